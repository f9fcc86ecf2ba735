# The SPE kselftest suite (tools/testing/selftests/perf_events/arm_spe),
# as a kernel developer runs it in their own guest: its KTAP goes to the
# console and the host judges each case (selftest.rs). The fault cases
# arm their faults through the guest control port.
. /scenarios/lib/spe.sh
arm_spe_test > /tmp/ktap.log 2>&1
rc=$?
cat /tmp/ktap.log
result selftest_rc=$rc
result kernel_warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
pass
