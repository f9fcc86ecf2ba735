# Samples stay exactly P + 1 operations apart when instructions fault: a
# TB that counts in its exit check takes all its operations off the
# count at its start, and a fault in it must give back those it did not
# run, which run again after the handler. `spe-workload faults` starts
# every pass of `spe-workload others`' loop (4096 `add`s) with a load
# from a page it has not touched, a page fault taken at EL1, which is
# not sampled (/u). Without the give-back each pass's fault would add
# the rest of the loop's first TB to the spacing that spans it.
# A spacing that starts at the load itself is not checked: selected, the
# load runs in a TB that counts singly, faults after its count, and is
# counted again when it runs again.
. /scenarios/lib/spe.sh
P=1024
taskset -p -c 0 $$ > /dev/null
d=/tmp/faults.data
spe_record $d "arm_spe_0/jitter=0/u" -c $P -- taskset -c 1 spe-workload faults 1000 || return
spe_table $d
kv=$(awk -v pc0="$(spe_value $d.log workload_others_pc)" \
    -v ops="$(spe_value $d.log workload_others_ops)" -v P=$P '
    BEGIN { pc0 += 0; ops += 0 }
    {
        pc = $5 + 0
        if ($4 != "el0" || pc < pc0 || pc >= pc0 + 4 * ops) { outside++; delete last; next }
        k = (pc - pc0) / 4
        if ($2 != "LD" && $2 != "ST" && $2 != "B") other++
        if (($1 in last) && last[$1] != 0) {
            dl = (k - last[$1] + ops) % ops
            cnt++
            if (dl != P + 1 && ++odd <= 5)
                printf "%d operations between loop indexes %d and %d\n",
                    dl, last[$1], k > "/dev/stderr"
            if (cnt == 1 || dl < min) min = dl
            if (dl > max) max = dl
        }
        last[$1] = k
    }
    END {
        printf "loop_records=%d loop_other_records=%d outside_records=%d ",
            NR - outside, other, outside
        printf "spacings=%d spacing_min=%d spacing_max=%d spacing_wrong=%d\n",
            cnt, min, max, odd
    }' $d.tab)
faults=$(spe_value $d.log workload_faults)
result $kv faults=$faults bad=$spe_bad
eval "$kv bad=$spe_bad"
why=
[ "${faults:-0}" -ge 1000 ] || why="$why; the workload took ${faults:-no} page faults, not 1000"
[ "$spacings" -ge 2000 ] || why="$why; only $spacings spacings"
[ "$spacing_wrong$bad" = 00 ] ||
    why="$why; $spacing_wrong spacings in [$spacing_min, $spacing_max] are not $((P + 1)), $bad decoder errors"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
