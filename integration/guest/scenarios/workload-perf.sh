# spe-workload under `perf record -e arm_spe_0//` at perf's default period.
spe_workload_perf=
. /scenarios/workload.sh
