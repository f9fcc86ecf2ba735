# The backend is killed and started again while perf records through
# virtio_spe: no CPU may hang and the kernel must not warn, the loss is
# reported to perf (AUX data flagged TRUNCATED), and the next perf record
# shows whether the device works again.
. /scenarios/lib/spe.sh
dmesg -c > /dev/null
if ! load_extra virtio_spe; then
    fail "insmod virtio_spe failed"
    return
fi
spe_record_bg /tmp/a.data arm_spe_0// 4
echo "SPE-VIRTIO-RESTART"
wait $spe_pid
rc=$?
perf report -D -i /tmp/a.data > /tmp/a.dump 2>&1
aux=$(spe_aux_flags /tmp/a.dump)
sleep 2
perf record -e arm_spe_0// -a -o /tmp/b.data -- sleep 1 > /tmp/b.log 2>&1
rc2=$?
after=$(perf report -D -i /tmp/b.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')
dmesg | grep -m 5 virtio_spe
warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:|rcu_.*stall|soft lockup')
result perf_rc=$rc $aux
result after_rc=$rc2 after_records=$after kernel_warnings=$warnings
if [ "$warnings" != 0 ]; then
    fail "the kernel warned"
else
    pass
fi
