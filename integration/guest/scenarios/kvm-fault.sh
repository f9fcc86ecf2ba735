# kvm-guest.sh with faults armed while the guest runs: the host arms
# them on vCPU 1, the VMM's CPU, once the VMM logs
# SPE-KVM-GUEST-RUNNING (integration/xtask/src/kvm.rs). The guest runs
# three times as long, so that both land before it is done.
# shellcheck disable=SC2034 # read by kvm-guest.sh
kvm_iterations=900000000
. /scenarios/kvm-guest.sh
