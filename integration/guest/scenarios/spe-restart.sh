# A backend that dies under a running VM and is started again on the same
# socket: once perf records, the runner kills the backend (SIGKILL) and
# starts a new one. QEMU reconnects and restores the SPU's registers; the
# records the old process had in flight are reported lost (PMBSR.DL),
# which perf sees as AUX data flagged TRUNCATED and PARTIAL, and the next
# recording in the same guest decodes, with records.
. /scenarios/lib/spe.sh
d=/tmp/restart.data
spe_record_across SPE-RESTART-NOW $d 3
st=$spe_st
spe_table $d
n1=$spe_n bad1=$spe_bad
aux=$(spe_aux_flags $d.dump)
spe_record /tmp/after.data arm_spe_0/ts_enable=1/ -- spe-workload 3 || return
spe_table /tmp/after.data
result restart_perf_status=$st restart_records=$n1 after_records=$spe_n bad=$((bad1 + spe_bad)) $aux
if [ "$st" = 0 ] && [ "$spe_n" -gt 0 ]; then
    pass
else
    tail -n 5 $d.log
    fail "perf $st, $spe_n records after the restart"
fi
