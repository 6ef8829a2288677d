#!/usr/bin/env bash
# Regenerates the hand-made seeds of corpus/dump_reader (real dumps: two bytes of meta.json
# length, meta.json, memmap.bin), corpus/size_args (NUL-separated command lines) and
# corpus/oracle_check (every committed golden extract in the target's raw form: a mode byte,
# the u32 little-endian lengths of facts.json and extract.json, the three files; and one seed of
# each structured edit form) and corpus/oracle_readers (one input per reader).
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
# oracle_readers: a mode byte (0 facts, 1 amplified meta.json, 2/3/4 gzip/xz/zstd, 5 image and
# names), then the reader's input.
mkdir -p "$corpus/oracle_readers"
r=$(CORPUS="$corpus" python3 - <<'PY'
import gzip, os, struct, subprocess
c = os.environ["CORPUS"] + "/oracle_readers/"
def put(name, data):
    open(c + name, "wb").write(data)
put("seed-facts", b"\0" + open("crates/kernel-oracle/golden/7.2-amd64/devdax-2m-dev/facts.json", "rb").read())
# (shape, count / 64 as u16, depth, typed): past the value limit, a few objects, past the depth limit.
for k, b in enumerate([b"\0\xff\xff\0\0", b"\7\x10\0\0\1", b"\3\1\0\xc8\0", b"\0\x40\0\0\1", b"\6\0\x80\2\0"]):
    put("seed-meta-%d" % k, b"\1" + b)
module = b"\x7fELF module"
put("seed-gzip", b"\2" + gzip.compress(module, mtime=0))
put("seed-gzip-bomb", b"\2" + gzip.compress(b"\0" * (2 << 20), 9, mtime=0))
for mode, tool, name in ((b"\3", "xz", "seed-xz"), (b"\4", "zstd", "seed-zstd")):
    put(name, mode + subprocess.run([tool, "-c"], input=module, capture_output=True, check=True).stdout)
def bzimage(version):
    img = bytearray(0x400)
    img[0x202:0x206] = b"HdrS"
    img[0x20e:0x210] = struct.pack("<H", 0x100)
    img[0x300:0x300 + len(version)] = version
    return bytes(img)
put("seed-bzimage", b"\5" + bzimage(b"7.3.0-rc1 (me@host) #1\0"))
put("seed-bzimage-dotdot", b"\5" + bzimage(b"../../x #1\0"))
put("seed-name", b"\5" + b"7.2.13+deb14-amd64")
print(13)
PY
)
echo "seeds: $i dumps, $n command lines, $g golden extracts and edits, $r reader inputs"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$corpus" -cf - . | xz -9 -T1 > fuzz/corpus.tar.xz
echo "seeds: fuzz/corpus.tar.xz packed again ($(find "$corpus" -type f | wc -l) inputs)"
