# perf's own Arm SPE tests, unmodified: `perf test` runs the shell tests
# its package ships (tests/shell/test_arm_spe.sh: snapshot, system-wide and
# discard parts; test_arm_spe_fork.sh). Each part's verdict and perf
# test's own are result lines; the host judges them (perf_test.rs).
tests=$(perf test list 2>&1 | grep -i 'arm spe')
echo "$tests"
[ -n "$tests" ] || { fail "perf test list names no Arm SPE test"; return; }
# How long perf record takes to start and stop around nothing, without
# SPE: the snapshot part signals perf after a fixed `sleep 1`.
t0=$(cut -d' ' -f1 /proc/uptime)
perf record -e cpu-clock -o /tmp/startup.data -- true > /dev/null 2>&1
t1=$(cut -d' ' -f1 /proc/uptime)
result perf_startup_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
# A Debian /bin/sh, not busybox's ash, which runs its own applets (its
# mktemp refuses five X's) ahead of PATH: 6.1's tests are #!/bin/sh.
ln -sf /bin/bash /bin/sh
perf test -v 'Arm SPE' > /tmp/perf-test.log 2>&1
result perf_test_rc=$?
result guest_cc=$(command -v cc > /dev/null && echo yes || echo no)
cat /tmp/perf-test.log
# "NN: Check Arm SPE trace data ... : Ok" (or FAILED!, Skip; 6.1 prints
# the description again without the number): one key per test.
verdict() {
    v=$(grep -E "$1.*: (Ok|FAILED!|Skip|Skip \(.*\))\$" /tmp/perf-test.log |
        tail -n 1 | sed 's/.*: //; s/[^A-Za-z!]//g')
    echo "${v:-none}"
}
result perf_test_trace=$(verdict 'trace data recording')
result perf_test_fork=$(verdict "hang when there are forks")
# The parts of test_arm_spe.sh print "NAME: PASS|FAIL|SKIPPED"; which
# parts this perf's script has is a result too (6.1's has no discard).
script=$(grep -l 'Arm SPE trace data' /usr/lib/perf-core/tests/shell/*.sh | head -n 1)
parts=
for part in "SPE snapshot testing" "SPE system-wide testing" "SPE discard mode"; do
    key=$(echo "$part" | sed 's/^SPE //; s/ testing//; s/ mode//; s/[^a-z]/_/g')
    grep -q "\"$part" "$script" && parts="$parts${parts:+,}$key"
    v=$(grep -E "^$part: (PASS|FAIL|SKIPPED)" /tmp/perf-test.log | tail -n 1 | sed 's/.*: //')
    result "perf_test_part_$key=${v:-none}"
done
result "perf_test_parts=$parts"
# A failed part or test again, waiting perf's start-up plus two seconds
# where perf's own waits one.
wait_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) + 2 }')
# later NAME SCRIPT VERDICT: runs SCRIPT and reports the verdict of its
# "VERDICT: " line as perf_test_NAME_later.
later() {
    bash "$2" > "$2.log" 2>&1
    cat "$2.log"
    v=$(sed -n "s/^$3: //p" "$2.log" | tail -n 1)
    result "perf_test_$1_later_s=$wait_s"
    result "perf_test_$1_later=${v:-none}"
}
# Why the snapshot part failed, if it did: perf's own part again, only its
# `sleep 1` lengthened. PASS here and FAIL above is the expected failure
# the LAVA job reports (lava.rs: its `_later` cases).
if grep -q '^SPE snapshot testing: FAIL' /tmp/perf-test.log; then
    sed -e "s/^\tsleep 1\$/\tsleep $wait_s/" \
        -e '/^arm_spe_system_wide_test$/d' -e '/^arm_spe_discard_test$/d' \
        "$script" > /tmp/snapshot-later.sh
    later snapshot /tmp/snapshot-later.sh "SPE snapshot testing"
fi
# The fork test again if it failed: it counts perf's log lines a second
# after starting perf and again a second later, and fails if they did not
# grow. Here the first wait is wait_s, and the second five: under emulation perf (-vvv) logs only at an AUX wake-up,
# and its workload's samples fill the buffer slower than on a real core
# (7.3, a busy host: 98 lines at 7 s and a second later).
if [ "$(verdict "hang when there are forks")" = "FAILED!" ]; then
    fork=$(grep -l "hang when there are forks" /usr/lib/perf-core/tests/shell/*.sh | head -n 1)
    awk -v w="$wait_s" '$0 == "sleep 1" { n++; print "sleep " (n == 1 ? w : 5); next } { print }' \
        "$fork" > /tmp/fork-later.sh
    later fork /tmp/fork-later.sh "SPE hang test"
fi
pass
