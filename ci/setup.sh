#!/usr/bin/env bash
# Installs what the other CI steps need: Debian packages for aarch64, riscv64 and ppc64le
# cross-linking (and their objdump) and qemu-user, the stable targets, and nightly's miri and
# rust-src (also for the loongarch64 builds with -Zbuild-std, which rustup cannot fetch here).
source "$(dirname "$0")/env.sh"

need=()
for pkg in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user binutils \
    gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu \
    gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross binutils-powerpc64le-linux-gnu; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

rustup target add aarch64-unknown-linux-gnu x86_64-unknown-none aarch64-unknown-none \
    riscv64gc-unknown-linux-gnu riscv64gc-unknown-none-elf powerpc64le-unknown-linux-gnu
rustup component add clippy rustfmt
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
rustup component add --toolchain nightly miri rust-src
cargo --version; cargo +nightly --version; qemu-aarch64 --version | head -1
