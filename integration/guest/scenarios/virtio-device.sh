# The backend's virtio device is on PCI with the expected IDs, and its config
# space can be read (which makes QEMU ask the backend: GET_CONFIG). The
# harness passes the expected virtio ID as spe.virtio_id=<decimal>.
want_virtio=$(printf '0x%04x' "$spe_virtio_id")
# Modern (non-transitional) virtio-pci device IDs are 0x1040 + virtio ID.
want_pci=$(printf '0x%04x' $((0x1040 + spe_virtio_id)))
pci=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = "$want_pci" ]; then
        pci=$d
    fi
done
virtio=
for d in /sys/bus/virtio/devices/*; do
    [ -e "$d/device" ] || continue
    if [ "$(cat "$d/device")" = "$want_virtio" ]; then
        virtio=${d##*/}
        result virtio_device=$virtio virtio_device_id=$(cat "$d/device") virtio_vendor=$(cat "$d/vendor")
    fi
done
if [ -z "$pci" ]; then
    for d in /sys/bus/pci/devices/*; do echo "$d $(cat $d/vendor) $(cat $d/device)"; done
    fail "no PCI device 1af4:${want_pci#0x}"
    return
fi
result pci_slot=${pci##*/} pci_vendor=0x1af4 pci_device_id=$want_pci
if [ -z "$virtio" ]; then
    fail "PCI device ${pci##*/} present but no virtio device with ID $want_virtio"
    return
fi

# No driver binds the device yet, so nothing reads its config space; read
# its first dword so QEMU asks the backend (GET_CONFIG). Find the device
# config window from the virtio capabilities in PCI config space.
cfg=$pci/config
byte() { od -An -tu1 -j "$1" -N 1 "$cfg" | tr -d ' '; }
le32() { od -An -tu4 -j "$1" -N 4 "$cfg" | tr -d ' '; }
dev_bar= dev_off=
pos=$(byte 52)
while [ "${pos:-0}" -ne 0 ]; do
    # vendor-specific capability with cfg_type 4: VIRTIO_PCI_CAP_DEVICE_CFG
    if [ "$(byte "$pos")" -eq 9 ] && [ "$(byte $((pos + 3)))" -eq 4 ]; then
        dev_bar=$(byte $((pos + 4)))
        dev_off=$(le32 $((pos + 8)))
    fi
    pos=$(byte $((pos + 1)))
done
if [ -z "$dev_bar" ]; then
    fail "no virtio device-config capability"
    return
fi
# /dev/mem may not touch regions a driver holds (IO_STRICT_DEVMEM), so let
# virtio-pci go first; the BAR stays mapped and decoded. (QEMU 10.0.2
# aborts on the VIRTIO_PCI_CAP_PCI_CFG window on virt, so not that way.)
echo "${pci##*/}" > /sys/bus/pci/drivers/virtio-pci/unbind
bar_start=$(sed -n "$((dev_bar + 1))p" "$pci/resource" | cut -d' ' -f1)
addr=$(printf '0x%x' $((bar_start + dev_off)))
word=$(devmem "$addr" 32) || { fail "devmem $addr failed"; return; }
result config_addr=$addr config_dword0=$word
pass
