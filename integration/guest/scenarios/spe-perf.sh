# perf records the records vhost-device-spe's synthetic source writes into
# the AUX buffers, through the patched QEMU, and decodes them.
# Usage from another scenario: set spe_perf_mmap (e.g. ",4") first.
ev=arm_spe_0/ts_enable=1,pa_enable=1/
irq_before=$(awk '/arm_spe|spe/ { n = 0; for (i = 2; i <= 3; i++) n += $i; print n }' /proc/interrupts | head -n 1)
out=$(perf record -e "$ev" ${spe_perf_mmap:+-m "$spe_perf_mmap"} -a -o /tmp/spe.data -- sleep "${spe_perf_secs:-2}" 2>&1)
rc=$?
echo "$out" | tail -n 5
irq_after=$(awk '/arm_spe|spe/ { n = 0; for (i = 2; i <= 3; i++) n += $i; print n }' /proc/interrupts | head -n 1)
grep -i spe /proc/interrupts
result perf_record_rc=$rc spe_irqs_before=${irq_before:-none} spe_irqs_after=${irq_after:-none}
perf report -D -i /tmp/spe.data > /tmp/spe.dump 2>&1
result perf_report_rc=$?
records=$(grep -cE '[[:space:]](TS [0-9]+|END)$' /tmp/spe.dump)
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' /tmp/spe.dump)
aux=$(grep -c 'PERF_RECORD_AUX ' /tmp/spe.dump)
result spe_records=$records spe_bad_packets=$bad spe_aux_records=$aux
grep -E '[[:space:]](TS [0-9]+|END)$' /tmp/spe.dump | head -n 3
grep -m 3 'PERF_RECORD_AUX ' /tmp/spe.dump
if [ "$rc" != 0 ]; then
    fail "perf record failed ($rc)"
elif [ "$records" -eq 0 ]; then
    fail "perf decoded no SPE records"
elif [ "$bad" != 0 ]; then
    grep -iE -m 5 'bad packet|decoder error|failed to decode' /tmp/spe.dump
    fail "the decoder reported $bad errors"
else
    pass
fi
