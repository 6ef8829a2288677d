#!/usr/bin/env bash
# stream-hal on bare metal: builds the test kernels of crates/baremetal-tests for
# x86_64-unknown-none, aarch64-unknown-none and riscv64gc-unknown-none-elf, boots each under QEMU
# (TCG; riscv64 twice, with Zicboz on and off), and checks the exit status and the lines the
# kernel prints on its serial port. Also checks that the x86-64 kernel has movnti and no SSE
# instruction, that the aarch64 kernel has dc zva and stnp, and that the riscv64 kernel has
# cbo.zero and the ntl.all hints.
source "$(dirname "$0")/env.sh"

# Seconds before a kernel that has not exited counts as hung (a run takes 5-20 s).
TIMEOUT="${BAREMETAL_TIMEOUT:-300}"
crate=crates/baremetal-tests
out="$crate/target/qemu"
step_start=$(date +%s)
now() { date +%s%N; }
elapsed() { local ds=$(( ($(now) - $1) / 100000000 )); echo "$(( ds / 10 )).$(( ds % 10 ))"; }

# --- tools --------------------------------------------------------------------------------------
t=$(now)
# QEMU 10 and the binutils come from ci/setup.sh.
rustup target add x86_64-unknown-none aarch64-unknown-none riscv64gc-unknown-none-elf
qemu-system-x86_64 --version | head -1
qemu-system-aarch64 --version | head -1
qemu-system-riscv64 --version | head -1
echo "baremetal: tools ready in $(elapsed "$t") s"

# --- build --------------------------------------------------------------------------------------
# The crate is outside the root workspace (own lockfile; kernel-only targets), so the root fmt
# and clippy steps do not see it: check it here. Its .cargo/config.toml is read from its directory.
t=$(now)
(
    cd "$crate"
    cargo fmt --check
    for target in x86_64-unknown-none aarch64-unknown-none riscv64gc-unknown-none-elf; do
        cargo clippy --locked --release --target "$target" -- -D warnings
        cargo build --locked --release --target "$target"
    done
)
x86_kernel="$crate/target/x86_64-unknown-none/release/baremetal-tests"
arm_kernel="$crate/target/aarch64-unknown-none/release/baremetal-tests"
rv_kernel="$crate/target/riscv64gc-unknown-none-elf/release/baremetal-tests"
echo "baremetal: kernels built and linted in $(elapsed "$t") s"

# --- instructions in the kernels ----------------------------------------------------------------
dis=$(objdump -d -M intel "$x86_kernel")
movnti=$(grep -c 'movnti' <<<"$dis" || true)
sse=$(grep -cE '\b[xyz]?mm[0-9]+\b|movntdq|movntps|movntpd|[ls]dmxcsr|fxsave|fxrstor|xsave|emms' <<<"$dis" || true)
if [ "$movnti" -eq 0 ] || [ "$sse" -ne 0 ]; then
    echo "baremetal: x86-64 kernel: $movnti movnti, $sse SSE/MMX instructions (want >0 and 0)"
    grep -E '\b[xyz]?mm[0-9]+\b|movntdq|movntps|movntpd|[ls]dmxcsr|fxsave|fxrstor|xsave|emms' <<<"$dis" | head
    exit 1
fi
echo "baremetal: x86-64 kernel: $movnti movnti, 0 SSE/MMX instructions"
adis=$(aarch64-linux-gnu-objdump -d "$arm_kernel")
stnp=$(grep -c 'stnp' <<<"$adis" || true)
zva=$(grep -cE 'dc[[:space:]]+zva' <<<"$adis" || true)
if [ "$stnp" -eq 0 ] || [ "$zva" -eq 0 ]; then
    echo "baremetal: aarch64 kernel: $stnp stnp, $zva dc zva (want both >0)"; exit 1
fi
echo "baremetal: aarch64 kernel: $stnp stnp, $zva dc zva"
rdis=$(riscv64-linux-gnu-objdump -d "$rv_kernel")
# binutils 2.40 prints cbo.zero as a raw word (and ntl.all as `add zero,zero,t0`): match the
# encoding.
cbo=$(perl -ne '$n++ if /^\s+[0-9a-f]+:\s+([0-9a-f]{8})\s/ && (hex($1) & 0xfff07fff) == 0x0040200f; END { print $n+0 }' <<<"$rdis")
ntl=$(grep -cE 'add\s+zero,zero,t0' <<<"$rdis" || true)
if [ "$cbo" -eq 0 ] || [ "$ntl" -eq 0 ]; then
    echo "baremetal: riscv64 kernel: $cbo cbo.zero, $ntl ntl.all (want both >0)"; exit 1
fi
echo "baremetal: riscv64 kernel: $cbo cbo.zero, $ntl ntl.all"

# --- runs ---------------------------------------------------------------------------------------
mkdir -p "$out"
failed=0

# run NAME EXPECTED_STATUS QEMU_ARGS...: boots a kernel with a timeout, echoes its serial output
# (carriage returns removed) and keeps it in $out/NAME.log; returns 1 on a wrong exit status.
run() {
    local name=$1 expect=$2 t status
    shift 2
    t=$(now)
    echo "baremetal: $name: $*"
    set +e
    timeout --kill-after=10 "$TIMEOUT" "$@" </dev/null 2>&1 | sed -u 's/\r$//' | tee "$out/$name.log"
    status=${PIPESTATUS[0]}
    set -e
    echo "baremetal: $name: QEMU exited with $status in $(elapsed "$t") s"
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        echo "baremetal: $name: FAILED: no exit within $TIMEOUT s (hung)"
        return 1
    fi
    if [ "$status" -ne "$expect" ]; then
        echo "baremetal: $name: FAILED: exit status $status, expected $expect"
        return 1
    fi
}

# expect NAME REGEX...: every extended regex matches a line of NAME's log.
expect() {
    local name=$1 re ok=0
    shift
    for re in "$@"; do
        if ! grep -qE "$re" "$out/$name.log"; then
            echo "baremetal: $name: FAILED: no line matches: $re"
            ok=1
        fi
    done
    if grep -q 'FAIL' "$out/$name.log"; then
        echo "baremetal: $name: FAILED: the kernel reported failures:"
        grep 'FAIL' "$out/$name.log" | head -20
        ok=1
    fi
    return $ok
}

summary_re='^summary: [1-9][0-9]* passed, 0 failed$'

# x86-64: PVH boot; isa-debug-exit turns the kernel's pass value 0x10 into exit status 33.
if run x86_64 33 qemu-system-x86_64 -accel tcg -machine q35 -cpu max -m 1G -smp 1 -nic none \
        -display none -no-reboot -serial stdio -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
        -kernel "$x86_kernel"; then
    # From 512 MiB: clzero where CPUID has it, else rep stosb on an AMD vendor, else movnti.
    if grep -qE '^cpuid: .* clzero yes' "$out/x86_64.log"; then clear=clzero large=clzero
    elif grep -qE '^cpuid: vendor (AuthenticAMD|HygonGenuine),' "$out/x86_64.log"; then clear=movnti large='rep stosb'
    else clear=movnti large=movnti; fi
    expect x86_64 \
        '^stream-hal backend: x86_64-movnti ' \
        "^stream-hal streaming clear method: $clear\$" \
        '^check clear_pages 255 pages \[rep stosb\]: ok' \
        "^check clear_pages 256 pages \\[$clear\\]: ok" \
        "^check clear_pages 131072 pages \\[$large\\]: ok" \
        '^check fill_with 64-byte records patched per index: ok' \
        "$summary_re" '^result: PASS$' || failed=1
else
    failed=1
fi

# aarch64: entered at EL2 (virtualization=on); semihosting SYS_EXIT gives status 0 on a pass.
if run aarch64 0 qemu-system-aarch64 -accel tcg -machine virt,virtualization=on -cpu max -m 1G -smp 1 \
        -nic none -display none -serial stdio -semihosting-config enable=on,target=native \
        -kernel "$arm_kernel"; then
    expect aarch64 \
        '^stream-hal backend: aarch64 ' \
        '^boot: entered at EL2, kernel runs at EL1$' \
        '^pass 1 of 2: .*\(TDZ = 0\): DCZID_EL0 = 0x[0-9a-f]+ \(BS = [0-9]+: [0-9]+-byte blocks, DZP = 0\): clear_pages uses dc zva$' \
        '^pass 2 of 2: .*\(TDZ = 1\): DCZID_EL0 = 0x[0-9a-f]+ \(BS = [0-9]+: [0-9]+-byte blocks, DZP = 1\): clear_pages uses stnp$' \
        '^check \[pass 1\] clear_pages 256 pages \[dc zva\]: ok' \
        '^check \[pass 2\] clear_pages 256 pages \[stnp\]: ok' \
        '^check \[pass 2\] clear_streaming 4096 pages \[stnp\]: ok' \
        '^check \[pass 2\] fill_with 64-byte records patched per index: ok' \
        "$summary_re" '^result: PASS$' || failed=1
else
    failed=1
fi

# riscv64: M-mode without firmware (-bios none); the SiFive test device gives status 0 on a
# pass. With Zicboz the clears must use cbo.zero, without it they must not (a cbo.zero there
# is an illegal instruction, which the kernel's trap handler turns into a failed run).
for zicboz in true false; do
    if [ "$zicboz" = true ]; then
        method=cbo.zero dt='^device tree: hart 0 has zicboz, riscv,cboz-block-size = 64$'
    else
        method=write_bytes dt='^device tree: hart 0 has no zicboz$'
    fi
    name="riscv64-zicboz-$zicboz"
    if run "$name" 0 qemu-system-riscv64 -machine virt -cpu "rv64,zicboz=$zicboz" -m 1G -smp 1 -nic none \
            -display none -serial stdio -bios none -kernel "$rv_kernel"; then
        expect "$name" \
            '^stream-hal backend: riscv64 ' "$dt" "^check clear_cached uses $method: ok\$" \
            "^check clear_cached 256 pages \\[$method\\]: ok" \
            '^check clear_streaming 4096 pages \[ntl.all sd\]: ok' \
            '^check fill_with 64-byte records patched per index: ok' \
            "$summary_re" '^result: PASS$' || failed=1
        if [ "$zicboz" = true ]; then
            expect "$name" '^check clear_pages 1 pages \[cbo.zero\]: ok' || failed=1
        else
            expect "$name" '^check clear_pages 1 pages \[write_bytes\]: ok' \
                '^check clear_pages 256 pages \[ntl.all sd\]: ok' || failed=1
        fi
    else
        failed=1
    fi
done

echo "baremetal: step time $(( $(date +%s) - step_start )) s"
if [ "$failed" -ne 0 ]; then
    echo "baremetal: FAILED (serial logs in $out)"
    exit 1
fi
echo "baremetal: all kernels passed (x86-64, aarch64, riscv64 with and without Zicboz)"
