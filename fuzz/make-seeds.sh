#!/usr/bin/env bash
# Regenerates the hand-made seeds of corpus/dump_reader (real dumps: two bytes of meta.json
# length, meta.json, memmap.bin), corpus/size_args (NUL-separated command lines) and
# corpus/oracle_check (every committed golden extract in the target's raw form: a mode byte,
# the u32 little-endian lengths of facts.json and extract.json, the three files; and one seed of
# each structured edit form).
# The seeds go into the committed corpus archive, fuzz/corpus.tar.xz (unpacked, updated, packed
# again; commit it).
# Usage: bash fuzz/make-seeds.sh (builds memmap-bench in the root workspace).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q -p memmap-bench
bin=target/debug/memmap-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
corpus=$tmp/corpus
mkdir -p "$corpus"
tar -xJf fuzz/corpus.tar.xz -C "$corpus"
mkdir -p "$corpus/dump_reader" "$corpus/size_args" "$corpus/oracle_check"
i=0
seed_dump() {
    "$bin" dump "$@" --out "$tmp/d$i" >/dev/null
    python3 - "$tmp/d$i" "$corpus/dump_reader/seed-$i" <<'PY'
import struct, sys
meta = open(sys.argv[1] + "/meta.json", "rb").read()
data = open(sys.argv[1] + "/memmap.bin", "rb").read()
open(sys.argv[2], "wb").write(struct.pack("<H", len(meta)) + meta + data)
PY
    i=$((i + 1))
}
seed_dump zone-device --memory-type fsdax --pages 4
seed_dump zone-device --memory-type generic --pages 8 --vmemmap-shift 2 --layout 72 --strategy streaming
seed_dump zone-device --memory-type private --pages 3 --altmap-reserve 1 --altmap-free 1 --page-ref-trace
seed_dump zone-device --memory-type p2pdma --pages 0 --config arm64
n=0
while IFS= read -r line; do
    printf '%s' "$line" | tr ' ' '\0' > "$corpus/size_args/seed-$n"
    n=$((n + 1))
done <<'ARGS'
16G
1.5GiB
zone-device --size 16G --align 2M --threads 4 --rounds 3 --json --plot x.svg
hugetlb --count 64 --hvo both --quick --config arm64
clear --alloc --size 3M
deferred --size 100T --no-progress
all --zone-device-size 1G --clear-size 2M --hugetlb-count 2 --deferred-size 4K
limits --quick --json
dump zone-device --memory-type generic --pages 4096 --vmemmap-shift 9 --strategy slow --out d --force
dump hugetlb --hstate 1G --count 1099511627776 --nodes 2 --hvo fail --layout 72 --out d
diff a b
--quick --json --no-progress --plot p.svg
ARGS
g=$(CORPUS="$corpus" python3 - <<'PY'
import glob, os, struct
n = 0
for d in sorted(glob.glob("crates/kernel-oracle/golden/*/*/")):
    f, x, p = (open(os.path.join(d, name), "rb").read() for name in ("facts.json", "extract.json", "pages.bin.gz"))
    name = "seed-" + d.rstrip("/").split("golden/")[1].replace("/", "-")
    # Mode 2 (raw, and compared with the model) for the extracts small enough: 2 MiB folios.
    mode = b"\2" if "hugetlb-2m" in name else b"\0"
    open(os.environ["CORPUS"] + "/oracle_check/" + name, "wb").write(mode + struct.pack("<II", len(f), len(x)) + f + x + p)
    n += 1
# Structured edits: mode byte 1 or 3 (with the model), then the Arbitrary bytes (which extract, the edits, the pages).
for k, body in enumerate([b"\0", b"\1\1\2\0\0\0\0\0\0\0", b"\2\1\5\3\0\0\0\0\3", b"\3\0\3"]):
    open(os.environ["CORPUS"] + "/oracle_check/seed-edit-%d" % k, "wb").write(b"\1\3"[k % 2:k % 2 + 1] + body)
    n += 1
print(n)
PY
)
echo "seeds: $i dumps, $n command lines, $g golden extracts and edits"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$corpus" -cf - . | xz -9 -T1 > fuzz/corpus.tar.xz
echo "seeds: fuzz/corpus.tar.xz packed again ($(find "$corpus" -type f | wc -l) inputs)"
