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
spe_launcher_check
