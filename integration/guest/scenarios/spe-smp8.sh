# Eight vCPUs, a copy of spe-workload pinned to each, and a system-wide
# perf record: every CPU samples at once, and the host checks that perf
# decoded exactly the records the backend wrote (query-spu). What could
# make them differ is reported with the counts: AUX records perf flagged
# truncated (T, the driver's answer to PMBSR.DL), partial (P) or
# collided (C), and lost events. A period of 16384 keeps the decoding
# inside the run's time: the default gave 360 k records in one run of
# `spe-workload 2` a CPU, whose dump busybox's grep read for minutes, and
# the count grows with how slowly the host runs the guest (perf's own
# work and the kernel's are sampled too: 50-175 k records at 4096).
. /scenarios/lib/spe.sh
cpus=$(grep -c ^processor /proc/cpuinfo)
d=/tmp/smp8.data
spe_record $d arm_spe_0/ts_enable=1,period=16384/ -a -- sh -c "
    c=0
    while [ \$c -lt $cpus ]; do taskset -c \$c spe-workload 1 > /dev/null & c=\$((c + 1)); done
    wait" || return
perf report -D -i $d > $d.dump 2>&1
result perf_report_rc=$?
spe_count $d.dump "$cpus" > $d.counts
result cpus=$cpus $(cat $d.counts)
grep -m 3 'PERF_RECORD_AUX ' $d.dump.lines
awk '/PERF_RECORD_AUXTRACE / { exit } { print "stray: " $0 }' $d.dump.lines | head -n 3
pass
