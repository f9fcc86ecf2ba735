# The kernel's own KVM selftests, which `cargo xtask kvm-selftests`
# builds from the kernel's source package and adds under
# /usr/lib/kvm-selftests: each runs alone, then while perf records SPE
# on every CPU. Per test, both runs' exit status (0 passed, 4 skipped:
# kselftest's KSFT_SKIP) and KTAP totals (pass/fail/skip/error), and the
# second's records and decoder errors. (No per-test timeout: the run's
# own timeout bounds a hang.)
. /scenarios/lib/spe.sh
. /scenarios/lib/kvm.sh
kvm_mode || return 0
dir=/usr/lib/kvm-selftests
if [ ! -d "$dir" ]; then
    fail "no $dir: cargo xtask kvm-selftests adds them"
    return 0
fi
totals() {
    sed -n 's/^# Totals: pass:\([0-9]*\) fail:\([0-9]*\) xfail:[0-9]* xpass:[0-9]* skip:\([0-9]*\) error:\([0-9]*\).*/\1\/\2\/\3\/\4/p' "$1" | tail -n 1
}
for t in "$dir"/*; do
    n=${t##*/}
    echo "== $n"
    "$t" > /tmp/st.plain 2>&1
    plain=$?
    rm -f /tmp/st.rc
    perf record -e arm_spe_0/ts_enable=1/ -a -o /tmp/st.data -- \
        sh -c "$t > /tmp/st.spe 2>&1; echo \$? > /tmp/st.rc" > /tmp/st.perf 2>&1
    perf_rc=$?
    spe=$(cat /tmp/st.rc 2>/dev/null)
    # Counted as it streams: debug-exceptions' dump alone is 442 MB, which
    # kept in the initramfs's RAM left get-reg-list too little to run.
    counts=$(perf report -D -i /tmp/st.data 2>&1 | awk '
        /[[:space:]](TS [0-9]+|END)$/ { r++ }
        tolower($0) ~ /bad packet|decoder error|failed to decode/ { b++ }
        END { print r + 0, b + 0 }')
    records=${counts% *} bad=${counts#* }
    rm -f /tmp/st.data
    echo "$n: $plain alone, ${spe:-none} under perf"
    tail -n 3 /tmp/st.plain
    if [ "$plain" != "${spe:-none}" ]; then
        tail -n 10 /tmp/st.spe /tmp/st.perf
    fi
    result kvm_selftest="$n" plain_rc=$plain spe_rc="${spe:-none}" perf_rc=$perf_rc \
        plain_totals="$(totals /tmp/st.plain)" spe_totals="$(totals /tmp/st.spe)" \
        spe_records="$records" spe_bad_packets="$bad"
done
result kernel_warnings=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call trace:')
pass
