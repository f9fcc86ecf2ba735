# rmmod virtio_spe while perf records through it: the module is in use, so
# rmmod must refuse, and once perf is done it must go cleanly.
. /scenarios/lib/spe.sh
dmesg -c > /dev/null
if ! load_extra virtio_spe; then
    fail "insmod virtio_spe failed"
    return
fi
spe_record_bg /tmp/r.data arm_spe_0// 3
rmmod virtio_spe 2> /tmp/rmmod.err
busy_rc=$?
cat /tmp/rmmod.err
wait $spe_pid
rc=$?
records=$(perf report -D -i /tmp/r.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')
rmmod virtio_spe
idle_rc=$?
pmu_after=$([ -d /sys/bus/event_source/devices/arm_spe_0 ] && echo present || echo absent)
# And it comes back: load it again and record once more.
load_extra virtio_spe
perf record -e arm_spe_0// -a -o /tmp/s.data -- sleep 1 > /tmp/s.log 2>&1
again_rc=$?
again=$(perf report -D -i /tmp/s.data 2>&1 | grep -cE '[[:space:]](TS [0-9]+|END)$')
warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
result rmmod_busy_rc=$busy_rc perf_rc=$rc spe_records=$records rmmod_idle_rc=$idle_rc pmu_after_rmmod=$pmu_after
result again_rc=$again_rc again_records=$again kernel_warnings=$warnings
if [ "$rc" != 0 ] || [ "$again_rc" != 0 ]; then
    tail -n 5 /tmp/r.data.log /tmp/s.log
    fail "perf record failed ($rc, then $again_rc)"
else
    pass
fi
