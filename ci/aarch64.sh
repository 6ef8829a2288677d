#!/usr/bin/env bash
# The whole workspace's tests on real aarch64 code under qemu-user, without Docker: what
# ci/cross.sh (a .ci/run step) runs in a cross container, for a machine without a Docker engine.
# The runner comes from ci/env.sh (the bench's and the oracle's CLI tests start their programs
# through it too); with QEMU 10's default `max` CPU the clears take their FEAT_MOPS path.
source "$(dirname "$0")/env.sh"
# Fewer random cases under emulation; the host run does the full count.
export PROPTEST_CASES="${PROPTEST_CASES:-16}" CARGO_PROFILE_TEST_OPT_LEVEL=2
STREAM_HAL_EXPECT_BACKEND=aarch64 cargo test --workspace --locked --no-fail-fast --target aarch64-unknown-linux-gnu
