# The guest reaches /init under the patched QEMU and can see its PCI bus;
# with the backend attached, its SPE driver shows the PMU the backend's
# CPU profile describes (the host compares caps/ with the backend's
# PMSIDR_EL1). Without SPE the PMU is reported absent, which the host
# check rejects.
result pci_devices=$(ls /sys/bus/pci/devices | wc -l)
spe=/sys/bus/event_source/devices/arm_spe_0
val() { cat "$spe/$1" 2>/dev/null || echo none; }
if [ -d "$spe" ]; then
    result spe_pmu=arm_spe_0 spe_pmu_type=$(val type) spe_pmu_cpumask=$(val cpumask)
    result spe_caps_min_interval=$(val caps/min_interval) \
        spe_caps_count_size=$(val caps/count_size) spe_caps_arch_inst=$(val caps/arch_inst)
else
    result spe_pmu=none
fi
if [ -d /sys/bus/pci/devices ]; then pass; else fail "no PCI bus"; fi
