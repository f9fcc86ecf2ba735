# PMSIRR_EL1.RND (perf's jitter=1) randomises the low 8 bits of each
# reloaded interval counter: with a period P of 1024 operations, samples
# are P + 1 operations apart without it (SPEToCollectSample() spends one
# operation on the reload) and P + 1 + [0, 255] with it, a mean in
# [P, P + 256]. Measured in operations: `spe-workload loads` runs a loop
# of a fixed instruction count whose k-th load reads the k-th word of the
# array, so a sampled load's VA gives its operation's index. Only EL0 is
# sampled (`u`), loads only, the workload on CPU 1 and perf on CPU 0.
. /scenarios/lib/spe.sh
P=1024
taskset -p -c 0 $$ > /dev/null
for j in 0 1; do
    d=/tmp/jitter$j.data
    spe_record $d "arm_spe_0/load_filter=1,jitter=$j/u" -c $P -- taskset -c 1 spe-workload loads 4 || return
    spe_table $d
    # Consecutive ladder loads (per CPU, in buffer order) 0 < delta < 2P
    # operations apart are one sampling interval apart (two are >= 2P + 2);
    # others (a sample on one of the loop's 3 other instructions, filtered
    # out, or a new pass) are gaps.
    kv=$(awk -v base="$(spe_value $d.log workload_array_va)" \
        -v pc0="$(spe_value $d.log workload_loads_pc)" \
        -v loads="$(spe_value $d.log workload_ladder_loads)" \
        -v ops="$(spe_value $d.log workload_ladder_ops)" \
        -v bytes="$(spe_value $d.log workload_array_bytes)" -v P=$P -v j=$j '
        BEGIN { base += 0; pc0 += 4; bytes += 0; loads += 0; ops += 0 }
        {
            pc = $5 + 0; va = $7 + 0
            if ($4 != "el0" || pc < pc0 || pc >= pc0 + 4 * loads || $7 == "-") { other++; next }
            if (va < base || va >= base + bytes) { outside++; next }
            it = int((va - base) / (8 * loads)); k = (va - base) / 8 - it * loads
            # The PC of the load names the same word of the iteration.
            if (k != (pc - pc0) / 4) pc_va++
            n = it * ops + k
            if ($1 in last) {
                dl = n - last[$1]
                if (dl > 0 && dl < 2 * P) {
                    cnt++; sum += dl
                    if (cnt == 1 || dl < min) min = dl
                    if (dl > max) max = dl
                    if (!(dl in seen)) distinct++
                    seen[dl] = 1
                    # Evidence for a failure: the records around a spacing
                    # out of its range, with how far apart in time.
                    if ((j ? dl > P + 256 : dl != P + 1) || dl < P + 1)
                        if (++odd <= 5)
                            printf "jitter=%d: %d operations between ops %d and %d, TS %s -> %s\n",
                                j, dl, last[$1], n, ts[$1], $10 > "/dev/stderr"
                } else gaps++
            }
            last[$1] = n; ts[$1] = $10
        }
        END {
            printf "j%d_ladder_records=%d j%d_other_records=%d j%d_va_outside=%d j%d_pc_va_mismatch=%d ",
                j, NR - other - outside, j, other, j, outside, j, pc_va
            printf "j%d_spacings=%d j%d_gaps=%d j%d_spacing_mean=%.1f j%d_spacing_min=%d j%d_spacing_max=%d ",
                j, cnt, j, gaps, j, cnt ? sum / cnt : 0, j, min, j, max
            printf "j%d_spacing_distinct=%d j%d_spacing_out_of_range=%d\n", j, distinct, j, odd
        }' $d.tab)
    result $kv j${j}_bad=$spe_bad
    eval "$kv j${j}_bad=$spe_bad"
done
ok() { awk "BEGIN { exit !($1) }"; }
why=
for j in 0 1; do
    eval "n=\$j${j}_spacings g=\$j${j}_gaps m=\$j${j}_pc_va_mismatch o=\$j${j}_va_outside b=\$j${j}_bad"
    [ "$n" -ge 500 ] || why="$why; jitter=$j: only $n spacings"
    [ $((10 * g)) -le "$n" ] || why="$why; jitter=$j: $g gaps for $n spacings"
    [ "$m$o$b" = 000 ] || why="$why; jitter=$j: $m PC/VA mismatches, $o VAs outside the array, $b decoder errors"
done
[ "$j0_spacing_distinct" = 1 ] && [ "$j0_spacing_min" = $((P + 1)) ] ||
    why="$why; without jitter: $j0_spacing_distinct distinct spacings in [$j0_spacing_min, $j0_spacing_max] ($j0_spacing_out_of_range not $((P + 1))), want only $((P + 1))"
ok "$j1_spacing_mean >= $P && $j1_spacing_mean <= $P + 256" ||
    why="$why; with jitter: mean spacing $j1_spacing_mean, want [$P, $((P + 256))]"
[ "$j1_spacing_min" -ge $((P + 1)) ] && [ "$j1_spacing_max" -le $((P + 256)) ] ||
    why="$why; with jitter: spacings in [$j1_spacing_min, $j1_spacing_max] ($j1_spacing_out_of_range of $j1_spacings out of range), want [$((P + 1)), $((P + 256))]"
[ "$j1_spacing_distinct" -ge 16 ] || why="$why; with jitter: only $j1_spacing_distinct distinct spacings"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
