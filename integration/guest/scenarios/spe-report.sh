# The host's view of the same records (the backend runs with --record):
# perf's three hottest kernel symbols in the guest, with their sample
# counts, for the host's `vhost-device-spe report` to match, and the
# kernel's text symbols (its /proc/kallsyms, run-time addresses) as
# SPE-KSYM lines, since Debian ships no real System.map outside -dbg.
. /scenarios/lib/spe.sh
d=/tmp/report.data
spe_record $d arm_spe_0/ts_enable=1/k -a -- dd if=/dev/zero of=/dev/null bs=64k count=2000 ||
    return
# "  45.00%  90  [k] symbol": one sample per record (i1i), kernel only.
perf report -i $d --itrace=i1i --sort sym -n --stdio 2> $d.err |
    grep -v '^#' | grep '%' | head -n 3 > $d.top
cat $d.top
n=0
while read -r pct samples k sym; do
    n=$((n + 1))
    result perf_top$n=$sym perf_top${n}_samples=$samples
done < $d.top
[ "$n" = 3 ] || { fail "perf report gave $n symbols"; return; }
awk '($2 == "t" || $2 == "T" || $2 == "w" || $2 == "W") && NF == 3 { print "SPE-KSYM " $0 }' \
    /proc/kallsyms
pass
