# Every filtering format attribute of the guest's arm_spe_pmu, one perf
# record of `spe-workload classes` each, and a run with none (the control:
# every class the filters remove is there). The control runs last: the
# backend's memory model learns a line's reuse when it comes back, and the
# workload's 4 MiB walk comes back after about a million operations, so a
# fresh VM's first run shows fewer of its cache misses than it has. Per
# run, the records by class as `ATTR_CLASS=N` results; the host judges
# them (attributes.rs). An attribute this driver lacks is reported absent,
# a value it refuses refused. Then discard=1: no AUX data and no PMBIRQ
# while the backend counts discarded records.
. /scenarios/lib/spe.sh
fmt=/sys/bus/event_source/devices/arm_spe_0/format
iters=${spe_attr_iterations:-100000}

# spe_attr_classes DATA LINE: DATA.tab's records as ldgp ldsimd stgp stsimd
# atomic br brnt other counts, "other" ones with the FP bit of their
# payload (fpother) or the SIMD bit (simdother) apart, and the SIMD&FP
# loads/stores of vector structures (ldvec, stvec: the workload's ld1 and
# st1, at LINE + 0x80 and + 0xa0 exactly; a scalar SIMD&FP access of the
# C library may end in 0xc0 or 0xe0 too) apart from the scalar
# ones (ldsimd, stsimd), those with L1D-REFILL (evrefill),
# L1D-ACCESS (evl1d), MISPRED (evmispred), ALIGNMENT (evalign) and
# LLC-ACCESS (evllc) events, and the loads (atomics included) with data
# source 0 (dsl1: L1D in the backend's encoding) and 8 (dsl2: L2)
# (key=value).
spe_attr_classes() {
    line=$(($2))
    awk -v vld="$(printf '0x%x' $((line + 0x80)))" \
        -v vst="$(printf '0x%x' $((line + 0xa0)))" '{
        c = "other"
        if ($14 != "-") {
            # an "other" operation: its payload byte, from the hex (perf
            # 6.1 does not print the FP and SIMD bits): bit 1 FP, bit 2 SIMD
            b = index("0123456789abcdef", substr($14, 2, 1)) - 1
            if (substr($14, 1, 1) == "0" && int(b / 4) % 2) c = "simdother"
            else if (substr($14, 1, 1) == "0" && int(b / 2) % 2) c = "fpother"
        } else if ($2 == "LD" || $2 == "ST") {
            # SIMD&FP: the vector ld1/st1 of the workload by address,
            # the scalar ones otherwise
            if ($3 ~ /-AT(-|$)/) c = "atomic"
            else if ($3 !~ /SIMD-FP/) c = tolower($2) "gp"
            else if ($7 == vld || $7 == vst) c = tolower($2) "vec"
            else c = tolower($2) "simd"
        } else if ($2 == "B") c = $11 ? "brnt" : "br"
        n[c]++
        if ($12 ~ /(^|-)L1D-REFILL(-|$)/) refill++
        if ($12 ~ /(^|-)L1D-ACCESS(-|$)/) l1d++
        if ($12 ~ /(^|-)MISPRED(-|$)/) mispred++
        if ($12 ~ /(^|-)ALIGNMENT(-|$)/) align++
        if ($12 ~ /(^|-)LLC-ACCESS(-|$)/) llc++
        if ($2 == "LD" || c == "atomic") {
            if ($13 == "0") dsl1++
            else if ($13 == "8") dsl2++
        }
    }
    END {
        printf "ldgp=%d ldsimd=%d stgp=%d stsimd=%d atomic=%d br=%d brnt=%d other=%d ",
            n["ldgp"], n["ldsimd"], n["stgp"], n["stsimd"], n["atomic"], n["br"],
            n["brnt"], n["other"]
        printf "fpother=%d simdother=%d ldvec=%d stvec=%d ", n["fpother"],
            n["simdother"], n["ldvec"], n["stvec"]
        printf "evrefill=%d evl1d=%d evmispred=%d evalign=%d evllc=%d dsl1=%d dsl2=%d\n",
            refill, l1d, mispred, align, llc, dsl1, dsl2
    }' "$1.tab"
}

# NAME|TERMS: the attribute proven and the event's terms.
while IFS='|' read -r name terms; do
    [ -n "$name" ] || continue
    missing=$(spe_missing_terms "$terms")
    if [ -n "$missing" ]; then
        result "attr_${name}_absent=$missing"
        continue
    fi
    # An older driver may refuse a value (6.1 takes PMSEVFR's valid bits
    # from the SPE version, not from the PE): reported, judged by the host.
    if ! perf record -e "arm_spe_0/ts_enable=1${terms:+,$terms}/" -o /tmp/$name.data \
        -- spe-workload classes "$iters" < /dev/null > /tmp/$name.data.log 2>&1; then
        tail -n 3 /tmp/$name.data.log
        result "attr_${name}_refused=1"
        continue
    fi
    spe_table /tmp/$name.data
    line=$(sed -n 's/.*workload_classes_line=\(0x[0-9a-f]*\).*/\1/p' /tmp/$name.data.log)
    result $(echo "n=$spe_n bad=$spe_bad $(spe_attr_classes /tmp/$name.data "${line:-0}")" |
        sed "s/\([a-z0-9]*\)=/attr_${name}_\1=/g")
done << 'EOF'
branch_filter|branch_filter=1
load_filter|load_filter=1
store_filter|store_filter=1
simd_filter|simd_filter=1
float_filter|float_filter=1
branch_filter_mask|branch_filter=1,branch_filter_mask=1
load_filter_mask|load_filter=1,load_filter_mask=1,simd_filter=1,simd_filter_mask=1
store_filter_mask|load_filter=1,store_filter_mask=1
simd_filter_mask|load_filter=1,simd_filter_mask=1
float_filter_mask|store_filter=1,store_filter_mask=1,float_filter=1,float_filter_mask=1
event_filter|event_filter=0x8
inv_event_filter|inv_event_filter=0x8
event_filter_l1d|event_filter=0x4
inv_event_filter_l1d|inv_event_filter=0x4
event_filter_not_taken|event_filter=0x40
inv_event_filter_not_taken|branch_filter=1,inv_event_filter=0x40
inv_data_src_filter|inv_data_src_filter=0x1
event_filter_mispred|event_filter=0x80
inv_event_filter_mispred|branch_filter=1,inv_event_filter=0x80
event_filter_alignment|event_filter=0x800
event_filter_llc|event_filter=0x100
none|
EOF

spe_irqs() {
    awk '/arm_spe|spe/ { n = 0; for (i = 2; i <= 3; i++) n += $i; print n }' /proc/interrupts |
        head -n 1
}
if [ -e "$fmt/discard" ]; then
    irq0=$(spe_irqs)
    spe_record /tmp/discard.data arm_spe_0/discard=1/ -- spe-workload classes "$iters" || return
    irq1=$(spe_irqs)
    aux=$(perf report -D -i /tmp/discard.data 2>/dev/null | grep -c 'PERF_RECORD_AUX ')
    result attr_discard_aux_records=$aux attr_discard_irqs=$((irq1 - irq0))
else
    result attr_discard_absent=discard
fi
pass
