# A loop whose length divides the sampling period: `spe-workload alias`
# loops over 5 instructions (a load, two adds, subs, b.ne) and perf's
# `-c 1024` makes the period 1025 = 5 x 205 operations. Counting
# instructions exactly, without jitter, every sample of the loop lands on
# the same instruction; counting micro-operations (the default operation
# model) every instruction of the loop is sampled, the load among them.
# The guest reports what it saw; the host judges it against the model the
# backend ran with (spe-alias, spe-alias-exact). EL0 only, the workload on
# CPU 1 and perf on CPU 0.
. /scenarios/lib/spe.sh
P=1024
taskset -p -c 0 $$ > /dev/null
d=/tmp/alias.data
spe_record $d "arm_spe_0/jitter=0/u" -c $P -- taskset -c 1 spe-workload alias 1000000 || return
spe_table $d
kv=$(awk -v pc0="$(spe_value $d.log workload_alias_pc)" \
    -v ops="$(spe_value $d.log workload_alias_ops)" '
    BEGIN { pc0 += 0; ops += 0 }
    {
        pc = $5 + 0
        if ($4 != "el0" || pc < pc0 || pc >= pc0 + 4 * ops) next
        k = (pc - pc0) / 4
        n[k]++; records++
        if ($2 == "LD") ld++
    }
    END {
        printf "alias_ops=%d alias_records=%d alias_ld=%d", ops, records, ld
        for (k = 0; k < ops; k++) {
            printf " alias_pos%d=%d", k, n[k]
            if (n[k] > 0) positions++
        }
        printf " alias_positions=%d\n", positions
    }' $d.tab)
result $kv bad=$spe_bad
eval "$kv"
if [ "${alias_records:-0}" -gt 0 ] && [ "$spe_bad" = 0 ]; then
    pass
else
    fail "${alias_records:-0} records of the loop, $spe_bad decoder errors"
fi
