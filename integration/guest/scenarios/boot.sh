# The guest reaches /init under the patched QEMU and can see its PCI bus.
result pci_devices=$(ls /sys/bus/pci/devices | wc -l)
if [ -d /sys/bus/pci/devices ]; then pass; else fail "no PCI bus"; fi
