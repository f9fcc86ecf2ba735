# PMSFCR_EL1.FL with PMSLATFR_EL1.MINLAT = N (perf's min_latency=N): no
# record's total latency is below N, while the same loads and stores
# sampled without it are mostly below N (QEMU's sampler gives them 5-45
# cycles, most under 10).
. /scenarios/lib/spe.sh
N=16
for f in nominlat minlat; do
    ev=arm_spe_0/ts_enable=1,load_filter=1,store_filter=1/
    [ $f = minlat ] && ev=arm_spe_0/ts_enable=1,load_filter=1,store_filter=1,min_latency=$N/
    spe_record /tmp/$f.data "$ev" -- spe-workload 5 || return
    spe_table /tmp/$f.data
    kv=$(awk -v n=$N -v f=$f '
        $9 == "-" { nolat++; next }
        { if ($9 < n) below++; if (min == "" || $9 < min) min = $9 }
        END { printf "%s_records=%d %s_below=%d %s_no_latency=%d %s_min_latency=%s\n",
              f, NR, f, below, f, nolat, f, min == "" ? "none" : min }' /tmp/$f.data.tab)
    result $kv ${f}_bad=$spe_bad
    eval "$kv ${f}_bad=$spe_bad"
done
result min_latency=$N nominlat_below_pct=$((nominlat_records ? 100 * nominlat_below / nominlat_records : 0))
why=
[ "$nominlat_below" -gt 0 ] && [ $((2 * nominlat_below)) -gt "$nominlat_records" ] ||
    why="$why; control: without min_latency only $nominlat_below of $nominlat_records records below $N"
[ "$minlat_records" -gt 0 ] || why="$why; no records with min_latency=$N"
[ "$minlat_below" = 0 ] || why="$why; $minlat_below records below $N with min_latency=$N"
[ "$minlat_no_latency" = 0 ] || why="$why; $minlat_no_latency records without a total latency"
[ "$nominlat_bad$minlat_bad" = 00 ] || why="$why; decoder errors"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
