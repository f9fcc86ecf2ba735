# Deliberate kernel panic: the harness must report this scenario as failed
# and show the console tail (panic=-1 reboots, -no-reboot ends QEMU).
echo 1 > /proc/sys/kernel/sysrq
echo c > /proc/sysrq-trigger
