//! The CPU profiles the backend models, by the names every process uses
//! for them: `vhost-device-spe --cpu` and `spe-qemu --spe-cpu`, which
//! passes its value on to the backend. The ID register values each stands
//! for live in the backend's model.

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
}
