#!/bin/sh
# Coverage-guided libFuzzer runs of every target for a bounded time, on
# stable Rust: the SanitizerCoverage flags cargo-fuzz passes are stable
# rustc options; only AddressSanitizer (-Zsanitizer) needs nightly, and
# safe Rust does not need it to find panics. With nightly and cargo-fuzz,
# `cargo fuzz run <target>` works on the same crate.
#
#   fuzz/run.sh [SECONDS_PER_TARGET=10] [TARGET...]
set -eu
cd "$(dirname "$0")"
secs=${1:-10}
[ $# -gt 0 ] && shift
targets=${*:-"channel_message sampled_op virtio packet_decode ring_consumer translation_walk channel_session channel_restore control_request"}
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# --target keeps the flags off build scripts, as cargo-fuzz does.
cargo build --release --target "$triple" --target-dir target/cov $(for t in $targets; do printf -- '--bin %s ' "$t"; done)
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    echo "== $t (${secs}s)"
    "target/cov/$triple/release/$t" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" "corpus/$t" 2>&1 | grep -E '^(#[0-9]+.*DONE|Done|stat::number_of_executed_units|==[0-9]+==|SUMMARY|thread .* panicked)' || true
    if ls "artifacts/$t"/crash-* >/dev/null 2>&1; then
        echo "$t: crash found, see fuzz/artifacts/$t" >&2
        exit 1
    fi
done
