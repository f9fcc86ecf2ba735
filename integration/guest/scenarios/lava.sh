# LAVA's test shell (`cargo xtask lava`, integration/lava/): a shell on
# the console for the dispatcher to drive. Each check the job runs is
# lib/lava-check.sh, which reports a LAVA test case. LAVA ends the VM when
# its job is done; a shell that exits powers it off.
echo "SPE-LAVA-SHELL"
PS1='/ # ' setsid cttyhack sh -l
pass
