# PMSCR's E2H redirection: integration/guest/modules/spe_el2 runs in a
# kernel at EL2 with E2H (VHE), writes 1 through PMSCR_EL1 and 2 through
# PMSCR_EL12, and prints what PMSCR_EL1, PMSCR_EL2 and PMSCR_EL12 read;
# the host checks that PMSCR_EL1 was PMSCR_EL2 and PMSCR_EL12 the EL1
# register. The module only prints on load and is unloaded at once.
load_extra spe_el2 && rmmod spe_el2
line=$(dmesg | grep 'SPE-EL2 ' | tail -n 1)
echo "$line"
case "$line" in
*"vhe=1 "*)
    result ${line#*SPE-EL2 }
    pass
    ;;
*)
    dmesg | grep -i -e spe -e 'hyp\|EL2' | tail -n 20
    fail "spe_el2 did not run at EL2: ${line:-no line}"
    ;;
esac
