# LAVA's test shell (`cargo xtask lava`, integration/lava/): a shell on
# the console for the dispatcher to drive. Each check the job runs is
# lib/lava-check.sh, which reports a LAVA test case. LAVA ends the VM when
# its job is done; a shell that exits powers it off. spe.login=1: a login
# prompt first (any name), for TuxRun's devices, which log in as root.
echo "SPE-LAVA-SHELL"
if [ -n "${spe_login:-}" ]; then
    printf 'spe login: '
    read -r _
fi
PS1='/ # ' setsid cttyhack sh -l
pass
