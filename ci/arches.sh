#!/usr/bin/env bash
# stream-hal on the architectures beyond x86-64 and aarch64 under qemu-user (aarch64's tests, with
# and without FEAT_MOPS, run in ci/cross.sh with the whole workspace):
#
# * riscv64 (real `ntl.all` stores, `fence w, rw`, and `cbo.zero` through `riscv_hwprobe`):
#   stream-hal's unit and integration tests twice, with `-cpu rv64,zicboz=true` (Zicboz with
#   64-byte blocks must be detected and used) and `zicboz=false` (it must not be: the safe
#   feature API must refuse the claim, and the unsafe claim in a child process must SIGILL);
# * ppc64le (`dcbz` with the kernel's AT_DCACHEBSIZE, `sync`): the same tests;
# * loongarch64 (the generic backend): the baremetal-tests checks as a Linux user-mode program
#   (no loongarch64 C library or standard library exists here to run the test suite);
# * memmap-core and hugetlb-init on riscv64 and ppc64le, fewer property cases than the host run;
# * x86-64: the safe-CPU-features regression test under `qemu-x86_64 -cpu Skylake-Client`
#   (no CLZERO);
# * clippy for the new targets, the instruction checks (cbo.zero in the riscv64 code, only in
#   its cbo.zero path, none with --cfg stream_hal_force_generic; dcbz in the ppc64le code; the
#   MOPS memory sets in the aarch64 code only in its two MOPS clears, none force-generic).
#
# qemu-user is QEMU 10 or newer (ci/setup.sh: bookworm's 7.2 knows no Zicboz, no riscv_hwprobe
# and no FEAT_MOPS).
source "$(dirname "$0")/env.sh"
reclaim target/debug target/force-generic target/loongarch64-none \
    target/riscv64gc-unknown-linux-gnu target/powerpc64le-unknown-linux-gnu target/aarch64-unknown-linux-gnu \
    target/riscv64gc-unknown-none-elf
root=$PWD
now() { date +%s%N; }
elapsed() { local ds=$(( ($(now) - $1) / 100000000 )); echo "$(( ds / 10 )).$(( ds % 10 ))"; }
step_start=$(now)
# Fewer random cases under emulation; the host run does the full count.
export PROPTEST_CASES="${PROPTEST_CASES:-16}"
# Emulated code at opt-level 2: half the run time of the test profile's 1, for a tenth more build
# time; debug assertions and overflow checks stay on.
export CARGO_PROFILE_TEST_OPT_LEVEL=2
# criterion is only needed by the benchmarks, which are not built here (see stream-hal's
# Cargo.toml); RUSTFLAGS apply to the cross targets only, so host artifacts are shared.
export RUSTFLAGS="--cfg stream_hal_no_bench_deps"
export CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER=riscv64-linux-gnu-gcc
export CARGO_TARGET_POWERPC64LE_UNKNOWN_LINUX_GNU_LINKER=powerpc64le-linux-gnu-gcc

# --- builds and lints -------------------------------------------------------------------------
t=$(now)
for target in riscv64gc-unknown-linux-gnu powerpc64le-unknown-linux-gnu; do
    cargo test --locked -p stream-hal --target "$target" --lib --tests --no-run
    cargo clippy --locked -p stream-hal --target "$target" --lib --tests -- -D warnings
done
# The emulated riscv64 and powerpc64 backends (what Miri runs) and the bare-metal riscv64 build.
RUSTFLAGS="$RUSTFLAGS --cfg stream_hal_emulate" cargo clippy --locked -p stream-hal --target riscv64gc-unknown-linux-gnu --lib --tests -- -D warnings
RUSTFLAGS="$RUSTFLAGS --cfg stream_hal_emulate" cargo clippy --locked -p stream-hal --target powerpc64le-unknown-linux-gnu --lib --tests -- -D warnings
RUSTFLAGS="$RUSTFLAGS --cfg stream_hal_no_cpuid" cargo clippy --locked -p stream-hal --target riscv64gc-unknown-none-elf -- -D warnings
# aarch64's clippy is ci/clippy.sh's; its tests run in ci/cross.sh.
echo "arches: riscv64, ppc64le and aarch64 test builds, riscv64 and ppc64le clippy in $(elapsed "$t") s"

# --- runs -------------------------------------------------------------------------------------
failed=0
# run_tests TARGET BACKEND FEATURES QEMU...: stream-hal's lib and integration tests under QEMU.
run_tests() {
    local target=$1 backend=$2 features=$3 t var
    shift 3
    var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$target")_RUNNER"
    t=$(now)
    echo "arches: $target under $*: expecting backend $backend, features $features"
    if env "$var=$*" STREAM_HAL_EXPECT_BACKEND="$backend" \
            STREAM_HAL_EXPECT_FEATURES="$features" "${extra_env[@]}" \
            cargo test --locked -p stream-hal --target "$target" --lib --tests 2>&1 | tee "$log" |
            grep -E '^test result|FAILED|panicked|error'; then :; fi
    if ! grep -q '^test result' "$log" || grep -qE '^test result: FAILED|error: test failed|could not compile' "$log"; then
        echo "arches: FAILED: $target under $* (log: $log)"; failed=1
    fi
    echo "arches: $target under $*: $(grep -c '^test .* ok$' "$log") tests passed in $(elapsed "$t") s"
}
mkdir -p target/arches
log=target/arches/riscv64-zicboz.log extra_env=()
run_tests riscv64gc-unknown-linux-gnu riscv64 zicboz=64 qemu-riscv64 -cpu rv64,zicboz=true -L /usr/riscv64-linux-gnu
log=target/arches/riscv64-no-zicboz.log extra_env=(STREAM_HAL_EXPECT_NO_OPTIONAL_FEATURES=1)
run_tests riscv64gc-unknown-linux-gnu riscv64 zicboz=none qemu-riscv64 -cpu rv64,zicboz=false -L /usr/riscv64-linux-gnu
# (With STREAM_HAL_EXPECT_NO_OPTIONAL_FEATURES the cpu_features test also requires the unsafe
# claim in its child process to die of SIGILL.)
log=target/arches/ppc64le.log extra_env=()
run_tests powerpc64le-unknown-linux-gnu powerpc64 dcbz=128 qemu-ppc64le -L /usr/powerpc64le-linux-gnu

# memmap-core and hugetlb-init (their streaming fast paths equal to the slow path, the node
# boot, deferred init, hotplug) on the riscv64 and ppc64le backends (aarch64's: ci/cross.sh).
# run_crates TARGET BACKEND QEMU...: the crates' lib and integration tests under QEMU.
run_crates() {
    local target=$1 backend=$2 t var crates=(-p memmap-core -p hugetlb-init)
    shift 2
    var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$target")_RUNNER"
    t=$(now)
    if env "$var=$*" STREAM_HAL_EXPECT_BACKEND="$backend" \
            cargo test --locked "${crates[@]}" --target "$target" --lib --tests --no-fail-fast 2>&1 | tee "$log" |
            grep -E '^test result: FAILED|FAILED|panicked|^error'; then :; fi
    if ! grep -q '^test result' "$log" || grep -qE '^test result: FAILED|error: test failed|could not compile' "$log"; then
        echo "arches: FAILED: ${crates[*]} on $target under $* (log: $log)"; failed=1
    fi
    echo "arches: ${crates[*]} on $target: $(grep -c '^test .* ok$' "$log") tests passed in $(elapsed "$t") s (with the build)"
}
log=target/arches/riscv64-crates.log
run_crates riscv64gc-unknown-linux-gnu riscv64 qemu-riscv64 -cpu rv64,zicboz=true -L /usr/riscv64-linux-gnu
log=target/arches/ppc64le-crates.log
run_crates powerpc64le-unknown-linux-gnu powerpc64 qemu-ppc64le -L /usr/powerpc64le-linux-gnu

# x86-64 without CLZERO: the host build's test binary, with the test step's flags (shared with it).
t=$(now)
bin=$(env -u RUSTFLAGS -u CARGO_PROFILE_TEST_OPT_LEVEL cargo test --locked -p stream-hal --test cpu_features --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
runner="qemu-x86_64 -cpu Skylake-Client"
if STREAM_HAL_EXPECT_NO_OPTIONAL_FEATURES=1 CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$runner" $runner "$bin" --nocapture \
        >target/arches/x86_64-skylake.log 2>&1 && grep -q 'SIGILL, as expected' target/arches/x86_64-skylake.log; then
    echo "arches: x86-64 -cpu Skylake-Client: the safe claim of clzero was refused and 1-2 MiB clears ran; the unsafe one died of SIGILL ($(elapsed "$t") s)"
else
    cat target/arches/x86_64-skylake.log; echo "arches: FAILED: x86-64 safe-feature regression"; failed=1
fi

# loongarch64: nightly with -Zbuild-std (rustup has no loongarch64 standard library here).
t=$(now)
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || true
(
    cd crates/baremetal-tests
    # The flags of ci/nostd.sh's build, which shares this target directory (else core is
    # rebuilt). stream-hal's switch comes from .cargo/config.toml's `[env]`
    # (STREAM_HAL_NO_CPUID), which a RUSTFLAGS would not replace anyway.
    unset RUSTFLAGS
    # Shared with ci/nostd.sh's loongarch64 build of the example kernel: core is built once.
    export CARGO_TARGET_DIR="$root/target/loongarch64-none"
    # No clippy here: with -Zbuild-std it rebuilds core under clippy-driver (73 s measured).
    # `cargo +nightly clippy -Zbuild-std=core --target loongarch64-unknown-none -- -D warnings`
    # in crates/baremetal-tests passes; the module's code is plain syscalls and the shared checks.
    cargo +nightly build --locked --release -Zbuild-std=core -Zbuild-std-features=compiler-builtins-mem \
        --target loongarch64-unknown-none
)
la=target/loongarch64-none/loongarch64-unknown-none/release/baremetal-tests
# The console writes CR LF (it is the kernels' serial console): drop the CRs.
if timeout 300 qemu-loongarch64 "$la" 2>&1 | sed 's/\r$//' >target/arches/loongarch64.log &&
        grep -q '^stream-hal backend: generic (generic (loongarch64 has no streaming store' target/arches/loongarch64.log &&
        grep -qE '^summary: [1-9][0-9]* passed, 0 failed$' target/arches/loongarch64.log; then
    echo "arches: loongarch64 (generic backend) under qemu-loongarch64: $(grep '^summary' target/arches/loongarch64.log) ($(elapsed "$t") s with the build)"
else
    cat target/arches/loongarch64.log; echo "arches: FAILED: loongarch64"; failed=1
fi

# --- instructions -----------------------------------------------------------------------------
# binutils 2.40 prints cbo.zero as `.4byte 0x..`: match the encoding (funct12 = 4, funct3 = 2,
# rd = 0, opcode MISC-MEM) on every 32-bit word, per function.
cbo_per_function() {
    riscv64-linux-gnu-objdump -d "$1" | perl -ne '
        if (/^[0-9a-f]+ <(.*)>:$/) { $f = $1; next }
        if (/^\s+[0-9a-f]+:\s+([0-9a-f]{8})\s/ && (hex($1) & 0xfff07fff) == 0x0040200f) { $n{$f}++ }
        END { print "$n{$_} $_\n" for sort keys %n }'
}
t=$(now)
# The release library (every public entry point compiled, as a user's build gets it; the test
# binaries only hold what their tests call).
cargo build --locked -p stream-hal --release --target riscv64gc-unknown-linux-gnu
rv_bin=target/riscv64gc-unknown-linux-gnu/release/libstream_hal.rlib
rv_cbo=$(cbo_per_function "$rv_bin")
# Present in the cbo.zero clear; absent from the copy and the hinted-store clear (the path
# taken without Zicboz).
if ! grep -q 'cbo_zero' <<<"$rv_cbo" || grep -qE 'clear_ntl|memcpy_nontemporal' <<<"$rv_cbo"; then
    echo "arches: FAILED: cbo.zero must be in clear_cbo_zero and not in clear_ntl or memcpy_nontemporal ($rv_bin):"
    echo "$rv_cbo"; failed=1
fi
ntl=$(riscv64-linux-gnu-objdump -d "$rv_bin" | grep -cE 'add\s+zero,zero,t0|ntl\.all' || true)
rv_fence=$(riscv64-linux-gnu-objdump -d "$rv_bin" | grep -cE 'fence\s+w,rw' || true)
RUSTFLAGS="$RUSTFLAGS --cfg stream_hal_force_generic" CARGO_TARGET_DIR=target/force-generic \
    cargo build --locked -p stream-hal --release --target riscv64gc-unknown-linux-gnu
fg_cbo=$(cbo_per_function target/force-generic/riscv64gc-unknown-linux-gnu/release/libstream_hal.rlib)
if [ -n "$fg_cbo" ]; then echo "arches: FAILED: cbo.zero in the force-generic riscv64 build: $fg_cbo"; failed=1; fi
cargo build --locked -p stream-hal --release --target powerpc64le-unknown-linux-gnu
pp_bin=target/powerpc64le-unknown-linux-gnu/release/libstream_hal.rlib
dcbz=$(powerpc64le-linux-gnu-objdump -d "$pp_bin" | grep -cE '\sdcbz\s' || true)
pp_sync=$(powerpc64le-linux-gnu-objdump -d "$pp_bin" | grep -cE '\s(sync|hwsync)$' || true)
if [ "$dcbz" -eq 0 ] || [ "$ntl" -eq 0 ] || [ "$rv_fence" -eq 0 ] || [ "$pp_sync" -eq 0 ]; then
    echo "arches: FAILED: riscv64 $ntl ntl.all, $rv_fence fence w,rw; ppc64le $dcbz dcbz, $pp_sync sync (want all > 0)"; failed=1
fi
echo "arches: riscv64 library: $(awk '{s+=$1} END {print s+0}' <<<"$rv_cbo") cbo.zero in $(wc -l <<<"$rv_cbo") functions (none in clear_ntl or memcpy_nontemporal), $ntl ntl.all," \
    "$rv_fence fence w,rw; force-generic riscv64 build: 0 cbo.zero; ppc64le: $dcbz dcbz, $pp_sync sync ($(elapsed "$t") s)"
# aarch64: the MOPS memory sets (SETP/SETM/SETE and the non-temporal SETPN/SETMN/SETEN), matched by
# encoding (sz = 00, 011 0 01 11 0, bits 11:10 = 01: mask 0xffe00c00, value 0x19c00400), per
# function: only in clear_mops and clear_mops_nt; none in the force-generic build.
mops_per_function() {
    aarch64-linux-gnu-objdump -d "$1" | perl -ne '
        if (/^[0-9a-f]+ <(.*)>:$/) { $f = $1; next }
        if (/^\s+[0-9a-f]+:\s+([0-9a-f]{8})\s/ && (hex($1) & 0xffe00c00) == 0x19c00400) { $n{$f}++ }
        END { print "$n{$_} $_\n" for sort keys %n }'
}
t=$(now)
cargo build --locked -p stream-hal --release --target aarch64-unknown-linux-gnu
a64_mops=$(mops_per_function target/aarch64-unknown-linux-gnu/release/libstream_hal.rlib)
if [ "$(grep -cE 'clear_mops(_nt)?17h' <<<"$a64_mops" || true)" -ne 2 ] || grep -vqE 'clear_mops(_nt)?17h' <<<"$a64_mops"; then
    echo "arches: FAILED: the MOPS memory sets must be in clear_mops and clear_mops_nt and nowhere else:"
    echo "$a64_mops"; failed=1
fi
RUSTFLAGS="$RUSTFLAGS --cfg stream_hal_force_generic" CARGO_TARGET_DIR=target/force-generic \
    cargo build --locked -p stream-hal --release --target aarch64-unknown-linux-gnu
fg_mops=$(mops_per_function target/force-generic/aarch64-unknown-linux-gnu/release/libstream_hal.rlib)
if [ -n "$fg_mops" ]; then echo "arches: FAILED: MOPS memory sets in the force-generic aarch64 build: $fg_mops"; failed=1; fi
echo "arches: aarch64 library: $(awk '{s+=$1} END {print s+0}' <<<"$a64_mops") MOPS memory-set instructions, all in clear_mops and" \
    "clear_mops_nt; force-generic aarch64 build: none ($(elapsed "$t") s)"

echo "arches: step time $(elapsed "$step_start") s"
if [ "$failed" -ne 0 ]; then echo "arches: FAILED"; exit 1; fi
echo "arches: riscv64 (Zicboz on and off), ppc64le, loongarch64, the aarch64 object code and the x86-64 regression passed"
