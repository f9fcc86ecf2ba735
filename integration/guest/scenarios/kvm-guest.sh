# KVM runs a guest of its own (spe-kvm: one vCPU, its code at IPA
# 0x1000000000 with the MMU off) while the host records SPE on every CPU,
# between runs of spe-workload (10 passes) before and after it. The guest
# reports what it saw of SPE (ID_AA64DFR0_EL1, the ESR of each SPE
# register access); the host's records are counted by where their PC is
# and when they were taken (the VMM prints the host's counter around
# its run loop). The mode is the kernel's kvm-arm.mode.
. /scenarios/lib/spe.sh
. /scenarios/lib/kvm.sh
kvm_mode || return 0
spe_irqs() {
    awk '/arm_spe|spe/ { n = 0; for (i = 2; i <= 3; i++) n += $i; print n }' /proc/interrupts | head -n 1
}
irq_before=$(spe_irqs)
# An 8-page AUX buffer per CPU: the driver's buffer fills (a PMBIRQ)
# every 4 pages, several times while the guest runs. A period of 4096
# lets perf keep up under emulation: a full AUX buffer is reported
# (truncated) and stops the event until perf drains it. The workload runs on CPU 0 and the VMM on CPU 1 (perf where it
# likes): CPU 1's event is still running when the guest enters (a
# CPU-wide event that a full AUX buffer stopped may stay stopped), and
# faults armed on vCPU 1 land on the guest's CPU.
# kvm_iterations: how long the guest runs (kvm-fault.sh runs it longer).
perf record -e arm_spe_0/ts_enable=1,period=4096/ -a -m ,8 -o /tmp/kvm.data -- \
    sh -c 'taskset -c 0 spe-workload 10 1 > /dev/null; taskset -c 1 spe-kvm '"${kvm_iterations:-300000000}"'; echo kvm_rc=$?; taskset -c 0 spe-workload 10 1 > /dev/null' \
    > /tmp/kvm.log 2>&1
rc=$?
irq_after=$(spe_irqs)
grep '^SPE-RESULT ' /tmp/kvm.log
kvm_rc=$(sed -n 's/^kvm_rc=//p' /tmp/kvm.log)
result perf_record_rc=$rc kvm_rc=${kvm_rc:-none} spe_irqs_before=${irq_before:-none} spe_irqs_after=${irq_after:-none}
if [ "$rc" != 0 ]; then
    tail -n 20 /tmp/kvm.log
    fail "perf record failed ($rc)"
    return 0
fi
lo=$(spe_value /tmp/kvm.log kvm_guest_pc_lo)
hi=$(spe_value /tmp/kvm.log kvm_guest_pc_hi)
start=$(spe_value /tmp/kvm.log kvm_count_start)
end=$(spe_value /tmp/kvm.log kvm_count_end)
spe_table /tmp/kvm.data
result spe_records=$spe_n spe_bad_packets=$spe_bad $(spe_aux_flags /tmp/kvm.data.dump)
# cpu class op el pc tgt va pa lat ts ...: by PC (the guest's code; the
# static programs' text at 0x400000, which spe-workload's loop fills, so
# that the range test is seen to match) and by timestamp against the
# VMM's run loop.
awk -v lo="$lo" -v hi="$hi" -v start="$start" -v end="$end" '
function hex(s,  i, v) {
    v = 0; sub(/^0x/, "", s)
    for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
    return v
}
BEGIN { l = hex(lo); h = hex(hi); sl = hex("0x400000"); sh = hex("0x500000") }
{
    pc = hex($5)
    if ($5 != "-" && pc >= l && pc < h) { guest++; print "guest PC record:", $0 > "/dev/stderr" }
    if ($4 == "el0" && pc >= sl && pc < sh) static++
    if ($10 == "-") nots++
    else if ($10 + 0 < start + 0) before++
    else if ($10 + 0 <= end + 0) during++
    else after++
    el[$4]++
}
END {
    printf "host_guest_pc_records=%d host_static_pc_records=%d host_records_before=%d host_records_during=%d host_records_after=%d host_records_no_ts=%d host_records_el0=%d host_records_el1=%d host_records_el2=%d\n",
        guest, static, before, during, after, nots, el["el0"], el["el1"], el["el2"]
}' /tmp/kvm.data.tab > /tmp/kvm.counts
# The SPE driver's error lines ("<what> on CPU n [PMBSR=0x…, …]"): all of
# them, and the first of those logged while the guest ran.
msgs=$(dmesg | grep -cE 'on CPU [0-9]+ \[PMBSR=')
during=$(dmesg | awk '/SPE-KVM-GUEST-RUNNING/ { on = 1 } /SPE-KVM-GUEST-DONE/ { on = 0 } on && /on CPU [0-9]+ \[PMBSR=/')
[ -n "$during" ] && echo "$during"
first=$(echo "$during" | head -n 1)
msg=$(echo "$first" | sed -n 's/^.*arm_spe_pmu: \(.*\) on CPU .*/\1/p' | tr ' ' '_')
msg_cpu=$(echo "$first" | sed -n 's/.* on CPU \([0-9]*\) \[PMBSR=.*/\1/p')
msg_pmbsr=$(echo "$first" | sed -n 's/.*\[PMBSR=\(0x[0-9a-f]*\),.*/\1/p')
# EC 0x25 (PMBSR bits 31:26): a stage 2 fault of the buffer's writes.
s2=$(dmesg | grep -cE 'on CPU [0-9]+ \[PMBSR=0x0*9[4-7][0-9a-f]{6},')
result fault_msgs=$msgs fault_stage2_msgs=$s2 fault_msgs_during=$(echo "$during" | grep -c PMBSR) fault_msg=${msg:-none} fault_cpu=${msg_cpu:-none} fault_pmbsr=${msg_pmbsr:-none}
result $(cat /tmp/kvm.counts) kernel_warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
head -n 3 /tmp/kvm.data.tab
pass
