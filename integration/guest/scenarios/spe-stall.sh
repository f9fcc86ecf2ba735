# A backend that stalls for less than QEMU's bound (10 s, the series' SPE channel client):
# once perf records, the runner stops the backend (SIGSTOP) for a few
# seconds, the VM pauses when a vCPU waits on it, and profiling goes on:
# this recording and the next one both decode, with records.
. /scenarios/lib/spe.sh
d=/tmp/stall.data
spe_record_across SPE-STALL-NOW $d 6
st=$spe_st
spe_table $d
n1=$spe_n bad1=$spe_bad
spe_record /tmp/after.data arm_spe_0/ts_enable=1/ -- spe-workload 3 || return
spe_table /tmp/after.data
result stall_perf_status=$st stall_records=$n1 after_records=$spe_n bad=$((bad1 + spe_bad))
if [ "$st" = 0 ] && [ "$n1" -gt 0 ] && [ "$spe_n" -gt 0 ]; then
    pass
else
    tail -n 5 $d.log
    fail "perf $st, $n1 records while stalled, $spe_n after"
fi
