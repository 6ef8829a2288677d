#!/usr/bin/env bash
# Real Linux as the oracle, end to end: fetches Debian's 7.2 (sid), 7.3 (experimental) and 6.12
# (bookworm-backports) kernels through a private apt configuration (cached), boots each memory configuration under
# QEMU (TCG), dumps the guest's struct pages, compares them with `memmap-bench dump`, and
# refreshes the golden extracts in the work tree (reported with git diff --stat, not committed).
#
# ORACLE_CONFIGS="a b c" picks configurations (default: four that together exercise every
# kernel behaviour the model distinguishes; "all" for every x86-64 configuration). Fails when
# any struct page or pageblock differs from the model. Without ORACLE_CONFIGS it also boots one
# riscv64 and two ppc64el configurations (Debian's 7.2 for those architectures, QEMU 10 from
# bookworm-backports). The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/memmap-oracle.
source "$(dirname "$0")/env.sh"
start=$(date +%s)
# Packages (QEMU 10, busybox, ndctl, dtc) come from ci/setup.sh.
qemu-system-x86_64 --version | head -1

# QEMU started with its scratch files under a path holding a comma and a space (QEMU's
# comma-separated options need the commas doubled); QEMU must be there now.
KERNEL_ORACLE_REQUIRE_QEMU=1 cargo test --locked --release -p kernel-oracle --test qemu_paths
cargo build --locked --release -p kernel-oracle
oracle="${CARGO_TARGET_DIR:-target}/release/kernel-oracle"
$oracle fetch
# The default set, within the CI budget: the altmap part (fsdax-dev), vmemmap dedup and early
# sections (devdax-2m-mem-early-section), memory hotplug into ZONE_NORMAL (hotplug-256m-normal:
# the isolation poison, the free-list order, blocks allocated after onlining) and boot-time 2M
# pages from the buddy allocator with HVO and the run-time shared tail (hugetlb-2m-boot-hvo-on),
# and the boot memmap of ordinary RAM (boot-3g: every zone, the model laid out from the guest).
# The other configurations (1G pages, two nodes, run-time 2M pages) and the differences only they
# exercise are checked by their golden extracts in `cargo test`; ORACLE_CONFIGS=all boots every
# one.
configs=${ORACLE_CONFIGS:-"fsdax-dev devdax-2m-mem-early-section hotplug-256m-normal hugetlb-2m-boot-hvo-on boot-3g"}
if [ "$configs" = all ]; then set -- --all; else set -- $configs; fi
$oracle run "$@" --out target/kernel-oracle --force --golden crates/kernel-oracle/golden
# One boot per further architecture: riscv64's boot-time 1 GiB page with HVO (optimized after
# boot: no SPARSEMEM_VMEMMAP_PREINIT) and ppc64el's run-time 2 MiB pages (its own list poison),
# and ppc64el's memory hotplug (a DIMM added with QMP after boot, onlined by DLPAR into a node
# without memory, 16 MiB MAX_PAGE_ORDER blocks).
if [ -z "${ORACLE_CONFIGS:-}" ]; then
    $oracle run --kernel 7.2-riscv64 riscv64-hugetlb-1g-hvo-on --out target/kernel-oracle --force \
        --golden crates/kernel-oracle/golden
    $oracle run --kernel 7.2-ppc64el ppc64el-hugetlb-2m ppc64el-hotplug-512m-normal --out target/kernel-oracle --force \
        --golden crates/kernel-oracle/golden
    # Linux 7.3 where it differs from 7.2: the vmemmap frames without boot memory info
    # (boot-3g) and the boot-time gigantic pages' list order (hugetlb-1g-hvo-on), and arm64 16K's
    # boot memmap (every 7.3 configuration's golden extract is checked below).
    $oracle run --kernel 7.3-amd64 boot-3g hugetlb-1g-hvo-on --out target/kernel-oracle --force \
        --golden crates/kernel-oracle/golden
    $oracle run --kernel 7.3-arm64-16k arm64-boot-2g --out target/kernel-oracle --force \
        --golden crates/kernel-oracle/golden
fi
# The module configurations (docs/linux-module.md): memmap_stream.ko on the Rust-enabled 7.2 and 7.3
# kernels `kernel-oracle build` keeps in the cache (patched with the memmap provider hook): two
# that compare in place, four where the module writes the memmap of 30 binds. A cold kernel
# build does not fit CI's budget, so CI boots each release's configurations only on a cached
# build and says plainly when there is none (exit status 3).
for source in 7.2 7.3; do
    module_rc=0
    $oracle build --source "$source" --cached-only --run --out target/kernel-oracle --force || module_rc=$?
    if [ "$module_rc" -eq 3 ]; then
        echo "oracle: module configurations on $source SKIPPED: no cached Rust-enabled kernel build (\`kernel-oracle build --source $source\` makes one)"
    elif [ "$module_rc" -ne 0 ]; then
        exit "$module_rc"
    fi
done
$oracle check --golden crates/kernel-oracle/golden
git diff --stat -- crates/kernel-oracle/golden || true
echo "oracle: $(( $(date +%s) - start )) s"
