# Booted through spe-qemu from a plain QEMU command line (no backend of
# the harness's own): the unmodified arm_spe_pmu probes, and perf records
# SPE records of a workload that decode without errors.
. /scenarios/lib/spe.sh
line=$(dmesg | grep 'arm_spe_pmu' | grep 'probed' | tail -n 1)
echo "$line"
cpus=$(echo "$line" | sed -n 's/.*for CPUs \([0-9,-]*\).*/\1/p')
result spe_probed_cpus=${cpus:-none}
if [ ! -d /sys/bus/event_source/devices/arm_spe_0 ]; then
    dmesg | grep -i spe
    fail "arm_spe_pmu did not probe"
    return
fi
result spe_pmu=arm_spe_0
spe_record /tmp/launcher.data arm_spe_0/ts_enable=1,pa_enable=1/ -- spe-workload 3 || return
spe_table /tmp/launcher.data
result launcher_records=$spe_n launcher_bad=$spe_bad
if [ "$spe_n" -gt 0 ] && [ "$spe_bad" = 0 ]; then
    pass
else
    fail "$spe_n records, $spe_bad decoder errors"
fi
