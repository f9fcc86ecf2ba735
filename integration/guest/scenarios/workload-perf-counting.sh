# spe-workload under `perf record -c 1048576 -e arm_spe_0//u`: QEMU counts
# every EL0 operation but selects one in a million, so the run times the
# counting alone.
spe_workload_event=arm_spe_0//u
spe_workload_perf="-c 1048576"
. /scenarios/workload.sh
