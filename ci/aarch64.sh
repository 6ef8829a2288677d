#!/usr/bin/env bash
# The whole workspace's tests on real aarch64 code (stnp, dc zva, dmb) under qemu-user, without
# Docker: the fallback of ci/cross.sh (which .ci/run runs: the same tests inside a cross container).
# qemu-user's default CPU is `max`: with a QEMU that implements FEAT_MOPS the clears take their
# MOPS path here; stream-hal with MOPS on (`-cpu max`) and off (`-cpu neoverse-n1`), with the
# expectations checked, and the MOPS path's object-code check run in ci/arches.sh (a .ci/run step).
source "$(dirname "$0")/env.sh"
# The bench's CLI tests start the aarch64 program as a child process: run it under qemu too.
export MEMMAP_BENCH_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"
# Fewer random cases under emulation (about 10x slower); the host run does the full count.
export PROPTEST_CASES="${PROPTEST_CASES:-32}"
STREAM_HAL_EXPECT_BACKEND=aarch64 cargo test --workspace --locked --no-fail-fast --target aarch64-unknown-linux-gnu
