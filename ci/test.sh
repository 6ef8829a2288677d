#!/usr/bin/env bash
# The README's test command, plus the force-generic build of stream-hal.
source "$(dirname "$0")/env.sh"
cargo test --workspace --locked
STREAM_HAL_EXPECT_BACKEND=generic:force-generic cargo test -p stream-hal --locked --features force-generic
