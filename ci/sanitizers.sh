#!/usr/bin/env bash
# Sanitizer builds. ASan and TSan must report the generic backend with the sanitizer's name,
# and the ASan run proves the switch matters (a deliberate one-byte overflow through
# memcpy_nontemporal is reported); MSan runs the emulated x86-64 backend. MSan and TSan need an instrumented std (-Zbuild-std); they run in release mode to
# stay fast. None builds criterion (benches only): `--cfg stream_hal_no_bench_deps`.
source "$(dirname "$0")/env.sh"
reclaim target/asan target/msan target/tsan
host=x86_64-unknown-linux-gnu
# Fewer random cases than the host run (which does the full count): the sanitizers check the
# memory accesses of paths the first cases already take (docs/testing.md, "Sizes").
export PROPTEST_CASES="${PROPTEST_CASES:-16}"

echo "--- AddressSanitizer (the crates with unsafe code; the bench's own unit tests, not its CLI tests)"
STREAM_HAL_EXPECT_BACKEND=generic:address RUSTFLAGS="-Zsanitizer=address --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/asan \
    cargo +nightly test --locked --target "$host" --lib --tests \
    -p stream-hal -p stream-par -p memmap-core -p hugetlb-init -p stream-vm-memory -p memmap-dump
STREAM_HAL_EXPECT_BACKEND=generic:address RUSTFLAGS="-Zsanitizer=address --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/asan \
    cargo +nightly test --locked --target "$host" --lib -p memmap-bench

echo "--- MemorySanitizer, on the emulated x86-64 backend"
# With --cfg stream_hal_emulate the x86-64 backend keeps its own code (edge handling, the
# unaligned integer and SSE loads of the source) and MSan sees every byte it reads: a load of
# uninitialized padding is reported. (ASan and TSan above and below check that a sanitizer
# build without the switch falls back to the generic backend.)
STREAM_HAL_EXPECT_BACKEND=x86_64-emulated RUSTFLAGS="-Zsanitizer=memory --cfg stream_hal_emulate --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/msan \
    cargo +nightly test -Zbuild-std --locked --release --target "$host" -p stream-hal --lib --tests

echo "--- ThreadSanitizer"
STREAM_HAL_EXPECT_BACKEND=generic:thread RUSTFLAGS="-Zsanitizer=thread --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -Zbuild-std --locked --release --target "$host" -p stream-hal --lib --tests
# Allocators racing deferred init and on-demand expansion (memmap-core's concurrency tests).
STREAM_HAL_EXPECT_BACKEND=generic:thread RUSTFLAGS="-Zsanitizer=thread --cfg stream_hal_no_bench_deps" CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -Zbuild-std --locked --release --target "$host" -p memmap-core --test concurrency
