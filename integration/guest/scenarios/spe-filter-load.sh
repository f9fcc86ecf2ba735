# PMSFCR_EL1.FT with LD alone (perf's load_filter=1): the workload's
# records are loads only, while the same workload sampled without a
# filter gives stores and branches too (the control: the filter has
# something to remove).
. /scenarios/lib/spe.sh
for f in nofilter loadfilter; do
    ev=arm_spe_0/ts_enable=1/
    [ $f = loadfilter ] && ev=arm_spe_0/ts_enable=1,load_filter=1/
    spe_record /tmp/$f.data "$ev" -- spe-workload 3 || return
    spe_table /tmp/$f.data
    kv=$(echo "$(spe_classes /tmp/$f.data) bad=$spe_bad" | sed "s/\([a-z]*\)=/${f}_\1=/g")
    result $kv
    eval "$kv"
done
why=
[ "$nofilter_st" -gt 0 ] && [ "$nofilter_br" -gt 0 ] ||
    why="$why; control: without a filter, $nofilter_st store and $nofilter_br branch records"
[ "$loadfilter_ld" -gt 0 ] || why="$why; no load records with load_filter=1"
[ "$loadfilter_st" = 0 ] || why="$why; $loadfilter_st store records with load_filter=1"
[ "$loadfilter_br" = 0 ] || why="$why; $loadfilter_br branch records with load_filter=1"
[ "$loadfilter_other" = 0 ] || why="$why; $loadfilter_other other records with load_filter=1"
[ "$nofilter_bad$loadfilter_bad" = 00 ] || why="$why; decoder errors"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
