# The backend's virtio device is on PCI with the expected IDs. The harness
# passes the expected virtio ID as spe.virtio_id=<decimal>.
want_virtio=$(printf '0x%04x' "$spe_virtio_id")
# Modern (non-transitional) virtio-pci device IDs are 0x1040 + virtio ID.
want_pci=$(printf '0x%04x' $((0x1040 + spe_virtio_id)))
pci=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = "$want_pci" ]; then
        pci=${d##*/}
    fi
done
virtio=
for d in /sys/bus/virtio/devices/*; do
    [ -e "$d/device" ] || continue
    if [ "$(cat "$d/device")" = "$want_virtio" ]; then
        virtio=${d##*/}
        result virtio_device=${virtio} virtio_device_id=$(cat "$d/device") virtio_vendor=$(cat "$d/vendor")
    fi
done
[ -z "$pci" ] || result pci_slot=$pci pci_vendor=0x1af4 pci_device_id=$want_pci
if [ -z "$pci" ]; then
    lspci 2>/dev/null || for d in /sys/bus/pci/devices/*; do echo "$d $(cat $d/vendor) $(cat $d/device)"; done
    fail "no PCI device 1af4:${want_pci#0x}"
elif [ -z "$virtio" ]; then
    fail "PCI device $pci present but no virtio device with ID $want_virtio"
else
    pass
fi
