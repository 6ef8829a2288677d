use super::*;
use std::string::ToString;
use std::vec::Vec;

/// `CPUID` answers from a table of `(leaf, subleaf, [eax, ebx, ecx, edx])`; zeros elsewhere,
/// as a CPU answers a subleaf past the last one.
fn table(rows: &[(u32, u32, [u32; 4])]) -> impl FnMut(u32, u32) -> [u32; 4] + '_ {
    move |leaf, sub| rows.iter().find(|r| r.0 == leaf && r.1 == sub).map_or([0; 4], |r| r.2)
}

/// Leaf 0 with `max` and the vendor string `v` (12 bytes, in the EBX, EDX, ECX order).
fn leaf0(max: u32, v: &[u8; 12]) -> (u32, u32, [u32; 4]) {
    let w = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    (0, 0, [max, w(0), w(8), w(4)])
}

/// The project's AMD EPYC (Zen 4) guest, 2 vCPUs, as `CPUID` answered there (read with
/// `__cpuid_count` in a 2 vCPU KVM guest, the machine the sweep measurements ran on). Its
/// sysfs says the same: L1d 32K, L2 1024K, L3 32768K shared by CPUs 0-1, 64-byte lines.
fn zen4_guest(topology_ext: bool) -> Vec<(u32, u32, [u32; 4])> {
    std::vec![
        leaf0(0x1c, b"AuthenticAMD"),
        (0x8000_0000, 0, [0x8000_0021, 0, 0, 0]),
        (0x8000_0001, 0, [0, 0, if topology_ext { 0x0040_03f3 } else { 0x0000_03f3 }, 0]),
        (0x8000_0005, 0, [0xff48_ff40, 0xff48_ff40, 0x2008_0140, 0x2008_0140]),
        (0x8000_0006, 0, [0x5c00_2200, 0x6c00_4200, 0x0400_6140, 0x0a00_9140]),
        (0x8000_0008, 0, [0x0030_3030, 0x5002_0005, 0x0000_7001, 0]),
        (0x8000_001d, 0, [0x0000_0121, 0x01c0_003f, 0x0000_003f, 0]),
        (0x8000_001d, 1, [0x0000_0122, 0x01c0_003f, 0x0000_003f, 0]),
        (0x8000_001d, 2, [0x0000_0143, 0x01c0_003f, 0x0000_07ff, 2]),
        (0x8000_001d, 3, [0x0000_4163, 0x03c0_003f, 0x0000_7fff, 1]),
    ]
}

/// An Alder Lake-S desktop (8 P-cores with two threads each, 4 E-cores; 25 MiB of L3), leaves
/// 4 and `0x1F` as posted to the QEMU development list in January 2024 (a topology patch
/// review: leaf 4's sharer field of the L3 says 128, the package has 20 threads). The
/// answers are an E-core's: 32 KiB L1d, 64 KiB L1i, 2 MiB L2 for its cluster.
fn alder_lake_s(max_basic: u32) -> Vec<(u32, u32, [u32; 4])> {
    std::vec![
        leaf0(max_basic, b"GenuineIntel"),
        (0x8000_0000, 0, [0x8000_0008, 0, 0, 0]),
        (4, 0, [0xfc00_4121, 0x01c0_003f, 0x0000_003f, 0]),
        (4, 1, [0xfc00_4122, 0x01c0_003f, 0x0000_007f, 0]),
        (4, 2, [0xfc01_c143, 0x03c0_003f, 0x0000_07ff, 0]),
        (4, 3, [0xfc1f_c163, 0x0240_003f, 0x0000_9fff, 4]),
        (0x1f, 0, [1, 1, 0x100, 0x4c]),
        (0x1f, 1, [7, 0x14, 0x201, 0x4c]),
        (0x1f, 2, [0, 0, 2, 0x4c]),
    ]
}

fn decode(rows: &[(u32, u32, [u32; 4])]) -> CacheInfo {
    crate::arch::x86_cache::from_cpuid(&mut table(rows))
}

#[test]
fn amd_topology_leaf_gives_every_level_and_the_l3_sharers() {
    let c = decode(&zen4_guest(true));
    assert_eq!(c.source(), CacheSource::CpuidLeaf8000001D);
    assert_eq!(c.data_sizes(), [32 << 10, 1 << 20, 32 << 20, 0]);
    assert_eq!((c.line_size(), c.last_level(), c.last_level_shared_by()), (Some(64), Some(3), Some(2)));
    assert_eq!(c.last_level_share(), Some(16 << 20));
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &c), 12 << 20);
    assert_eq!(
        c.to_string(),
        "L1d 32 KiB, L2 1 MiB, L3 32 MiB shared by 2 CPUs, 64-byte lines (CPUID leaf 0x8000001D)"
    );
}

#[test]
fn amd_without_topology_extensions_falls_back_to_the_old_leaves() {
    // The same guest's 0x80000006 reports 320 MiB of L3 (what the hypervisor passes through),
    // which is what this leaf gives: the reason leaf 0x8000001D comes first.
    let c = decode(&zen4_guest(false));
    assert_eq!(c.source(), CacheSource::CpuidLeaf80000006);
    assert_eq!(c.data_sizes(), [32 << 10, 1 << 20, 320 << 20, 0]);
    assert_eq!((c.line_size(), c.last_level_shared_by()), (Some(64), Some(2)));
}

#[test]
fn intel_leaf4_sharers_are_capped_by_the_package() {
    let c = decode(&alder_lake_s(0x20));
    assert_eq!(c.source(), CacheSource::CpuidLeaf4);
    // The L1i (64 KiB) is not a data cache; the L3 is 10 ways x 64 B x 40960 sets.
    assert_eq!(c.data_sizes(), [32 << 10, 2 << 20, 25 << 20, 0]);
    assert_eq!((c.line_size(), c.last_level_shared_by()), (Some(64), Some(20)));
    assert_eq!(c.last_level_share(), Some((25 << 20) / 20));
    // Without leaf 0x1F or 0xB the APIC-ID width stands: a smaller share, never a larger one.
    assert_eq!(decode(&alder_lake_s(4)).last_level_shared_by(), Some(128));
}

#[test]
fn a_cpu_without_cache_leaves_reports_nothing() {
    let c = decode(&[leaf0(1, b"GenuineIntel")]);
    assert_eq!(c, CacheInfo::unknown(NoCacheInfo::NotReported));
    assert_eq!(c.last_level(), None);
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &c), READ_SOON_FALLBACK);
    assert_eq!(c.to_string(), "no cache known (unknown: no data cache reported)");
}

#[test]
fn hostile_cpuid_answers_neither_overflow_nor_invent_levels() {
    // A hypervisor answering every leaf with all ones: leaf 4's "level 7" entries are skipped
    // and the old AMD leaves give what their fields can hold.
    let mut ones = |_: u32, _: u32| [u32::MAX; 4];
    let c = crate::arch::x86_cache::from_cpuid(&mut ones);
    assert_eq!(c.source(), CacheSource::CpuidLeaf80000006);
    assert_eq!(c.data_sizes(), [255 << 10, 0xffff << 10, 0x3fff << 19, 0]);
    assert_eq!(c.last_level_shared_by(), Some(256));
    // A level-3 entry with every size field at its maximum: 2^64 bytes, saturated.
    let rows = [leaf0(4, b"GenuineIntel"), (4, 0, [0x63, u32::MAX, u32::MAX, 0])];
    assert_eq!(decode(&rows).level_size(3), Some(u64::MAX));
}

#[test]
fn the_rule_streams_write_once_from_the_floor_and_read_soon_from_the_share() {
    let share = |llc: u64, cpus: u32| CacheInfo::new(64, [32 << 10, 1 << 20, llc, 0], cpus);
    for c in [share(32 << 20, 2), share(0, 0), CacheInfo::unknown(NoCacheInfo::NoCpuid)] {
        assert_eq!(streaming_threshold(Reuse::WriteOnce, &c), WRITE_ONCE_FLOOR, "{c}");
    }
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &share(32 << 20, 16)), 1536 << 10);
    // Unknown sharers count as one CPU.
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &share(32 << 20, 0)), 24 << 20);
    // Without an L3 the L2 is the last level.
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &share(0, 1)), 768 << 10);
    // Never below the floor, never above usize::MAX.
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &share(4096, 4096)), WRITE_ONCE_FLOOR);
    let huge = CacheInfo::new(64, [0, 0, 0, u64::MAX], 1);
    let three_quarters = (u128::from(u64::MAX) * 3 / 4) as u64;
    assert_eq!(streaming_threshold(Reuse::ReadSoon, &huge) as u64, three_quarters.min(usize::MAX as u64));
    assert_eq!(Reuse::default(), Reuse::WriteOnce);
}

#[test]
fn encoding_round_trips_every_field() {
    let sources = [
        CacheSource::CpuidLeaf4,
        CacheSource::CpuidLeaf8000001D,
        CacheSource::CpuidLeaf80000006,
        CacheSource::Sysfs,
        CacheSource::Caller,
        CacheSource::Unknown(NoCacheInfo::NoCpuid),
        CacheSource::Unknown(NoCacheInfo::NeedsStd),
        CacheSource::Unknown(NoCacheInfo::NoSource),
        CacheSource::Unknown(NoCacheInfo::NotReported),
    ];
    for source in sources {
        let c = CacheInfo::new(128, [48 << 10, 5 << 19, 1 << 40, u64::MAX], u32::MAX).with_source(source);
        assert_eq!(CacheInfo::decode(c.encode()), c);
    }
}

#[test]
#[cfg_attr(miri, ignore = "thousands of interleavings: slow under Miri")]
fn a_slot_never_hands_out_half_of_two_values() {
    let a = CacheInfo::new(64, [1, 2, 3, 4], 5);
    let b = CacheInfo::new(128, [u64::MAX, u64::MAX - 1, 1 << 33, 7], 9);
    let slot = Slot::new();
    assert_eq!(slot.read(), None);
    assert!(slot.write_once(&a));
    assert!(!slot.write_once(&b));
    assert_eq!(slot.read(), Some(a));
    std::thread::scope(|s| {
        for info in [a, b] {
            let slot = &slot;
            s.spawn(move || (0..2000).for_each(|_| slot.write(&info)));
        }
        let mut seen = 0;
        for _ in 0..20_000 {
            if let Some(got) = slot.read() {
                assert!(got == a || got == b, "torn value {got:?}");
                seen += 1;
            }
        }
        assert!(seen > 0);
    });
}

#[test]
fn sysfs_sizes_and_cpu_lists_parse_and_refuse_garbage() {
    use sysfs::{count_cpus, parse_size};
    assert_eq!(parse_size("32K"), Some(32 << 10));
    assert_eq!(parse_size("32768K"), Some(32 << 20));
    assert_eq!(parse_size("2M"), Some(2 << 20));
    assert_eq!(parse_size("1G"), Some(1 << 30));
    assert_eq!(parse_size("4096"), Some(4096));
    for bad in ["", "K", "0K", "-1K", "12Q", "1.5M", "99999999999999999999K", "18014398509481984K"] {
        assert_eq!(parse_size(bad), None, "{bad:?}");
    }
    assert_eq!(count_cpus("0"), Some(1));
    assert_eq!(count_cpus("0-1"), Some(2));
    assert_eq!(count_cpus("0-3,8,10-11"), Some(7));
    assert_eq!(count_cpus("0-4294967295"), None);
    for bad in ["", "a", "3-1", "1-", "-1", "0,,1", "0-1-2"] {
        assert_eq!(count_cpus(bad), None, "{bad:?}");
    }
}

/// A fake `cpu0/cache` tree under the temporary directory, removed on drop.
struct FakeTree(std::path::PathBuf);

impl FakeTree {
    fn new(name: &str, entries: &[&[(&str, &str)]]) -> FakeTree {
        let dir = std::env::temp_dir().join(std::format!("stream-hal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (i, attrs) in entries.iter().enumerate() {
            let index = dir.join(std::format!("index{i}"));
            std::fs::create_dir_all(&index).unwrap();
            for (file, value) in *attrs {
                std::fs::write(index.join(file), std::format!("{value}\n")).unwrap();
            }
        }
        FakeTree(dir)
    }
}

impl Drop for FakeTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entry<'a>(level: &'a str, kind: &'a str, size: &'a str, shared: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("level", level),
        ("type", kind),
        ("size", size),
        ("coherency_line_size", "64"),
        ("shared_cpu_list", shared),
    ]
}

#[test]
#[cfg_attr(miri, ignore = "Miri's isolation has no file system")]
fn sysfs_tree_of_the_zen4_guest_is_read() {
    let (l1d, l1i) = (entry("1", "Data", "32K", "0"), entry("1", "Instruction", "32K", "0"));
    let (l2, l3) = (entry("2", "Unified", "1024K", "0"), entry("3", "Unified", "32768K", "0-1"));
    let tree = FakeTree::new("zen4", &[&l1d, &l1i, &l2, &l3]);
    let c = sysfs::read(&tree.0);
    assert_eq!(c.source(), CacheSource::Sysfs);
    assert_eq!(c.data_sizes(), [32 << 10, 1 << 20, 32 << 20, 0]);
    assert_eq!((c.line_size(), c.last_level_shared_by()), (Some(64), Some(2)));
    assert_eq!(c.to_string(), "L1d 32 KiB, L2 1 MiB, L3 32 MiB shared by 2 CPUs, 64-byte lines (sysfs)");
}

#[test]
#[cfg_attr(miri, ignore = "Miri's isolation has no file system")]
fn sysfs_entries_without_a_usable_level_type_or_size_are_skipped() {
    let big = "9".repeat(10_000);
    let l1 = entry("1", "Data", "48K", "0");
    let no_size = [("level", "2"), ("type", "Unified"), ("shared_cpu_list", "0-3")];
    let bad_level = entry("9", "Unified", "64M", "0-7");
    let huge_file = entry("3", "Unified", &big, "0-7");
    let odd_type = entry("3", "Trace", "8M", "0-7");
    let l2 = entry("2", "Unified", "2M", "0-1");
    let tree = FakeTree::new("garbage", &[&l1, &no_size, &bad_level, &huge_file, &odd_type, &l2]);
    let c = sysfs::read(&tree.0);
    assert_eq!(c.data_sizes(), [48 << 10, 2 << 20, 0, 0]);
    assert_eq!(c.last_level_shared_by(), Some(2));
    // No tree at all, or one without a data cache: nothing known.
    let missing = std::env::temp_dir().join("stream-hal-no-such-cache-tree");
    assert_eq!(sysfs::read(&missing), CacheInfo::unknown(NoCacheInfo::NotReported));
    let l1i = entry("1", "Instruction", "32K", "0");
    let tree = FakeTree::new("icache-only", &[&l1i]);
    assert_eq!(sysfs::read(&tree.0).source(), CacheSource::Unknown(NoCacheInfo::NotReported));
}
