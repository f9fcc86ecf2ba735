#!/bin/sh
# The SPE kselftest suite (arm_spe_test) as LAVA test cases: each KTAP
# result line is a case suite-NAME (ok: pass, ok # SKIP: skip, not ok:
# fail), and `suite` is the suite's exit status (0 passes; anything else
# fails, a suite skipped whole for want of an SPE PMU too). The fault
# cases arm their faults through the guest control port: the job needs
# no hook on the host. Needs LAVA's lava-test-case on PATH.
export PATH=$PATH:/bin:/sbin:/usr/bin:/usr/sbin
arm_spe_test > /tmp/suite.ktap 2>&1
rc=$?
cat /tmp/suite.ktap
awk '$1 == "ok" || ($1 == "not" && $2 == "ok") {
        fail = $1 == "not"
        skip = index($0, " # SKIP ") > 0
        sub(/^(not )?ok [0-9]+ (# SKIP )?/, "")
        name = $0
        sub(/[: ].*/, "", name)
        print name, (fail ? "fail" : skip ? "skip" : "pass")
    }' /tmp/suite.ktap |
    while read -r name res; do
        lava-test-case "suite-$name" --result "$res"
    done
if [ "$rc" = 0 ]; then
    lava-test-case suite --result pass
else
    lava-test-case suite --result fail
fi
