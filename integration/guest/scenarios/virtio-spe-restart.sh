# The backend is killed and started again while perf records through
# virtio_spe: no CPU may hang, the kernel must not warn, and the next perf
# record must work. Whether the interrupted recording was told of its
# loss (AUX data flagged TRUNCATED, the driver's message) is reported.
. /scenarios/lib/spe.sh
dmesg -c > /dev/null
if ! load_extra virtio_spe; then
    fail "insmod virtio_spe failed"
    return
fi
# perf takes up to 3 s of guest time to enable its events under
# emulation (7.3): the host acts well after that.
perf record -e arm_spe_0// -a -o /tmp/a.data -- sleep 8 > /tmp/a.log 2>&1 &
spe_pid=$!
while [ ! -s /tmp/a.data ] && kill -0 $spe_pid 2> /dev/null; do sleep 0.2; done
sleep 4
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
# The driver's word for the loss: the new device's PMBPTR was not ours,
# or a request found no device.
loss=$(dmesg | grep -cE 'outside the buffer|control queue')
result after_rc=$rc2 after_records=$after kernel_warnings=$warnings loss_msgs=$loss
if [ "$warnings" != 0 ]; then
    fail "the kernel warned"
else
    pass
fi
