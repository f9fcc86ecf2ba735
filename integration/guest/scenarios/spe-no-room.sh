# A known driver bug, on demand: "perf: arm_spe: Properly set hw.state on
# failures" (Linux 283182c1c239). When the AUX buffer has some room but
# not up to the next page boundary, arm_spe_pmu_next_off() gives a limit
# of 0 and the driver writes PMBLIMITR_EL1 = 0 (buffer disabled); without
# the fix it does not stop the event, so PMSCR_EL1 keeps E0SPE set
# (profiling enabled, with no buffer) and the perf core believes SPE
# runs. With the fix the driver stops the event: PMSCR_EL1 = 0.
#
# `spe-workload no-room` (on CPU 1) profiles itself into a 4-page AUX
# buffer whose tail it leaves 64 bytes in; the backend writes 64-byte
# aligned records (--align 64), so the buffer fills to exactly each
# limit and, after the wrap, the only room left is below the tail, in
# the page the head is in. The host reads the driver's reaction in the
# backend's log of register writes (xtask/src/driver_bugs.rs, by the
# kernel's version).
taskset -p -c 0 $$ > /dev/null
dmesg -c > /dev/null
taskset -c 1 spe-workload no-room
rc=$?
warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
dmesg | grep -E 'WARNING:|BUG:|Oops' | head -n 3
result workload_rc=$rc kernel_warnings=$warnings
if [ "$rc" = 0 ]; then
    pass
else
    fail "spe-workload no-room failed ($rc)"
fi
