#!/usr/bin/env bash
# Release checks for the published library crates (stream-hal, stream-par, memmap-core,
# hugetlb-init, stream-vm-memory):
#
# 1. MSRV: the crates build with Rust 1.85.0 (the workspace's `rust-version`) and the
#    dependency versions in Cargo.lock (`--locked`; Cargo's resolver picks versions whose
#    rust-version fits, so a lockfile update that needs a newer rustc fails here). With and
#    without default features.
# 2. `cargo publish --dry-run` of all five in one invocation. Cargo packages them in dependency
#    order (stream-hal, stream-par, memmap-core, hugetlb-init, stream-vm-memory) and verifies each packaged
#    crate by building it, resolving the not-yet-published workspace crates from the packages
#    it just made (a local overlay of the registry), so the crates that depend on stream-hal
#    are verified too although it is not on crates.io. This needs cargo 1.90 or newer (the
#    stable toolchain); one `-p` per crate in separate runs would fail for every crate but
#    stream-hal ("no matching package named `stream-hal` found").
# 3. Each package holds its README and both license texts.
source "$(dirname "$0")/env.sh"
reclaim target/msrv target/package-check
now() { date +%s%N; }
elapsed() { local ds=$(( ($(now) - $1) / 100000000 )); echo "$(( ds / 10 )).$(( ds % 10 ))"; }
crates=(stream-hal stream-par memmap-core hugetlb-init stream-vm-memory)
pkg_args=()
for c in "${crates[@]}"; do pkg_args+=(-p "$c"); done
step_start=$(now)

# --- MSRV ---------------------------------------------------------------------------------------
t=$(now)
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ "$msrv" = "1.85" ] || { echo "release: workspace rust-version is '$msrv'; update this script and the docs"; exit 1; }
toolchain=1.85.0
# Its own target directory: 1.85's artifacts are not reusable by the stable toolchain.
msrv_target="${CARGO_TARGET_DIR:-$PWD/target}/msrv"
have_toolchain() { rustup run "$toolchain" rustc --version >/dev/null 2>&1; }
if ! have_toolchain; then
    # A machine whose network reaches the crate registry but not rustup's server has no way to
    # get it: the install gives up after a few retries.
    RUSTUP_MAX_RETRIES=2 timeout 180 rustup toolchain install "$toolchain" --profile minimal || true
fi
if have_toolchain; then
    CARGO_TARGET_DIR="$msrv_target" cargo "+$toolchain" check --locked "${pkg_args[@]}"
    CARGO_TARGET_DIR="$msrv_target" cargo "+$toolchain" check --locked --no-default-features "${pkg_args[@]}"
    echo "release: MSRV $toolchain checks passed in $(elapsed "$t") s"
else
    # Without the old compiler, the closest check: clippy's incompatible_msrv lint flags every
    # use of a standard-library item stabilised after the crates' rust-version (it does not see
    # language features or newer Cargo manifest keys).
    echo "release: Rust $toolchain is not installed and rustup could not fetch it on this machine;"
    echo "release: checking the MSRV with clippy's incompatible_msrv lint instead"
    CARGO_TARGET_DIR="$msrv_target" cargo clippy --locked "${pkg_args[@]}" -- -A clippy::all -D clippy::incompatible_msrv
    CARGO_TARGET_DIR="$msrv_target" cargo clippy --locked --no-default-features "${pkg_args[@]}" -- -A clippy::all -D clippy::incompatible_msrv
    echo "release: MSRV $msrv standard-library check (clippy incompatible_msrv, no $toolchain toolchain) passed in $(elapsed "$t") s"
fi

# --- packages -----------------------------------------------------------------------------------
t=$(now)
# The packaged crates are verified in their own target directory (`cargo publish` builds them
# from the unpacked .crate files, which share nothing with the workspace build).
pkg_target="${CARGO_TARGET_DIR:-$PWD/target}/package-check"
# --allow-dirty: files other steps leave in the tree must not fail this check (a real publish
# runs without it, from a clean tree).
# Cargo unpacks the verified packages of a dependency (the local overlay of the registry) under
# $CARGO_HOME/registry/src/<overlay>/NAME-VERSION and reuses such a directory when it exists: on
# a machine that ran this step for an earlier commit, hugetlb-init would be verified against that
# commit's memmap-core. None of these crates is on crates.io, so every such directory is stale;
# and so are the packaged crates' build artifacts (their fingerprint is the name and version).
rm -rf -- "$pkg_target"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for c in "${crates[@]}"; do
    v=$(sed -n 's/^version = "\(.*\)"/\1/p' "crates/$c/Cargo.toml" | head -1)
    for d in "$cargo_home"/registry/src/*/"$c-$v"; do
        [ -d "$d" ] && ! [ -L "$d" ] && { echo "release: removing the stale unpacked package $d"; rm -rf -- "$d"; }
    done
done
CARGO_TARGET_DIR="$pkg_target" cargo publish --dry-run --allow-dirty --locked "${pkg_args[@]}"
for c in "${crates[@]}"; do
    list=$(cargo package --list --allow-dirty --locked -p "$c")
    for f in README.md LICENSE-MIT LICENSE-APACHE; do
        grep -qx "$f" <<<"$list" || { echo "release: the $c package has no $f"; exit 1; }
    done
done
echo "release: publish dry runs (packaged and verified in dependency order) passed in $(elapsed "$t") s"
echo "release: step time $(elapsed "$step_start") s"
