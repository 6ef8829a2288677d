#!/usr/bin/env bash
# Lints for the host and for aarch64 (cfg'd-out backend code is not linted otherwise), and for the
# no_std kernel targets.
source "$(dirname "$0")/env.sh"
reclaim target/debug target/force-generic target/aarch64-unknown-linux-gnu
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --workspace --all-targets --locked --target aarch64-unknown-linux-gnu -- -D warnings
cargo clippy -p stream-hal --locked --target x86_64-unknown-none -- -D warnings
cargo clippy -p stream-hal --locked --target aarch64-unknown-none -- -D warnings
RUSTFLAGS="--cfg stream_hal_force_generic" CARGO_TARGET_DIR=target/force-generic \
    cargo clippy -p stream-hal --locked --features bytemuck,zerocopy --all-targets -- -D warnings
# Documentation builds without broken or private intra-doc links.
RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps --workspace --locked
