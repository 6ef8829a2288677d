//! What changed between Linux 6.12 and 7.2 in ZONE_DEVICE memmap init, checked against the
//! values both kernels left in guest memory under QEMU (Debian's 6.12.95 and 7.2.13, read by
//! the `kernel-oracle` tool; its golden extracts are compared with this model in
//! `crates/kernel-oracle/tests/golden.rs`, `every_extract_equals_the_model`). The literals here are
//! those kernel values; `docs/kernel-model.md` lists what each release does.

mod support;

use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, KernelVersion, MemoryType, MigrateType, PG, Page64, Strategy,
    StructPage, VmemAltmap, vmemmap_alias,
};
use support::{GUARD_WORD, range, run, run_full, vaddr};

const BASE: u64 = 0x100000;
const STRATEGIES: [Strategy; 3] = [Strategy::Slow, Strategy::Template, Strategy::Streaming];

fn v7_2() -> KernelConfig {
    KernelConfig::X86_64
}

fn v6_12() -> KernelConfig {
    KernelConfig::X86_64_6_12
}

/// FS_DAX pages start with `_refcount` 1 in 6.12 and 0 from 6.15 ("fs/dax: properly refcount
/// fs dax pages"); device-dax (GENERIC) keeps 1 in both.
#[test]
fn fsdax_refcount_is_one_before_6_15() {
    for (cfg, fsdax) in [(v6_12(), 1), (v7_2(), 0)] {
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, BASE, 64), &DevPagemap::new(MemoryType::FsDax), s, false)
                .unwrap();
            assert!((BASE..BASE + 64).all(|pfn| r.page(pfn).refcount() == fsdax), "{} {s}", cfg.version);
            let r =
                run::<Page64>(cfg, &range(&cfg, BASE, 64), &DevPagemap::new(MemoryType::Generic), s, false)
                    .unwrap();
            assert!((BASE..BASE + 64).all(|pfn| r.page(pfn).refcount() == 1), "{} {s}", cfg.version);
        }
    }
}

/// page\[1\] and page\[2\] of a 2 MiB devdax folio, word by word, as the kernels hold them.
#[test]
#[cfg_attr(miri, ignore = "512-page compound pages: too slow for Miri; equivalence.rs covers the paths")]
fn folio_pages_1_and_2_per_release() {
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    for s in STRATEGIES {
        // 6.12: @16 _large_mapcount and _entire_mapcount -1, @24 _nr_pages_mapped and
        // _pincount 0, @32 the 32-bit _folio_nr_pages, @56 untouched (0); page[2] an ordinary
        // tail (zone_device_data NULL, TAIL_MAPPING).
        let cfg = v6_12();
        let r = run::<Page64>(cfg, &range(&cfg, BASE, 1024), &pgmap, s, false).unwrap();
        for head in [BASE, BASE + 512] {
            let p1 = r.page(head + 1);
            assert_eq!(p1.u64_at(16), 0xffff_ffff_ffff_ffff, "6.12 {s}");
            assert_eq!(p1.u64_at(24), 0, "6.12 {s}");
            assert_eq!(p1.u64_at(32), 0x200, "6.12 {s}");
            assert_eq!(p1.u64_at(56), 0, "6.12 {s}");
            assert_eq!(p1.compound_head(), vaddr::<Page64>(&cfg, head) + 1, "6.12 {s}: head | 1");
            let p2 = r.page(head + 2);
            assert_eq!((p2.u64_at(16), p2.u64_at(24)), (0, cfg.tail_mapping()), "6.12 {s}");
        }
        // 7.2: @16 _large_mapcount -1 / _nr_pages_mapped 0, @24 _entire_mapcount -1 /
        // _pincount 0, @32 _mm_id_mapcount[] -1, @40 _mm_ids 0, @56 _nr_pages; page[2] the
        // _deferred_list self-pointers; tails hold the compound_info mask.
        let cfg = v7_2();
        let r = run::<Page64>(cfg, &range(&cfg, BASE, 1024), &pgmap, s, false).unwrap();
        for head in [BASE, BASE + 512] {
            let p1 = r.page(head + 1);
            assert_eq!(p1.u64_at(16), 0x0000_0000_ffff_ffff, "7.2 {s}");
            assert_eq!(p1.u64_at(24), 0x0000_0000_ffff_ffff, "7.2 {s}");
            assert_eq!(p1.u64_at(32), 0xffff_ffff_ffff_ffff, "7.2 {s}");
            assert_eq!(p1.u64_at(40), 0, "7.2 {s}");
            assert_eq!(p1.u64_at(56), 0x200, "7.2 {s}");
            assert_eq!(p1.compound_head(), 0xffff_ffff_ffff_8001, "7.2 {s}");
            let list = vaddr::<Page64>(&cfg, head + 2) + 16;
            assert_eq!((r.page(head + 2).u64_at(16), r.page(head + 2).u64_at(24)), (list, list), "7.2 {s}");
        }
    }
}

/// A namespace that starts in a section whose first part is boot memory (an early section):
/// 7.2 writes all 512 struct pages of each 2 MiB compound page there and deduplicates from the
/// next section on; 6.12 writes 128 everywhere ("mm/mm_init: fix uninitialized struct pages
/// for ZONE_DEVICE").
#[test]
#[cfg_attr(miri, ignore = "a section of struct pages: too slow for Miri; equivalence.rs covers the paths")]
fn early_sections_get_every_struct_page_from_7_2() {
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    let pps = v7_2().pages_per_section();
    // Boot memory ends 64 MiB into the section at 4 GiB; the namespace starts there.
    let start = BASE + 0x4000;
    let nr = 2 * pps - 0x4000;
    for (cfg, early_written) in [(v6_12(), 128), (v7_2(), 512)] {
        let rg = range(&cfg, start, nr).with_boot_memory_end(start);
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &rg, &pgmap, s, false).unwrap();
            for head in (start..start + nr).step_by(512) {
                let written = if head < BASE + pps { early_written } else { 128 };
                let last = head + written - 1;
                assert!(r.page(last).compound_head() & 1 == 1, "{} {s}: tail {last:#x}", cfg.version);
                if written < 512 {
                    assert!(r.page(head + written).words().iter().all(|&w| w == GUARD_WORD));
                }
            }
            let expect =
                if cfg.version == KernelVersion::V7_2 { 0x4000 / 512 * 512 } else { 0x4000 / 512 * 128 };
            let later = (nr - (BASE + pps - start)) / 512 * 128;
            assert_eq!(r.report.pages_initialized, expect + later, "{} {s}", cfg.version);
        }
    }
}

/// The struct pages of the altmap part (the memory that holds the device's memmap), before
/// `memmap_init_zone_device`: plain reserved ZONE_DEVICE pages (`lru` self-pointers, refcount 1,
/// mapcount -1, no pgmap), the reserve PFNs untouched, MOVABLE from the first pageblock-aligned
/// PFN of the part (both kernels: fsdax and devdax namespaces with `map=dev`).
#[test]
#[cfg_attr(miri, ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers the paths")]
fn the_altmap_part_is_initialized_as_reserved_pages() {
    for cfg in [v6_12(), v7_2()] {
        let l = cfg.flags_layout().unwrap();
        let altmap = VmemAltmap { base_pfn: BASE, reserve: 2, free: 4606 };
        let pgmap = DevPagemap::new(MemoryType::FsDax).with_altmap(altmap);
        for s in STRATEGIES {
            let r =
                run_full::<Page64>(cfg, &range(&cfg, BASE, 8192), &pgmap, InitOptions::new(s), false, true)
                    .unwrap();
            assert!(r.page(BASE).words().iter().all(|&w| w == GUARD_WORD), "reserve pfn written");
            assert!(r.page(BASE + 1).words().iter().all(|&w| w == GUARD_WORD), "reserve pfn written");
            for pfn in BASE + 2..BASE + 4608 {
                let p = r.page(pfn);
                let own = vaddr::<Page64>(&cfg, pfn) + 8;
                assert_eq!(
                    (p.u64_at(memmap_core::offsets::LRU_NEXT), p.u64_at(memmap_core::offsets::LRU_PREV)),
                    (own, own),
                    "{} {s} {pfn:#x}",
                    cfg.version
                );
                assert!(p.test_flag(PG::RESERVED));
                assert_eq!((p.refcount(), p.mapcount()), (1, -1));
                assert_eq!((l.zone(p.flags()), l.node(p.flags())), (cfg.zone_device(), 1));
            }
            // The device pages proper start after the part.
            assert_eq!(r.page(BASE + 4608).pgmap(), pgmap.addr);
            let movable = |pfn: u64| {
                r.pageblocks[((pfn >> 9) - (r.base_pfn >> 9)) as usize] == MigrateType::Movable.value()
            };
            assert!(!movable(BASE), "{} {s}: the part starts at an unaligned pfn", cfg.version);
            assert!((BASE + 512..BASE + 8192).step_by(512).all(movable), "{} {s}", cfg.version);
        }
    }
}

/// With the DAX vmemmap optimization, struct pages 128.. of a compound page read as copies of
/// struct pages 64..127 (its vmemmap pages 2.. map the frame of vmemmap page 1).
#[test]
fn deduplicated_struct_pages_alias_vmemmap_page_1() {
    let cfg = v7_2();
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    let rg = range(&cfg, BASE, 1024);
    let alias = |pfn| vmemmap_alias::<Page64>(&cfg, &rg, &pgmap, pfn);
    assert_eq!(alias(BASE + 127), None);
    assert_eq!(alias(BASE + 128), Some(BASE + 64));
    assert_eq!(alias(BASE + 511), Some(BASE + 127));
    assert_eq!(alias(BASE + 512 + 200), Some(BASE + 512 + 64 + 200 % 64));
    assert_eq!(alias(BASE + 1024), None, "outside the range");
    // No dedup with an altmap, with 72-byte struct pages, or in an early section.
    let with_altmap = pgmap.with_altmap(VmemAltmap { base_pfn: BASE, reserve: 0, free: 512 });
    assert_eq!(vmemmap_alias::<Page64>(&cfg, &rg, &with_altmap, BASE + 600), None);
    assert_eq!(vmemmap_alias::<memmap_core::Page72>(&cfg, &rg, &pgmap, BASE + 200), None);
    // Boot memory in the first page of the range's section makes the section early.
    let early = rg.with_boot_memory_end(BASE + 1);
    assert_eq!(vmemmap_alias::<Page64>(&cfg, &early, &pgmap, BASE + 200), None);
}
