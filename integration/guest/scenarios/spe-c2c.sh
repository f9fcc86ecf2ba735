# perf c2c finds false sharing: spe-workload false-sharing runs two
# threads on CPUs 0 and 1 incrementing counters in one cache line
# (spe_workload_share_a and _b); perf c2c record and report must put that
# line first, with loads served from the peer core (HITM, or "Peer" on
# perfs that count a peer core's cache as such), and both functions as
# its writers. The negative control (spe-c2c-padded.sh, which sets
# c2c_mode=padded) puts the counters a line apart: no line is shared.
. /scenarios/lib/spe.sh
d=/tmp/c2c.data
if ! perf c2c record -o $d -- spe-workload false-sharing 3 ${c2c_mode:-} > $d.log 2>&1; then
    tail -n 20 $d.log
    fail "perf c2c record failed"
    return
fi
grep '^SPE-RESULT ' $d.log
perf c2c report -i $d --stdio --no-source > $d.rep 2> $d.err
sed 's/^/SPE-C2C /' $d.rep | head -n 120
[ -s $d.rep ] || { head -n 20 $d.err; fail "perf c2c report gave nothing"; return; }
pass
