# The negative control of spe-c2c: the same run with the two counters a
# cache line apart, which the c2c check must reject (nothing shared,
# nothing served from the peer core).
c2c_mode=padded
. /scenarios/spe-c2c.sh
