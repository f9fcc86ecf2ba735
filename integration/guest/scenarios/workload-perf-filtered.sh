# spe-workload under `perf record -e arm_spe_0/min_latency=4095/`: QEMU
# samples at perf's default period and the backend filters every record
# out, so nothing reaches perf's buffer: the run times QEMU's sampling and
# the backend, without the guest's perf draining the records.
spe_workload_event=arm_spe_0/min_latency=4095/
spe_workload_perf=
. /scenarios/workload.sh
