# IPIs to vCPUs that count operations to their next sample: while perf
# records, spe-workload's main thread on CPU 0 interrupts the others with
# membarrier() calls, each of which waits until every target took its
# IPI. An IPI is another thread's exit request to the target vCPU, which
# a TB's count can overwrite and the sampler must restore; the targets are
# tickless (nohz_full), so a request lost would hold its call until the
# next stray interrupt. Every call must return within IPI_SLOW_MS.
. /scenarios/lib/spe.sh
d=/tmp/ipis.data
n=$(nproc)
perf record -e arm_spe_0/period=262144/ -o $d -- spe-workload ipis 6 $n > $d.log 2>&1
st=$?
grep '^SPE-RESULT ' $d.log
spe_table $d
slow=$(spe_value $d.log ipi_slow)
calls=$(spe_value $d.log ipi_calls)
result ipi_perf_status=$st ipi_records=$spe_n bad=$spe_bad
if [ "$st" = 0 ] && [ "$spe_n" -gt 0 ] && [ "${calls:-0}" -gt 0 ] && [ "$slow" = 0 ]; then
    pass
else
    tail -n 5 $d.log
    fail "perf $st, $spe_n records, ${calls:-no} calls, ${slow:-?} slow"
fi
