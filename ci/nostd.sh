#!/usr/bin/env bash
# no_std kernel targets build, and x86_64-unknown-none (soft-float: no SSE registers) uses the
# movnti-only path: the library's object code has movnti and no SSE instruction at all.
# memmap-core and hugetlb-init build without their default `std` feature for both -none
# targets (the recipe in their crate docs). A custom target JSON (x86_64-unknown-none's
# specification under a name no target parser knows) built with nightly -Zbuild-std=core gets
# the same movnti-only streaming backend.
source "$(dirname "$0")/env.sh"
reclaim target/x86_64-unknown-none target/aarch64-unknown-none target/riscv64gc-unknown-none-elf \
    target/loongarch64-none target/custom-target
root=$PWD
now() { date +%s%N; }
elapsed() { local ds=$(( ($(now) - $1) / 100000000 )); echo "$(( ds / 10 )).$(( ds % 10 ))"; }

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
