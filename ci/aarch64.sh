#!/usr/bin/env bash
# The whole workspace's tests on real aarch64 code (stnp, dc zva, dmb) under qemu-user.
source "$(dirname "$0")/env.sh"
STREAM_HAL_EXPECT_BACKEND=aarch64 cargo test --workspace --locked --target aarch64-unknown-linux-gnu
