# Exit requests while the vCPU counts operations to its next sample: once
# perf records, the runner pauses and resumes the VM (QMP stop, cont)
# again and again; each stop is an exit request from another thread,
# which a TB's count can overwrite and the sampler must restore. Every
# stop must be taken (the runner fails the run otherwise), and the
# recording decode, with records.
. /scenarios/lib/spe.sh
d=/tmp/exit.data
spe_record_across SPE-STOP-CONT-NOW $d 8
st=$spe_st
spe_table $d
result exit_perf_status=$st exit_records=$spe_n bad=$spe_bad
if [ "$st" = 0 ] && [ "$spe_n" -gt 0 ]; then
    pass
else
    tail -n 5 $d.log
    fail "perf $st, $spe_n records across the stops"
fi
