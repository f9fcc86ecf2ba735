# The negative control of pmu-snapshot: on a CPU without FEAT_PMUv3_SS
# (QEMU without pmu-ss=on) guest-driver/pmu_snapshot refuses to load and
# says why.
dmesg -c > /dev/null
insmod "$kdir/extra/pmu_snapshot.ko"
rc=$?
msg=$(dmesg | grep 'pmu_snapshot: ' | grep -v 'taint' | head -n 1)
echo "$msg"
loaded=$(grep -c '^pmu_snapshot ' /proc/modules)
dir=$([ -d /sys/devices/system/cpu/cpu0/pmu_snapshot ] && echo present || echo absent)
result insmod_rc=$rc loaded=$loaded dir=$dir
result refusal="$(echo "$msg" | sed 's/^\[[^]]*\] //; s/ /_/g')"
pass
