#!/usr/bin/env bash
# The whole workspace's tests on real aarch64 code through `cross test`, as a user who
# cross-tests the crates runs them: inside a Docker container built from the repository's own
# image recipe (ci/cross-image.sh), under its qemu-user (QEMU 10, whose default `max` CPU has
# FEAT_MOPS), with the shipped Cross.toml. Then stream-hal's tests again under a CPU without
# FEAT_MOPS (`-cpu neoverse-n1`, same build), and the object code of stream-hal's test binary.
#
# Uses a running Docker daemon, else starts one for this step (and stops it at the end); builds
# the image once per recipe (its tag carries a hash of the recipe). ci/setup.sh installs Docker,
# debootstrap and cross. If Docker cannot be started this step fails with the daemon's own
# words: it never skips.
source "$(dirname "$0")/env.sh"
reclaim target/cross
TARGET=aarch64-unknown-linux-gnu
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
now() { date +%s; }

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
at_exit stop_dockerd

if docker info >/dev/null 2>&1; then
    echo "cross: using the running Docker daemon ($(docker version --format '{{.Server.Version}}'))"
else
    log="${TMPDIR:-/tmp}/memmap-stream-dockerd.log"
    echo "cross: no Docker daemon answers; starting dockerd (log: $log)"
    t=$(now)
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
    echo "cross: dockerd $(docker version --format '{{.Server.Version}}') ready in $(( $(now) - t ))s" \
        "($(docker info --format '{{.Driver}}, cgroup driver {{.CgroupDriver}}'))"
fi

# The default image in Cross.toml is the one made for the cross release ci/setup.sh installs.
want="ghcr.io/cross-rs/$TARGET:$(cargo install --list | sed -n 's/^cross v\(.*\):$/\1/p')"
[ "$(sed -n 's/^image = "\(.*\)"/\1/p' Cross.toml)" = "$want" ] ||
    { echo "cross: Cross.toml must name $want, the image of the installed cross" >&2; exit 1; }

# --- The image: built once per recipe -----------------------------------------------------------
t=$(now)
image=$(bash ci/cross-image.sh | tail -1)
echo "cross: image $image ready in $(( $(now) - t ))s"

# --- The tests ----------------------------------------------------------------------------------
# cross 0.2.5 misreads today's `rustup toolchain list` and would update `stable`: the toolchain
# is named by its version (ci/setup.sh installs it under that name; docs/cross.md).
version=$(rustc --version | cut -d' ' -f2)
# Every crate is fetched on the host: the container needs no network.
cargo fetch --locked
# The image's own linker and runner must be in force, not the host ones from env.sh (cross
# passes every CARGO_* variable of the host into the container).
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
# Its own target directory: the container's build scripts differ from the host's.
export CARGO_TARGET_DIR=target/cross
export CROSS_TARGET_AARCH64_UNKNOWN_LINUX_GNU_IMAGE="$image"
# Passed into the container by Cross.toml: the backend and CPU features the tests must find
# (QEMU's default CPU, `max`, has FEAT_MOPS), fewer random cases under emulation (the host run
# does the full count; docs/testing.md, "Sizes").
export STREAM_HAL_EXPECT_BACKEND=aarch64 STREAM_HAL_EXPECT_FEATURES=mops=yes
export PROPTEST_CASES="${PROPTEST_CASES:-16}"
# Emulated code at opt-level 2: half the run time of the test profile's 1, for a tenth more build
# time (docs/testing.md, "Sizes"); debug assertions and overflow checks stay on.
export CARGO_PROFILE_TEST_OPT_LEVEL=2
log=target/ci-cross.log
echo "cross: cross +$version test --workspace --target $TARGET in $image"
t=$(now)
rc=0
cross "+$version" test --workspace --locked --no-fail-fast --target "$TARGET" 2>&1 | tee "$log" || rc=$?
passed=$(grep -oE '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -oE '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo "cross: cross test --workspace: $passed tests passed, $failed failed, in $(( $(now) - t ))s"
[ "$rc" -eq 0 ] || { echo "cross: FAILED: cross test --workspace (status $rc)"; exit 1; }

# stream-hal without FEAT_MOPS: the same test binaries under a CPU that lacks it (Armv8.2): the
# feature must not be detected, the safe claim of it refused, the unsafe claim (in a child
# process, started through the same runner) must die of SIGILL, and dc zva/stnp clear instead.
# The binaries are run in the image directly: a `cross test -p stream-hal` would resolve other
# features than the workspace's and build everything again.
t=$(now)
bins=$(cross "+$version" test --workspace --locked --target "$TARGET" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line) if line.startswith("{") else {}
    if m.get("executable") and m.get("profile", {}).get("test") and "/crates/stream-hal#" in m.get("package_id", ""):
        print(m["executable"])')
[ -n "$bins" ] || { echo "cross: FAILED: no stream-hal test binary in the build"; exit 1; }
runner="qemu-aarch64 -cpu neoverse-n1 -L /usr/aarch64-linux-gnu"
# shellcheck disable=SC2086 # one word per binary
docker run --rm -v "$(readlink -f target/cross):/target:ro" -e "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$runner" \
    -e STREAM_HAL_EXPECT_BACKEND=aarch64 -e STREAM_HAL_EXPECT_FEATURES=mops=no -e STREAM_HAL_EXPECT_NO_OPTIONAL_FEATURES=1 \
    -e PROPTEST_CASES -e PROPTEST_DISABLE_FAILURE_PERSISTENCE=1 "$image" \
    sh -c 'set -e; for b in "$@"; do echo "     Running $b"; '"$runner"' "$b"; done' sh $bins 2>&1 |
    tee target/ci-cross-no-mops.log || { echo "cross: FAILED: stream-hal under -cpu neoverse-n1"; exit 1; }
# The MOPS tests ran in both (under neoverse-n1 they find MOPS absent).
for f in "$log" target/ci-cross-no-mops.log; do
    for test in mops_paths_zero_exactly_the_range clear_uses_mops_exactly_where_it_is_in_effect; do
        grep -q "^test arch::aarch64::tests::$test ... ok$" "$f" ||
            { echo "cross: FAILED: $test did not pass in $f"; exit 1; }
    done
done
echo "cross: stream-hal with FEAT_MOPS (-cpu max) and without (-cpu neoverse-n1) passed ($(( $(now) - t ))s for the second)"

# The container built the real aarch64 instructions into stream-hal (the backend test above
# asserts that they are the ones selected at run time); disassembled with the image's binutils.
bin=$(ls -t "target/cross/$TARGET/debug/deps/" | grep -E '^stream_hal-[0-9a-f]+$' | head -1)
dis=$(docker run --rm -v "$(readlink -f target/cross):/target:ro" "$image" \
    aarch64-linux-gnu-objdump -d "/target/$TARGET/debug/deps/$bin")
for insn in stnp 'dc[[:space:]]+zva' 'dmb[[:space:]]+ish'; do
    grep -qE "$insn" <<<"$dis" || { echo "cross: no '$insn' in $bin" >&2; exit 1; }
done
echo "cross: $bin (stream-hal's unit tests) has $(grep -c stnp <<<"$dis") stnp," \
    "$(grep -cE 'dc[[:space:]]+zva' <<<"$dis") dc zva, $(grep -cE 'dmb[[:space:]]+ish' <<<"$dis") dmb ish"
