# The proof that the records describe what the guest executed:
# perf records spe-workload's loads, stores and branches with physical
# addresses and timestamps, and
#  (a) perf attributes most user-space samples to the workload's own
#      functions (kernel samples are counted, not judged: how long the
#      kernel spins on a lock the other vCPU holds depends on the host);
#  (b) the data VAs of spe_workload_strided's loads and stores fall in
#      its array;
#  (c) their PAs are the guest's translation of those VAs (the
#      workload's /proc/self/pagemap of the array at the end of its run);
#  (d) taken branches carry their target (TGT), not-taken ones none, the
#      workload's direct branches target its own functions, and exactly
#      the target their instruction encodes (spe-workload branches);
#  (e) timestamps do not decrease, per CPU, in buffer order;
#  (f) on perf's clock (perf converts the generic timer's count) no
#      record is later than the workload's exit, and the workload's own
#      records span at least half of the time its loop measured.
# Each check also runs on deliberately wrong inputs (PAs a page off, the
# array moved past its end, the records reversed, the targets one
# instruction off, the exit moved to the middle of the workload's
# records), which it must reject.
. /scenarios/lib/spe.sh
d=/tmp/profile.data
ev=arm_spe_0/load_filter=1,store_filter=1,branch_filter=1,pa_enable=1,ts_enable=1/
spe_record $d "$ev" -- spe-workload 10 0 /tmp/profile.pagemap || return
spe_table $d
spe_syms $d
spe-workload branches $d.branches || { fail "spe-workload branches failed"; return; }
awk '{ printf "%s 0x%x\n", $1, $2 + 4 }' $d.branches > $d.branches-off
base=$(spe_value $d.log workload_array_va)
bytes=$(spe_value $d.log workload_array_bytes)
pages=$(wc -l < /tmp/profile.pagemap)

# (a) The workload's share of the user-space records (a kernel PC is
# printed sign-extended, 16 digits from ff).
set -- $(awk '
    length($1) == 16 && $1 ~ /^ff/ { k++; next }
    $2 == "spe_workload_strided" || $2 == "spe_workload_branchy" { w++ }
    END { u = NR - k; printf "%d %d %d %.1f\n", NR, k, w, u ? 100 * w / u : 0 }' $d.script)
result spe_records=$spe_n spe_bad_packets=$spe_bad perf_samples=$1 \
    kernel_samples=$2 workload_samples=$3 workload_share_pct=$4 pagemap_pages=$pages
share=$4
# Where the rest went, for a failed (a): the five busiest other symbols.
awk '$2 != "spe_workload_strided" && $2 != "spe_workload_branchy" { n[$2]++ }
    END { for (s in n) print n[s], s }' $d.script | sort -rn | head -n 5 |
    awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 } END { print "" }' |
    sed 's/^/SPE-INFO other_symbols /'

# profile_check BASE PA_SHIFT TABLE [BRANCHES]: (b)-(e) over TABLE for an
# array at BASE whose pages' PAs are the pagemap's plus PA_SHIFT, and
# direct branches' targets as BRANCHES lists them; prints key=value.
profile_check() {
    awk -v base="$1" -v bytes="$bytes" -v shift="$2" '
    BEGIN { base += 0; bytes += 0; shift += 0 }
    FILENAME == ARGV[1] { sym[$1] = $2; next }
    FILENAME == ARGV[2] { pa[int(($1 + 0) / 4096)] = $2 + 0; next }
    FILENAME == ARGV[3] { brt[sprintf("%x", $1 + 0)] = $2 + 0; next }
    # cpu class op el pc tgt va pa lat ts nt
    {
        if ($10 == "-") ts_missing++
        else {
            t = $10 + 0
            if (($1 in last) && t < last[$1]) ts_dec++
            last[$1] = t
        }
        if ($2 == "B") {
            if ($11) { nt++; if ($6 != "-") nt_tgt++ }
            else { taken++; if ($6 == "-") taken_no_tgt++ }
            # The workload functions call nothing: their taken direct
            # branches stay in them (where perf knows the target).
            f = sym[$5]
            if (!$11 && $3 != "B-IND" && (f == "spe_workload_strided" || f == "spe_workload_branchy")) {
                if ($6 in sym) { if (sym[$6] == f) tgt_same++; else tgt_other++ }
                k = sprintf("%x", $5 + 0)
                if (k in brt) {
                    if ($6 + 0 == brt[k]) tgt_exact++
                    else if (++tgt_wrong <= 3)
                        printf "branch at %s: target %s, its instruction encodes 0x%x\n", $5, $6, brt[k] > "/dev/stderr"
                }
            }
        }
        if (sym[$5] != "spe_workload_strided" || ($2 != "LD" && $2 != "ST")) next
        ldst++
        if ($7 == "-") { no_va++; next }
        v = $7 + 0
        if (v < base || v >= base + bytes) { outside++; next }
        if ($8 == "-") { no_pa++; next }
        k = int(v / 4096)
        want = pa[k] + shift + v - k * 4096
        if ($8 + 0 == want) pa_ok++
        else if (++pa_bad <= 3)
            printf "PA mismatch: %s VA %s PA %s, the pagemap gives 0x%x\n", $2, $7, $8, want > "/dev/stderr"
    }
    END {
        printf "strided_ldst=%d no_va=%d va_outside=%d no_pa=%d pa_match=%d pa_mismatch=%d ",
            ldst, no_va, outside, no_pa, pa_ok, pa_bad
        printf "branches_taken=%d taken_without_tgt=%d branches_not_taken=%d not_taken_with_tgt=%d ",
            taken, taken_no_tgt, nt, nt_tgt
        printf "workload_tgt_same_function=%d workload_tgt_elsewhere=%d ", tgt_same, tgt_other
        printf "workload_tgt_exact=%d workload_tgt_wrong=%d ", tgt_exact, tgt_wrong
        printf "ts_missing=%d ts_decreases=%d\n", ts_missing, ts_dec
    }' $d.syms /tmp/profile.pagemap "${4:-$d.branches}" "$3"
}
checks=$(profile_check "$base" 0 $d.tab)
result $checks
# Negative controls: the same checks must see a wrong translation, a wrong
# array and out-of-order timestamps.
tac $d.tab > $d.rev
control_pa=$(spe_kv pa_match "$(profile_check "$base" 4096 $d.tab 2>/dev/null)")
control_va=$(spe_kv va_outside "$(profile_check $((base + bytes)) 0 $d.tab)")
control_ts=$(spe_kv ts_decreases "$(profile_check "$base" 0 $d.rev)")
control_tgt=$(spe_kv workload_tgt_exact "$(profile_check "$base" 0 $d.tab $d.branches-off 2>/dev/null)")
result control_pa_match=$control_pa control_va_outside=$control_va control_ts_decreases=$control_ts control_tgt_exact=$control_tgt

# (f) Record times against the workload's life, on perf's clock, in
# perf script's time order: "COMM TID SECONDS: ..." per record and per
# task event. "mid" (the control) puts the exit halfway through the
# workload's records: a fixed shift (10 ms once) depended on how long the
# guest's exit path runs after the last records (on 7.3 under TCG about
# 10 ms, with a dozen records in it).
perf script -i $d --show-task-events --itrace=i1i -F comm,tid,time > $d.times 2>/dev/null
time_check() {
    awk -v mid="${1:-}" -v loop="$(spe_value $d.log workload_ns)" '
    { t = $3; sub(":", "", t); t += 0 }
    / PERF_RECORD_EXIT/ { if ($1 == "spe-workload") exit_t = t; next }
    / PERF_RECORD_/ { next }
    {
        n++; all[n] = t
        if ($1 == "spe-workload") { if (!first) first = t; last = t }
    }
    END {
        if (mid && exit_t) exit_t = (first + last) / 2
        for (i = 1; i <= n; i++) if (exit_t && all[i] > exit_t) after++
        printf "ts_records=%d ts_exit_seen=%d ts_after_exit=%d ts_span_pct=%.0f\n",
            n, exit_t ? 1 : 0, after, loop ? 100 * (last - first) * 1e9 / loop : 0
    }' $d.times
}
times=$(time_check)
result $times
control_exit=$(spe_kv ts_after_exit "$(time_check mid)")
result control_ts_after_exit=$control_exit

v() { spe_kv "$1" "$checks"; }
why=
[ "$spe_n" -gt 0 ] || why="$why; no records"
[ "$spe_bad" = 0 ] || why="$why; $spe_bad decoder errors"
[ "$pages" -gt 0 ] || why="$why; the workload wrote no pagemap"
awk -v s="$share" 'BEGIN { exit !(s > 75) }' || why="$why; only $share % of the user-space samples in the workload's functions"
[ "$(v strided_ldst)" -gt 0 ] || why="$why; no load/store records from spe_workload_strided"
[ "$(v no_va)" = 0 ] || why="$why; $(v no_va) strided loads/stores without a VA"
[ "$(v va_outside)" = 0 ] || why="$why; $(v va_outside) strided VAs outside the array"
[ "$(v no_pa)" = 0 ] || why="$why; $(v no_pa) strided loads/stores without a PA"
[ "$(v pa_mismatch)" = 0 ] || why="$why; $(v pa_mismatch) PAs differ from the guest's translation"
[ "$(v pa_match)" -gt 0 ] || why="$why; no PA checked"
[ "$(v branches_taken)" -gt 0 ] || why="$why; no taken branch records"
[ "$(v taken_without_tgt)" = 0 ] || why="$why; $(v taken_without_tgt) taken branches without a target"
[ "$(v not_taken_with_tgt)" = 0 ] || why="$why; $(v not_taken_with_tgt) not-taken branches with a target"
[ "$(v workload_tgt_same_function)" -gt 0 ] || why="$why; no workload branch target checked"
[ "$(v workload_tgt_elsewhere)" = 0 ] || why="$why; $(v workload_tgt_elsewhere) workload branches target another function"
[ "$(v workload_tgt_exact)" -gt 0 ] || why="$why; no workload branch target checked against its instruction"
[ "$(v workload_tgt_wrong)" = 0 ] || why="$why; $(v workload_tgt_wrong) workload branch targets differ from their instruction's"
[ "$(v ts_missing)" = 0 ] || why="$why; $(v ts_missing) records without a timestamp"
[ "$(v ts_decreases)" = 0 ] || why="$why; timestamps decrease $(v ts_decreases) times"
t() { spe_kv "$1" "$times"; }
[ "$(t ts_exit_seen)" = 1 ] || why="$why; perf script shows no exit of the workload"
[ "$(t ts_after_exit)" = 0 ] || why="$why; $(t ts_after_exit) records dated after the workload exited"
[ "$(t ts_span_pct)" -ge 50 ] || why="$why; the workload's records span only $(t ts_span_pct) % of its loop's time"
[ "${control_exit:-0}" -gt 0 ] || why="$why; control: no record after an exit moved halfway through the workload's records"
[ "$control_pa" = 0 ] || why="$why; control: $control_pa PAs match a page-shifted pagemap"
[ "$control_va" = "$(v strided_ldst)" ] || why="$why; control: $control_va of $(v strided_ldst) VAs outside a moved array"
[ "${control_ts:-0}" -gt 0 ] || why="$why; control: reversed records show no decreasing timestamp"
[ "$control_tgt" = 0 ] || why="$why; control: $control_tgt targets match instructions one off"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
