# The README's main command: perf records SPE around the guest workload
# through the patched QEMU (whose sampler picks the operations) and
# vhost-device-spe (which writes the records), then shows what perf
# decoded and its profile.
ev=arm_spe_0/ts_enable=1,pa_enable=1,load_filter=1,store_filter=1,branch_filter=1/
if ! perf record -e "$ev" -o /tmp/spe.data -- spe-workload 100 > /tmp/rec.log 2>&1; then
    cat /tmp/rec.log
    fail "perf record failed"
    return
fi
perf report -D -i /tmp/spe.data > /tmp/spe.dump 2>&1
records=$(grep -cE '[[:space:]](TS [0-9]+|END)$' /tmp/spe.dump)
bad=$(grep -ciE 'bad packet|decoder error|failed to decode' /tmp/spe.dump)
result spe_records=$records spe_bad_packets=$bad
echo "SPE-PROFILE --- perf report -D: the first decoded SPE records ---"
grep -m 1 -B 1 -A 24 'ARM SPE' /tmp/spe.dump | sed 's/^/SPE-PROFILE /'
echo "SPE-PROFILE --- perf report --stdio --itrace=i1i: where the sampled instructions were ---"
perf report --stdio -q -i /tmp/spe.data --itrace=i1i --sort sym 2>/dev/null | grep -v '^$' | head -n 12 |
    sed 's/^/SPE-PROFILE /'
if [ "$records" -gt 0 ] && [ "$bad" = 0 ]; then pass; else fail "perf decoded $records records, $bad errors"; fi
