//! Inputs a careless or hostile caller passes to the safe API: each is a typed error or a
//! correct result, never a panic, a hang or a write outside the memmap.

use memmap_core::{
    DevPagemap, InitError, InitOptions, KernelConfig, Memmap, MemoryType, NoHooks, Page64, Page72, Strategy,
    StructPage, VmemAltmap, ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
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
