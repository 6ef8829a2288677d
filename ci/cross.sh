#!/usr/bin/env bash
# The whole workspace's tests on real aarch64 code (stnp, dc zva, dmb, the memfd-backed HVO, the
# bench's CLI) through `cross test`, inside a Docker container built from the repository's own
# image recipe (ci/cross-image.sh): the same tests and expectations as the Docker-free qemu-user
# run of ci/aarch64.sh, and a real run of the shipped Cross.toml.
#
# Idempotent: uses a running Docker daemon, else installs Debian's docker.io and starts one for
# this step only (and stops it at the end); builds the image once per recipe (its tag carries a
# hash of the recipe); installs cross at the pinned version unless that version is installed.
# If Docker cannot be started this step fails with the daemon's own words: it never skips.
source "$(dirname "$0")/env.sh"

# cross, pinned. The default image in Cross.toml carries the same version: cross's images are
# made for the cross release of the same tag.
CROSS_VERSION=0.2.5
TARGET=aarch64-unknown-linux-gnu
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

image_line=$(sed -n 's/^image = "\(.*\)"/\1/p' Cross.toml)
if [ "$image_line" != "ghcr.io/cross-rs/$TARGET:$CROSS_VERSION" ]; then
    echo "cross: Cross.toml names the image '$image_line', expected ghcr.io/cross-rs/$TARGET:$CROSS_VERSION" \
        "(the image of the cross version this step installs)" >&2
    exit 1
fi

# --- Packages: the Docker engine and debootstrap (the image recipe's base system) ---------------
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    echo "cross: installing ${need[*]}"
    t=$(date +%s)
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    echo "cross: installed ${need[*]} in $(( $(date +%s) - t ))s"
fi

# --- The Docker daemon: reuse a running one, else start one and stop it on exit ----------------
dockerd_pid=""
stop_dockerd() {
    [ -n "$dockerd_pid" ] || return 0
    echo "cross: stopping the Docker daemon this step started (pid $dockerd_pid)"
    $sudo kill -TERM "$dockerd_pid" 2>/dev/null || return 0
    for _ in $(seq 60); do
        kill -0 "$dockerd_pid" 2>/dev/null || return 0
        sleep 0.5
    done
    echo "cross: the Docker daemon (pid $dockerd_pid) did not stop within 30 s" >&2
}
trap stop_dockerd EXIT

if docker info >/dev/null 2>&1; then
    echo "cross: using the running Docker daemon ($(docker version --format '{{.Server.Version}}'))"
else
    log="${TMPDIR:-/tmp}/memmap-stream-dockerd.log"
    echo "cross: no Docker daemon answers; starting dockerd (log: $log)"
    t=$(date +%s)
    $sudo dockerd >"$log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 120); do
        docker info >/dev/null 2>&1 && break
        if ! kill -0 "$dockerd_pid" 2>/dev/null; then
            wait "$dockerd_pid" && rc=0 || rc=$?
            dockerd_pid=""
            tail -25 "$log" >&2
            echo "cross: FAILED: dockerd exited with status $rc before answering (above: its log);" \
                "this step needs a Docker engine (ci/aarch64.sh runs the same tests without one)" >&2
            exit 1
        fi
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        tail -25 "$log" >&2
        echo "cross: FAILED: dockerd (pid $dockerd_pid) did not answer within 60 s (above: its log)" >&2
        exit 1
    fi
    echo "cross: dockerd $(docker version --format '{{.Server.Version}}') ready in $(( $(date +%s) - t ))s" \
        "($(docker info --format '{{.Driver}}, cgroup driver {{.CgroupDriver}}'))"
fi

# --- The image ---------------------------------------------------------------------------------
t=$(date +%s)
image=$(bash ci/cross-image.sh | tail -1)
echo "cross: image $image ready in $(( $(date +%s) - t ))s"

# --- cross --------------------------------------------------------------------------------------
if [ "$(cross --version 2>/dev/null | head -1)" != "cross $CROSS_VERSION" ]; then
    echo "cross: installing cross $CROSS_VERSION"
    t=$(date +%s)
    cargo install cross --locked --version "$CROSS_VERSION"
    echo "cross: installed cross $CROSS_VERSION in $(( $(date +%s) - t ))s"
fi

# --- The toolchain ------------------------------------------------------------------------------
# cross 0.2.5 reads `rustup toolchain list` expecting "NAME (default)"; today's rustup prints
# "NAME (active, default)", so cross takes the default toolchain (`stable`) for missing and runs
# `rustup toolchain add stable`, which tries to update it to the newest release. Naming the
# toolchain by its version (not the default entry) avoids that and pins what the container uses.
version=$(rustc --version | cut -d' ' -f2)
host=$(rustc -vV | sed -n 's/^host: //p')
if ! rustup toolchain list | grep -q "^$version-$host"; then
    echo "cross: installing the toolchain $version (the version of the default rustc) under its own name"
    rustup toolchain install "$version" --profile minimal --target "$TARGET"
fi
rustup target add --toolchain "$version" "$TARGET"

# --- The tests ----------------------------------------------------------------------------------
# Every crate is fetched on the host: the container needs no network.
cargo fetch --locked
# The image's own linker and runner must be in force, not the host ones from env.sh (cross
# passes every CARGO_* variable of the host into the container).
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
# Its own target directory: the container's build scripts differ from the host's, so sharing
# target/ would rebuild them in every other step.
export CARGO_TARGET_DIR=target/cross
export CROSS_TARGET_AARCH64_UNKNOWN_LINUX_GNU_IMAGE="$image"
# Passed into the container by Cross.toml (MEMMAP_BENCH_TEST_RUNNER is set there).
export STREAM_HAL_EXPECT_BACKEND=aarch64
# Fewer random cases under emulation (about 10x slower); the host run does the full count.
export PROPTEST_CASES="${PROPTEST_CASES:-32}"
echo "cross: cross +$version test --workspace --target $TARGET in $image"
t=$(date +%s)
cross "+$version" test --workspace --locked --no-fail-fast --target "$TARGET"
echo "cross: cross test passed in $(( $(date +%s) - t ))s"

# The container built the real aarch64 instructions into stream-hal (the backend test above
# asserts that they are the ones selected at run time); disassembled with the image's binutils.
bin=$(ls -t "target/cross/$TARGET/debug/deps/" | grep -E '^stream_hal-[0-9a-f]+$' | head -1)
dis=$(docker run --rm -v "$PWD/target/cross:/target:ro" "$image" \
    aarch64-linux-gnu-objdump -d "/target/$TARGET/debug/deps/$bin")
for insn in stnp 'dc[[:space:]]+zva' 'dmb[[:space:]]+ish'; do
    grep -qE "$insn" <<<"$dis" || { echo "cross: no '$insn' in $bin" >&2; exit 1; }
done
echo "cross: $bin (stream-hal's unit tests) has $(grep -c stnp <<<"$dis") stnp," \
    "$(grep -cE 'dc[[:space:]]+zva' <<<"$dis") dc zva, $(grep -cE 'dmb[[:space:]]+ish' <<<"$dis") dmb ish"
