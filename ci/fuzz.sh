#!/usr/bin/env bash
# cargo-fuzz targets (fuzz/), each for a bounded time on nightly with libFuzzer and ASan, starting
# from the committed corpus (fuzz/corpus/TARGET, read only: new inputs go to a scratch copy).
# Fails on any crash, panic, leak or timeout and prints the input that caused it.
#
# Also replays fuzz/regressions/TARGET/* (inputs that once found a bug) before fuzzing, except
# `*.open` ones: known bugs not fixed yet (fuzz/regressions/README.md), listed but not replayed.
#
# FUZZ_SECONDS (default 30) sets the time per target; installs cargo-fuzz (pinned) if absent.
source "$(dirname "$0")/env.sh"

CARGO_FUZZ_VERSION=0.13.2
FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
targets=(dump_reader size_args zone_device_init node_boot guest_memory)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
    t=$(date +%s)
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
    echo "fuzz: installed cargo-fuzz in $(( $(date +%s) - t ))s"
fi
cargo +nightly --version
cargo fuzz --version

t=$(date +%s)
cargo +nightly fuzz build
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - t ))s"

bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
case "$(uname -m)" in
    aarch64) bin_dir=fuzz/target/aarch64-unknown-linux-gnu/release ;;
esac
work=target/fuzz-work
rm -rf "$work"
failed=()
for target in "${targets[@]}"; do
    mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
    replay=()
    for f in fuzz/regressions/"$target"/*; do
        [ -f "$f" ] || continue
        case "$f" in
            *.open) echo "fuzz: $target: known open bug, not replayed: $f" ;;
            *) replay+=("$f") ;;
        esac
    done
    if [ ${#replay[@]} -gt 0 ]; then
        echo "fuzz: $target: replaying ${#replay[@]} regression input(s)"
        if ! "$bin_dir/$target" -runs=1 "${replay[@]}" >"$work/$target/replay.log" 2>&1; then
            tail -n 40 "$work/$target/replay.log"
            failed+=("$target (regression)")
            continue
        fi
    fi
    echo "fuzz: $target: ${FUZZ_SECONDS}s from $(ls "fuzz/corpus/$target" | wc -l) corpus inputs"
    # Scratch corpus first (libFuzzer writes new inputs there), the committed one read only.
    if "$bin_dir/$target" "$work/$target/corpus" "fuzz/corpus/$target" \
        -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
        -artifact_prefix="$work/$target/artifacts/" >"$work/$target/log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$work/$target/log" \
            | sed "s/^/fuzz: $target: /"
    else
        tail -n 60 "$work/$target/log"
        for f in "$work/$target/artifacts"/*; do
            [ -f "$f" ] || continue
            echo "fuzz: $target: failing input $f (base64):"
            base64 -w0 "$f"
            echo
        done
        failed+=("$target")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (reproduce: cargo +nightly fuzz run TARGET INPUT)"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${FUZZ_SECONDS}s each, no failure"
