# The driver's reaction to a fault the backend delivers (armed by the
# host's --scenario file: see integration/xtask/src/faults.rs). perf
# records the synthetic source's records system-wide while the fault
# lands (or, with spe_fault_workload, a workload's); the host judges what the guest reports here against what the
# driver's code says it does for that syndrome. A second recording shows
# SPE still works once the fault is handled.
. /scenarios/lib/spe.sh

irq_line=$(grep -m 1 -E 'arm_spe|spe' /proc/interrupts)
irq=$(echo "$irq_line" | sed -n 's/^ *\([0-9]*\):.*/\1/p')
# PMBIRQ is a per-CPU interrupt: the kernel counts every one taken, but
# keeps no spurious count for it (/proc/irq/N/spurious stays 0).
irq_count() { grep -m 1 -E 'arm_spe|spe' /proc/interrupts | awk '{ print $2 + $3 }'; }
dmesg -c > /dev/null
irqs_before=$(irq_count)

ev=arm_spe_0/ts_enable=1,pa_enable=1/
# spe_fault_workload: what runs while perf records (LAVA's job, whose
# samples are the guest's own, not a synthetic source's, runs a workload).
# shellcheck disable=SC2086
perf record -e "$ev" -a -o /tmp/f.data -- ${spe_fault_workload:-sleep 3} > /tmp/f.log 2>&1 &
perf_pid=$!
# The host may act now (a live `ctl` command): perf is recording.
sleep 1
echo "SPE-FAULT-RECORDING"
wait $perf_pid
rc=$?
tail -n 3 /tmp/f.log
perf report -D -i /tmp/f.data > /tmp/f.dump 2>&1
records=$(grep -cE '[[:space:]](TS [0-9]+|END)$' /tmp/f.dump)
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' /tmp/f.dump)
aux=$(spe_aux_flags /tmp/f.dump)
irqs_after=$(irq_count)

# The driver's error line: "arm_spe_pmu: <what> on CPU n [PMBSR=0x…, …]"
# (virtio_spe's says "virtio_spe:").
msg_line=$(dmesg | grep -m 1 -E 'on CPU [0-9]+ \[PMBSR=')
msgs=$(dmesg | grep -cE 'on CPU [0-9]+ \[PMBSR=')
msg=$(echo "$msg_line" | sed -n 's/^.*\(arm_spe_pmu\|virtio_spe\): \(.*\) on CPU .*/\2/p' | tr ' ' '_')
msg_pmbsr=$(echo "$msg_line" | sed -n 's/.*\[PMBSR=\(0x[0-9a-f]*\),.*/\1/p')
warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
[ -n "$msg_line" ] && echo "$msg_line"

# Once the fault is handled a new event records again.
perf record -e "$ev" -a -o /tmp/g.data -- sleep 1 > /tmp/g.log 2>&1
rc2=$?
after=$(perf report -D -i /tmp/g.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')

result perf_rc=$rc spe_records=$records spe_bad_packets=$bad $aux
result spe_irq=${irq:-none} irqs_before=${irqs_before:-0} irqs_after=${irqs_after:-0}
result fault_msgs=$msgs fault_msg=${msg:-none} fault_pmbsr=${msg_pmbsr:-none} kernel_warnings=$warnings
result after_rc=$rc2 after_records=$after
if [ "$rc" != 0 ] || [ "$rc2" != 0 ]; then
    tail -n 10 /tmp/f.log /tmp/g.log
    fail "perf record failed ($rc, then $rc2)"
else
    pass
fi
