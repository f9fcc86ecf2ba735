# spe-workload under `perf record -c 256 -e arm_spe_0//` (the driver
# raises a period below PMSIDR_EL1.Interval to it).
spe_workload_perf="-c 256"
. /scenarios/workload.sh
