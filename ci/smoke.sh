#!/usr/bin/env bash
# The main program end to end: the quick suite with --json and --plot, validated against the
# report's JSON Schema, plus a dump/diff round trip.
source "$(dirname "$0")/env.sh"
out=target/ci-smoke
mkdir -p "$out"
cargo build --locked --release -p memmap-bench
./target/release/memmap-bench --quick --json --no-progress --plot "$out/plot.svg" > "$out/report.json"
python3 -m pip install --quiet --disable-pip-version-check 'jsonschema>=4.18' >/dev/null 2>&1 \
    || python3 -m pip install --quiet --user --disable-pip-version-check 'jsonschema>=4.18'
python3 - "$out/report.json" crates/memmap-bench/schema/report.schema.json <<'PY'
import json, sys
import jsonschema
report = json.load(open(sys.argv[1]))
schema = json.load(open(sys.argv[2]))
jsonschema.validate(report, schema)
names = [s["name"] for s in report["scenarios"]]
print("report valid:", ", ".join(names))
for s in report["scenarios"]:
    for r in s["results"]:
        print(f'  {s["name"]:<24} {r["strategy"]:<14} {r["gbps"]:7.2f} GB/s  x{r["x_limit"]:.2f}')
PY
grep -q '<svg' "$out/plot.svg"
./target/release/memmap-bench dump zone-device --memory-type generic --pages 4096 --vmemmap-shift 9 --strategy slow --out "$out/a" --force >/dev/null
./target/release/memmap-bench dump zone-device --memory-type generic --pages 4096 --vmemmap-shift 9 --strategy streaming --out "$out/b" --force >/dev/null
./target/release/memmap-bench diff "$out/a" "$out/b"
