# FEAT_PMUv3_SS: integration/guest/modules/pmu_snapshot requests a PMU
# snapshot (a write of 1 to PMSSCR_EL1.SS) with PMECR_EL1.SSE 0b00
# (disabled), 0b10 (prohibited) and 0b11 (allowed) and prints PMSSCR_EL1
# and the snapshot registers; the host checks {NC,SS} and the copies.
# It captures once, on load, and is unloaded at once.
load_extra pmu_snapshot && rmmod pmu_snapshot
lines=$(dmesg | grep 'SPE-SNAPSHOT sse=')
echo "$lines"
n=0
for sse in 0 2 3; do
    line=$(echo "$lines" | grep "SPE-SNAPSHOT sse=$sse ")
    [ -n "$line" ] || continue
    n=$((n + 1))
    kv=""
    for f in ${line#*SPE-SNAPSHOT }; do
        case "$f" in
        sse=*) ;;
        *=*) kv="$kv sse${sse}_$f" ;;
        esac
    done
    result $kv
done
if [ "$n" = 3 ] && [ "$(echo "$lines" | wc -l)" = 3 ]; then
    pass
else
    dmesg | grep -i -e snapshot -e pmu | tail -n 20
    fail "pmu_snapshot printed $(echo "$lines" | grep -c .) lines, want one per SSE"
fi
