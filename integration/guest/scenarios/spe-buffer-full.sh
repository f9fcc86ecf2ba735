# A 4-page AUX buffer per CPU fills many times: each fill is a PMBIRQ
# (PPI 21) the driver handles before perf collects more.
spe_perf_mmap=,4
spe_perf_secs=3
. /scenarios/spe-perf.sh
