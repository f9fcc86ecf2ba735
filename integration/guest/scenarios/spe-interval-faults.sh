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
kv=$(spe_loop_spacings $d $P 0)
faults=$(spe_value $d.log workload_faults)
result $kv faults=$faults bad=$spe_bad
eval "$kv bad=$spe_bad"
why=$(spe_spacings_why $P)
[ "${faults:-0}" -ge 1000 ] || why="$why; the workload took ${faults:-no} page faults, not 1000"
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
