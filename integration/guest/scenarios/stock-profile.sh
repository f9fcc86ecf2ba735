# The stock-QEMU path: an unpatched QEMU with the TCG plugin as the
# sample source of the paravirtual device. The virtio_spe module registers
# arm_spe_0 on a CPU without SPE, and spe-profile.sh's checks hold the
# records to the same standard as full emulation's: the workload's
# functions, its array's VAs and their PAs, branch targets, timestamps.
# The harness has init load virtio_spe first (spe.load=virtio_spe).
dmesg | grep -m 3 -E 'virtio_spe|arm_spe'
result native_spe_probes=$(dmesg | grep -c 'arm_spe_pmu.*probed')
. /scenarios/spe-profile.sh
result kernel_warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
