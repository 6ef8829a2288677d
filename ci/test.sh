#!/usr/bin/env bash
# The README's test command, plus stream-hal with the generic backend forced by
# `STREAM_HAL_FORCE_GENERIC=1`, the switch users set (its own target directory: the build
# script's cfg differs), and the optional Record derives.
source "$(dirname "$0")/env.sh"
reclaim target/debug target/force-generic
# The host backend must be the x86-64 one (a fallback to generic would pass silently otherwise).
STREAM_HAL_EXPECT_BACKEND=x86_64 cargo test --workspace --locked
STREAM_HAL_EXPECT_BACKEND=generic:force-generic STREAM_HAL_FORCE_GENERIC=1 CARGO_TARGET_DIR=target/force-generic \
    cargo test -p stream-hal --locked --features bytemuck,zerocopy
# The memory-cgroup test creates a cgroup of its own (root and a writable memory controller):
# say whether it ran here or was skipped, and why.
cargo test --locked -p memmap-bench --test cgroup -- --nocapture 2>&1 | grep -E '^skipped: |^test result' | sed 's/^/cgroup test: /'
