#!/usr/bin/env bash
# Formatting.
source "$(dirname "$0")/env.sh"
cargo fmt --all -- --check
