//! Inputs a careless or hostile caller passes to the safe API: each is a typed error or a
//! correct result, never a panic, a hang or a write outside the memmap.

use memmap_core::{
    DevPagemap, InitError, InitOptions, KernelConfig, Memmap, MemoryType, MigrateType, NoHooks, Page64,
    Page72, Strategy, StructPage, VmemAltmap, ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
    vmemmap_can_optimize,
};
use support::{is_guard, run};

const STRATEGIES: [Strategy; 4] = [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto];

/// A memmap that would reach past the configuration's last PFN is refused: the template loops'
/// pageblock arithmetic (`(pfn | (pb - 1)) + 1`) used to wrap to 0 on the last pageblock of the
/// `u64` space and write past the slice.
#[test]
fn a_memmap_past_the_last_pfn_is_refused() {
    let cfg = KernelConfig::X86_64;
    let mut pages = vec![Page64::ZEROED; 16];
    let mut pb = vec![0u8; 2];
    for base in [u64::MAX - 16, u64::MAX - 15, cfg.max_pfn() - 15, cfg.max_pfn()] {
        let err = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap_err();
        assert!(
            matches!(err, InitError::BeyondMaxPfn { .. } | InitError::RangeOverflow { .. }),
            "base {base:#x}: {err:?}"
        );
    }
    assert!(Memmap::new(cfg, cfg.max_pfn() - 16, &mut pages, &mut pb).is_ok());
    assert_eq!(cfg.max_pfn(), 1 << (46 - 12));
}

/// The last pageblock below the configuration's last PFN initializes like any other, with
/// every strategy, and nothing is written outside the range.
#[test]
fn the_last_pageblock_of_the_pfn_space_initializes() {
    let cfg = KernelConfig::X86_64;
    let n = if cfg!(miri) { 64 } else { 1024 };
    // The harness adds 3 guard struct pages after the range: they end exactly at the last PFN.
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, cfg.max_pfn() - n - 3, n);
    let slow =
        run::<Page64>(cfg, &range, &DevPagemap::new(MemoryType::Generic), Strategy::Slow, false).unwrap();
    assert!(slow.guard_intact(&range));
    for s in STRATEGIES {
        let r = run::<Page64>(cfg, &range, &DevPagemap::new(MemoryType::Generic), s, false).unwrap();
        assert_eq!(r.pages, slow.pages, "{s}");
        assert_eq!(r.pageblocks, slow.pageblocks, "{s}");
        assert_eq!(r.resched, slow.resched, "{s}");
    }
}

/// An altmap that covers the whole range leaves nothing to initialize: every strategy returns
/// a report of zero pages starting at the altmap's end and writes nothing (it used to panic with
/// "pfn outside memmap" in the template, streaming and auto paths).
#[test]
fn an_altmap_covering_the_whole_range_is_a_no_op() {
    let cfg = KernelConfig::X86_64;
    let start = 1 << 20;
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, start, 64);
    for (reserve, free) in [(32, 32), (0, 64), (64, 0)] {
        let pgmap =
            DevPagemap::new(MemoryType::FsDax).with_altmap(VmemAltmap { base_pfn: start, reserve, free });
        for s in STRATEGIES {
            let r = run::<Page64>(cfg, &range, &pgmap, s, false).unwrap();
            assert_eq!(
                (r.report.start_pfn, r.report.nr_pages, r.report.pages_initialized),
                (start + 64, 0, 0)
            );
            assert!(r.pages.iter().all(is_guard), "{s}: nothing written");
            assert!(r.resched.is_empty());
        }
    }
}

/// Public helpers are total: absurd arguments give a saturated or "no" answer, not an
/// arithmetic panic.
#[test]
fn helpers_do_not_panic_on_absurd_arguments() {
    let cfg = KernelConfig::X86_64;
    assert_eq!(pageblocks_needed(&cfg, u64::MAX, 2), 1);
    assert_eq!(
        pageblocks_needed(&cfg, 0, u64::MAX),
        usize::try_from((u64::MAX >> 9) + 1).unwrap_or(usize::MAX)
    );
    for shift in [60, 63, 64, 200, u32::MAX] {
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
        assert_eq!(pgmap.vmemmap_nr(), if shift < 64 { 1 << shift } else { u64::MAX });
        assert!(vmemmap_can_optimize(&cfg, 64, &pgmap));
        assert!(!vmemmap_can_optimize(&cfg, 72, &pgmap));
        // The initializer refuses the shift with a typed error.
        let mut pages = vec![Page64::ZEROED; 4];
        let mut pb = vec![0u8; 1];
        let mut m = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
        let range = ZoneDeviceRange::new(cfg.zone_device(), 0, 0, 4);
        let err = memmap_init_zone_device(&mut m, &range, &pgmap, &InitOptions::default(), &mut NoHooks);
        assert!(matches!(err, Err(InitError::VmemmapShiftTooLarge { .. })));
    }
    for wide in [65, 1000, u32::MAX] {
        for cfg in [
            KernelConfig { nodes_shift: wide, ..cfg },
            KernelConfig { last_cpupid_shift: wide, ..cfg },
            KernelConfig { kasan_tag_width: wide, ..cfg },
            KernelConfig { lru_gen_width: wide, ..cfg },
            KernelConfig { lru_refs_width: wide, ..cfg },
            KernelConfig { page_shift: wide, ..cfg },
            KernelConfig { section_size_bits: wide, ..cfg },
            KernelConfig { pageblock_order: wide, ..cfg },
            KernelConfig { max_page_order: wide, ..cfg },
            KernelConfig { max_physmem_bits: wide, ..cfg },
            KernelConfig { max_nr_zones: wide, ..cfg },
            KernelConfig { nr_pageflags: wide, ..cfg },
        ] {
            assert!(cfg.flags_layout().is_err(), "{cfg:?}");
            // The accessors stay total on such a configuration.
            let _ = (
                cfg.page_size(),
                cfg.pages_per_section(),
                cfg.pageblock_nr_pages(),
                cfg.max_order_nr_pages(),
            );
            let _ = (cfg.pfn_to_virt(u64::MAX), cfg.pfn_to_section_nr(u64::MAX), cfg.max_pfn());
            let mut pages = vec![Page64::ZEROED; 4];
            let mut pb = vec![0u8; 1];
            assert!(matches!(Memmap::new(cfg, 0, &mut pages, &mut pb), Err(InitError::Config(_))));
        }
    }
}

/// The 72-byte layout at the top of the pfn space, with `virtual` computed from the PFN
/// (`pfn << PAGE_SHIFT` must not overflow for any PFN a memmap can hold).
#[test]
fn virtual_addresses_of_the_last_pfns_are_computed_without_overflow() {
    let cfg = KernelConfig::X86_64;
    let base = cfg.max_pfn() - 8;
    let mut pages = vec![Page72::ZEROED; 8];
    let mut pb = vec![0u8; 1];
    let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
    let range = ZoneDeviceRange::new(cfg.zone_device(), 0, base, 8);
    memmap_init_zone_device(
        &mut m,
        &range,
        &DevPagemap::new(MemoryType::Private),
        &InitOptions::default(),
        &mut NoHooks,
    )
    .unwrap();
    assert_eq!(m.read(base + 7).virtual_address(), Some(cfg.pfn_to_virt(base + 7)));
}

mod support;

/// A node whose zone ends at the configuration's last PFN boots in every mode and order, hands
/// every page to the buddy allocator, and allocates all of it back (it used to panic in debug
/// builds and hang in release builds when the node ended at the top of the `u64` PFN space).
#[test]
fn a_node_at_the_top_of_the_pfn_space_boots_and_allocates() {
    use memmap_core::{BootOptions, BootOrder, Gfp, InitMode, NodeLayout, PfnRange, ZoneSpan};
    let cfg = support::cfg();
    let max_block = cfg.max_order_nr_pages();
    // One guard page after the span (support::Storage): the span ends one page below the end.
    let end = cfg.max_pfn() - max_block;
    let start = end - 4 * max_block;
    let zones = [ZoneSpan::new(cfg.zone_device() - 2, start, end)];
    let memory = [PfnRange::new(start, end)];
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    for mode in [InitMode::Eager, InitMode::Deferred, InitMode::OnDemand] {
        for order in [BootOrder::Kernel, BootOrder::Fused] {
            let mut st = support::Storage::new(&cfg, layout.span(), false);
            let opts = BootOptions { order, ..BootOptions::new(mode) };
            let (node, _) = st.boot(cfg, layout, &opts);
            node.deferred_init_memmap_serial();
            let mut pages = 0;
            while let Ok(b) = node.alloc_pages(zones[0].zone, 0, Gfp::NONE) {
                pages += b.nr_pages();
            }
            assert_eq!(pages, end - start, "{mode} {order:?}");
        }
    }
}

/// A memmap of `n` pages at `base` over fresh storage, for the tests below.
fn with_memmap<R>(cfg: KernelConfig, base: u64, n: usize, f: impl FnOnce(&mut Memmap<'_, Page64>) -> R) -> R {
    let mut pages = vec![Page64::ZEROED; n];
    let mut pb = vec![0u8; pageblocks_needed(&cfg, base, n as u64)];
    let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
    f(&mut m)
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
}

/// `page->flags` has 64 bits: a flag bit of 64 or more is no flag. Setting or clearing it
/// changes nothing and testing it reads clear (it was a shift overflow: a panic in debug
/// builds, and in release builds `1 << 64` wrapped to bit 0, so `set_flag(pfn, 64)` set
/// `PG_locked`).
#[test]
fn flag_bits_of_64_and_more_name_no_flag() {
    with_memmap(KernelConfig::X86_64, 0x1000, 16, |m| {
        let mut p = Page64::ZEROED;
        p.set_u64_at(memmap_core::offsets::FLAGS, 0x00ff_00ff_00ff_00fe);
        m.write(0x1000, p);
        for bit in [64, 65, 127, 1 << 20, u32::MAX] {
            m.set_flag(0x1000, bit);
            m.clear_flag(0x1000, bit);
            assert_eq!(m.read(0x1000), p, "bit {bit}");
            assert!(!m.read(0x1000).test_flag(bit), "bit {bit}");
        }
        m.set_flag(0x1000, 0);
        assert!(m.read(0x1000).test_flag(0));
        m.clear_flag(0x1000, 63);
        assert!(!m.read(0x1000).test_flag(63));
    });
}

/// `pageblocks_with` visits the pageblocks the range shares with the memmap, once each: a range
/// ending at or past `u64::MAX` used to overflow (`start + nr - 1`), a range of 2^64 pages
/// to step through 2^55 pageblocks, and the pageblocks before the memmap's first were all
/// reported with the first one's migrate type.
#[test]
fn pageblocks_with_visits_only_the_memmaps_pageblocks() {
    let cfg = KernelConfig::X86_64;
    let base = 0x10_0000;
    with_memmap(cfg, base, 4 * 512, |m| {
        for b in 0..4 {
            m.set_pageblock_migratetype(base + b * 512, MigrateType::Movable);
        }
        m.set_pageblock_migratetype(base + 512, MigrateType::Unmovable);
        let all = [base, base + 1024, base + 1536];
        let t = std::time::Instant::now();
        assert_eq!(m.pageblocks_with(0, u64::MAX, MigrateType::Movable).collect::<Vec<_>>(), all);
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "one step per pageblock of the memmap");
        assert_eq!(
            m.pageblocks_with(base - 4096, 4096 + 700, MigrateType::Movable).collect::<Vec<_>>(),
            [base]
        );
        assert_eq!(m.pageblocks_with(base + 1, u64::MAX, MigrateType::Movable).collect::<Vec<_>>(), all);
        for start in [u64::MAX, u64::MAX - 1, u64::MAX - 511, base + 4 * 512] {
            assert_eq!(m.pageblocks_with(start, 2, MigrateType::Movable).count(), 0, "{start:#x}");
            assert_eq!(m.pageblocks_with(start, u64::MAX, MigrateType::Movable).count(), 0, "{start:#x}");
        }
        assert_eq!(m.pageblocks_with(base, 0, MigrateType::Movable).count(), 0);
    });
}

/// `memmap_init_compound` checks the shift and the range before writing: a page count that
/// overflows or leaves the memmap, or a shift of 64 and more, is a typed error and every page
/// keeps its bytes (`head_pfn + nr_pages` overflowed, and a shift of 64 overflowed the mask
/// shift; in release builds the loop wrapped and wrote nothing but page[1]).
#[test]
fn memmap_init_compound_refuses_what_it_cannot_write() {
    let cfg = KernelConfig::X86_64;
    let base = 0x1000;
    with_memmap(cfg, base, 1024, |m| {
        let before: Vec<_> = (base..base + 1024).map(|p| m.read(p)).collect();
        let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9);
        for nr in [u64::MAX, u64::MAX - 1, u64::MAX - 511, 1 << 63, 1025] {
            let e = m.memmap_init_compound(base, cfg.zone_device(), 0, &pgmap, nr, &mut NoHooks).unwrap_err();
            assert!(matches!(e, InitError::RangeOverflow { .. } | InitError::OutOfRange { .. }), "{nr}: {e}");
        }
        for shift in [19, 32, 63, 64, u32::MAX] {
            let pgmap = DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(shift);
            let e = m.memmap_init_compound(base, cfg.zone_device(), 0, &pgmap, 4, &mut NoHooks);
            assert!(matches!(e, Err(InitError::VmemmapShiftTooLarge { .. })), "{shift}: {e:?}");
        }
        let e = m.memmap_init_compound(base + 1023, cfg.zone_device(), 0, &pgmap, 1, &mut NoHooks);
        assert!(matches!(e, Err(InitError::OutOfRange { nr_pages: 3, .. })), "page[1] and page[2]: {e:?}");
        assert!((base..base + 1024).map(|p| m.read(p)).eq(before), "nothing written");
        m.memmap_init_compound(base, cfg.zone_device(), 0, &pgmap, 512, &mut NoHooks).unwrap();
        assert!(m.read(base).test_flag(memmap_core::PG::HEAD));
    });
}

/// `prep_compound_head` and `prep_compound_tail` with orders no compound page has: the 32-bit
/// page counts are 0 and the tail word keeps just its tail bit (`1u32 << order` and `order +
/// 6` overflowed); a tail index past the end of the PFN space is a tail outside the memmap
/// (the sum overflowed).
#[test]
fn compound_orders_and_tails_past_every_limit_do_not_overflow() {
    for cfg in [
        KernelConfig::X86_64,
        KernelConfig::X86_64_6_12,
        KernelConfig::X86_64.with_version(memmap_core::KernelVersion::V6_1),
    ] {
        with_memmap(cfg, 0x1000, 16, |m| {
            for order in [31, 32, 63, 64, 255, 256, u32::MAX] {
                // The kernel's order: the tails, then the head.
                m.set_flag(0x1000, cfg.behaviour().page_flags.head);
                m.prep_compound_tail(0x1000, 1, order);
                m.prep_compound_head(0x1000, order);
            }
            // Page[1]'s 32-bit `_nr_pages` / `_folio_nr_pages` (+56, +32, +28) holds 0.
            let p1 = m.read(0x1001);
            let at = match cfg.behaviour().folio_layout {
                memmap_core::FolioLayout::MmIds => 56,
                memmap_core::FolioLayout::NrPages => 32,
                _ => 28,
            };
            assert_eq!(p1.u32_at(at), 0, "{} {}", cfg.name, cfg.version);
        });
    }
    let cfg = KernelConfig::X86_64;
    assert_eq!(cfg.compound_head_word(0, u32::MAX, 64), 1);
    assert_eq!(cfg.compound_head_word(0, 58, 64), 1);
    assert_eq!(cfg.compound_head_word(0, 9, 64), 0xffff_ffff_ffff_8001);
    for idx in [u64::MAX, u64::MAX - 0x1000, 16] {
        let msg = panic_message(|| with_memmap(cfg, 0x1000, 16, |m| m.prep_compound_tail(0x1000, idx, 9)));
        assert!(msg.contains("outside memmap"), "{idx:#x}: {msg}");
    }
}

/// The padata split near the top of the `u64` space and with absurd sizes: `nworks * 4`
/// saturates (it overflowed with more than 2^62 works), each call's size is computed without
/// `start + 1` (which overflowed on the last chunk of a job ending at `u64::MAX`), and a job
/// that ends past `u64::MAX` is a typed error with no call made.
#[test]
fn padata_jobs_at_the_top_of_the_u64_space() {
    use stream_par::{PadataError, PadataJob, PadataPlan, padata_do_multithreaded};
    let huge = PadataJob { start: 0, size: u64::MAX, align: 1, min_chunk: 1, max_threads: usize::MAX };
    let plan = huge.plan().unwrap();
    assert_eq!(plan.chunk, 1);
    assert_eq!(plan.nworks, usize::MAX);
    let top = PadataJob { start: u64::MAX - 100, size: 100, align: 8, min_chunk: 8, max_threads: 4 };
    assert_eq!(top.plan(), Some(PadataPlan { nworks: 4, chunk: 8 }));
    let calls: Vec<_> = top.chunks().unwrap().collect();
    assert_eq!(calls.first().unwrap().0, u64::MAX - 100);
    assert_eq!(calls.last().unwrap().1, u64::MAX);
    assert!(calls.windows(2).all(|w| w[0].1 == w[1].0 && w[0].1 % 8 == 0));
    let seen = std::sync::Mutex::new(Vec::new());
    let report = padata_do_multithreaded(&top, |s, e| seen.lock().unwrap().push((s, e))).unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, calls);
    assert_eq!(report.plan, top.plan());
    for (start, size) in [(u64::MAX, 1), (u64::MAX - 5, 10), (1, u64::MAX)] {
        let job = PadataJob { start, size, align: 1, min_chunk: 1, max_threads: 2 };
        let e = PadataError::RangeOverflow { start, size };
        assert_eq!(job.end(), Err(e));
        assert!(matches!(job.chunks(), Err(x) if x == e));
        let ran = std::sync::atomic::AtomicBool::new(false);
        let r = padata_do_multithreaded(&job, |_, _| ran.store(true, std::sync::atomic::Ordering::Relaxed));
        assert_eq!(r.unwrap_err(), e);
        assert!(!ran.into_inner(), "no call is made");
        assert!(e.to_string().contains("ends past u64::MAX"), "{e}");
    }
}

/// A range past the end of the `u64` PFN space names itself in the error.
#[test]
fn range_overflow_names_the_range() {
    let cfg = KernelConfig::X86_64;
    with_memmap(cfg, 0, 16, |m| {
        let range = ZoneDeviceRange::new(cfg.zone_device(), 0, u64::MAX - 3, 8);
        let e = memmap_init_zone_device(
            m,
            &range,
            &DevPagemap::new(MemoryType::FsDax),
            &InitOptions::default(),
            &mut NoHooks,
        )
        .unwrap_err();
        assert_eq!(e, InitError::RangeOverflow { start_pfn: u64::MAX - 3, nr_pages: 8 });
        assert!(
            e.to_string()
                .contains("[0xfffffffffffffffc, +0x8) overflows the u64 pfn space (at most 0x3 pages"),
            "{e}"
        );
    });
}

/// The ZONE_DEVICE ranges of every golden extract (`crates/kernel-oracle/golden`) are ranges the
/// kernel maps; a 1 MiB-aligned fsdax namespace is not, with the kernel's reason.
#[test]
fn the_kernels_zone_device_alignment_rules() {
    use memmap_core::{Unmappable, check_memremap_pages};
    let cfg = KernelConfig::X86_64;
    let golden = [
        (MemoryType::Generic, 1_048_576, 524_288),
        (MemoryType::Generic, 1_048_576, 262_144),
        (MemoryType::Generic, 1_064_960, 245_760),
        (MemoryType::Generic, 1_572_864, 262_144),
        (MemoryType::FsDax, 1_048_576, 262_144),
    ];
    for (t, start, n) in golden {
        let range = ZoneDeviceRange::new(cfg.zone_device(), 0, start, n);
        assert_eq!(check_memremap_pages(&cfg, &range, &DevPagemap::new(t)), Ok(()), "{t} {start:#x}+{n}");
    }
    let fsdax = ZoneDeviceRange::new(cfg.zone_device(), 0, 0x10_0100, 0x4_0000);
    let e = check_memremap_pages(&cfg, &fsdax, &DevPagemap::new(MemoryType::FsDax)).unwrap_err();
    assert!(
        matches!(e, InitError::NotMappable { why: Unmappable::PmemMisaligned, align_pages: 512, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("misaligned, unable to map"), "{e}");
    let arm = KernelConfig { page_shift: 16, ..KernelConfig::ARM64 };
    let e = check_memremap_pages(
        &arm,
        &ZoneDeviceRange::new(4, 0, 16, 32),
        &DevPagemap::new(MemoryType::Generic),
    );
    assert!(
        matches!(e, Err(InitError::NotMappable { align_pages: 32, why: Unmappable::AddPagesMisaligned, .. })),
        "{e:?}"
    );
}

/// A hot-added zone's free lists only ever link struct pages of the memmap they were built
/// in: a struct page the caller made look free (the buddy page type, an order in `private`)
/// is no free block, and a zone used with another memmap leaves its lists alone. Both reached
/// an `unreachable!` (or indexed past the free areas with a large order).
#[test]
fn hotplug_free_lists_survive_foreign_and_forged_struct_pages() {
    use memmap_core::{HotplugError, HotplugZone, OnlineOptions, online_pages, take_free_block};
    // Sections of 256 struct pages under Miri (`support::cfg`), 32768 otherwise.
    let cfg = support::cfg();
    let pps = cfg.pages_per_section();
    let max = cfg.max_page_order;
    let block = 1u64 << max;
    let (base, n) = (pps, 2 * pps as usize);
    let mut pages = vec![Page64::ZEROED; n];
    let mut pb = vec![0u8; pageblocks_needed(&cfg, base, n as u64)];
    let mut m = Memmap::new(cfg, base, &mut pages, &mut pb).unwrap();
    let mut zone = HotplugZone::new(&cfg, 0, 2).unwrap();
    online_pages(&mut m, &mut zone, base, pps, &OnlineOptions::default(), &mut NoHooks).unwrap();
    // A forged free block in the part not onlined: page type, order, links to nowhere.
    let forged = base + pps + block;
    let mut p = m.read(base);
    p.set_u64_at(8, 0x1234_5678);
    p.set_u64_at(16, 0x9abc_def0);
    for order in [u64::from(max), u64::from(max) + 1, 23, 24, 200] {
        p.set_u64_at(40, order);
        m.write(forged, p);
        assert_eq!(
            take_free_block(&mut m, &mut zone, forged),
            Err(HotplugError::NotFree { pfn: forged }),
            "order {order}"
        );
    }
    // A cycle on a real list: the walk ends after the list's count.
    let first = {
        let mut v = Vec::new();
        zone.for_each_free_block(&m, max, MigrateType::Movable, |pfn| v.push(pfn));
        v
    };
    assert_eq!(first.len() as u64, pps / block);
    let mut head = m.read(first[0]);
    head.set_u64_at(8, m.vaddr(first[0]) + 8);
    m.write(first[0], head);
    let mut walked = 0;
    zone.for_each_free_block(&m, max, MigrateType::Movable, |_| walked += 1);
    assert_eq!(walked, pps / block);
    // The same zone with a memmap elsewhere: onlining there neither panics nor links its
    // pages into the other memmap's lists.
    let other_base = 8 * pps;
    let mut pages2 = vec![Page64::ZEROED; pps as usize];
    let mut pb2 = vec![0u8; pageblocks_needed(&cfg, other_base, pps)];
    let mut m2 = Memmap::new(cfg, other_base, &mut pages2, &mut pb2).unwrap();
    online_pages(&mut m2, &mut zone, other_base, pps, &OnlineOptions::default(), &mut NoHooks).unwrap();
    assert_eq!(zone.present_pages(), 2 * pps);
    let _ = take_free_block(&mut m2, &mut zone, other_base);
    let _ = take_free_block(&mut m, &mut zone, first[1]);
}

/// Accessors on configurations no kernel has stay total.
#[test]
fn accessors_of_absurd_configurations_do_not_panic() {
    let none = KernelConfig { max_nr_zones: 0, ..KernelConfig::X86_64 };
    assert_eq!(none.zone_device(), 0);
    let top = KernelConfig { page_offset: u64::MAX, ..KernelConfig::X86_64 };
    let zone = memmap_core::HotplugZone::new(&top, 1023, 3).unwrap();
    let _ = zone.free_list_addr(23, MigrateType::Isolate);
    assert_eq!(zone.nr_free(u32::MAX, MigrateType::Movable), 0);
}

/// `max_pfn` of a configuration no validation has seen saturates instead of wrapping its shift
/// (`& 63` once made 80 physical address bits a 16-page machine).
#[test]
fn max_pfn_saturates_past_64_bits_of_pfns() {
    let at = |bits| KernelConfig { max_physmem_bits: bits, ..KernelConfig::X86_64 }.max_pfn();
    assert_eq!(at(75), 1 << 63);
    assert_eq!(at(76), u64::MAX);
    assert_eq!(at(80), u64::MAX);
    assert_eq!(at(u32::MAX), u64::MAX);
    assert_eq!(at(0), 1);
}

/// A `.config` that chooses two page sizes (a Kconfig `choice` sets one) is refused, naming both
/// symbols, instead of taking the first one silently.
#[test]
fn a_config_with_two_page_sizes_is_refused() {
    use memmap_core::{Kconfig, KconfigError};
    for text in [
        "CONFIG_ARM64=y\nCONFIG_ARM64_16K_PAGES=y\nCONFIG_ARM64_64K_PAGES=y\n",
        "CONFIG_ARM64=y\nCONFIG_ARM64_4K_PAGES=y\nCONFIG_ARM64_16K_PAGES=y\n",
        "CONFIG_ARM64=y\nCONFIG_PAGE_SHIFT=12\nCONFIG_ARM64_64K_PAGES=y\n",
        "CONFIG_PPC64=y\nCONFIG_PPC_4K_PAGES=y\nCONFIG_PPC_64K_PAGES=y\n",
    ] {
        let got = KernelConfig::from_kconfig(&Kconfig::new(text));
        assert!(matches!(got, Err(KconfigError::Conflict { .. })), "{text}: {got:?}");
    }
    // One choice, agreeing with CONFIG_PAGE_SHIFT, is the 16 KiB preset.
    let one = KernelConfig::from_kconfig(&Kconfig::new(
        "CONFIG_ARM64=y\nCONFIG_PAGE_SHIFT=14\nCONFIG_ARM64_16K_PAGES=y\n",
    ));
    assert_eq!(one.map(|c| c.page_shift), Ok(14));
}
