//! `memmap_init_zone_device()` (`mm/mm_init.c`): what the kernel's ZONE_DEVICE init leaves in
//! every struct page, pageblock and tracepoint event, and the template series' rules (the fast
//! paths equal the slow path, fall back to it when they must, refresh the PFN-dependent fields),
//! plus the typed errors.

mod support;

use memmap_core::Named;
use memmap_core::{
    DevPagemap, InitError, InitOptions, KernelConfig, KernelVersion, Memmap, MemoryType, MigrateType, PG,
    Page64, Page72, RecordingHooks, Strategy, StrategyReason, StructPage, VmemAltmap, ZoneDeviceRange,
    memmap_init_zone_device, pageblocks_needed,
};
use support::{range, run, vaddr, with_debug_page_ref};

const BASE: u64 = 1 << 20;
const STRATEGIES: [Strategy; 3] = [Strategy::Slow, Strategy::Template, Strategy::Streaming];

fn cfg() -> KernelConfig {
    KernelConfig::X86_64
}

// ---------------------------------------------------------------- what the slow path writes

/// The `__init_single_page` order, observed through the tracepoint event that
/// `init_page_count()` emits in the middle of it: at that point the page is zeroed and linked
/// (zone/node set) but `_mapcount`, last_cpupid and `lru` are not yet written.
#[test]
fn init_single_page_runs_in_kernel_order() {
    let cfg = with_debug_page_ref(cfg());
    let l = cfg.flags_layout().unwrap();
    let mut pages = vec![support::guard_page::<Page64>(); 4];
    let mut pb = vec![0; 1];
    let mut m = Memmap::new(cfg, BASE, &mut pages, &mut pb).unwrap();
    let mut hooks = RecordingHooks::new(true);
    m.init_single_page(BASE + 2, 2, 3, &mut hooks);
    let [ev] = hooks.page_ref_events[..] else { panic!("one init_page_count event expected") };
    assert_eq!(ev.val, 1);
    assert_eq!(ev.count, 1);
    let links = l.set_node(l.set_zone(0, 2), 3);
    assert_eq!(ev.flags, links, "links set, cpupid not yet reset");
    assert_eq!(ev.mapcount, 0, "_mapcount not yet -1: zeroed before, set after init_page_count");
    assert_eq!(ev.mapping, 0);
    // Final bytes: the field table of `__init_single_page` (docs/kernel-model.md).
    let p = m.read(BASE + 2);
    let v = vaddr::<Page64>(&cfg, BASE + 2);
    let last_cpupid = ((1u64 << l.last_cpupid_width) - 1) << l.last_cpupid_pgshift;
    assert_eq!(p.flags(), links | last_cpupid, "page_cpupid_reset_last: LAST_CPUPID all ones");
    assert_eq!(
        (p.u64_at(memmap_core::offsets::LRU_NEXT), p.u64_at(memmap_core::offsets::LRU_PREV)),
        (v + 8, v + 8),
        "INIT_LIST_HEAD self-pointers"
    );
    assert_eq!(
        (
            p.u64_at(memmap_core::offsets::MAPPING),
            p.u64_at(memmap_core::offsets::INDEX),
            p.u64_at(memmap_core::offsets::PRIVATE)
        ),
        (0, 0, 0)
    );
    assert_eq!((p.mapcount(), p.refcount(), p.u64_at(memmap_core::offsets::MEMCG_DATA)), (-1, 1, 0));
    assert!(support::is_guard(&m.read(BASE + 1)) && support::is_guard(&m.read(BASE + 3)));
}

#[test]
fn want_page_virtual_gets_the_direct_map_address() {
    let cfg = cfg();
    let mut pages = vec![Page72::ZEROED; 2];
    let mut pb = vec![0; 1];
    let mut m = Memmap::new(cfg, BASE, &mut pages, &mut pb).unwrap();
    m.init_single_page(BASE + 1, 2, 0, &mut memmap_core::NoHooks);
    assert_eq!(m.read(BASE + 1).virtual_address(), Some(cfg.page_offset + ((BASE + 1) << 12)));
}

/// Every initialized pfn: PG_reserved, `_mapcount == -1`, `zone_device_data == NULL`, zone ==
/// ZONE_DEVICE, node == nid.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn every_initialized_page_is_reserved_device_zone_node_unmapped() {
    let cfg = cfg();
    let l = cfg.flags_layout().unwrap();
    // Struct pages written per compound page: all of them for 4-page compounds (one vmemmap
    // page, nothing to deduplicate), 128 (two vmemmap pages) for 2 MiB ones.
    for (shift, written) in [(0, 1), (2, 4), (9, 128)] {
        for s in STRATEGIES {
            let pgmap = DevPagemap::new(MemoryType::FsDax).with_vmemmap_shift(shift);
            let rg = ZoneDeviceRange { nid: 5, ..range(&cfg, BASE, 4 << shift.max(2)) };
            let r = run::<Page64>(cfg, &rg, &pgmap, s, false).unwrap();
            let ppc = 1u64 << shift;
            for pfn in BASE..BASE + rg.nr_pages {
                if ppc > 1 && (pfn - BASE) % ppc >= written {
                    continue;
                }
                let p = r.page(pfn);
                assert!(p.test_flag(PG::RESERVED), "{s} pfn {pfn:#x}");
                assert_eq!(p.mapcount(), -1);
                // zone_device_data is word 16, which page[1] of a compound reuses for the
                // _large_mapcount/_nr_pages_mapped pair and page[2] for _deferred_list.
                if ppc == 1 || !matches!((pfn - BASE) % ppc, 1 | 2) {
                    assert_eq!(p.u64_at(memmap_core::offsets::ZONE_DEVICE_DATA), 0, "{s} pfn {pfn:#x}");
                }
                assert_eq!(l.zone(p.flags()), cfg.zone_device());
                assert_eq!(l.node(p.flags()), 5);
            }
        }
    }
}

#[test]
fn word8_is_pgmap_for_heads_and_the_compound_info_for_tails() {
    // 7.2 with HVO built in encodes tails with the mask GENMASK(63, order + 6) | 1; 6.12 (and a
    // 7.2 without HVO, such as Debian's arm64 build) with head | 1.
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(3);
    for (cfg, mask) in [(cfg(), true), (KernelConfig::X86_64_6_12, false), (KernelConfig::ARM64, false)] {
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, BASE, 32), &pgmap, s, false).unwrap();
            for pfn in BASE..BASE + 32 {
                let head = pfn & !7;
                let w = r.page(pfn).compound_head();
                if pfn == head {
                    assert_eq!(w, pgmap.addr, "{s}: head {pfn:#x}");
                } else if mask {
                    assert_eq!(w, 0xffff_ffff_ffff_fe01, "{} {s}: tail {pfn:#x}", cfg.name);
                    assert_eq!(vaddr::<Page64>(&cfg, pfn) & (w & !1), vaddr::<Page64>(&cfg, head));
                } else {
                    assert_eq!(w, vaddr::<Page64>(&cfg, head) | 1, "{} {s}: tail {pfn:#x}", cfg.name);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn refcount_by_memory_type_and_zero_for_every_tail() {
    let cfg = cfg();
    for ty in MemoryType::ALL.iter().copied() {
        let want_head = if ty == MemoryType::Generic { 1 } else { 0 };
        for shift in [0, 4] {
            let pgmap = DevPagemap::new(ty).with_vmemmap_shift(shift);
            for s in STRATEGIES {
                let r = run::<Page64>(cfg, &range(&cfg, BASE, 64), &pgmap, s, false).unwrap();
                for pfn in BASE..BASE + 64 {
                    let is_head = pfn % (1 << shift) == 0;
                    let want = if is_head { want_head } else { 0 };
                    assert_eq!(r.page(pfn).refcount(), want, "{ty} shift {shift} {s} pfn {pfn:#x}");
                }
            }
        }
    }
}

/// Every tail has `mapping == TAIL_MAPPING` (the configuration's) and `private == 0`, except page\[1\] (folio counters)
/// and, for order > 1, page\[2\] (`_deferred_list.prev`) in the v6.18+ order.
#[test]
fn tails_have_tail_mapping_except_page1_and_page2() {
    let cfg = cfg();
    let tail_mapping = cfg.tail_mapping();
    for shift in [1, 2, 5] {
        let pgmap = DevPagemap::new(MemoryType::FsDax).with_vmemmap_shift(shift);
        let ppc = 1u64 << shift;
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, BASE, 2 * ppc), &pgmap, s, false).unwrap();
            for pfn in BASE..BASE + 2 * ppc {
                let k = (pfn - BASE) % ppc;
                let p = r.page(pfn);
                match k {
                    0 => assert_eq!(p.u64_at(memmap_core::offsets::MAPPING), 0),
                    1 => assert_ne!(p.u64_at(memmap_core::offsets::MAPPING), tail_mapping),
                    2 => assert_eq!(
                        p.u64_at(memmap_core::offsets::MAPPING),
                        vaddr::<Page64>(&cfg, pfn) + 16,
                        "{s} shift {shift}"
                    ),
                    _ => assert_eq!(
                        p.u64_at(memmap_core::offsets::MAPPING),
                        tail_mapping,
                        "{s} shift {shift} pfn {pfn:#x}"
                    ),
                }
                if k != 1 {
                    assert_eq!(p.u64_at(memmap_core::offsets::PRIVATE), 0);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn head_has_pg_head_and_page1_has_order_and_nr_pages() {
    let cfg = cfg();
    for shift in [1, 3, 9] {
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, BASE, 1 << shift), &pgmap, s, false).unwrap();
            assert!(r.page(BASE).test_flag(PG::HEAD), "{s}");
            assert!(!r.page(BASE + 1).test_flag(PG::HEAD));
            assert_eq!(r.page(BASE + 1).flags() & 0xff, u64::from(shift), "{s}: order in page[1] flags");
            assert_eq!(r.page(BASE + 1).u32_at(56), 1 << shift, "{s}: _nr_pages");
        }
    }
}

fn movable_pageblocks(r: &support::Run<Page64>) -> Vec<u64> {
    // From the raw pageblock bytes: index = pageblock - first pageblock of the memmap.
    let first = r.base_pfn >> 9;
    r.pageblocks
        .iter()
        .enumerate()
        .filter(|&(_, &v)| v == MigrateType::Movable.value())
        .map(|(i, _)| (first + i as u64) << 9)
        .collect()
}

/// Before 7.2 (`__init_zone_device_page` sets the migrate type): MOVABLE exactly at the
/// initialized pageblock-aligned pfns, and `cond_resched` at the same pfns, in order; with the
/// DAX vmemmap optimization the skipped struct pages get neither, so the later pageblocks of a
/// compound page larger than a pageblock stay unset (what Linux 6.12 shows under QEMU).
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn before_7_2_movable_and_cond_resched_exactly_at_initialized_pageblock_starts() {
    let cfg = KernelConfig::X86_64_6_12;
    // (vmemmap_shift, start, pages, struct pages written per compound page: 128 of a 2 MiB or a
    // 4 MiB compound page with the DAX vmemmap optimization)
    for (shift, start, nr, written) in
        [(0u32, BASE + 100, 2000u64, 1), (9, BASE, 4 * 512, 128), (10, BASE, 2 * 1024, 128)]
    {
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        let ppc = 1u64 << shift;
        let expect: Vec<u64> = (start..start + nr)
            .filter(|pfn| pfn % 512 == 0 && (ppc == 1 || (pfn - start) % ppc < written))
            .collect();
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, start, nr), &pgmap, s, false).unwrap();
            assert_eq!(r.resched, expect, "{s} shift {shift}");
            assert_eq!(movable_pageblocks(&r), expect, "{s} shift {shift}");
        }
    }
}

/// From 7.2 (`pageblock_migratetype_init_range` after the struct pages): every pageblock that
/// starts in the range is MOVABLE, whether its struct page was written or deduplicated away, and
/// `cond_resched` comes after each section-aligned compound head in the loop and after each
/// section-aligned pageblock in the pass (Debian's 7.2 under QEMU: all 1024 pageblocks of a
/// 2 GiB devdax namespace with 1 GiB pages are MOVABLE).
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn from_7_2_every_pageblock_of_the_range_is_movable() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    // (vmemmap_shift, start, pages): an unaligned start (its pageblock is not the range's:
    // `pageblock_align` rounds up), 2 MiB and 4 MiB compound pages across two sections.
    for (shift, start, nr) in [(0u32, BASE + 100, 2000u64), (9, BASE, 2 * pps), (10, BASE, 2 * pps)] {
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        let ppc = 1u64 << shift;
        let expect_movable: Vec<u64> = (start..start + nr).filter(|pfn| pfn % 512 == 0).collect();
        let heads = (start..start + nr).step_by(ppc as usize).filter(|pfn| pfn % pps == 0);
        let pass = expect_movable.iter().copied().filter(|pfn| pfn % pps == 0);
        let expect_resched: Vec<u64> = heads.chain(pass).collect();
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, start, nr), &pgmap, s, false).unwrap();
            assert_eq!(movable_pageblocks(&r), expect_movable, "{s} shift {shift}");
            assert_eq!(r.resched, expect_resched, "{s} shift {shift}");
        }
    }
}

#[test]
fn altmap_pfns_are_not_touched_and_without_altmap_start_is_first() {
    let cfg = cfg();
    let altmap = VmemAltmap { base_pfn: BASE, reserve: 3, free: 29 };
    for s in STRATEGIES {
        let pgmap = DevPagemap::new(MemoryType::FsDax).with_altmap(altmap);
        let r = run::<Page64>(cfg, &range(&cfg, BASE, 100), &pgmap, s, false).unwrap();
        for pfn in BASE..BASE + 32 {
            assert!(support::is_guard(r.page(pfn)), "{s}: altmap pfn {pfn:#x} written");
        }
        assert_eq!(r.report.start_pfn, BASE + 32);
        assert!(r.page(BASE + 32).test_flag(PG::RESERVED));
        let r = run::<Page64>(cfg, &range(&cfg, BASE, 100), &DevPagemap::new(MemoryType::FsDax), s, false)
            .unwrap();
        assert_eq!(r.report.start_pfn, BASE);
        assert!(r.page(BASE).test_flag(PG::RESERVED));
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn vmemmap_optimized_compounds_write_exactly_128_struct_pages() {
    let cfg = cfg();
    for shift in [8, 9, 18] {
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        let ppc = 1u64 << shift;
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range(&cfg, BASE, ppc), &pgmap, s, false).unwrap();
            let written = (BASE..BASE + ppc).filter(|&pfn| !support::is_guard(r.page(pfn))).count();
            assert_eq!(written, 128, "{s} shift {shift}");
            assert!((BASE + 128..BASE + ppc).all(|pfn| support::is_guard(r.page(pfn))));
            assert_eq!(r.report.pages_initialized, 128);
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn unoptimized_compounds_write_every_struct_page() {
    // Order 7: two vmemmap pages, not more than VMEMMAP_RESERVE_NR, so not optimizable; and
    // every order under arm64 (no ARCH_WANT_OPTIMIZE_DAX_VMEMMAP), altmap, or the 72-byte page.
    let cases: [(KernelConfig, u32, bool); 3] =
        [(cfg(), 7, false), (KernelConfig::ARM64, 9, false), (cfg(), 9, true)];
    for (cfg, shift, altmap) in cases {
        let ppc = 1u64 << shift;
        let mut pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        let mut nr = ppc;
        if altmap {
            pgmap = pgmap.with_altmap(VmemAltmap { base_pfn: BASE, reserve: ppc, free: 0 });
            nr = 2 * ppc;
        }
        let r = run::<Page64>(cfg, &range(&cfg, BASE, nr), &pgmap, Strategy::Slow, false).unwrap();
        let start = r.report.start_pfn;
        assert!((start..BASE + nr).all(|pfn| !support::is_guard(r.page(pfn))), "{} shift {shift}", cfg.name);
        assert_eq!(r.report.pages_initialized, ppc);
    }
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    let r = run::<Page72>(cfg(), &range(&cfg(), BASE, 512), &pgmap, Strategy::Streaming, false).unwrap();
    assert!((BASE..BASE + 512).all(|pfn| !support::is_guard(r.page(pfn))));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn pr_debug_reports_nr_pages_after_the_altmap_adjustment() {
    let cfg = cfg();
    let pgmap =
        DevPagemap::new(MemoryType::FsDax).with_altmap(VmemAltmap { base_pfn: BASE, reserve: 2, free: 6 });
    let r = run::<Page64>(cfg, &range(&cfg, BASE, 1000), &pgmap, Strategy::Slow, false).unwrap();
    assert_eq!(r.report.nr_pages, 992);
    assert_eq!(r.report.start_pfn, BASE + 8);
}

/// Tracepoint events: `1 + (0 or 1)` per head or single page, `1 + 1 + 1` per tail (GENERIC
/// tails: `1 + 0 + 1`), one per `set_page_count`/`init_page_count`.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn tracepoint_emits_one_event_per_set_page_count() {
    let cfg = with_debug_page_ref(cfg());
    for ty in MemoryType::ALL.iter().copied() {
        for shift in [0, 3] {
            let pgmap = DevPagemap::new(ty).with_vmemmap_shift(shift);
            let nr = 64u64;
            let ppc = 1u64 << shift;
            let heads = nr / ppc;
            let tails = nr - heads;
            let zero = u64::from(ty != MemoryType::Generic);
            let expect = heads * (1 + zero) + tails * (1 + zero + 1);
            for s in STRATEGIES {
                let r = run::<Page64>(cfg, &range(&cfg, BASE, nr), &pgmap, s, true).unwrap();
                assert_eq!(r.events.len() as u64, expect, "{ty} shift {shift} {s}");
                assert_eq!(r.report.used, Strategy::Slow);
                assert_eq!(
                    r.report.reason,
                    if s == Strategy::Slow {
                        StrategyReason::Requested
                    } else {
                        StrategyReason::PageRefTracepoint
                    }
                );
            }
            // Without CONFIG_DEBUG_PAGE_REF the hook is never consulted.
            let r = run::<Page64>(cfg_without_debug(), &range(&cfg, BASE, nr), &pgmap, Strategy::Slow, true)
                .unwrap();
            assert!(r.events.is_empty());
        }
    }
}

fn cfg_without_debug() -> KernelConfig {
    KernelConfig { debug_page_ref: false, ..cfg() }
}

// ---------------------------------------------------------------- the template and streaming paths

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn template_and_streaming_equal_slow_for_each_type_with_and_without_altmap() {
    for cfg in KernelConfig::ALL.iter().copied() {
        for ty in MemoryType::ALL.iter().copied() {
            for shift in [0, 1, 2, 9] {
                for altmap in [false, true] {
                    let ppc = 1u64 << shift;
                    let mut pgmap = DevPagemap::new(ty).with_vmemmap_shift(shift);
                    if altmap {
                        pgmap = pgmap.with_altmap(VmemAltmap { base_pfn: BASE, reserve: ppc, free: ppc });
                    }
                    let rg = range(&cfg, BASE, 6 * ppc.max(2));
                    let slow = run::<Page64>(cfg, &rg, &pgmap, Strategy::Slow, false).unwrap();
                    for s in [Strategy::Template, Strategy::Streaming] {
                        let fast = run::<Page64>(cfg, &rg, &pgmap, s, false).unwrap();
                        assert_eq!(
                            slow.pages, fast.pages,
                            "{} {ty} shift {shift} altmap {altmap} {s}",
                            cfg.name
                        );
                        assert_eq!(slow.pageblocks, fast.pageblocks);
                    }
                }
            }
        }
    }
}

#[test]
fn fast_paths_are_off_with_the_tracepoint_or_kasan_or_kmsan() {
    let base = cfg();
    let pgmap = DevPagemap::new(MemoryType::FsDax);
    let rg = range(&base, BASE, 64);
    for s in [Strategy::Template, Strategy::Streaming, Strategy::Auto] {
        let r = run::<Page64>(with_debug_page_ref(base), &rg, &pgmap, s, true).unwrap();
        assert_eq!((r.report.used, r.report.reason), (Strategy::Slow, StrategyReason::PageRefTracepoint));
        for c in [KernelConfig { kasan: true, ..base }, KernelConfig { kmsan: true, ..base }] {
            let r = run::<Page64>(c, &rg, &pgmap, s, false).unwrap();
            assert_eq!((r.report.used, r.report.reason), (Strategy::Slow, StrategyReason::KasanOrKmsan));
        }
        // Tracepoint compiled in but not enabled: the fast path stays on (Auto still picks Slow
        // when stream-hal itself is sanitized).
        let r = run::<Page64>(with_debug_page_ref(base), &rg, &pgmap, s, false).unwrap();
        let sanitized = matches!(
            stream_hal::backend(),
            stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_))
        );
        if s == Strategy::Auto && sanitized {
            assert_eq!((r.report.used, r.report.reason), (Strategy::Slow, StrategyReason::SanitizerBuild));
        } else {
            assert_ne!(r.report.used, Strategy::Slow);
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn auto_uses_the_threshold_unless_stream_hal_is_sanitized() {
    let cfg = cfg();
    let pgmap = DevPagemap::new(MemoryType::FsDax);
    let mut pages = vec![Page64::ZEROED; 20_000];
    let mut pb = vec![0; pageblocks_needed(&cfg, BASE, 20_000)];
    let mut m = Memmap::new(cfg, BASE, &mut pages, &mut pb).unwrap();
    let opts = InitOptions::new(Strategy::Auto).with_threshold(64 * 10_000);
    let small =
        memmap_init_zone_device(&mut m, &range(&cfg, BASE, 9_999), &pgmap, &opts, &mut memmap_core::NoHooks)
            .unwrap();
    let big =
        memmap_init_zone_device(&mut m, &range(&cfg, BASE, 10_000), &pgmap, &opts, &mut memmap_core::NoHooks)
            .unwrap();
    if let stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_)) = stream_hal::backend() {
        assert_eq!((small.used, small.reason), (Strategy::Slow, StrategyReason::SanitizerBuild));
        assert_eq!((big.used, big.reason), (Strategy::Slow, StrategyReason::SanitizerBuild));
    } else {
        assert_eq!((small.used, small.reason), (Strategy::Template, StrategyReason::BelowThreshold));
        assert_eq!((big.used, big.reason), (Strategy::Streaming, StrategyReason::AboveThreshold));
    }
}

/// Section bits (classic SPARSEMEM) and `virtual` (WANT_PAGE_VIRTUAL) are refreshed for every
/// pfn the template writes, including across a section boundary.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn pfn_dependent_fields_are_refreshed_per_pfn() {
    let cfg = KernelConfig::X86_64_CLASSIC_SPARSE;
    let l = cfg.flags_layout().unwrap();
    let start = 32768 - 600;
    for s in [Strategy::Template, Strategy::Streaming] {
        let r = run::<Page72>(cfg, &range(&cfg, start, 1200), &DevPagemap::new(MemoryType::FsDax), s, false)
            .unwrap();
        for pfn in start..start + 1200 {
            let p = r.page(pfn);
            assert_eq!(l.section(p.flags()), pfn >> 15, "{s} pfn {pfn:#x}");
            assert_eq!(p.virtual_address(), Some(cfg.pfn_to_virt(pfn)), "{s} pfn {pfn:#x}");
        }
    }
}

/// Pageblock-aligned pages are complete before `set_pageblock_migratetype` reads them back:
/// on classic SPARSEMEM the model's `page_to_pfn` reads the section bits of the page and panics
/// if they are not the pfn's (see `Memmap::set_pageblock_migratetype`), so a streaming path that
/// left those pages in flight or unwritten would fail here.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn pageblock_pages_are_readable_when_the_migratetype_is_set() {
    // Before 7.2 the migrate type is set as each pageblock-aligned page is initialized, from
    // 7.2 in a pass after them all (with one `cond_resched` at the section-aligned head and one
    // at the section-aligned pageblock of the pass).
    for (cfg, resched) in [
        (KernelConfig::X86_64_CLASSIC_SPARSE.with_version(KernelVersion::V6_12), 8),
        (KernelConfig::X86_64_CLASSIC_SPARSE, 2),
    ] {
        for shift in [0, 9] {
            let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
            let r =
                run::<Page64>(cfg, &range(&cfg, 3 << 15, 4096), &pgmap, Strategy::Streaming, false).unwrap();
            assert_eq!(r.resched.len(), resched, "{}", cfg.version);
            assert_eq!(movable_pageblocks(&r).len(), 8);
        }
    }
}

/// The streaming path never touches a streamed page before a drain: with the upstream policy it
/// drains before `memmap_init_compound` reads the head, before `prep_compound_head`, and before
/// returning; with the default minimal policy the pages read back are written with normal stores
/// and one drain before returning suffices. The cached template never drains. Both policies
/// produce the slow path's bytes.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of struct pages: too slow for Miri; equivalence.rs covers these paths at Miri sizes"
)]
fn streaming_drains_at_the_upstream_points() {
    use memmap_core::DrainPolicy;
    let cfg = cfg();
    let run_with = |rg: &ZoneDeviceRange, pgmap: &DevPagemap, opts: InitOptions| {
        let mut pages = vec![Page64::ZEROED; rg.nr_pages as usize];
        let mut pb = vec![0; pageblocks_needed(&cfg, rg.start_pfn, rg.nr_pages)];
        let mut m = Memmap::new(cfg, rg.start_pfn, &mut pages, &mut pb).unwrap();
        let report = memmap_init_zone_device(&mut m, rg, pgmap, &opts, &mut memmap_core::NoHooks).unwrap();
        (report, pages)
    };
    let streaming = InitOptions::new(Strategy::Streaming);
    let singles = DevPagemap::new(MemoryType::FsDax);
    for policy in [DrainPolicy::Minimal, DrainPolicy::Upstream] {
        let (r, _) = run_with(&range(&cfg, BASE, 1000), &singles, streaming.with_drains(policy));
        assert_eq!(r.drains, 1, "{policy:?}: once, before returning");
    }
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
    let rg = range(&cfg, BASE, 8 * 512);
    let (upstream, up_pages) = run_with(&rg, &pgmap, streaming.with_drains(DrainPolicy::Upstream));
    assert_eq!(upstream.drains, 17, "two per compound page, one before returning");
    let (minimal, min_pages) = run_with(&rg, &pgmap, streaming);
    assert_eq!(minimal.drains, 1, "one, before returning");
    let (slow, slow_pages) = run_with(&rg, &pgmap, InitOptions::new(Strategy::Slow));
    assert_eq!(slow.drains, 0);
    assert!(up_pages == slow_pages && min_pages == slow_pages);
    let (template, _) =
        run_with(&rg, &pgmap, InitOptions::new(Strategy::Template).with_drains(DrainPolicy::Upstream));
    assert_eq!(template.drains, 0);
}

// ---------------------------------------------------------------- typed errors

fn expect_err(range: ZoneDeviceRange, pgmap: DevPagemap, want: fn(&InitError) -> bool) {
    for s in Strategy::ALL.iter().copied() {
        let Err((e, untouched)) = run::<Page64>(cfg(), &range, &pgmap, s, false) else {
            panic!("{s}: {range:?} {pgmap:?} accepted");
        };
        assert!(want(&e), "{s}: unexpected error {e}");
        assert!(untouched, "{s}: {e} but the memmap or hooks were touched");
    }
}

#[test]
fn errors_range_outside_the_memmap() {
    let cfg = cfg();
    let mut pages = vec![Page64::ZEROED; 100];
    let mut pb = vec![0; 2];
    let mut m = Memmap::new(cfg, BASE, &mut pages, &mut pb).unwrap();
    let pgmap = DevPagemap::new(MemoryType::FsDax);
    for (start, nr) in [(BASE - 1, 10), (BASE + 90, 11), (BASE + 100, 1), (u64::MAX - 1, 5)] {
        let e = memmap_init_zone_device(
            &mut m,
            &range(&cfg, start, nr),
            &pgmap,
            &InitOptions::default(),
            &mut memmap_core::NoHooks,
        )
        .unwrap_err();
        assert!(matches!(e, InitError::OutOfRange { .. } | InitError::RangeOverflow { .. }), "{e}");
    }
    assert!(pages.iter().all(|p| *p == Page64::ZEROED));
}

#[test]
fn errors_misaligned_start_or_length() {
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(4);
    expect_err(range(&cfg(), BASE + 8, 32), pgmap, |e| matches!(e, InitError::Misaligned { .. }));
    expect_err(range(&cfg(), BASE, 40), pgmap, |e| matches!(e, InitError::Misaligned { .. }));
    // An altmap whose end is not compound-aligned misaligns the start.
    let pgmap = pgmap.with_altmap(VmemAltmap { base_pfn: BASE, reserve: 1, free: 2 });
    expect_err(range(&cfg(), BASE, 64), pgmap, |e| matches!(e, InitError::Misaligned { .. }));
}

#[test]
fn errors_altmap_outside_the_range() {
    let mk = |a| DevPagemap::new(MemoryType::FsDax).with_altmap(a);
    expect_err(range(&cfg(), BASE, 64), mk(VmemAltmap { base_pfn: BASE - 1, reserve: 0, free: 1 }), |e| {
        matches!(e, InitError::AltmapOutsideRange { .. })
    });
    expect_err(range(&cfg(), BASE, 64), mk(VmemAltmap { base_pfn: BASE, reserve: 40, free: 25 }), |e| {
        matches!(e, InitError::AltmapOutsideRange { .. })
    });
    expect_err(range(&cfg(), BASE, 64), mk(VmemAltmap { base_pfn: BASE, reserve: u64::MAX, free: 1 }), |e| {
        matches!(e, InitError::AltmapOutsideRange { .. })
    });
}

#[test]
fn errors_vmemmap_shift_too_large_wrong_zone_bad_node() {
    let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(19);
    // Natively a range aligned to the too-large compound size (so only the shift is wrong);
    // Miri checks the same error on a small range (the shift is checked first).
    let nr = if cfg!(miri) { 8 } else { 1 << 19 };
    expect_err(range(&cfg(), BASE, nr), pgmap, |e| {
        matches!(e, InitError::VmemmapShiftTooLarge { shift: 19, max: 18 })
    });
    let normal = ZoneDeviceRange { zone: 2, ..range(&cfg(), BASE, 8) };
    expect_err(normal, DevPagemap::new(MemoryType::FsDax), |e| {
        matches!(e, InitError::NotZoneDevice { zone: 2, zone_device: 4 })
    });
    // NODES_SHIFT 10: nodes 0..=1023.
    let far = ZoneDeviceRange { nid: 1024, ..range(&cfg(), BASE, 8) };
    expect_err(far, DevPagemap::new(MemoryType::FsDax), |e| {
        matches!(e, InitError::NodeOutOfRange { nid: 1024, max: 1023 })
    });
}

#[test]
fn zero_pages_is_a_no_op() {
    for s in Strategy::ALL.iter().copied() {
        let r = run::<Page64>(cfg(), &range(&cfg(), BASE, 0), &DevPagemap::new(MemoryType::FsDax), s, false)
            .unwrap();
        assert!(r.pages.iter().all(support::is_guard));
        assert_eq!((r.report.nr_pages, r.report.pages_initialized), (0, 0));
        assert!(r.resched.is_empty());
    }
}

#[test]
fn prep_compound_head_warns_without_pg_head_but_still_runs() {
    let cfg = cfg();
    let mut pages = vec![Page64::ZEROED; 8];
    let mut pb = vec![0; 1];
    let mut m = Memmap::new(cfg, BASE, &mut pages, &mut pb).unwrap();
    for pfn in BASE..BASE + 8 {
        m.init_single_page(pfn, 4, 0, &mut memmap_core::NoHooks);
    }
    assert!(!m.prep_compound_head(BASE, 3), "no PG_head: folio_set_order must WARN");
    assert_eq!(m.read(BASE + 1).flags() & 0xff, 0, "order not set");
    assert_eq!(m.read(BASE + 1).u32_at(16) as i32, -1, "_large_mapcount still set");
    m.set_flag(BASE, PG::HEAD);
    assert!(m.prep_compound_head(BASE, 3));
    assert_eq!(m.read(BASE + 1).flags() & 0xff, 3);
}
