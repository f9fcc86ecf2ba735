//! Which kernel of the matrix runs which scenario in `cargo xtask test`
//! (the CI set), and which runs are left to be run by hand (`--full`).

use super::Scenario;
use crate::kernels::KernelSpec;
use crate::runner::Rig;
use crate::setup::QemuRelease;

/// Test modules of integration/guest/modules that only the host suite's
/// kernel gets in CI (they ran on it alone before the newer suites had
/// headers).
const NEEDS_EXTRA_MODULES: &[&str] = &["spe-el2"];

/// What needs a test module or a guest driver (guest-driver/pmu_snapshot:
/// [`crate::snapshot::NEEDS_MODULE`]).
fn needs_extra_modules(s: &Scenario) -> bool {
    NEEDS_EXTRA_MODULES.contains(&s.name) || crate::snapshot::NEEDS_MODULE.contains(&s.name)
}

/// The paravirtual scenarios the newest kernel runs in `cargo xtask test`
/// (the oldest runs them all, the middle one `virtio-spe-perf`): the rest
/// run by hand (`cargo xtask test --kernel 7.3 NAME...`), so CI stays
/// inside its time.
const PARAVIRT_ON_NEWEST: &[&str] = &[
    "virtio-spe-perf",
    "virtio-spe-rmmod",
    "virtio-fault-data-loss",
    "virtio-fault-buffer-full",
    "virtio-spe-restart",
];

/// What the middle kernel of the matrix (6.12) runs in `cargo xtask test`:
/// a sample, so CI stays well inside its time on 2 cores. The oldest kernel
/// runs everything, the newest every SPE scenario.
const ON_MIDDLE_KERNELS: &[&str] = &[
    "boot",
    "perf",
    "spe-probe",
    "spe-probe-vhe",
    "spe-perf",
    "spe-buffer-full",
    "spe-profile",
    "fault-data-loss",
    "fault-stage1-translation",
    "spe-attributes",
    "spe-no-room",
    "virtio-spe-perf",
];

/// Runs that only the newest kernel makes: eight vCPUs under load (the
/// driver's code path is the same on the others, and the time is CI's),
/// and the exit-request floods (QEMU's proof, whatever the kernel).
const NEWEST_ONLY: &[&str] = &["spe-smp8", "spe-exit-requests", "spe-ipis", "spe-ipis-smp8"];

/// Whether `s` can run on `rig` at all: the paravirtual ones and the
/// test modules need modules built against its kernel's headers; the
/// stock-QEMU scenarios run on the unpatched QEMU and nothing else does.
pub fn can_run(s: &Scenario, rig: &Rig) -> bool {
    (rig.has_extra_modules || !(needs_extra_modules(s) || s.is_paravirt()))
        && crate::stock::is_stock(s.name) == rig.qemu_release.stock
}

/// The two sets of runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// `cargo xtask test`, which CI runs.
    Ci,
    /// Added by `cargo xtask test --full`: run by hand before an issue
    /// is resolved (integration/docs/results/by-hand.md records them).
    ByHand,
}

/// Which set runs `s` on kernel `k`, if either does.
pub fn selection(s: &Scenario, k: &KernelSpec) -> Option<Set> {
    if let Some(set) = crate::uefi::selection(s.name, k) {
        set
    } else if let Some(set) = crate::kvm::selection(s.name, k) {
        set
    } else if let Some(set) = crate::selftest::selection(s.name, k) {
        set
    } else if !in_matrix(s, k) {
        None
    } else if by_hand(s, k) {
        Some(Set::ByHand)
    } else {
        Some(Set::Ci)
    }
}

/// Which set runs `s` on kernel `k` under QEMU `q`: [`selection`] on the
/// patched QEMU, the stock path's own on the unpatched one.
pub fn selection_on(s: &Scenario, k: &KernelSpec, q: &QemuRelease) -> Option<Set> {
    if crate::stock::is_stock(s.name) != q.stock {
        None
    } else if q.stock {
        crate::stock::selection(s.name, k, q)
    } else {
        selection(s, k)
    }
}

/// Every scenario on the oldest kernel, a sample on the middle one, and
/// every SPE scenario on the newest.
fn in_matrix(s: &Scenario, k: &KernelSpec) -> bool {
    // The unpatched QEMU's own (see selection_on).
    if crate::stock::is_stock(s.name) {
        return false;
    }
    if NEWEST_ONLY.contains(&s.name) {
        return k == KernelSpec::newest();
    }
    if !k.private_apt {
        return true;
    }
    if needs_extra_modules(s) {
        return false;
    }
    if k == KernelSpec::newest() {
        if s.is_paravirt() {
            return PARAVIRT_ON_NEWEST.contains(&s.name);
        }
        return s.spe.is_some() || ["boot", "perf"].contains(&s.name);
    }
    ON_MIDDLE_KERNELS.contains(&s.name)
}

/// Runs of the newest kernel whose proof is mostly the backend's or the
/// QEMU channel's (a stall, a replay, a fault the driver only has to
/// survive), or that the oldest kernel runs in CI with the same driver
/// code path (a buffer full, a data loss, the snapshot, perf mem, the
/// host's report): the oldest kernel runs each in CI, the newest by
/// hand. They took 573 s of a 68-minute CI run, and the second five 291 s
/// of a 67-minute new machine. The third group took 263 s of a 60-minute
/// new machine whose CI run took 65: the catalogue's faults that the
/// driver reports as an error without acting on the syndrome's detail
/// (the newest keeps a buffer full at a byte, a translation fault, a
/// lost interrupt, live control and the wrong-syndrome control), the
/// launcher (the host's tool), and three runs whose proof is the
/// sampler's (jitter, an icount interval, two pinned vCPUs). The fourth
/// is `perf-test-spe` (326-489 s of guest time fixed by icount), which
/// makes room for QEMU 10.2.2's build and smoke set (about 10 minutes).
/// The fifth, four runs whose proof is the sampler's, the memory
/// model's or the backend's filters (the alias of micro-operations, c2c's
/// padded control, the load filter, the latency filter), make room with
/// ccache for the unpatched QEMU's build and its three runs. The sixth,
/// the IPI flood on eight vCPUs: its two-vCPU run is the sensitive one.
const NEWEST_BY_HAND: &[&str] = &[
    "spe-backend-stall",
    "spe-replay-a",
    "spe-replay-b",
    "fault-stuck-pointer",
    "fault-spurious-irq",
    "fault-collision",
    "spe-aux-snapshot",
    "spe-buffer-full",
    "spe-mem-levels",
    "fault-data-loss",
    "spe-report",
    "fault-external-abort",
    "fault-stage1-permission",
    "fault-imp-def",
    "fault-unknown-ec",
    "fault-size-too-large",
    "fault-unknown-bsc",
    "spe-qemu-launcher",
    "spe-qemu-launcher-vhe",
    "spe-interval-others-icount",
    "spe-jitter",
    "spe-smp2-pinned",
    "perf-test-spe",
    "spe-alias",
    "spe-c2c-padded",
    "spe-filter-load",
    "spe-min-latency",
    "spe-ipis-smp8",
];

/// The paravirtual copies of catalogue faults on the oldest kernel
/// ([`crate::faults::VIRTIO_OF_CASES`]): the driver's reactions they
/// check are those the full-emulation runs of the same faults check in
/// CI, so they wait for `--full` and keep CI inside its hour. And
/// [`NEWEST_BY_HAND`] on the newest.
fn by_hand(s: &Scenario, k: &KernelSpec) -> bool {
    if k == KernelSpec::newest() {
        return NEWEST_BY_HAND.contains(&s.name);
    }
    !k.private_apt && crate::faults::is_virtio_copy(s.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::MATRIX;

    /// The unpatched QEMU runs the stock scenarios and nothing else, and
    /// no patched one runs them: in CI on the newest kernel, by hand on
    /// the middle one.
    #[test]
    fn the_stock_qemu_runs_its_own_scenarios_only() {
        let all = super::super::all();
        let stock = QemuRelease::by_version("stock").unwrap();
        let debian = QemuRelease::by_version("11.1").unwrap();
        assert_eq!(debian.label(), "11.1.3-debian");
        for k in MATRIX {
            for s in &all {
                let on_stock = selection_on(s, k, stock);
                if crate::stock::is_stock(s.name) {
                    let by_hand = s.name == "stock-perf-test";
                    let want = if by_hand && (k == KernelSpec::newest() || k.private_apt) {
                        Some(Set::ByHand)
                    } else if k == KernelSpec::newest() {
                        Some(Set::Ci)
                    } else if k.private_apt {
                        Some(Set::ByHand)
                    } else {
                        None
                    };
                    assert_eq!(on_stock, want, "{} on {}", s.name, k.name);
                    let on_debian = selection_on(s, k, debian);
                    let want = (k == KernelSpec::newest()).then_some(
                        if ["stock-profile", "stock-no-plugin"].contains(&s.name) {
                            Set::Ci
                        } else {
                            Set::ByHand
                        },
                    );
                    assert_eq!(
                        on_debian, want,
                        "{} on {} under Debian's QEMU",
                        s.name, k.name
                    );
                    for q in QemuRelease::patched() {
                        assert_eq!(selection_on(s, k, q), None, "{} on {}", s.name, q.version);
                    }
                } else {
                    assert_eq!(on_stock, None, "{} on the stock QEMU", s.name);
                    assert_eq!(selection_on(s, k, debian), None, "{} on Debian's", s.name);
                }
            }
        }
    }

    #[test]
    fn by_hand_are_the_paravirtual_copies_on_the_oldest_kernel_and_a_list_on_the_newest() {
        let all = super::super::all();
        let by_hand: Vec<(&str, &str)> = MATRIX
            .iter()
            .flat_map(|k| all.iter().map(move |s| (s, k)))
            // The UEFI copies, the KVM runs and the kselftest suite have
            // their own (uefi.rs, kvm.rs, selftest.rs).
            .filter(|(s, k)| {
                !crate::uefi::is_uefi(s.name)
                    && !crate::kvm::is_kvm(s.name)
                    && crate::selftest::selection(s.name, k).is_none()
            })
            .filter(|(s, k)| selection(s, k) == Some(Set::ByHand))
            .map(|(s, k)| (s.name, k.name))
            .collect();
        assert_eq!(by_hand.len(), 6 + NEWEST_BY_HAND.len(), "{by_hand:?}");
        assert!(by_hand
            .iter()
            .all(|(n, k)| (*k == "6.1" && n.starts_with("virtio-fault-"))
                || (*k == "7.3" && NEWEST_BY_HAND.contains(n))));
        // Each of the newest kernel's is in CI on the oldest, but those
        // only the newest runs, which no other kernel does.
        for name in NEWEST_BY_HAND.iter().filter(|n| !NEWEST_ONLY.contains(n)) {
            let s = all.iter().find(|s| s.name == *name).unwrap();
            assert_eq!(selection(s, &MATRIX[0]), Some(Set::Ci), "{name}");
        }
        // Those only the newest runs are in its CI set, or by hand there.
        for name in NEWEST_ONLY {
            let s = all.iter().find(|s| s.name == *name).unwrap();
            for k in &MATRIX[..MATRIX.len() - 1] {
                assert_eq!(selection(s, k), None, "{name} on {}", k.name);
            }
            let set = match NEWEST_BY_HAND.contains(name) {
                true => Set::ByHand,
                false => Set::Ci,
            };
            assert_eq!(selection(s, KernelSpec::newest()), Some(set), "{name}");
        }
        // The live ones stay in CI.
        let live = all
            .iter()
            .find(|s| s.name == "virtio-fault-data-loss")
            .unwrap();
        assert_eq!(selection(live, &MATRIX[0]), Some(Set::Ci));
    }
}
