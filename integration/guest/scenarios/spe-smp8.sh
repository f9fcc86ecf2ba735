# Eight vCPUs, a copy of spe-workload pinned to each, and a system-wide
# perf record at perf's default period: every CPU samples at once, and
# the host checks that perf decoded exactly the records the backend
# wrote (query-spu). What could make them differ is reported with the
# counts: AUX records perf flagged truncated (T, the driver's answer to
# PMBSR.DL), partial (P) or collided (C), and lost events.
. /scenarios/lib/spe.sh
cpus=$(grep -c ^processor /proc/cpuinfo)
d=/tmp/smp8.data
spe_record $d arm_spe_0/ts_enable=1/ -a -- sh -c "
    c=0
    while [ \$c -lt $cpus ]; do taskset -c \$c spe-workload 2 > /dev/null & c=\$((c + 1)); done
    wait" || return
perf report -D -i $d > $d.dump 2>&1
result perf_report_rc=$?
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' $d.dump)
aux_flagged=$(grep 'PERF_RECORD_AUX ' $d.dump | grep -c '\[[^]]*[TPC][^]]*\]')
lost=$(grep -cE 'PERF_RECORD_LOST' $d.dump)
# Records per CPU: an AUXTRACE chunk's records are its CPU's buffer's.
per_cpu=$(grep -E 'PERF_RECORD_AUXTRACE |[[:space:]](TS [0-9]+|END)$' $d.dump | awk -v n="$cpus" '
    /PERF_RECORD_AUXTRACE / { cpu = $NF; next }
    { total++; per[cpu]++ }
    END {
        printf "spe_records=%d", total
        for (c = 0; c < n; c++) printf " cpu%d_records=%d", c, per[c]
        printf "\n"
    }')
result cpus=$cpus spe_bad_packets=$bad aux_flagged=$aux_flagged lost_events=$lost $per_cpu
grep -m 3 'PERF_RECORD_AUX ' $d.dump
pass
