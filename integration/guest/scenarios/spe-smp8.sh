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
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' $d.dump)
# One pass over the dump for the rest: AUX and lost events, and each
# record's last line, whose AUXTRACE chunk gives its CPU.
# A record's last line outside any chunk is not a record (stray).
grep -E 'PERF_RECORD_(AUX |AUXTRACE |LOST)|[[:space:]](TS [0-9]+|END)$' $d.dump > $d.lines
counts=$(awk -v n="$cpus" '
    /PERF_RECORD_AUXTRACE / { cpu = $NF; next }
    /PERF_RECORD_AUX / { if ($0 ~ /\[[^]]*[TPC][^]]*\]/) flagged++; next }
    /PERF_RECORD_LOST/ { lost++; next }
    cpu == "" { stray++; next }
    { total++; per[cpu]++ }
    END {
        printf "spe_records=%d stray_lines=%d aux_flagged=%d lost_events=%d", total, stray, flagged, lost
        for (c = 0; c < n; c++) printf " cpu%d_records=%d", c, per[c]
        printf "\n"
    }' $d.lines)
result cpus=$cpus spe_bad_packets=$bad $counts
grep -m 3 'PERF_RECORD_AUX ' $d.lines
awk '/PERF_RECORD_AUXTRACE / { exit } { print "stray: " $0 }' $d.lines | head -n 3
pass
