# SVE operations in the records: `spe-workload sve` runs
# ld1w with a full, a partial and an empty predicate, a gather, a
# predicated fadd and add (full, partial), an unpredicated add and a
# st1w. Each record of its loop is sorted by its operation-type payload
# (SVE load/store: EVL, PRED, SG; "other SVE": EVL, PRED, FP), its data
# address and its predicate events; then runs with event_filter on the
# partial (bit 17) and empty (bit 18) predicate events, inv_event_filter
# on the partial one and float_filter, where the driver has them. The
# host judges the counts (proofs::check_spe_sve).
. /scenarios/lib/spe.sh
iters=${spe_sve_iterations:-100000}

# spe_sve_kinds DATA LOG: DATA.tab's records of the loop by kind.
spe_sve_kinds() {
    awk -v pc0="$(spe_value "$2" workload_sve_pc)" \
        -v vl="$(spe_value "$2" workload_sve_vl)" \
        -v arr="$(spe_value "$2" workload_sve_array)" '
    function hex(s,  i, v) {
        v = 0; sub(/^0x/, "", s)
        for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(tolower(s), i, 1)) - 1
        return v
    }
    function bit(v, b) { while (b-- > 0) v = int(v / 2); return v % 2 }
    function evl(v,  e, k) { e = 32; for (k = int(v / 16) % 8; k > 0; k--) e *= 2; return e }
    BEGIN { pc0 = hex(pc0); arr = hex(arr); vl += 0 }
    {
        pc = hex($5)
        if (pc < pc0 || pc >= pc0 + 0x60) next
        n++
        partial = $12 ~ /(^|-)SVE-PARTIAL-PRED(-|$)/
        empty = $12 ~ /(^|-)SVE-EMPTY-PRED(-|$)/
        va = $7 == "-" ? -1 : hex($7) - arr
        k = "none"
        if ($14 != "-") {
            b = hex($14)
            if (bit(b, 3) && !bit(b, 7) && !bit(b, 0)) {
                sve++
                if (evl(b) != vl) evl_bad++
                if (bit(b, 1) && bit(b, 2) && !partial) k = "fp"
                else if (!bit(b, 1) && bit(b, 2) && partial && !empty) k = "add_partial"
                else if (!bit(b, 1) && !bit(b, 2) && !partial && !empty) k = "add_unpred"
                else k = "wrong"
            } else k = "other"
        } else if ($15 != "-") {
            b = hex($15)
            if (bit(b, 3) && !bit(b, 1)) {
                sve++
                if (evl(b) != vl) evl_bad++
                st = bit(b, 0); sg = bit(b, 7); pr = bit(b, 2)
                if (!pr) k = "wrong"
                else if (!st && !sg && va == 256 && !partial) k = "ld_full"
                else if (!st && !sg && va == 512 && partial && !empty) k = "ld_partial"
                else if (!st && !sg && va == -1 && partial && empty) k = "ld_empty"
                else if (!st && sg && va == 768 && !partial) k = "gather"
                else if (st && !sg && va == 1024 && !partial) k = "st"
                else k = "wrong"
            } else k = "ldst"
        } else if ($2 == "B") k = "b"
        c[k]++
        if (partial) np++
        if (empty) ne++
    }
    END {
        printf "n=%d sve=%d evl_bad=%d partial=%d empty=%d", n, sve, evl_bad, np, ne
        split("ld_full ld_partial ld_empty gather fp add_partial add_unpred st other b wrong ldst none", ks, " ")
        for (i = 1; i in ks; i++) printf " %s=%d", ks[i], c[ks[i]]
        printf "\n"
    }' "$1.tab"
}

# NAME|TERMS: the run and the event's terms.
while IFS='|' read -r name terms; do
    [ -n "$name" ] || continue
    missing=$(spe_missing_terms "$terms")
    if [ -n "$missing" ]; then
        result "sve_${name}_absent=$missing"
        continue
    fi
    d=/tmp/sve-$name.data
    spe_record $d "arm_spe_0/ts_enable=1${terms:+,$terms}/u" -- spe-workload sve "$iters" || return
    spe_table $d
    result $(echo "bad=$spe_bad $(spe_sve_kinds $d $d.log)" |
        sed "s/\([a-z_0-9]*\)=/sve_${name}_\1=/g")
done << 'TERMS'
none|
partial|event_filter=0x20000
empty|event_filter=0x40000
notpartial|inv_event_filter=0x20000
float|float_filter=1
TERMS
result sve_vl="$(spe_value /tmp/sve-none.data.log workload_sve_vl)"
pass
