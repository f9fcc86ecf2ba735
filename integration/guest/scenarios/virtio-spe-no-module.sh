# The negative control of virtio-spe-perf.sh: the same steps without the
# virtio_spe module. There is no arm_spe_0, so perf must fail.
vspe_no_module=1
. /scenarios/virtio-spe-perf.sh
