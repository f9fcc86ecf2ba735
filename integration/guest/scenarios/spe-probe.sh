# Full emulation: the unmodified arm_spe_pmu driver (loaded by /init)
# probes the SPE that the patched QEMU forwards to vhost-device-spe.
line=$(dmesg | grep 'arm_spe_pmu' | grep 'probed' | tail -n 1)
echo "$line"
cpus=$(echo "$line" | sed -n 's/.*for CPUs \([0-9,-]*\).*/\1/p')
result spe_probed_cpus=${cpus:-none}
pmu=none
[ -d /sys/bus/event_source/devices/arm_spe_0 ] && pmu=arm_spe_0
result spe_pmu=$pmu
result spe_irq="$(grep -i spe /proc/interrupts | tr -s ' ' | tr ' ' _)"
# The core the guest runs on (the profile's, by QEMU's -cpu).
result cpu_midr="$(cat /sys/devices/system/cpu/cpu0/regs/identification/midr_el1 2> /dev/null)"
if [ "$pmu" = arm_spe_0 ] && [ -n "$cpus" ]; then
    pass
else
    dmesg | grep -i spe
    fail "arm_spe_pmu did not probe"
fi
