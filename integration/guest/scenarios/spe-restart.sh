# A backend that dies under a running VM and is started again on the same
# socket: once perf records, the runner kills the backend (SIGKILL) and
# starts a new one. QEMU reconnects and restores the SPU's registers; the
# records the old process had in flight are reported lost (PMBSR.DL),
# which perf sees as AUX data flagged TRUNCATED and PARTIAL, and the next
# recording in the same guest decodes, with records.
. /scenarios/lib/spe.sh
d=/tmp/restart.data
# A long period: seconds of records at the default one take
# minutes to decode under emulation.
perf record -e arm_spe_0/ts_enable=1,period=65536/ -o $d -- spe-workload 0 3 > $d.log 2>&1 &
pid=$!
# perf writes its file's header when it starts recording.
while [ ! -s $d ] && kill -0 $pid 2> /dev/null; do sleep 0.2; done
sleep 1
echo SPE-RESTART-NOW
wait $pid
st=$?
spe_table $d
n1=$spe_n bad1=$spe_bad
aux=$(spe_aux_flags $d.dump)
dmesg | grep -m 3 -E 'arm_spe_pmu|PMBSR'
spe_record /tmp/after.data arm_spe_0/ts_enable=1/ -- spe-workload 3 || return
spe_table /tmp/after.data
result restart_perf_status=$st restart_records=$n1 after_records=$spe_n bad=$((bad1 + spe_bad)) $aux
if [ "$st" = 0 ] && [ "$spe_n" -gt 0 ]; then
    pass
else
    tail -n 5 $d.log
    fail "perf $st, $spe_n records after the restart"
fi
