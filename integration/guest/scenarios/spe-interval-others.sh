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
kv=$(spe_loop_spacings $d $P)
result $kv bad=$spe_bad
eval "$kv bad=$spe_bad"
why=$(spe_spacings_why $P)
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
