# perf mem tells where loads are served from, and that follows the
# program: spe-workload levels alternates a load loop over 16 KiB
# (spe_workload_small: every line back within a few hundred loads) with
# one over 64 MiB (spe_workload_large: every line back only after a
# million others). perf mem records every load (--ldlat 0: no latency
# filter, or L1 hits would not be kept) and reports by function and
# memory level; the host judges each function's shares.
. /scenarios/lib/spe.sh
d=/tmp/levels.data
if ! perf mem record --ldlat 0 -t load -c 8192 -o $d -- spe-workload levels 2 > $d.log 2>&1; then
    tail -n 20 $d.log
    fail "perf mem record failed"
    return
fi
grep '^SPE-RESULT ' $d.log
# "  12.34%  N  ... [.] symbol  L1 hit" lines: per function and level.
perf mem report -i $d --stdio --sort=sym,mem -n 2> $d.err | grep '%' | grep -v '^#' > $d.rep
sed 's/^/SPE-MEM /' $d.rep | head -n 40
[ -s $d.rep ] || { tail -n 5 $d.err; fail "perf mem report gave nothing"; return; }
# The same from the records' own packets (perf's decoder): each load's
# data source by function.
spe_table $d
spe_syms $d
awk 'FILENAME == ARGV[1] { sym[$1] = $2; next }
    $2 == "LD" { n[sym[$5] " " $13]++ }
    END { for (k in n) print "SPE-DS " k, n[k] }' $d.syms $d.tab | sort
result spe_records=$spe_n spe_bad_packets=$spe_bad
pass
