# Without jitter, samples are exactly P + 1 operations apart (see
# spe-jitter) also where the count runs out at an operation that is not
# a load, store or branch, which QEMU selects without leaving the TB
# when it is among the TB's first 32 instructions: `spe-workload others`
# loops over 4096 `add`s and 2 loop instructions, so a sample's PC gives
# its index in the loop, and consecutive samples in the loop are P + 1
# apart modulo the loop's length. Every operation is sampled (no
# filter), at EL0 only, the workload on CPU 1 and perf on CPU 0.
. /scenarios/lib/spe.sh
P=1024
taskset -p -c 0 $$ > /dev/null
d=/tmp/others.data
spe_record $d "arm_spe_0/jitter=0/u" -c $P -- taskset -c 1 spe-workload others 1000 || return
spe_table $d
kv=$(awk -v pc0="$(spe_value $d.log workload_others_pc)" \
    -v ops="$(spe_value $d.log workload_others_ops)" -v P=$P '
    BEGIN { pc0 += 0; ops += 0 }
    {
        pc = $5 + 0
        if ($4 != "el0" || pc < pc0 || pc >= pc0 + 4 * ops) { outside++; delete last; next }
        k = (pc - pc0) / 4
        if ($2 == "B") branch++; else if ($2 != "LD" && $2 != "ST") other++
        if ($1 in last) {
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
    }' $d.tab)
result $kv bad=$spe_bad
eval "$kv bad=$spe_bad"
why=
[ "$spacings" -ge 2000 ] || why="$why; only $spacings spacings"
[ "$loop_other_records" -ge 2000 ] || why="$why; only $loop_other_records records of the adds"
[ "$spacing_wrong$bad" = 00 ] ||
    why="$why; $spacing_wrong spacings in [$spacing_min, $spacing_max] are not $((P + 1)), $bad decoder errors"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
