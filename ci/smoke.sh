#!/usr/bin/env bash
# The main program end to end, CI-sized: the commands of the README's quick start and of
# docs/bench-cli.md with --quick (the full-size run is measured in docs/performance/suite.txt):
# the suite's text (at most 120 columns, a verdict per scenario), the docs/results.* command with
# the JSON validated against the report's schema (provenance included), output flags before the
# subcommand with a memory budget, the custom-strategy example, and a dump/diff round trip.
source "$(dirname "$0")/env.sh"
out=target/ci-smoke
mkdir -p "$out"
cargo build --locked --release -p memmap-bench --bin memmap-bench --example custom_strategy --example clear_methods
cargo build --locked --release -p stream-vm-memory --example reset_sweep
bin=./target/release/memmap-bench

# README: cargo run --release -p memmap-bench (here with --quick).
cargo run --locked --release -q -p memmap-bench -- --quick > "$out/quick.txt"
awk 'length($0) > 120 { print "line over 120 columns: " $0; bad = 1 } END { exit bad }' "$out/quick.txt"
verdicts=$(grep -c '^  verdict: ' "$out/quick.txt")
[ "$verdicts" -ge 10 ] || { echo "expected a verdict per scenario, got $verdicts"; exit 1; }
grep -q '^summary (' "$out/quick.txt"

# docs/bench-cli.md: the command that regenerates docs/results.* (here with --quick, into $out).
cargo run --locked --release -q -p memmap-bench -- --quick --json --plot "$out/results.svg" --force \
    > "$out/results.json" 2> "$out/results.txt"
python3 -m pip install --quiet --disable-pip-version-check 'jsonschema>=4.18' >/dev/null 2>&1 \
    || python3 -m pip install --quiet --user --disable-pip-version-check 'jsonschema>=4.18'
python3 - "$out/results.json" crates/memmap-bench/schema/report.schema.json <<'PY'
import json, sys
import jsonschema
report = json.load(open(sys.argv[1]))
schema = json.load(open(sys.argv[2]))
jsonschema.validate(report, schema)
p = report["provenance"]
for k in ("generated_at", "version", "rustc", "kernel", "thp", "cpu_model"):
    assert p.get(k), f"provenance.{k} missing: {p}"
names = [s["name"] for s in report["scenarios"]]
print("report valid:", ", ".join(names))
print("provenance:", p["version"], p["git_commit"], p["rustc"], p["kernel"], "THP", p["thp"], p["cpu_model"]["name"])
for s in report["scenarios"]:
    print(f'  {s["name"]:<24} {s["threads"]}T  {s["verdict"]}')
PY
grep -q '<svg' "$out/results.svg"
grep -q 'not plotted' "$out/results.svg"

# Output flags before the subcommand, and a memory budget.
$bin --quick --no-progress zone-device --memory-budget 1GiB > "$out/budget.txt"
grep -q '^memory budget 1 GiB (--memory-budget)' "$out/budget.txt"

# docs/bench-cli.md: an initializer of one's own against the library's and the limit.
cargo run --locked --release -q -p memmap-bench --example custom_strategy -- 1G 3

# docs/bench-cli.md: dump and diff.
$bin dump zone-device --memory-type generic --pages 4096 --vmemmap-shift 9 --strategy slow --out "$out/a" --force >/dev/null
$bin dump zone-device --memory-type generic --pages 4096 --vmemmap-shift 9 --strategy streaming --out "$out/b" --force >/dev/null
$bin diff "$out/a" "$out/b"
# docs/bench-cli.md: diff --json, dump hotplug, dump hugetlb --place.
$bin diff --json "$out/a" "$out/b" | python3 -c 'import json, sys; assert json.load(sys.stdin)["identical"]'
$bin dump hotplug --pages 65536 --strategy slow --out "$out/h-slow" --force >/dev/null
$bin dump hotplug --pages 65536 --strategy streaming --out "$out/h-stream" --force >/dev/null
$bin diff "$out/h-slow" "$out/h-stream"
$bin dump hugetlb --hstate 2M --place 0x10000 --place 0x10400 --hvo off --out "$out/placed" --force >/dev/null

# docs/performance/sweep.md: the sweep, small, with its plot.
$bin sweep --max-size 4M --rounds 3 --no-progress --plot "$out/sweep.svg" --force > "$out/sweep.txt"
awk 'length($0) > 120 { print "sweep: line over 120 columns: " $0; bad = 1 } END { exit bad }' "$out/sweep.txt"
grep -q '<svg' "$out/sweep.svg"

# docs/performance/clear-methods.md: which clear wins at which size (one round, 2 GiB).
./target/release/examples/clear_methods 1 > "$out/clear-methods.txt"
grep -q '^1 thread(s): call size' "$out/clear-methods.txt"
grep -qE '^ +2048 MiB ' "$out/clear-methods.txt"

# stream-vm-memory's README: the reset rule's sweep, small.
./target/release/examples/reset_sweep --max 1M --rounds 1 > "$out/reset-sweep.txt"
grep -q 'auto' "$out/reset-sweep.txt"
echo "smoke: all commands ran"
