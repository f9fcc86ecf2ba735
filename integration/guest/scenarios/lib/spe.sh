# Helpers for the scenarios that prove where SPE records land (sourced
# from /scenarios/lib/spe.sh): record with perf, turn perf's decoding into
# one line per record, read the workload's results.

# spe_record DATA EVENT [PERF-RECORD-ARGS...] -- COMMAND...: perf record
# of EVENT into DATA, output in DATA.log; shows the command's SPE-RESULT
# lines. On failure shows perf's output, calls fail and returns 1.
spe_record() {
    spe_data=$1 spe_ev=$2
    shift 2
    if ! perf record -e "$spe_ev" -o "$spe_data" "$@" > "$spe_data.log" 2>&1; then
        tail -n 20 "$spe_data.log"
        fail "perf record -e $spe_ev failed"
        return 1
    fi
    grep '^SPE-RESULT ' "$spe_data.log"
    return 0
}

# spe_value FILE KEY: the value of the first KEY=value in FILE.
spe_value() {
    sed -n "s/.*[[:space:]]$2=\([^[:space:]]*\).*/\1/p" "$1" | head -n 1
}

# spe_kv KEY TEXT: the value of KEY=value in TEXT (space-separated pairs).
spe_kv() {
    echo " $2" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"
}

# spe_table DATA: decodes DATA with `perf report -D` (into DATA.dump) and
# writes DATA.tab, one line per SPE record in buffer order:
#
#   cpu class op el pc tgt va pa lat ts nt
#
# cpu: the AUX buffer's CPU; class: LD, ST, B or the operation-type
# packet's first word; op: that packet's whole text joined by '-' (e.g.
# B-COND); el: the PC packet's EL; lat: the total latency; nt: 1 when the
# events have NOT-TAKEN; '-' for an absent packet. Sets spe_n (records)
# and spe_bad (decoder errors).
spe_table() {
    perf report -D -i "$1" > "$1.dump" 2>&1
    # busybox awk and grep are slow under TCG: one plain grep keeps the
    # AUX headers and the packets read here (PC, TGT, VA, PA, total
    # latency, operation type, events, timestamp, end) by header byte.
    grep -E 'PERF_RECORD_AUXTRACE |^\.  [0-9a-f]{8}:  (b[0-3]|98|4[89a]|[4-7]2|71|01) ' "$1.dump" | awk '
    function reset() { cls = op = el = pc = tgt = va = pa = lat = ts = "-"; nt = 0 }
    function emit() {
        print cpu, cls, op, el, pc, tgt, va, pa, lat, ts, nt
        reset()
    }
    BEGIN { reset(); cpu = "-" }
    / PERF_RECORD_AUXTRACE / {
        for (i = 1; i < NF; i++) if ($i == "cpu:") cpu = $(i + 1)
        next
    }
    {
        # ".  OFFSET:  BYTES (16 columns of 3)  TEXT": the header byte and
        # the decoded text.
        hdr = $3
        $0 = substr($0, 63)
        if (hdr == "48" || hdr == "49" || hdr == "4a") {
            cls = $1
            op = $1
            for (i = 2; i <= NF; i++) op = op "-" $i
        } else if ($1 == "PC") { pc = $2; el = $3 }
        else if ($1 == "TGT") tgt = $2
        else if ($1 == "VA") va = $2
        else if ($1 == "PA") pa = $2
        else if ($1 == "LAT" && $3 == "TOT") lat = $2
        else if ($1 == "EV" && / NOT-TAKEN/) nt = 1
        else if ($1 == "TS") { ts = $2; emit() }
        else if ($1 == "END") emit()
    }' > "$1.tab"
    spe_n=$(wc -l < "$1.tab")
    spe_bad=$(grep -ciE 'bad packet|decoder error|failed to decode' "$1.dump")
}

# spe_syms DATA: DATA.syms, the symbol of each sampled PC as perf resolves
# it (`0xPC SYMBOL`, the PC as DATA.tab writes it: perf script
# sign-extends kernel PCs, the PC packet holds 56 bits), from perf
# script's instruction samples (one per record); sets spe_script_n to
# their count.
spe_syms() {
    perf script -i "$1" --itrace=i1i -F ip,sym > "$1.script" 2> "$1.script.err"
    spe_script_n=$(wc -l < "$1.script")
    awk '{
        pc = length($1) == 16 && $1 ~ /^ff/ ? substr($1, 3) : $1
        print "0x" pc, ($2 == "" ? "[unknown]" : $2)
    }' "$1.script" | sort -u > "$1.syms"
}

# spe_classes DATA: `ld=N st=N br=N other=N`, DATA.tab's records by class.
spe_classes() {
    awk '{ n[$2 == "LD" || $2 == "ST" || $2 == "B" ? $2 : "other"]++ }
        END { printf "ld=%d st=%d br=%d other=%d\n", n["LD"], n["ST"], n["B"], n["other"] }' "$1.tab"
}
