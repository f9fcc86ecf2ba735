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
# perf's other consumers of an Arm SPE PMU, unmodified: report, mem, c2c.
# Each must run and find samples in what the device wrote.
perf report -i /tmp/spe.data --stdio > /tmp/spe.report 2>&1
report_rc=$?
report_samples=$(sed -n 's/^# Samples: \([0-9]*\).*/\1/p' /tmp/spe.report | head -n 1)
perf mem record -a -o /tmp/mem.data -- sleep 1 > /tmp/mem.log 2>&1
mem_rc=$?
perf mem report -i /tmp/mem.data --stdio > /tmp/mem.report 2>&1
mem_report_rc=$?
mem_samples=$(sed -n 's/^# Samples: \([0-9]*\).*/\1/p' /tmp/mem.report | head -n 1)
perf c2c record -a -o /tmp/c2c.data -- sleep 1 > /tmp/c2c.log 2>&1
c2c_rc=$?
perf c2c report -i /tmp/c2c.data --stdio > /tmp/c2c.report 2>&1
c2c_report_rc=$?
c2c_loads=$(sed -n 's/^ *Load Operations *: *\([0-9]*\).*/\1/p' /tmp/c2c.report | head -n 1)
head -n 12 /tmp/mem.report
grep -m 3 -E 'Total records|Load Operations|Store Operations' /tmp/c2c.report
[ "$mem_rc" = 0 ] || tail -n 5 /tmp/mem.log
[ "$c2c_rc" = 0 ] || tail -n 5 /tmp/c2c.log
result report_rc=$report_rc report_samples=${report_samples:-0} mem_rc=$mem_rc mem_report_rc=$mem_report_rc mem_samples=${mem_samples:-0}
result c2c_rc=$c2c_rc c2c_report_rc=$c2c_report_rc c2c_loads=${c2c_loads:-0}
# Every record the device wrote, over the three recordings.
mem_records=$(perf report -D -i /tmp/mem.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')
c2c_records=$(perf report -D -i /tmp/c2c.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')
result all_records=$((records + mem_records + c2c_records))
