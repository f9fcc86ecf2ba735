//! The CPU profiles the backend models, by the names every process uses
//! for them: `vhost-device-spe --cpu` and `spe-qemu --spe-cpu`, which
//! passes its value on to the backend. A profile is the core it names:
//! QEMU's CPU model of the same name (`-cpu`) gives the guest its MIDR
//! and ID registers, the backend its SPE ID registers and records (the
//! SPE ones live in the backend's model), and perf picks its decoding of
//! the records by that MIDR.

use std::fmt;

/// A CPU whose SPE and PMU-snapshot ID registers the backend advertises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuProfile {
    #[default]
    NeoverseN1,
    NeoverseV1,
    Max,
}

impl CpuProfile {
    /// Every profile, the default first.
    pub const ALL: [CpuProfile; 3] = [
        CpuProfile::NeoverseN1,
        CpuProfile::NeoverseV1,
        CpuProfile::Max,
    ];

    /// The name on command lines.
    pub const fn name(self) -> &'static str {
        match self {
            CpuProfile::NeoverseN1 => "neoverse-n1",
            CpuProfile::NeoverseV1 => "neoverse-v1",
            CpuProfile::Max => "max",
        }
    }

    /// What the profile implements, for help texts.
    pub const fn about(self) -> &'static str {
        match self {
            CpuProfile::NeoverseN1 => "FEAT_SPEv1p1, Neoverse N1-like (PMSIDR_EL1 0x2641f)",
            CpuProfile::NeoverseV1 => {
                "FEAT_SPEv1p1 with ERnd, Neoverse V1-like (PMSIDR_EL1 0x2643f)"
            }
            CpuProfile::Max => {
                "Everything modelled: FEAT_SPEv1p4, FnE, EFT, FDS, ERnd, nVM, EXC, \
                 FEAT_PMUv3_SS (PMSIDR_EL1 0x40264ff)"
            }
        }
    }

    /// QEMU's CPU model (`-cpu`) that is this core.
    pub const fn qemu_cpu(self) -> &'static str {
        // The names were chosen to be QEMU's.
        self.name()
    }

    /// MIDR_EL1's implementer and part number on QEMU's model of the
    /// core: 0x41 ('A', Arm) 0xd0c for Neoverse N1 and 0xd40 for V1 (their
    /// TRMs' MIDR_EL1, and perf's `MIDR_NEOVERSE_N1`/`_V1`), 0x00 0x051
    /// ('Q') for QEMU's own `max`.
    pub const fn midr_part(self) -> (u8, u16) {
        match self {
            CpuProfile::NeoverseN1 => (0x41, 0xd0c),
            CpuProfile::NeoverseV1 => (0x41, 0xd40),
            CpuProfile::Max => (0x00, 0x051),
        }
    }

    /// Whether a guest CPU whose MIDR_EL1 is `midr` is this core (any
    /// variant and revision).
    pub const fn matches_midr(self, midr: u32) -> bool {
        let (implementer, part) = self.midr_part();
        (midr >> 24) as u8 == implementer && ((midr >> 4) & 0xfff) as u16 == part
    }

    /// Whether the core has FEAT_E0PD (Armv8.5): without it Linux with
    /// KASLR unmaps the kernel at EL0 (KPTI) and its SPE driver refuses
    /// the profiling buffer, on the real core as here. N1 is Armv8.2, V1
    /// Armv8.4 (their TRMs); QEMU's `max` has E0PD.
    pub const fn has_e0pd(self) -> bool {
        matches!(self, CpuProfile::Max)
    }

    /// The profile whose core has MIDR_EL1 `midr`, if any.
    pub fn of_midr(midr: u32) -> Option<CpuProfile> {
        Self::ALL.into_iter().find(|p| p.matches_midr(midr))
    }

    /// The profile called `name` on a command line.
    pub fn from_name(name: &str) -> Option<CpuProfile> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Every name, comma-separated, for messages.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl fmt::Display for CpuProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for p in CpuProfile::ALL {
            assert_eq!(CpuProfile::from_name(p.name()), Some(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(CpuProfile::ALL[0], CpuProfile::default());
        assert_eq!(CpuProfile::names(), "neoverse-n1, neoverse-v1, max");
        assert_eq!(CpuProfile::from_name("cortex-a57"), None);
        assert_eq!(CpuProfile::from_name("Max"), None);
    }

    #[test]
    fn each_profile_is_the_midr_of_qemus_model_of_that_name() {
        // Rows: QEMU 10.0.2's cpu->midr for the model (target/arm/tcg/
        // cpu64.c), the profile that must match it.
        for (midr, p) in [
            (0x414f_d0c1, Some(CpuProfile::NeoverseN1)), // r4p1
            (0x411f_d402, Some(CpuProfile::NeoverseV1)), // r1p2
            (0x000f_0510, Some(CpuProfile::Max)),
            (0x411f_d070, None),                         // cortex-a57
            (0x414f_d0b1, None),                         // cortex-a76
            (0x410f_d0c0, Some(CpuProfile::NeoverseN1)), // r0p0
            (0x510f_d0c0, None),                         // part 0xd0c of another implementer
        ] {
            assert_eq!(CpuProfile::of_midr(midr), p, "{midr:#x}");
            if let Some(p) = p {
                assert!(p.matches_midr(midr));
                assert_eq!(p.qemu_cpu(), p.name());
            }
        }
    }
}
