#!/usr/bin/env python3
"""Two builds of memmap-bench on the same scenarios, interleaved in one run: A B B A A B ...
(each binary runs a whole scenario with --json, the order alternating so neither always runs
first), then per scenario row and strategy the median of the runs' medians and B/A.
Checks that a change left the bench's figures where they were (issue 44's "behaviour
unchanged"); the figures go to docs/performance/ with this command line.

    python3 ci/bench-compare.py A_BINARY B_BINARY [--runs N] [--threads T] -- SCENARIO [ARGS]...
"""
import argparse
import json
import statistics
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--runs", type=int, default=4, help="runs of each binary per scenario")
p.add_argument("--threads", default="2")
p.add_argument("scenarios", nargs="+", help="SCENARIO[:ARG,ARG...] e.g. zone-device:--zone-device-size=4G")
args = p.parse_args()

for spec in args.scenarios:
    name, _, extra = spec.partition(":")
    cmd_tail = [name, "--json", "--no-progress", "--threads", args.threads] + [x for x in extra.split(",") if x]
    times = {"A": {}, "B": {}}
    for i in range(args.runs):
        for which in ("AB" if i % 2 == 0 else "BA"):
            binary = args.a if which == "A" else args.b
            out = subprocess.run([binary] + cmd_tail, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{binary} {' '.join(cmd_tail)}: exit {out.returncode}\n{out.stderr[-2000:]}")
            for s in json.loads(out.stdout)["scenarios"]:
                for r in s.get("results", []):
                    key = (s["name"], s.get("threads"), r["strategy"])
                    times[which].setdefault(key, []).append(r["median_ms"])
    print(f"== {' '.join(cmd_tail)}  ({args.runs} runs of each, interleaved)")
    print(f"{'scenario':34} {'thr':>3} {'strategy':22} {'A ms':>10} {'B ms':>10} {'B/A':>6}")
    for key in sorted(set(times["A"]) & set(times["B"]), key=str):
        a = statistics.median(times["A"][key])
        b = statistics.median(times["B"][key])
        print(f"{key[0]:34} {str(key[1]):>3} {key[2]:22} {a:10.3f} {b:10.3f} {b / a if a else float('nan'):6.3f}")
    for which in "AB":
        only = set(times[which]) - set(times["B" if which == "A" else "A"])
        for key in sorted(only, key=str):
            print(f"only in {which}: {key}")
    sys.stdout.flush()
