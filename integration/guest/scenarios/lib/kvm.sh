# KVM's mode, from the kernel's log, as kvm_mode=vhe|nvhe|hvhe|protected;
# fails the scenario (and returns 1) when KVM did not initialise or
# there is no /dev/kvm. 6.1 says "Hyp mode" for nVHE.
kvm_mode() {
    mode=$(dmesg | grep -m 1 -o -E '(Protected [nh]VHE|Hyp nVHE|Hyp hVHE|Hyp|VHE) mode initialized successfully')
    case "$mode" in
    Protected*) result kvm_mode=protected ;;
    Hyp\ nVHE* | Hyp\ mode*) result kvm_mode=nvhe ;;
    Hyp\ hVHE*) result kvm_mode=hvhe ;;
    VHE*) result kvm_mode=vhe ;;
    *)
        dmesg | grep -i -e kvm -e hyp | tail -n 10
        fail "KVM did not initialise: ${mode:-no line}"
        return 1
        ;;
    esac
    if [ ! -c /dev/kvm ]; then
        fail "no /dev/kvm"
        return 1
    fi
}
