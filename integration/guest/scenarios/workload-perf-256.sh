# spe-workload under `perf record -c 256 -e arm_spe_0//`. The bench runs it
# with the backend's PMSIDR_EL1.Interval at 256: Linux raises a period
# below the interval the CPU recommends to it.
spe_workload_perf="-c 256"
. /scenarios/workload.sh
