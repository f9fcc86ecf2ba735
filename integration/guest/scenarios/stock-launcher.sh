# Booted through `spe-qemu --spe-stock` from a plain QEMU command line on
# an unpatched QEMU: spe-qemu adds the vhost-user device and the TCG
# plugin and starts the backend; the virtio_spe module registers arm_spe_0
# (init loads it: spe.load=virtio_spe) and perf records a workload's
# records, which decode without errors.
. /scenarios/lib/spe.sh
dmesg | grep -m 2 virtio_spe
result pmu=$([ -d /sys/bus/event_source/devices/arm_spe_0 ] && echo present || echo absent)
spe_record /tmp/launcher.data arm_spe_0/ts_enable=1,pa_enable=1/ -- spe-workload 3 || return
spe_table /tmp/launcher.data
result launcher_records=$spe_n launcher_bad=$spe_bad
if [ "$spe_n" -gt 0 ] && [ "$spe_bad" = 0 ]; then
    pass
else
    fail "$spe_n records, $spe_bad decoder errors"
fi
