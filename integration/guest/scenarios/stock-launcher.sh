# Booted through `spe-qemu --spe-stock` from a plain QEMU command line on
# an unpatched QEMU: spe-qemu adds the vhost-user device and the TCG
# plugin and starts the backend; the virtio_spe module registers arm_spe_0
# (init loads it: spe.load=virtio_spe) and perf records a workload's
# records, which decode without errors.
. /scenarios/lib/spe.sh
dmesg | grep -m 2 virtio_spe
result pmu=$([ -d /sys/bus/event_source/devices/arm_spe_0 ] && echo present || echo absent)
spe_launcher_check
