#!/usr/bin/env bash
# Installs what the other CI steps need: Debian packages for aarch64 cross-linking and
# qemu-user, the stable targets, and nightly's miri and rust-src.
source "$(dirname "$0")/env.sh"

need=()
for pkg in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user binutils; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

rustup target add aarch64-unknown-linux-gnu x86_64-unknown-none aarch64-unknown-none
rustup component add clippy rustfmt
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
rustup component add --toolchain nightly miri rust-src
cargo --version; cargo +nightly --version; qemu-aarch64 --version | head -1
