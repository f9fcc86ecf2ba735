# FEAT_PMUv3_SS through guest-driver/pmu_snapshot's sysfs interface
# (/sys/devices/system/cpu/cpuN/pmu_snapshot/, see its ABI.md), on cpu0:
#  (a) a capture requested from user space holds a cycle count between
#      the PMCCNTR_EL0 reads the driver takes around it (its pr_debug
#      line); perf counts cycles twice system-wide meanwhile (`cycles`
#      on the cycle counter, `r11` CPU_CYCLES on an event counter: QEMU
#      counts instructions only with -icount), so both kinds run;
#  (c) with Capture events prohibited the capture reports nc=1;
#  (b) the host's `ctl snapshot` (run when the console shows the marker)
#      shows up as a new seq with source=host while a loop runs on cpu0.
# Then CPU hotplug (cpu1 off and on again) and rmmod.
# (c) comes before (b): the model's external request copies the counters
# QEMU sent at the last PMSSCR_EL1 write, so the prohibited capture is
# what gives the host's capture values the snapshot registers lack.
d=/sys/devices/system/cpu/cpu0/pmu_snapshot
fields() { # the latest capture of $1 as key=value, keys prefixed by $2
    kv="${2}seq=$(cat "$1/seq") ${2}source=$(cat "$1/source") ${2}nc=$(cat "$1/nc") ${2}ccnt=$(cat "$1/ccnt")"
    for f in "$1"/evcnt*; do
        n=${f##*/evcnt}
        kv="$kv ${2}evcnt$n=$(cat "$f") ${2}evtype$n=$(cat "$1/evtype$n")"
    done
    echo "$kv"
}
dmesg -c > /dev/null
if ! insmod "$kdir/extra/pmu_snapshot.ko" dyndbg=+p; then
    fail "insmod pmu_snapshot failed"
    return
fi
if [ ! -d $d ]; then
    fail "no $d"
    return
fi
result files=$(ls $d | tr '\n' , | sed 's/,$//') load_seq=$(cat $d/seq) load_source=$(cat $d/source)

perf stat -a -x, -e cycles,r11 -o /tmp/stat > /dev/null 2>&1 &
perf_pid=$!
sleep 2
# (a)
echo 1 > $d/capture
a_rc=$?
line=$(dmesg | grep 'cpu0: capture' | tail -n 1)
echo "$line"
before=$(echo "$line" | sed -n 's/.*PMCCNTR_EL0 \([0-9]*\) before.*/\1/p')
svr=$(echo "$line" | sed -n 's/.*PMCCNTSVR_EL1 \([0-9]*\),.*/\1/p')
after=$(echo "$line" | sed -n 's/.*PMCCNTR_EL0 \([0-9]*\) after.*/\1/p')
result a_rc=$a_rc a_before=${before:-none} a_svr=${svr:-none} a_after=${after:-none}
result $(fields $d a_)
# (c)
echo 1 > /sys/module/pmu_snapshot/parameters/prohibit
echo 1 > $d/capture
c_rc=$?
result c_rc=$c_rc $(fields $d c_)
echo 0 > /sys/module/pmu_snapshot/parameters/prohibit
# (b)
c_seq=$(cat $d/seq)
taskset -c 0 sh -c 'while :; do :; done' &
loop_pid=$!
echo "PMU-SNAPSHOT-HOST-NOW"
waited=0
while [ "$(cat $d/seq)" = "$c_seq" ] && [ $waited -lt 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
kill $loop_pid
result b_waited_ds=$waited $(fields $d b_)
kill -INT $perf_pid
i=0
while kill -0 $perf_pid 2> /dev/null && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
done
kill -KILL $perf_pid 2> /dev/null
wait $perf_pid
cat /tmp/stat
# CPU hotplug: cpu1's directory goes with it and comes back, and works.
h=/sys/devices/system/cpu/cpu1
hp=skipped
if [ -w $h/online ]; then
    echo 0 > $h/online
    off=$([ -d $h/pmu_snapshot ] && echo present || echo absent)
    echo 1 > $h/online
    on=$([ -d $h/pmu_snapshot ] && echo present || echo absent)
    s0=$(cat $h/pmu_snapshot/seq 2> /dev/null)
    echo 1 > $h/pmu_snapshot/capture
    hp="off:$off,on:$on,seq:${s0:-none}->$(cat $h/pmu_snapshot/seq 2> /dev/null),$(cat $h/pmu_snapshot/source 2> /dev/null)"
fi
rmmod pmu_snapshot
rmmod_rc=$?
after_rmmod=$([ -d $d ] && echo present || echo absent)
warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
result hotplug=$hp rmmod_rc=$rmmod_rc dir_after_rmmod=$after_rmmod kernel_warnings=$warnings
pass
