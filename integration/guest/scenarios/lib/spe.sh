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

# spe_record_across MARKER DATA SECONDS: perf records `spe-workload 0
# SECONDS` at a long period (seconds of records at the default one take
# minutes to decode under emulation) into DATA, output in DATA.log; once
# perf has started, prints MARKER for the host to act on. Sets spe_st to
# perf's exit status.
spe_record_across() {
    perf record -e arm_spe_0/ts_enable=1,period=65536/ -o "$2" -- spe-workload 0 "$3" > "$2.log" 2>&1 &
    spe_pid=$!
    # perf writes its file's header when it starts recording.
    while [ ! -s "$2" ] && kill -0 $spe_pid 2> /dev/null; do sleep 0.2; done
    sleep 1
    echo "$1"
    wait $spe_pid
    spe_st=$?
}

# spe_record_bg DATA EVENT SECONDS: `perf record -e EVENT -a -- sleep
# SECONDS` into DATA in the background (output in DATA.log); returns once
# perf records, with its PID in spe_pid.
spe_record_bg() {
    perf record -e "$2" -a -o "$1" -- sleep "$3" > "$1.log" 2>&1 &
    spe_pid=$!
    while [ ! -s "$1" ] && kill -0 $spe_pid 2> /dev/null; do sleep 0.2; done
    sleep 1
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
#   cpu class op el pc tgt va pa lat ts nt ev ds other ldst
#
# cpu: the AUX buffer's CPU; class: LD, ST, B or the operation-type
# packet's first word; op: that packet's whole text joined by '-' (e.g.
# B-COND); el: the PC packet's EL; lat: the total latency; nt: 1 when the
# events have NOT-TAKEN; ev: the events packet's names joined by '-';
# ds: the data-source packet's value; other: an "other" operation-type
# packet's payload byte in hex; ldst: a load/store one's, the same;
# '-' for an absent packet. Sets spe_n (records)
# and spe_bad (decoder errors).
spe_table() {
    perf report -D -i "$1" > "$1.dump" 2>&1
    # busybox awk and grep are slow under TCG: one plain grep keeps the
    # AUX headers and the packets read here (PC, TGT, VA, PA, total
    # latency, operation type, events, data source, timestamp, end) by
    # header byte.
    grep -E 'PERF_RECORD_AUXTRACE |^\.  [0-9a-f]{8}:  (b[0-3]|98|4[89a]|[4-7]2|[45]3|71|01) ' "$1.dump" | awk '
    function reset() { cls = op = el = pc = tgt = va = pa = lat = ts = ev = ds = other = ldst = "-"; nt = 0 }
    function emit() {
        print cpu, cls, op, el, pc, tgt, va, pa, lat, ts, nt, ev, ds, other, ldst
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
        if (hdr == "48") other = $4
        if (hdr == "49") ldst = $4
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
        else if ($1 == "EV") {
            ev = $2
            for (i = 3; i <= NF; i++) ev = ev "-" $i
            if (/ NOT-TAKEN/) nt = 1
        }
        else if ($1 == "DATA-SOURCE") ds = $2
        else if ($1 == "TS") { ts = $2; emit() }
        else if ($1 == "END") emit()
    }' > "$1.tab"
    spe_n=$(wc -l < "$1.tab")
    spe_bad=$(grep -ciE 'bad packet|decoder error|failed to decode' "$1.dump")
}

# spe_aux_flags DUMP: the flags the driver gave each piece of AUX data in
# `perf report -D` output (" PERF_RECORD_AUX offset: 0x0 size: 0x1fd8
# flags: 0x5 [TP]"), as "aux_records=N aux_first_size=S aux_truncated=N
# aux_partial=N aux_collision=N"; shows the first five such lines.
spe_aux_flags() {
    grep 'PERF_RECORD_AUX ' "$1" | head -n 5 >&2
    grep 'PERF_RECORD_AUX ' "$1" | awk '
    function hex(s,  i, v) {
        v = 0; sub(/^0x/, "", s)
        for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
        return v
    }
    { for (i = 1; i < NF; i++) { if ($i == "size:") s = $(i + 1); if ($i == "flags:") f = hex($(i + 1)) } }
    { n++; if (n == 1) first = s; if (f % 2) t++; if (int(f / 4) % 2) p++; if (int(f / 8) % 2) c++ }
    END { printf "aux_records=%d aux_first_size=%s aux_truncated=%d aux_partial=%d aux_collision=%d\n", n, first, t, p, c }'
}

# spe_count DUMP CPUS: the SPE records in DUMP (`perf report -D`
# output) counted as perf decoded them, as "spe_bad_packets=N
# spe_records=N stray_lines=N aux_flagged=N lost_events=N cpu0_records=N
# ...": decoder errors; records (each record's last line, TS or END)
# inside an AUXTRACE chunk, whose CPU they count for; such lines outside
# any chunk (stray: not records); AUX records flagged truncated (T),
# partial (P) or collided (C); lost events. One pass of grep over the
# dump (busybox's awk is slow under TCG) keeps those lines in DUMP.lines.
spe_count() {
    printf 'spe_bad_packets=%d ' "$(grep -ciE 'bad packet|decoder error|failed to decode' "$1")"
    grep -E 'PERF_RECORD_(AUX |AUXTRACE |LOST)|[[:space:]](TS [0-9]+|END)$' "$1" > "$1.lines"
    awk -v n="$2" '
    /PERF_RECORD_AUXTRACE / { cpu = $NF; next }
    /PERF_RECORD_AUX / { if ($0 ~ /\[[^]]*[TPC][^]]*\]/) flagged++; next }
    /PERF_RECORD_LOST/ { lost++; next }
    cpu == "" { stray++; next }
    { total++; per[cpu]++ }
    END {
        printf "spe_records=%d stray_lines=%d aux_flagged=%d lost_events=%d", total, stray, flagged, lost
        for (c = 0; c < n; c++) printf " cpu%d_records=%d", c, per[c]
        printf "\n"
    }' "$1.lines"
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

# spe_loop_spacings DATA P [UNCHECKED]: the spacings, in operations,
# between consecutive samples (per CPU) inside a workload loop of
# workload_others_ops operations from workload_others_pc (DATA.log), a
# record's loop index being its PC's; a record outside the loop breaks
# the chain. A spacing that starts at loop index UNCHECKED is not
# checked. Prints `loop_records loop_other_records loop_branch_records
# outside_records spacings spacing_min spacing_max spacing_wrong` (those
# not P + 1) as key=value pairs, and up to 5 wrong ones on stderr.
spe_loop_spacings() {
    awk -v pc0="$(spe_value "$1.log" workload_others_pc)" \
        -v ops="$(spe_value "$1.log" workload_others_ops)" -v P="$2" \
        -v skip="${3:--1}" '
    BEGIN { pc0 += 0; ops += 0 }
    {
        pc = $5 + 0
        if ($4 != "el0" || pc < pc0 || pc >= pc0 + 4 * ops) { outside++; delete last; next }
        k = (pc - pc0) / 4
        if ($2 == "B") branch++; else if ($2 != "LD" && $2 != "ST") other++
        if (($1 in last) && last[$1] != skip) {
            dl = (k - last[$1] + ops) % ops
            cnt++
            if (dl != P + 1 && ++odd <= 5)
                printf "%d operations between loop indexes %d and %d, TS %s -> %s\n",
                    dl, last[$1], k, ts[$1], $10 > "/dev/stderr"
            if (cnt == 1 || dl < min) min = dl
            if (dl > max) max = dl
        }
        last[$1] = k; ts[$1] = $10
    }
    END {
        printf "loop_records=%d loop_other_records=%d loop_branch_records=%d ",
            NR - outside, other, branch
        printf "outside_records=%d spacings=%d spacing_min=%d spacing_max=%d spacing_wrong=%d\n",
            outside, cnt, min, max, odd
    }' "$1.tab"
}

# spe_spacings_why P: why the spacings spe_loop_spacings gave (its pairs
# and bad, already set) fail to show samples exactly P + 1 operations
# apart in the loop's adds, as "; reason" items; nothing if they do not.
spe_spacings_why() {
    [ "$spacings" -ge 2000 ] || printf '; only %s spacings' "$spacings"
    [ "$loop_other_records" -ge 2000 ] ||
        printf '; only %s records of the adds' "$loop_other_records"
    [ "$spacing_wrong$bad" = 00 ] ||
        printf '; %s spacings in [%s, %s] are not %s, %s decoder errors' \
            "$spacing_wrong" "$spacing_min" "$spacing_max" $(($1 + 1)) "$bad"
}

# spe_missing_terms TERMS: the format terms of TERMS (term=value,...)
# this driver lacks, comma-separated; empty if it has them all.
spe_missing_terms() {
    spe_missing=
    for t in $(echo "$1" | tr ',' ' '); do
        [ -e /sys/bus/event_source/devices/arm_spe_0/format/${t%%=*} ] ||
            spe_missing="$spe_missing ${t%%=*}"
    done
    echo $spe_missing | tr ' ' ,
}

# spe_launcher_check: what a guest booted through spe-qemu must show,
# with arm_spe_0 in place: perf records `spe-workload 3` with timestamps
# and physical addresses, and its records decode without errors.
spe_launcher_check() {
    spe_record /tmp/launcher.data arm_spe_0/ts_enable=1,pa_enable=1/ -- spe-workload 3 || return
    spe_table /tmp/launcher.data
    result launcher_records=$spe_n launcher_bad=$spe_bad
    if [ "$spe_n" -gt 0 ] && [ "$spe_bad" = 0 ]; then
        pass
    else
        fail "$spe_n records, $spe_bad decoder errors"
    fi
}
