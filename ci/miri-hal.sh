#!/usr/bin/env bash
# Miri on stream-hal, the runs ci/miri.sh leaves to the other lane (each with its own target
# directory, so the two steps share no build lock):
#
# 1. plain Miri: the build reports the generic backend with Miri as the reason;
# 2. the emulated aarch64 backend (see ci/miri.sh): stnp, dc zva and its stnp fallback with
#    DCZID_EL0.DZP set, under Tree Borrows: the unit, backend and differential tests (the
#    differential tests go through every routine at every alignment; the property tests run
#    outside Miri).
source "$(dirname "$0")/env.sh"
reclaim target/miri target/miri-aarch64
# Miri runs the aarch64 target itself: the qemu runner from env.sh must not wrap it.
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
t() { local s; s=$(date +%s); "$@"; local rc=$?; echo "miri-hal: $(( $(date +%s) - s )) s: ${*: -6}"; return $rc; }
fail=0
t env STREAM_HAL_EXPECT_BACKEND=generic:miri CARGO_TARGET_DIR=target/miri \
    cargo +nightly miri test --locked -p stream-hal --test backend || fail=1
t env RUSTFLAGS="--cfg stream_hal_emulate --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/miri-aarch64 \
    MIRIFLAGS="-Zmiri-tree-borrows" cargo +nightly miri test --locked -p stream-hal \
    --target aarch64-unknown-linux-gnu --lib --test backend --test differential || fail=1
exit $fail
