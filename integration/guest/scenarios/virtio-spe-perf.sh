# The paravirtual path: on a guest CPU without SPE, the virtio_spe module
# binds the vhost-user device (virtio ID 58) and registers arm_spe_0; perf
# records the backend's synthetic records through it and decodes them.
# virtio-spe-no-module.sh runs the same steps without the module.
pmu=/sys/bus/event_source/devices/arm_spe_0
dmesg -c > /dev/null
if [ -z "${vspe_no_module:-}" ] && ! load_extra virtio_spe; then
    fail "insmod virtio_spe failed"
    return
fi
dmesg | grep -m 3 -E 'virtio_spe|arm_spe'
formats=$(ls "$pmu/format" 2> /dev/null | tr '\n' ',')
result pmu=$([ -d "$pmu" ] && echo present || echo absent) \
    pmu_formats=${formats:-none} \
    pmu_min_interval=$(cat "$pmu/caps/min_interval" 2> /dev/null || echo none) \
    pmu_cpumask=$(cat "$pmu/cpumask" 2> /dev/null || echo none)
# The guest's own SPE driver must have found nothing: the CPU has no SPE.
result native_spe_probes=$(dmesg | grep -c 'arm_spe_pmu.*probed')
. /scenarios/spe-perf.sh
result kernel_warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
