#!/usr/bin/env bash
# Miri on stream-hal's emulated aarch64 backend (see ci/miri.sh): stnp, dc zva and its stnp
# fallback with DCZID_EL0.DZP set, under Tree Borrows: the unit, backend and differential tests
# (the differential tests go through every routine at every alignment; the property tests run
# outside Miri). A step of its own, in the lane without ci/miri.sh, with its own target
# directory, so the two Miri runs share no build lock.
source "$(dirname "$0")/env.sh"
reclaim target/miri-aarch64
# Miri runs the aarch64 target itself: the qemu runner from env.sh must not wrap it.
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
s=$(date +%s)
RUSTFLAGS="--cfg stream_hal_emulate --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/miri-aarch64 \
    MIRIFLAGS="-Zmiri-tree-borrows" cargo +nightly miri test --locked -p stream-hal \
    --target aarch64-unknown-linux-gnu --lib --test backend --test differential
echo "miri-aarch64: $(( $(date +%s) - s )) s"
