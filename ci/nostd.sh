#!/usr/bin/env bash
# no_std kernel targets build, and x86_64-unknown-none (soft-float: no SSE registers) uses the
# movnti-only path: the library's object code has movnti and no SSE instruction at all.
# memmap-core and hugetlb-init build without their default `std` feature for both -none
# targets (the recipe in their crate docs). A custom target JSON (x86_64-unknown-none's
# specification under a name no target parser knows) built with nightly -Zbuild-std=core gets
# the same movnti-only streaming backend. The example kernel builds for every -none target,
# its checks pass on the host, and its stream-hal switch survives a RUSTFLAGS in the
# environment (no CPUID in the image).
#
# Then what a downstream crate hits at build time (`downstream`, on the host; fixtures in
# ci/downstream/): the compiler's hints for a type without `Record`, a `bytemuck_record!` or
# `zerocopy_record!` without its feature and the removed `no-cpuid`/`force-generic` features;
# the lockfile of a fresh no_std kernel crate (at most 6 packages); a
# downstream `--cfg loom` (a kernel's build, a VMM's run of stream-vm-memory).
#
# `bash ci/nostd.sh downstream` runs only the downstream part (it needs no -none target).
source "$(dirname "$0")/env.sh"
reclaim target/x86_64-unknown-none target/aarch64-unknown-none target/riscv64gc-unknown-none-elf \
    target/loongarch64-none target/custom-target target/example-kernel target/downstream \
    target/downstream-rustflags target/downstream-loom
root=$PWD
host=$(rustc -vV | sed -n 's/^host: //p')
# A fresh no_std kernel's lockfile: itself, stream-hal, memmap-core, hugetlb-init, cfg-if, and
# stream-par (the padata split and the `Threads` policy, which memmap-core's no_std API takes:
# `Node::deferred_init_memmap_with` hands out `PadataJob`s; without `std` it has no dependencies).
max_lock_packages=6
now() { date +%s%N; }
elapsed() { local ds=$(( ($(now) - $1) / 100000000 )); echo "$(( ds / 10 )).$(( ds % 10 ))"; }

# expect_fail WANT DIR CARGO-ARGS...: the build in DIR must fail, and its output contain WANT.
expect_fail() {
    local want=$1 dir=$2 out
    shift 2
    if out=$(cd "$dir" && cargo build --locked "$@" 2>&1); then
        echo "nostd: \`cargo build $*\` in $dir succeeded; it must fail with: $want"; exit 1
    fi
    grep -qF -- "$want" <<<"$out" || {
        echo "nostd: \`cargo build $*\` in $dir failed without the hint: $want"; tail -n 30 <<<"$out"; exit 1
    }
}

# cpuid_functions RLIB...: the functions of the rlibs that contain a cpuid instruction, sorted.
cpuid_functions() {
    local f
    for f in "$@"; do objdump -d --no-show-raw-insn "$f"; done |
        awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /\tcpuid/ { print fn }' | sort -u
}

# kernel_switch TARGET [CARGO-ARGS...]: the example kernel built with a RUSTFLAGS of its own in
# the environment (which replaces every `rustflags` of .cargo/config.toml, and with them a
# `--cfg stream_hal_no_cpuid` kept there) still gets the switch from `[env]`: its compile-time
# assertion holds, and no function it can call has a cpuid instruction (only the explicit
# `CpuFeatures::detect` and `CacheInfo::detect`'s `detect_cache_info`, which it never calls,
# have one). With the switch overridden to 0 the
# assertion fails the build loudly.
kernel_switch() {
    local target=$1 dir="$root/target/downstream-rustflags" out
    shift
    (
        cd crates/example-kernel
        CARGO_TARGET_DIR="$dir" RUSTFLAGS="-C force-frame-pointers=yes" \
            cargo build --locked --release --target "$target" "$@"
    )
    out=$(cpuid_functions "$dir/$target"/release/deps/libstream_hal-*.rlib "$dir/$target"/release/libexample_kernel.rlib)
    # (arch::detect_cpu_features and detect_cache_info are the bodies of the two, called by them alone.)
    if grep -v -e 'CpuFeatures.*6detect' -e 'detect_cpu_features' -e 'detect_cache_info' <<<"$out" | grep -q .; then
        echo "nostd: example kernel for $target with RUSTFLAGS set: cpuid in"; echo "$out"; exit 1
    fi
    STREAM_HAL_NO_CPUID=0 CARGO_TARGET_DIR="$dir" RUSTFLAGS="-C force-frame-pointers=yes" \
        expect_fail "stream-hal was built without STREAM_HAL_NO_CPUID=1" crates/example-kernel \
        --release --target "$target" "$@"
    echo "nostd: example kernel for $target with RUSTFLAGS set: switch from [env], assertion holds," \
        "no cpuid outside CpuFeatures::detect and CacheInfo::detect; with STREAM_HAL_NO_CPUID=0 the build fails"
}

# The host-side checks of what a downstream crate hits at build time.
downstream() {
    local t n d
    t=$(now)
    export CARGO_TARGET_DIR="$root/target/downstream"
    # Outside the root workspace, so the fmt step does not see them.
    for d in ci/downstream/*/; do (cd "$d" && cargo fmt --check); done
    local hints=ci/downstream/hints
    expect_fail 'is not a `stream_hal::Record`' $hints --example missing_record
    expect_fail 'stream_hal::bytemuck_record!(Frame)' $hints --example missing_record
    expect_fail "needs stream-hal's \`bytemuck\` feature" $hints --example bytemuck_without_feature
    expect_fail "needs stream-hal's \`zerocopy\` feature" $hints --example zerocopy_without_feature
    expect_fail 'Set `STREAM_HAL_NO_CPUID = "1"`' $hints --features old-no-cpuid
    expect_fail 'Set `STREAM_HAL_FORCE_GENERIC = "1"`' $hints --features old-force-generic
    STREAM_HAL_NO_CPUID=yes expect_fail 'STREAM_HAL_NO_CPUID="yes" is not a switch value' $hints
    echo "nostd: downstream hints: missing Record, bytemuck_record!/zerocopy_record! without their feature," \
        "the removed no-cpuid/force-generic features, a bad STREAM_HAL_NO_CPUID value: each names the fix"

    # The example kernel's checks, on the host (its tests linted too).
    (cd crates/example-kernel && cargo clippy --locked --all-targets -- -D warnings && cargo test --locked)
    kernel_switch "$host"

    # A fresh no_std kernel crate: generate its lockfile as `cargo build` would, and count.
    local fixture="$CARGO_TARGET_DIR/nostd-kernel"
    rm -rf "$fixture" && mkdir -p "$fixture"
    cp -r ci/downstream/nostd-kernel/. "$fixture"
    sed -i "s#\.\./\.\./\.\./crates#$root/crates#" "$fixture/Cargo.toml"
    (cd "$fixture" && cargo generate-lockfile)
    n=$(grep -c '^name = ' "$fixture/Cargo.lock")
    if [ "$n" -gt "$max_lock_packages" ]; then
        echo "nostd: a fresh no_std kernel's lockfile has $n packages (at most $max_lock_packages):"
        grep '^name = ' "$fixture/Cargo.lock"; exit 1
    fi
    # Its own loom tests set `--cfg loom` for the whole build: memmap-core must not change.
    (cd "$fixture" && CARGO_TARGET_DIR="$root/target/downstream-loom" RUSTFLAGS="--cfg loom" cargo build --locked)
    # A VMM's: stream-vm-memory's parallel zero, populate and reset must work as in any build.
    (cd ci/downstream/vmm-loom && CARGO_TARGET_DIR="$root/target/downstream-loom" RUSTFLAGS="--cfg loom" cargo run --locked)
    unset CARGO_TARGET_DIR
    echo "nostd: downstream: a fresh no_std kernel's lockfile has $n packages (at most $max_lock_packages);" \
        "--cfg loom leaves memmap-core alone (a no_std kernel builds, a VMM runs); $(elapsed "$t") s"
}

if [ "${1:-}" = downstream ]; then
    downstream
    exit 0
fi

t=$(now)
for target in x86_64-unknown-none aarch64-unknown-none riscv64gc-unknown-none-elf; do
    cargo build --locked -p stream-hal --release --target "$target"
    cargo build --locked -p memmap-core -p hugetlb-init --no-default-features --release --target "$target"
done
echo "nostd: stream-hal, memmap-core and hugetlb-init (no default features) built for the three stable -none targets in $(elapsed "$t") s"
rvdis=$(riscv64-linux-gnu-objdump -d target/riscv64gc-unknown-none-elf/release/libstream_hal.rlib)
# binutils 2.40 prints cbo.zero as a raw word: match its encoding.
rvcbo=$(perl -ne '$n++ if /^\s+[0-9a-f]+:\s+([0-9a-f]{8})\s/ && (hex($1) & 0xfff07fff) == 0x0040200f; END { print $n+0 }' <<<"$rvdis")
rvntl=$(grep -cE 'add\s+zero,zero,t0' <<<"$rvdis" || true)
[ "$rvcbo" -gt 0 ] && [ "$rvntl" -gt 0 ] || { echo "riscv64gc-unknown-none-elf: $rvcbo cbo.zero, $rvntl ntl.all (want both > 0)"; exit 1; }
echo "riscv64gc-unknown-none-elf: $rvcbo cbo.zero, $rvntl ntl.all"
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || rustup component add --toolchain nightly rust-src

# --- the example kernel -------------------------------------------------------------------------
t=$(now)
(
    cd crates/example-kernel
    export CARGO_TARGET_DIR="$root/target/example-kernel"
    cargo fmt --check
    for target in x86_64-unknown-none aarch64-unknown-none riscv64gc-unknown-none-elf; do
        cargo clippy --locked --release --target "$target" -- -D warnings
        cargo build --locked --release --target "$target"
    done
    # stream-hal for loongarch64-unknown-none comes with it. The target directory is shared
    # with ci/arches.sh's loongarch64 build (same core, same flags): core is built once.
    CARGO_TARGET_DIR="$root/target/loongarch64-none" cargo +nightly build --locked --release \
        -Zbuild-std=core -Zbuild-std-features=compiler-builtins-mem --target loongarch64-unknown-none
)
kernel_switch x86_64-unknown-none
echo "nostd: example kernel built (and linted) for x86_64-unknown-none, aarch64-unknown-none, riscv64gc-unknown-none-elf, loongarch64-unknown-none in $(elapsed "$t") s"

rlib=target/x86_64-unknown-none/release/libstream_hal.rlib
dis=$(objdump -d -M intel "$rlib")
grep -q 'movnti' <<<"$dis" || { echo "x86_64-unknown-none: no movnti in $rlib"; exit 1; }
if grep -Eq 'xmm|movntdq' <<<"$dis"; then
    echo "x86_64-unknown-none: SSE instructions found in $rlib:"; grep -E 'xmm|movntdq' <<<"$dis" | head; exit 1
fi
echo "x86_64-unknown-none: movnti-only path confirmed ($(grep -c movnti <<<"$dis") movnti, 0 SSE instructions)"
arlib=target/aarch64-unknown-none/release/libstream_hal.rlib
# Disassemble into a variable: `objdump | grep -q` fails under pipefail when grep exits early.
adis=$(aarch64-linux-gnu-objdump -d "$arlib")
grep -q 'stnp' <<<"$adis" || { echo "aarch64-unknown-none: no stnp in $arlib"; exit 1; }
echo "aarch64-unknown-none: stnp path present ($(grep -c stnp <<<"$adis") stnp, $(grep -cE 'dc[[:space:]]+zva' <<<"$adis") dc zva)"

# --- custom target JSON -------------------------------------------------------------------------
# The specification is printed by the nightly that builds it (the JSON schema changes between
# nightlies, so a committed copy would break on a toolchain update). The check crate's
# compile-time assertions fail the build unless backend() is Backend::X86_64 { vector: false };
# the disassembly then shows what that backend emitted.
t=$(now)
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || rustup component add --toolchain nightly rust-src
check=crates/stream-hal/tests/custom-target
ct_dir="$PWD/target/custom-target"
mkdir -p "$ct_dir"
spec="$ct_dir/x86_64-unknown-mykernel.json"
rustc +nightly -Zunstable-options --print target-spec-json --target x86_64-unknown-none >"$spec"
(
    cd "$check"
    # Outside the root workspace, so the fmt step does not see it.
    cargo fmt --check
    CARGO_TARGET_DIR="$ct_dir" cargo +nightly build --locked --release \
        -Zbuild-std=core -Zjson-target-spec --target "$spec"
)
ct_out="$ct_dir/x86_64-unknown-mykernel/release"
ct_dis=$(for f in "$ct_out"/deps/libstream_hal-*.rlib "$ct_out"/libstream_hal_custom_target_check.rlib; do
    objdump -d -M intel "$f"; done)
ct_movnti=$(grep -c 'movnti' <<<"$ct_dis" || true)
ct_sse=$(grep -cE '\b[xyz]?mm[0-9]+\b|movntdq|movntps|movntpd' <<<"$ct_dis" || true)
ct_sfence=$(grep -c 'sfence' <<<"$ct_dis" || true)
if [ "$ct_movnti" -eq 0 ] || [ "$ct_sse" -ne 0 ] || [ "$ct_sfence" -eq 0 ]; then
    echo "x86_64-unknown-mykernel.json: $ct_movnti movnti, $ct_sfence sfence, $ct_sse SSE instructions (want >0, >0, 0)"
    grep -E '\b[xyz]?mm[0-9]+\b|movntdq|movntps|movntpd' <<<"$ct_dis" | head
    exit 1
fi
echo "x86_64-unknown-mykernel.json (custom target, -Zbuild-std=core): backend x86_64-movnti asserted at compile time;" \
    "$ct_movnti movnti, $ct_sfence sfence, 0 SSE instructions; $(elapsed "$t") s"

downstream
