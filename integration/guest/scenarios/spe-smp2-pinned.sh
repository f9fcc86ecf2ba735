# Two vCPUs, two copies of spe-workload (spe-cpu0, spe-cpu1) pinned to
# CPU 0 and CPU 1, and a system-wide perf record: each CPU's records of
# the workloads come from the one pinned there (and there are at least
# 500). Kernel threads also run on both CPUs (rcu_sched can have a third
# of CPU 1's records), so the command with the most records is reported,
# not required.
. /scenarios/lib/spe.sh
for c in 0 1; do cp /usr/bin/spe-workload /tmp/spe-cpu$c; done
d=/tmp/smp.data
spe_record $d arm_spe_0/ts_enable=1,load_filter=1,store_filter=1,branch_filter=1/ -a -- \
    sh -c 'taskset -c 0 /tmp/spe-cpu0 5 & taskset -c 1 /tmp/spe-cpu1 5 & wait' || return
perf script -i $d --itrace=i1i -F cpu,comm > $d.script 2> $d.script.err
# Per CPU: its records, those of the workload pinned there (own) and of
# the other one, and the command with the most records.
kv=$(awk '
    { c = $NF; gsub(/[^0-9]/, "", c); c += 0; n[c]++; per[c, $1]++ }
    $1 ~ /^spe-cpu[01]$/ { if (substr($1, 8) + 0 == c) own[c]++; else cross[c]++ }
    END {
        for (k in per) {
            split(k, f, SUBSEP)
            if (per[k] > topn[f[1]]) { topn[f[1]] = per[k]; top[f[1]] = f[2] }
        }
        for (c = 0; c < 2; c++)
            printf "cpu%d_records=%d cpu%d_own=%d cpu%d_other_workload=%d cpu%d_own_pct=%d cpu%d_top=%s ",
                c, n[c], c, own[c], c, cross[c], c, n[c] ? 100 * own[c] / n[c] : 0, c, top[c]
        printf "\n"
    }' $d.script)
result $kv
eval "$kv"
cpus=$(grep -c ^processor /proc/cpuinfo)
why=
[ "$cpus" = 2 ] || why="$why; the guest has $cpus CPUs, want 2"
for c in 0 1; do
    eval "own=\$cpu${c}_own cross=\$cpu${c}_other_workload"
    [ "$own" -ge 500 ] || why="$why; CPU $c has $own records of spe-cpu$c, want >= 500"
    [ "$cross" = 0 ] || why="$why; CPU $c has $cross records of the workload pinned to the other CPU"
done
if [ -z "$why" ]; then pass; else fail "${why#; }"; fi
