#!/bin/sh
# One LAVA test case from a scenario of the harness, judged in the guest
# (a lab's results database sees only what the guest reports):
#
#   lava-check.sh CASE SCENARIO [CONDITION...]
#
# runs /scenarios/SCENARIO.sh as /init would, then holds its SPE-RESULT
# lines to each CONDITION: KEY=VALUE (numbers by value), KEY!=VALUE,
# KEY>=N, KEY<=N (quoted:
# unquoted, the shell takes >= and <= for redirections);
# `attributes`, the filtering attributes' judge (attributes-judge.sh);
# `+KEY`, KEY's value as a test case of its own, CASE-KEY (Ok and PASS
# pass; Skip, SKIPPED, none for a part that printed no verdict, and no
# value, for a rerun that was not needed, skip; anything else fails). CASE passes if the scenario and every condition
# do. Needs LAVA's lava-test-case on PATH.
case_name=$1
scenario=$2
shift 2
# Kept apart: a scenario may `set --`.
conditions="$*"
. /scenarios/lib/params.sh
export PATH=$PATH:/bin:/sbin:/usr/bin:/usr/sbin
export PAGER=cat
results=/tmp/lava-$case_name.results
: > "$results"

verdict=
why=
result() {
    echo "SPE-RESULT $*"
    for kv in "$@"; do echo "$kv"; done >> "$results"
}
pass() { verdict=pass; }
fail() {
    verdict=fail
    why="${why:+$why; }$*"
}
kdir=/lib/modules/$(uname -r)
load_extra() {
    m=$1
    shift
    insmod "$kdir/extra/$m.ko" "$@"
}
value() { sed -n "s/^$1=//p" "$results" | tail -n 1; }
compare() {
    awk -v v="$1" -v w="$3" -v op="$2" 'BEGIN {
        if (v == "") exit 1
        exit !(op == ">=" ? v + 0 >= w + 0 : v + 0 <= w + 0)
    }'
}

. "/scenarios/$scenario.sh"
[ -n "$verdict" ] || fail "the scenario gave no verdict"
# No condition is a glob.
set -f
for cond in $conditions; do
    case "$cond" in
    attributes)
        out=$(sh /scenarios/lib/attributes-judge.sh /scenarios/lib/attributes.tab \
            "$results" "$(uname -r)") || fail "$out"
        ;;
    +*)
        key=${cond#+}
        case "$(value "$key")" in
        Ok | PASS) r=pass ;;
        Skip* | SKIPPED | none | '') r=skip ;;
        *) r=fail ;;
        esac
        echo "SPE-LAVA-CASE $case_name-$key $(value "$key")"
        lava-test-case "$case_name-$key" --result $r
        ;;
    *'>='* | *'<='*)
        op=$(echo "$cond" | sed 's/^[^<>]*\([<>]=\).*/\1/')
        key=${cond%%"$op"*}
        want=${cond#*"$op"}
        compare "$(value "$key")" "$op" "$want" || fail "$key=$(value "$key"), want $op $want"
        ;;
    *'!='*)
        key=${cond%%!=*}
        [ "$(value "$key")" != "${cond#*!=}" ] || fail "$key=${cond#*!=}"
        ;;
    *=*)
        key=${cond%%=*}
        v=$(value "$key")
        want=${cond#*=}
        # Numbers (decimal or 0x hex) by value: 0x0090 is 0x90.
        if echo "$v $want" | grep -qE '^(0x[0-9a-fA-F]+|[0-9]+) (0x[0-9a-fA-F]+|[0-9]+)$'; then
            [ $((v)) -eq $((want)) ] || fail "$key=$v, want $want"
        else
            [ "$v" = "$want" ] || fail "$key=$v, want $want"
        fi
        ;;
    *)
        fail "lava-check.sh: a condition it does not know: $cond"
        ;;
    esac
done
[ "$verdict" = pass ] || echo "SPE-LAVA-FAIL $case_name: $why"
lava-test-case "$case_name" --result "$verdict"
