#!/usr/bin/env bash
# Installs everything the other CI steps need, once, before they run side by side (two steps
# must never run apt or `cargo install` at the same time):
#
# * Debian packages: cross linkers, C libraries and binutils for aarch64, riscv64 and ppc64le;
#   QEMU (user mode and the x86-64, arm, riscv64 and ppc system emulators) at version 10 or
#   newer, from the suite's backports on bookworm (its QEMU 7.2 knows no Zicboz, no
#   `riscv_hwprobe`, no FEAT_MOPS, and answers `madvise` without doing it); the oracle's guest
#   tools; Docker and debootstrap for the cross image;
# * the Rust targets and components, nightly with miri and rust-src (also for the -Zbuild-std
#   builds), and the pinned tools: cargo-nextest, cross, cargo-fuzz.
#
# Idempotent: what is installed at the wanted version is left alone.
source "$(dirname "$0")/env.sh"
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"

CROSS_VERSION=0.2.5
CARGO_FUZZ_VERSION=0.13.2

# --- Debian packages ----------------------------------------------------------------------------
packages=(
    # cross-linking and object-code checks
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils binutils-aarch64-linux-gnu
    gcc-riscv64-linux-gnu libc6-dev-riscv64-cross binutils-riscv64-linux-gnu
    gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross binutils-powerpc64le-linux-gnu
    # the oracle's guests: initramfs, namespaces, device trees, kernel packages
    busybox-static ndctl xz-utils file device-tree-compiler
    # the provider configurations: ext4 in the guest, the static dax-rw
    e2fsprogs libc6-dev
    # CPU time per step (.ci/run)
    time
    # the cross image (ci/cross-image.sh) and its daemon
    docker.io debootstrap
)
qemu=(qemu-user qemu-system-x86 qemu-system-arm qemu-system-riscv qemu-system-ppc opensbi)
need=()
for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
old_qemu=0
for pkg in "${qemu[@]}"; do
    v=$(dpkg-query -W -f '${Status} ${Version}' "$pkg" 2>/dev/null | sed -n 's/^install ok installed //p')
    # QEMU's Debian versions read 1:MAJOR.MINOR...; opensbi's has no epoch.
    major=$(sed -E 's/^[0-9]+://; s/\..*//' <<<"$v")
    if [ -z "$v" ] || { [ "${pkg#qemu}" != "$pkg" ] && [ "${major:-0}" -lt 10 ]; }; then old_qemu=1; fi
done
if [ ${#need[@]} -gt 0 ] || [ "$old_qemu" = 1 ]; then
    t=$(date +%s)
    $sudo apt-get update -qq
    [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
    if [ "$old_qemu" = 1 ]; then
        suite=$(debian_suite)
        if [ "$suite" = bookworm ]; then
            # All of QEMU from one release: backports' qemu-system-common breaks bookworm's
            # emulators, so every QEMU package (and the firmware they need) comes from there.
            # A private source list and package lists leave the machine's apt setup as it is.
            with_backports "$suite" $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends -t "$suite-backports" "${qemu[@]}" qemu-system-common qemu-system-data seabios
        else
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${qemu[@]}"
        fi
    fi
    echo "setup: Debian packages installed in $(( $(date +%s) - t )) s"
fi
qemu-aarch64 --version | head -1
qemu-system-x86_64 --version | head -1

# --- Rust ---------------------------------------------------------------------------------------
rustup target add aarch64-unknown-linux-gnu x86_64-unknown-none aarch64-unknown-none \
    riscv64gc-unknown-linux-gnu riscv64gc-unknown-none-elf powerpc64le-unknown-linux-gnu
rustup component add clippy rustfmt
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
rustup component add --toolchain nightly miri rust-src
# cross 0.2.5 misreads today's `rustup toolchain list` and would update `stable`: the cross step
# names the toolchain by its version (docs/cross.md), installed here under that name.
version=$(rustc --version | cut -d' ' -f2)
host=$(rustc -vV | sed -n 's/^host: //p')
if ! rustup toolchain list | grep -q "^$version-$host"; then
    rustup toolchain install "$version" --profile minimal
fi
rustup target add --toolchain "$version" aarch64-unknown-linux-gnu

# cargo_tool CRATE VERSION: installs CRATE at VERSION unless `cargo install` has it already.
# (Never ask `cross --version`: cross 0.2.5 then checks the default toolchain and may try to
# update `stable`.)
cargo_tool() {
    if ! cargo install --list | grep -qx "$1 v$2:"; then
        t=$(date +%s)
        cargo install --locked "$1" --version "$2"
        echo "setup: installed $1 $2 in $(( $(date +%s) - t )) s"
    fi
}
# cargo-nextest: any release the machine has (the sanitizer and Miri steps run through it).
command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest
cargo_tool cross "$CROSS_VERSION"
cargo_tool cargo-fuzz "$CARGO_FUZZ_VERSION"
cargo --version; cargo +nightly --version; cargo nextest --version | head -1; cargo fuzz --version
