# `cargo xtask soak`'s guest: perf records the workload, pinned to each
# CPU in turn, again and again for spe.soak_seconds, while the host acts
# on the backend between the markers (integration/xtask/src/by_hand/soak):
#
#   SOAK-START I cpu=C   iteration I begins; the host arms its fault or
#                        changes a choice (a second's pause follows)
#   SOAK-RECORDING I     perf records; the host stalls or restarts now
#   SOAK-STOPPED I       perf has exited: nothing samples until the next
#                        START, and the host reads the backend's count
#   SOAK-ITER I ...      what perf decoded (spe_count), perf's status and
#                        the kernel's new WARN/BUG/Oops lines
#
# A run ends at the first iteration that starts after the time is up.
# The period keeps an iteration near 10 k records (the guest's workload
# runs at hundreds of millions of operations a second here): at 16384
# one wrote 95 k, which perf and busybox take a minute to decode.
. /scenarios/lib/spe.sh
cpus=$(grep -c ^processor /proc/cpuinfo)
end=$(($(date +%s) + ${spe_soak_seconds:-3600}))
d=/tmp/soak.data
i=0
dmesg -c > /dev/null
while [ "$(date +%s)" -lt $end ]; do
    cpu=$((i % cpus))
    echo "SOAK-START $i cpu=$cpu"
    sleep 1
    rm -f $d $d.*
    perf record -e arm_spe_0/ts_enable=1,period=131072/ -o $d -- \
        taskset -c $cpu spe-workload 0 2 > $d.log 2>&1 &
    pid=$!
    # perf writes its file's header when it starts recording.
    while [ ! -s $d ] && kill -0 $pid 2> /dev/null; do sleep 0.2; done
    echo "SOAK-RECORDING $i"
    wait $pid
    st=$?
    echo "SOAK-STOPPED $i"
    perf report -D -i $d > $d.dump 2>&1
    counts=$(spe_count $d.dump "$cpus")
    warns=$(dmesg -c | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
    echo "SOAK-ITER $i cpu=$cpu perf_status=$st warns=$warns $counts"
    [ "$st" = 0 ] || tail -n 3 $d.log
    i=$((i + 1))
done
result soak_iterations=$i
pass
