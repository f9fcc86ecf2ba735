# As workload-perf-filtered, at period 256 (the bench gives the backend
# PMSIDR_EL1.Interval 256).
spe_workload_event=arm_spe_0/min_latency=4095/
spe_workload_perf="-c 256"
. /scenarios/workload.sh
