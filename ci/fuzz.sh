#!/usr/bin/env bash
# cargo-fuzz targets (fuzz/), each for a bounded time on nightly with libFuzzer and ASan, starting
# from the committed corpus: one archive, fuzz/corpus.tar.xz (TARGET/INPUT files, unpacked into
# target/fuzz-corpus/TARGET and read only there: new inputs go to a scratch copy).
# Fails on any crash, panic, leak or timeout and prints the input that caused it.
#
# Also replays fuzz/regressions/TARGET/* (inputs that once found a bug) before fuzzing, except
# `*.open` ones: known bugs not fixed yet (fuzz/regressions/README.md), listed but not replayed.
#
# FUZZ_SECONDS (default 10) sets the time per target, FUZZ_TIMEOUT (default 20) the seconds one
# input may take; installs cargo-fuzz (pinned) if absent.
#
# `ci/fuzz.sh --long [TARGET...]` is the run that finds things, outside the CI budget: 600 s per
# target by default (FUZZ_SECONDS still overrides), one target at a time (libFuzzer uses one
# core), the given targets only if any are named. It keeps what it found: each target's scratch
# corpus is merged into its unpacked corpus and minimized (`cargo fuzz cmin`), so the committed
# corpus grows only by inputs that add coverage, and fuzz/corpus.tar.xz is packed again from the
# result; commit it. A failing input is left in
# target/fuzz-work/TARGET/artifacts: copy it into fuzz/regressions/TARGET/ (see the README there).
source "$(dirname "$0")/env.sh"
reclaim fuzz/target

CARGO_FUZZ_VERSION=0.13.2
long=0
if [ "${1:-}" = "--long" ]; then
    long=1
    shift
fi
FUZZ_SECONDS="${FUZZ_SECONDS:-$([ "$long" = 1 ] && echo 600 || echo 10)}"
# A unit slower than this is a failure (a hang). The long runs allow more: on a machine shared
# with compilers, a unit of a fraction of a second has been seen to take 26 s.
FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-$([ "$long" = 1 ] && echo 60 || echo 20)}"
targets=(dump_reader size_args zone_device_init node_boot)
targets+=(oracle_check guest_memory oracle_readers)
if [ $# -gt 0 ]; then
    targets=("$@")
fi

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

# The committed corpus, unpacked (fuzz/corpus.tar.xz holds TARGET/INPUT files).
corpus_root=target/fuzz-corpus
rm -rf "$corpus_root"
mkdir -p "$corpus_root"
tar -xJf fuzz/corpus.tar.xz -C "$corpus_root"
echo "fuzz: corpus: $(find "$corpus_root" -type f | wc -l) inputs unpacked from fuzz/corpus.tar.xz ($(( $(stat -c %s fuzz/corpus.tar.xz) / 1024 )) KiB)"

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
    corpus="$corpus_root/$target"
    mkdir -p "$corpus"
    echo "fuzz: $target: ${FUZZ_SECONDS}s from $(ls "$corpus" | wc -l) corpus inputs"
    t=$(date +%s)
    # Scratch corpus first (libFuzzer writes new inputs there), the committed one read only.
    if "$bin_dir/$target" "$work/$target/corpus" "$corpus" \
        -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout="$FUZZ_TIMEOUT" -print_final_stats=1 \
        -artifact_prefix="$work/$target/artifacts/" >"$work/$target/log" 2>&1; then
        # The coverage reached on the committed corpus (INITED) and at the end (the last line).
        grep -E '^(#[0-9]+[[:space:]]+INITED|Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' \
            "$work/$target/log" | sed "s/^/fuzz: $target: /"
        grep -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|DONE)' "$work/$target/log" | tail -n 1 | sed "s/^/fuzz: $target: last: /"
        echo "fuzz: $target: ran $(( $(date +%s) - t ))s"
        if [ "$long" = 1 ]; then
            # Keep what the run found, minimized: scratch and committed inputs together, then
            # cmin (libFuzzer -merge=1) down to the inputs that add coverage.
            before=$(ls "$corpus" | wc -l)
            cp -n "$work/$target/corpus"/* "$corpus/" 2>/dev/null || true
            cargo +nightly fuzz cmin "$target" "$PWD/$corpus" >"$work/$target/cmin.log" 2>&1 || {
                tail -n 40 "$work/$target/cmin.log"
                failed+=("$target (cmin)")
                continue
            }
            grep -E 'MERGE-OUTER: [0-9]+ new files' "$work/$target/cmin.log" | sed "s/^/fuzz: $target: cmin: /"
            echo "fuzz: $target: corpus $before inputs before, $(ls "$corpus" | wc -l) after cmin"
        fi
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
if [ "$long" = 1 ]; then
    # Deterministic archive: sorted names, no owners or times.
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$corpus_root" -cf - . \
        | xz -9 -T1 > fuzz/corpus.tar.xz
    echo "fuzz: packed $(find "$corpus_root" -type f | wc -l) inputs into fuzz/corpus.tar.xz ($(( $(stat -c %s fuzz/corpus.tar.xz) / 1024 )) KiB): commit it"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (reproduce: cargo +nightly fuzz run TARGET INPUT)"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${FUZZ_SECONDS}s each, no failure"
