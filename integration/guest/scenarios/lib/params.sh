# spe.KEY=VALUE parameters from the kernel command line become $spe_KEY
# (sourced by /init and by lava-check.sh).
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    spe.*=*)
        key=${arg%%=*}
        key=${key#spe.}
        key=$(echo "$key" | tr -c 'a-zA-Z0-9_\n' _)
        eval "spe_$key=\${arg#*=}"
        ;;
    esac
done
