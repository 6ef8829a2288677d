#!/usr/bin/env bash
# Concurrency checked by tools (docs/testing.md, "Concurrency").
#
# 1. loom: the spin lock and the block-state machine (`BlockStates::run_once`, `mark_done`,
#    `is_done`) built on loom's atomics (`--cfg memmap_core_loom`, memmap-core's own cfg, which
#    only its own test build reads), every interleaving of the models in
#    crates/memmap-core/src/sync/loom_tests.rs, each access to the data they protect checked
#    against the happens-before order. Exhaustive; the models take well under a second, the
#    build (every dependency again, under the changed RUSTFLAGS) the rest.
# 2. Miri with many seeds: the node's concurrency tests (allocators racing deferred init on
#    padata threads, and racing each other's on-demand expansions) under Miri's data-race
#    detector and weak-memory emulation, one scheduling per seed. Loom cannot run those: the
#    struct pages are raw memory it does not see, and a boot is thousands of lock operations.
#    Shares target/miri-emulate with ci/miri.sh (same RUSTFLAGS), so after that step only the
#    seeds run.
#
# `ci/loom.sh --long` runs 64 Miri seeds instead of 8 (LOOM_SEEDS overrides either).
source "$(dirname "$0")/env.sh"

seeds="${LOOM_SEEDS:-8}"
if [ "${1:-}" = "--long" ]; then
    seeds="${LOOM_SEEDS:-64}"
fi
t() { local s; s=$(date +%s); "$@"; local rc=$?; echo "loom: $(( $(date +%s) - s )) s: ${*: -4}"; return $rc; }
fail=0

t env RUSTFLAGS="--cfg memmap_core_loom" CARGO_TARGET_DIR=target/loom \
    cargo test --locked -p memmap-core --lib sync::loom_tests || fail=1

t env RUSTFLAGS="--cfg stream_hal_emulate" CARGO_TARGET_DIR=target/miri-emulate \
    MIRIFLAGS="-Zmiri-many-seeds=0..$seeds" \
    cargo +nightly miri test --locked -p memmap-core --test concurrency || fail=1

exit $fail
