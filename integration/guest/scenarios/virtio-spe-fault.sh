# spe-fault.sh on the paravirtual path: the virtio_spe module's reaction
# to the fault the backend delivers.
if ! load_extra virtio_spe; then
    fail "insmod virtio_spe failed"
    return
fi
. /scenarios/spe-fault.sh
