# perf's snapshot mode (-S, the AUX buffer overwritten in place, taken on
# SIGUSR2), as perf's own test_arm_spe.sh drives it, but signalling once
# the workload runs rather than after a fixed `sleep 1`: perf's start-up
# alone takes longer than that in an emulated guest (see
# integration/README.md).
perf record -o /tmp/snap.data -e arm_spe// -S \
    -- dd if=/dev/zero of=/dev/null > /tmp/snap.log 2>&1 &
pid=$!
i=0
while ! pidof dd > /dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
result snapshot_workload_started=$(pidof dd > /dev/null && echo yes || echo no)
sleep 1
kill -USR2 $pid
sleep 1
kill $pid
wait $pid
cat /tmp/snap.log
# The event names perf synthesises from SPE records (arm-spe.c), as the
# test's perf_script_samples matches them.
events='(l1d-miss|l1d-access|llc-miss|llc-access|tlb-miss|tlb-access|branch-miss|remote-access|memory)'
n=$(perf script -F,-time -i /tmp/snap.data 2>/dev/null | grep -cE " +dd +[0-9]+ .* +$events:(.*:)? +")
result snapshot_samples=$n
perf report --stdio -i /tmp/snap.data 2>/dev/null | grep -E '%' | head -n 5
pass
