#!/usr/bin/env bash
# Miri on the real backends' logic: with `--cfg stream_hal_emulate` the x86-64 and aarch64
# backends keep all of their Rust code (address arithmetic, alignment steps, edges, the loads of
# the source) and only their instructions become ordinary accesses, so Miri checks that code.
# x86-64 under Stacked Borrows (the default) here, aarch64 under Tree Borrows in ci/miri-hal.sh
# (with the plain run that checks stream-hal switches itself to the generic backend under
# Miri); the heavy suites run once, on x86-64.
source "$(dirname "$0")/env.sh"
reclaim target/miri-emulate
t() { local s; s=$(date +%s); "$@"; local rc=$?; echo "miri: $(( $(date +%s) - s )) s: ${*: -6}"; return $rc; }
fail=0

# The emulated backends. One target directory per RUSTFLAGS value keeps the builds apart.
# (criterion, for the benches only, is left out: `stream_hal_no_bench_deps`.)
export RUSTFLAGS="--cfg stream_hal_emulate --cfg stream_hal_no_bench_deps"
export CARGO_TARGET_DIR=target/miri-emulate
# stream-hal, x86-64: the unit tests, the backend and CPU-feature checks and the differential
# copies at every alignment (clear_pages with rep stosb / movntdq / clzero), Stacked Borrows and
# strict provenance (no integer-to-pointer cast in the backends' logic). The property tests
# (the same routines on random inputs) run natively, under ASan and under qemu-user; under Miri
# they cost about 140 s (`--test proptests` to add them). The doctests run natively in the
# test step (under Miri each is a build of its own).
t env MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test --locked -p stream-hal --lib \
    --test backend --test cpu_features --test differential --test asan_oob || fail=1
# (stream-hal's aarch64 backend under Tree Borrows is ci/miri-hal.sh, a step of the other lane.)
# memmap-core on the emulated x86-64 backend: its suite scales itself down under Miri (small
# memmaps, few proptest cases); drain_on_unwind checks the drain when a hook panics mid-stream.
# Doctests run natively in the test step. stream-par: the padata split and runner.
t cargo +nightly miri test --locked -p memmap-core -p stream-par --lib --tests || fail=1
# (memmap-core on the emulated aarch64 backend, Tree Borrows, is outside the CI budget:
# MIRIFLAGS="-Zmiri-tree-borrows" cargo +nightly miri test -p memmap-core --target aarch64-unknown-linux-gnu
#   --test equivalence --test kernel_releases --test drain_on_unwind; the aarch64 backend's own
# code runs under Tree Borrows in ci/miri-hal.sh.)
# hugetlb-init: the unit tests and the Template/Streaming-equal-Slow property test on small
# configurations (2 MiB folios); the real memfd HVO is cfg(not(miri)).
t cargo +nightly miri test --locked -p hugetlb-init --lib --test equivalence || fail=1
exit $fail
