#!/usr/bin/env python3
"""The workspace's weight, as issue closing notes report it: per crate the lines of crates/*/src
before each file's `#[cfg(test)]` module (non-blank, and all), the files over 600 such lines,
and the published items of api/*.txt (fields, variants and trait impls not counted; an item
reachable at several paths counted once).

    python3 ci/weight.py [REPO]
"""
import glob
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."


def before_tests(path):
    """The file's lines up to its first top-level `#[cfg(test)]`, or all of them (the measure
    of a file's size)."""
    out = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#[cfg(test)]"):
            break
        out.append(line)
    return out


def strip_tests(lines):
    """`lines` without the items under `#[cfg(test)]`, and the names of test modules declared
    as files (`#[cfg(test)] mod tests;`)."""
    out, files, i, n = [], set(), 0, len(lines)
    while i < n:
        if re.match(r"\s*#\[cfg\((test|all\(test.*)\)\]\s*$", lines[i]):
            j = i + 1
            while j < n and lines[j].strip().startswith("#["):
                j += 1
            m = re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", lines[j]) if j < n else None
            if m:
                files.add(m.group(3))
                i = j + 1
                continue
            depth, started, k = 0, False, j
            while k < n:
                depth += lines[k].count("{") - lines[k].count("}")
                started = started or "{" in lines[k]
                if (started and depth <= 0) or (not started and lines[k].rstrip().endswith(";")):
                    break
                k += 1
            i = k + 1
            continue
        out.append(lines[i])
        i += 1
    return out, files


total = [0, 0]
big = []
for src in sorted(glob.glob(os.path.join(root, "crates/*/src"))):
    files = glob.glob(src + "/**/*.rs", recursive=True)
    kept, skip = {}, set()
    for f in files:
        lines, test_files = strip_tests(open(f, encoding="utf-8").read().split("\n"))
        kept[f] = lines
        d, stem = os.path.dirname(f), os.path.splitext(os.path.basename(f))[0]
        base = d if stem in ("mod", "lib", "main") else os.path.join(d, stem)
        for t in test_files:
            skip.update({os.path.join(base, t + ".rs"), os.path.join(base, t, "mod.rs")})
            skip.update(glob.glob(os.path.join(base, t, "**/*.rs"), recursive=True))
        if len(before_tests(f)) > 600:
            big.append((len(before_tests(f)), os.path.relpath(f, root)))
    n = [0, 0]
    for f, lines in kept.items():
        if f not in skip:
            n[0] += sum(1 for l in lines if l.strip())
            n[1] += len(lines)
    total = [total[0] + n[0], total[1] + n[1]]
    print(f"{src.split('/')[-2]:18} {n[0]:6} non-blank {n[1]:6} lines")
print(f"{'total':18} {total[0]:6} non-blank {total[1]:6} lines")
print(f"files over 600 lines before their tests: {len(big)}")
for n, f in sorted(big, reverse=True):
    print(f"  {n} {f}")

items_total = 0
for f in sorted(glob.glob(os.path.join(root, "api/*.txt"))):
    keys = set()
    for l in open(f, encoding="utf-8"):
        l = l.rstrip("\n")
        if not l.strip() or l.startswith("impl ") or re.match(r"pub (field|variant) ", l):
            continue
        m = re.search(r"([A-Za-z_]\w*(::[A-Za-z_#]\w*)+)", l)
        if not m:
            keys.add(l)
            continue
        segs = m.group(1).split("::")
        # From the first type-like segment on (a method keeps its type), else the last.
        k = next(("::".join(segs[i:]) for i in range(1, len(segs)) if segs[i][:1].isupper()), segs[-1])
        keys.add(l[: m.start()] + k + l[m.end():])
    items_total += len(keys)
    print(f"api {os.path.basename(f):22} {len(keys):5} items")
print(f"api total {items_total} items")
