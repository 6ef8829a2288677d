#!/usr/bin/env python3
"""The CI build cache (.ci/run): what to keep of it for the next run.

    python3 ci/cache.py prune CACHE [--max-gib N]

Deletes from CACHE (the kept build directories of every step) the artifacts of the
repository's own packages: libraries, test and example binaries, build-script outputs and
fingerprints of every package and target defined by a Cargo.toml of this repository. A fresh
clone rebuilds those anyway (their sources are new to cargo), so they would only pile up, one
set per run. What stays is what every run shares: crates.io dependencies and the standard
libraries built with -Zbuild-std. If the cache still holds more than N GiB (40), all of it is
deleted: the next run builds from nothing.
"""
import argparse
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Directories cargo writes per-unit artifacts into, whose entries are named NAME-HASH[...]
UNIT_DIRS = {"deps", ".fingerprint", "build", "examples", "incremental"}


def own_names():
    """Package and target names of every Cargo.toml in the repository (cargo's auto-discovered
    targets included), with '-' and '_' spellings."""
    names = set()
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in ("target", ".git") and not os.path.islink(os.path.join(top, d))]
        if "Cargo.toml" not in files:
            continue
        text = open(os.path.join(top, "Cargo.toml"), encoding="utf-8").read()
        names.update(re.findall(r'^\s*name\s*=\s*"([^"]+)"', text, re.M))
        for sub in ("tests", "examples", "benches", os.path.join("src", "bin")):
            d = os.path.join(top, sub)
            if not os.path.isdir(d):
                continue
            for entry in os.listdir(d):
                if entry.endswith(".rs"):
                    names.add(entry[:-3])
                elif os.path.isfile(os.path.join(d, entry, "main.rs")):
                    names.add(entry)
    return {v for n in names for v in (n, n.replace("-", "_"))}


def size(path):
    total = 0
    for top, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(top, f)).st_size
            except OSError:
                pass
    return total


def prune(cache, max_gib):
    if os.path.islink(cache) or not os.path.isdir(cache):
        sys.exit(f"cache: {cache}: not a directory")
    names = own_names()
    unit = re.compile(r"^(?:lib)?(" + "|".join(map(re.escape, sorted(names))) + r")-[0-9a-f]{16}(?:[.-].*)?$")
    freed = removed = 0
    for top, dirs, files in os.walk(cache):
        if os.path.basename(top) not in UNIT_DIRS:
            continue
        for entry in dirs + files:
            if not unit.match(entry):
                continue
            path = os.path.join(top, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                freed += size(path)
                shutil.rmtree(path, ignore_errors=True)
            else:
                freed += os.lstat(path).st_size
                os.unlink(path)
            removed += 1
        dirs[:] = [d for d in dirs if os.path.isdir(os.path.join(top, d))]
    left = size(cache)
    print(f"=== build cache: {removed} artifacts of this repository's packages deleted ({freed / 2**30:.1f} GiB), "
          f"{left / 2**30:.1f} GiB kept in {cache}")
    if left > max_gib * 2**30:
        shutil.rmtree(cache, ignore_errors=True)
        print(f"=== build cache: over {max_gib} GiB: deleted; the next run builds everything")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["prune"])
    ap.add_argument("cache")
    ap.add_argument("--max-gib", type=float, default=40)
    a = ap.parse_args()
    prune(a.cache, a.max_gib)


if __name__ == "__main__":
    main()
