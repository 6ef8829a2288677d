#!/usr/bin/env bash
# Miri on the generic paths, interpreted as x86-64 and as aarch64.
source "$(dirname "$0")/env.sh"
export MIRIFLAGS="${MIRIFLAGS:-}"
# Miri runs the aarch64 target itself: the qemu runner from env.sh must not wrap it.
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
STREAM_HAL_EXPECT_BACKEND=generic:miri cargo +nightly miri test --locked -p stream-hal
# Under Miri both targets run the same generic backend: the aarch64 run checks the target's
# cfg paths and the backend selection; the copy differential and property tests run once, above.
STREAM_HAL_EXPECT_BACKEND=generic:miri cargo +nightly miri test --locked -p stream-hal --target aarch64-unknown-linux-gnu \
    --lib --test backend --test asan_oob
# memmap-core's suite scales itself down under Miri (cfg!(miri)): small memmaps, few proptest cases.
STREAM_HAL_EXPECT_BACKEND=generic:miri cargo +nightly miri test --locked -p memmap-core
# hugetlb-init: the unit tests and the Template/Streaming-equal-Slow property test on small
# configurations (2 MiB folios). The s6_5 check list (hundreds of thousands of struct pages)
# runs natively, under qemu-aarch64 and under ASan instead; the real memfd HVO is cfg(not(miri)).
STREAM_HAL_EXPECT_BACKEND=generic:miri cargo +nightly miri test --locked -p hugetlb-init --lib --test equivalence
