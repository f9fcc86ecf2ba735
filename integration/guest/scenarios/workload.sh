# The issue-6 guest workload runs and reports its array's addresses.
# $spe_workload_perf, when set (the workload-perf* scenarios), is the
# arguments of a `perf record` of the arm_spe_0 event around it, and
# $spe_workload_event the event (default arm_spe_0//). The workload runs
# on CPU 0 and perf on CPU 1, in every variant, so that perf's draining
# of the records never shares a vCPU with what it measures; a guest of
# one vCPU (the bench's --vcpus 1) runs both on CPU 0. A shorter
# run in the same variant first warms QEMU up (its TLB grows to the
# array, the TBs SPE counts in are translated), which otherwise made the
# first run in a boot up to a fifth slower at random.
n=1000
perf_cpu=1
if [ "$(grep -c '^processor' /proc/cpuinfo)" = 1 ]; then
    perf_cpu=0
fi
# run ITERATIONS DATA: the workload in this variant (perf writing DATA).
run() {
    if [ -n "${spe_workload_perf+x}" ]; then
        taskset -c $perf_cpu perf record -e "${spe_workload_event:-arm_spe_0//}" $spe_workload_perf -o "$2" -- taskset -c 0 spe-workload "$1" 2>&1
    else
        taskset -c 0 spe-workload "$1" 2>&1
    fi
}
# The backend's statistics count the warm-up's samples too: its time
# (warmup_ns) lets the bench divide them by all the time sampled.
warm=$(run 300 /tmp/warm-up.data)
rm -f /tmp/warm-up.data
echo "SPE-RESULT warmup_ns=$(echo "$warm" | sed -n 's/.*workload_ns=\([0-9]*\).*/\1/p')"
# The timed run marks its loop on the console for the host's CPU times
# (or instructions: then spe.mark_pause= gives the host time to act).
export SPE_WORKLOAD_MARK=/dev/console
if [ -n "${spe_mark_pause:-}" ]; then
    export SPE_WORKLOAD_MARK_PAUSE="$spe_mark_pause"
fi
out=$(run $n /tmp/workload.data)
rc=$?
echo "$out"
got=$(echo "$out" | sed -n 's/.*workload_iterations=\([0-9]*\).*/\1/p')
pa0=$(echo "$out" | sed -n 's/.*workload_array_pa0=\(0x[0-9a-f]*\).*/\1/p')
if [ "$rc" != 0 ]; then
    fail "spe-workload failed ($rc)"
elif [ "$got" != "$n" ]; then
    fail "spe-workload ran ${got:-no} iterations, want $n"
elif [ -z "$pa0" ] || [ "$pa0" = 0x0 ]; then
    fail "spe-workload found no physical address for its array"
else
    pass
fi
