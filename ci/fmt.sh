#!/usr/bin/env bash
# Formatting.
source "$(dirname "$0")/env.sh"
cargo fmt --all -- --check
# The module's Rust is no workspace crate (the kernel's build compiles it): checked by itself.
rustfmt --edition 2021 --config-path rustfmt.toml --check linux-module/*.rs
