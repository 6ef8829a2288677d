//! Decoding of the x86 `CPUID` cache leaves, for any source of answers (the instruction, or
//! the canned answers of `src/cache/tests.rs`), so it is tested on every host.
#![cfg_attr(not(test), allow(dead_code))] // only the x86-64 backend calls it outside tests

use crate::cache::{CacheInfo, CacheSource, MAX_CACHE_LEVELS};

/// `CPUID` answers: `(leaf, subleaf) -> [eax, ebx, ecx, edx]`.
pub(crate) type Cpuid<'a> = &'a mut dyn FnMut(u32, u32) -> [u32; 4];

/// Subleaves read at most from a cache or topology leaf (real CPUs have 4 to 6).
const MAX_SUBLEAVES: u32 = 16;

/// Whether leaf 0's vendor string (EBX, EDX, ECX) is AMD's or Hygon's.
pub(crate) fn amd_vendor(b: u32, c: u32, d: u32) -> bool {
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&b.to_le_bytes());
    vendor[4..8].copy_from_slice(&d.to_le_bytes());
    vendor[8..].copy_from_slice(&c.to_le_bytes());
    &vendor == b"AuthenticAMD" || &vendor == b"HygonGenuine"
}

/// The caches `CPUID` reports (see [`CacheSource`] for which leaves, by vendor).
pub(crate) fn from_cpuid(cpuid: Cpuid<'_>) -> CacheInfo {
    let [max_basic, b, c, d] = cpuid(0, 0);
    let amd = amd_vendor(b, c, d);
    let max_ext = cpuid(0x8000_0000, 0)[0];
    let info = if amd {
        let topology_ext = max_ext >= 0x8000_001d && cpuid(0x8000_0001, 0)[2] & (1 << 22) != 0;
        let cached = if topology_ext { deterministic(cpuid, 0x8000_001d) } else { None };
        match cached {
            Some(info) => info.with_source(CacheSource::CpuidLeaf8000001D),
            None => legacy_amd(cpuid, max_ext).with_source(CacheSource::CpuidLeaf80000006),
        }
    } else {
        let cached = if max_basic >= 4 { deterministic(cpuid, 4) } else { None };
        match cached {
            Some(info) => {
                cap_sharers(info, package_cpus(cpuid, max_basic)).with_source(CacheSource::CpuidLeaf4)
            }
            None => legacy_amd(cpuid, max_ext).with_source(CacheSource::CpuidLeaf80000006),
        }
    };
    info.or_not_reported()
}

/// Leaf 4 or `0x8000_001D` (the same layout): per subleaf, EAX\[4:0\] the type (0 none, 1
/// data, 2 instruction, 3 unified), EAX\[7:5\] the level, EAX\[25:14\] the sharing
/// logical processors minus 1; EBX\[31:22\] ways, \[21:12\] partitions and \[11:0\] line
/// size, each minus 1; ECX the sets minus 1.
fn deterministic(cpuid: Cpuid<'_>, leaf: u32) -> Option<CacheInfo> {
    let (mut sizes, mut line, mut shared, mut top) = ([0u64; MAX_CACHE_LEVELS], 0u32, 0u32, 0usize);
    for sub in 0..MAX_SUBLEAVES {
        let [a, b, c, _] = cpuid(leaf, sub);
        let kind = a & 0x1f;
        let level = ((a >> 5) & 7) as usize;
        if kind == 0 {
            break;
        }
        if kind == 2 || level == 0 || level > MAX_CACHE_LEVELS {
            continue;
        }
        let ways = u64::from(b >> 22) + 1;
        let partitions = u64::from((b >> 12) & 0x3ff) + 1;
        let line_size = (b & 0xfff) + 1;
        // At most 2^10 * 2^10 * 2^12 * 2^32: one more than `u64::MAX`, hence saturating.
        let size = (ways * partitions * u64::from(line_size)).saturating_mul(u64::from(c) + 1);
        sizes[level - 1] = sizes[level - 1].max(size);
        if line == 0 || level == 1 {
            line = line_size;
        }
        if level >= top {
            top = level;
            shared = ((a >> 14) & 0xfff) + 1;
        }
    }
    (top > 0).then(|| CacheInfo::new(line, sizes, shared))
}

/// The logical processors of the package: EBX\[15:0\] of the last subleaf of leaf `0x1F`
/// (else `0xB`) whose level type (ECX\[15:8\]) is not 0. Leaf 4's sharer count is the
/// width of an APIC ID field, which can far exceed the CPUs there are, so it is capped by this.
fn package_cpus(cpuid: Cpuid<'_>, max_basic: u32) -> Option<u32> {
    for leaf in [0x1f, 0xb] {
        if max_basic < leaf {
            continue;
        }
        let mut cpus = None;
        for sub in 0..MAX_SUBLEAVES {
            let [_, b, c, _] = cpuid(leaf, sub);
            if (c >> 8) & 0xff == 0 {
                break;
            }
            cpus = Some(b & 0xffff).filter(|&n| n != 0);
        }
        if cpus.is_some() {
            return cpus;
        }
    }
    None
}

/// `info` with the last level's sharers at most `cpus`.
fn cap_sharers(info: CacheInfo, cpus: Option<u32>) -> CacheInfo {
    match (info.last_level_shared_by(), cpus) {
        (Some(shared), Some(cpus)) if cpus < shared => info.with_shared_by(cpus),
        _ => info,
    }
}

/// AMD's older leaves: `0x8000_0005` ECX\[31:24\] the L1d in KiB and \[7:0\] its line;
/// `0x8000_0006` ECX\[31:16\] the L2 in KiB and EDX\[31:18\] the L3 in 512 KiB units; the
/// cores of the package (`0x8000_0008` ECX\[7:0\] plus 1) share the last level.
fn legacy_amd(cpuid: Cpuid<'_>, max_ext: u32) -> CacheInfo {
    let mut sizes = [0u64; MAX_CACHE_LEVELS];
    let mut line = 0;
    if max_ext >= 0x8000_0005 {
        let c = cpuid(0x8000_0005, 0)[2];
        sizes[0] = u64::from(c >> 24) << 10;
        line = c & 0xff;
    }
    if max_ext >= 0x8000_0006 {
        let [_, _, c, d] = cpuid(0x8000_0006, 0);
        sizes[1] = u64::from(c >> 16) << 10;
        sizes[2] = u64::from(d >> 18) << 19;
        if line == 0 {
            line = c & 0xff;
        }
    }
    let shared = if max_ext >= 0x8000_0008 { (cpuid(0x8000_0008, 0)[2] & 0xff) + 1 } else { 0 };
    CacheInfo::new(line, sizes, shared)
}
