# Deliberate hang: the harness must hit its timeout, kill QEMU and report
# this scenario as failed.
while :; do sleep 3600; done
