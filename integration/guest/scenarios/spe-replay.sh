# Deterministic replay: the backend runs --deterministic (records and
# PMBIRQ changes only in replies to QEMU's synchronous requests), QEMU
# -icount shift=0,sleep=off with -seed, and a fault armed by record count.
# perf records the workload on CPU 1; the guest reports a hash of every
# AUX byte perf saved (perf report -D's dump lines) and how many records
# they hold. spe-replay-b, a second boot of the same, must report the same
# hash, and its backend the fault on the same record (xtask/src/proofs.rs).
. /scenarios/lib/spe.sh
taskset -p -c 0 $$ > /dev/null
d=/tmp/replay.data
spe_record $d "arm_spe_0/ts_enable=1,pa_enable=1/u" -c 1024 -- taskset -c 1 spe-workload 30 || return
perf report -D -i $d > $d.dump 2>&1
hash=$(grep -E '^\.  [0-9a-f]{8}:  ' $d.dump | sha256sum | cut -c1-32)
records=$(grep -cE '[[:space:]](TS [0-9]+|END)$' $d.dump)
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' $d.dump)
result replay_records=$records replay_aux_hash=$hash bad=$bad
if [ "$records" -gt 0 ] && [ "$bad" = 0 ]; then
    pass
else
    fail "$records records, $bad decoder errors"
fi
