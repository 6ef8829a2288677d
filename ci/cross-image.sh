#!/usr/bin/env bash
# Builds the Docker image that `cross` uses for aarch64-unknown-linux-gnu when the default cross
# images cannot be pulled: a Debian root file system made by debootstrap (no registry needed),
# with Debian's aarch64 cross linker, the aarch64 C library and qemu-user, imported into Docker.
#
#   bash ci/cross-image.sh          build the image unless it exists; print its tag last
#   bash ci/cross-image.sh --tag    print the tag only (no Docker, no build)
#
# Then: CROSS_TARGET_AARCH64_UNKNOWN_LINUX_GNU_IMAGE=<tag> cross +<version> test --target ...
#
# The tag ends in a hash of this file and of the Debian release, so any change to the recipe
# builds a new image and an unchanged recipe reuses the one built before. The Debian mirror and
# release are the host's own (its apt sources and /etc/os-release): the image's C library is
# then the host's, which the host's Rust toolchain (mounted into the container by cross) needs.
# Needs root (debootstrap, chroot) and a running Docker daemon; ci/cross.sh provides both in CI.
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
source "$(dirname "$self")/env.sh"

# What the image holds: a host C compiler and C library (build scripts and proc macros are
# linked for the host inside the container), the aarch64 cross linker and C library, and
# qemu-user to run the aarch64 test binaries. ca-certificates lets cargo inside the container
# reach crates.io should a crate be missing from the mounted cargo home (ci/cross.sh fetches
# every crate on the host first, so CI needs no network inside the container). qemu-user is
# QEMU 10 or newer: on bookworm from its backports (its own 7.2 answers `madvise` without doing
# it and knows no FEAT_MOPS, which the default `max` CPU of QEMU 10 has).
PACKAGES=(gcc libc6-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user ca-certificates)
# The image's own configuration for cargo, so that `cross` (and a plain `docker run`) link with
# the cross linker and run aarch64 binaries under qemu-user without anything from the host
# (the same variables as the default cross image; QEMU_LD_PREFIX lets a bare `qemu-aarch64 PROG`
# find the aarch64 loader and libraries).
IMAGE_ENV=(
    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc"
    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 -L /usr/aarch64-linux-gnu"
    "CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc"
    "QEMU_LD_PREFIX=/usr/aarch64-linux-gnu"
)
REPOSITORY=memmap-stream-cross-aarch64

suite=$(debian_suite)
hash=$({ cat "$self"; echo "$suite"; } | sha256sum | cut -c1-12)
tag="$REPOSITORY:$suite-$hash"
if [ "${1:-}" = --tag ]; then
    echo "$tag"
    exit 0
fi

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "cross-image: $tag exists, reusing it" >&2
    echo "$tag"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "cross-image: debootstrap and chroot need root" >&2; exit 1; }
if ! command -v debootstrap >/dev/null; then
    echo "cross-image: installing debootstrap" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
fi

url=$(debian_mirror)
rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/cross-rootfs.XXXXXX")
cleanup() {
    # Never leave a mount behind inside the tree that is being deleted.
    mountpoint -q "$rootfs/proc" && umount "$rootfs/proc"
    rm -rf --one-file-system "$rootfs"
}
at_exit cleanup

start=$(date +%s)
echo "cross-image: building $tag: debootstrap --variant=minbase $suite from $url" >&2
debootstrap --variant=minbase "$suite" "$rootfs" "$url" >"$rootfs.log" 2>&1 || {
    tail -20 "$rootfs.log" >&2
    echo "cross-image: debootstrap failed (full log: $rootfs.log)" >&2
    exit 1
}
rm -f "$rootfs.log"
echo "cross-image: debootstrap done in $(( $(date +%s) - start ))s; installing ${PACKAGES[*]}" >&2
mount -t proc proc "$rootfs/proc"
install=("${PACKAGES[@]}")
if [ "$suite" = bookworm ]; then
    echo "deb $url $suite-backports main" >>"$rootfs/etc/apt/sources.list"
    install=("${install[@]/#qemu-user/qemu-user/$suite-backports}")
fi
{ chroot "$rootfs" apt-get update -q && chroot "$rootfs" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${install[@]}"; } >"$rootfs.log" 2>&1 || {
    tail -20 "$rootfs.log" >&2
    echo "cross-image: apt-get install in the new root failed (full log: $rootfs.log)" >&2
    exit 1
}
rm -f "$rootfs.log"
chroot "$rootfs" apt-get clean
umount "$rootfs/proc"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

changes=()
for e in "${IMAGE_ENV[@]}"; do
    # docker import's ENV instruction: KEY="VALUE" keeps the spaces of a value together.
    changes+=(-c "ENV ${e%%=*}=\"${e#*=}\"")
done
changes+=(-c "LABEL org.opencontainers.image.description=\"memmap-stream: cross image for aarch64-unknown-linux-gnu ($suite)\"")
tar -C "$rootfs" -c . | docker import "${changes[@]}" - "$tag" >&2
echo "cross-image: $tag built in $(( $(date +%s) - start ))s" >&2

# Older builds of an earlier recipe are of no further use: remove them.
docker image ls --format '{{.Repository}}:{{.Tag}}' "$REPOSITORY" | while read -r old; do
    if [ "$old" != "$tag" ]; then
        echo "cross-image: removing the outdated $old" >&2
        docker image rm "$old" >/dev/null || true
    fi
done
echo "$tag"
