# MTE tag-checked accesses in the records: `spe-workload mte`
# turns on synchronous tag checks, tags a page and loops over a load and
# a store through the tagged pointer (QEMU checks their tags, in a helper
# that used to hide the address from SPE). Each record of the loop's load
# and store must carry its data address, tag included. The host judges
# the counts (proofs::check_spe_mte).
. /scenarios/lib/spe.sh
d=/tmp/mte.data
spe_record $d "arm_spe_0/ts_enable=1/u" -- spe-workload mte 200000 || return
spe_table $d
kv=$(awk -v pc0="$(spe_value $d.log workload_mte_pc)" \
    -v ld="$(spe_value $d.log workload_mte_ld)" \
    -v st="$(spe_value $d.log workload_mte_st)" '
    # A hex address as perf and printf print it, without 0x and leading zeros.
    function norm(s) { s = tolower(s); sub(/^0x0*/, "", s); return s }
    BEGIN { pc0 += 0; ld = norm(ld); st = norm(st) }
    {
        pc = $5 + 0
        if (pc < pc0 || pc >= pc0 + 0x18) next
        if ($2 == "LD") { if (norm($7) == ld) ldok++; else { ldbad++; if (ldbad < 3) print "SPE-INFO load VA " $7 > "/dev/stderr" } }
        if ($2 == "ST") { if (norm($7) == st) stok++; else { stbad++; if (stbad < 3) print "SPE-INFO store VA " $7 > "/dev/stderr" } }
        n++
    }
    END {
        printf "mte_n=%d mte_ld_ok=%d mte_ld_bad=%d mte_st_ok=%d mte_st_bad=%d tagged=%d\n",
            n, ldok, ldbad, stok, stbad, substr(ld, 1, length(ld) - 12) != ""
    }' $d.tab)
result $kv mte_bad=$spe_bad
pass
