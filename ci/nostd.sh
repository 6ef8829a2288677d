#!/usr/bin/env bash
# no_std kernel targets build, and x86_64-unknown-none (soft-float: no SSE registers) uses the
# movnti-only path: the library's object code has movnti and no SSE instruction at all.
source "$(dirname "$0")/env.sh"
cargo build --locked -p stream-hal --release --target x86_64-unknown-none
cargo build --locked -p stream-hal --release --target aarch64-unknown-none
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
