//! Memory hotplug (`online_pages`): the template and streaming paths leave the same struct
//! pages, pageblocks, hook calls and free lists as the slow path, over random ranges, memory
//! blocks, zones, releases and layouts; and the state the kernel leaves (the oracle's
//! measurement on Linux 7.2 and 6.12: `LIST_POISON1/2` in the struct page at `head + 0x200` of
//! every `MAX_PAGE_ORDER` block, blocks on the free list in ascending pfn order).

mod support;

use memmap_core::{
    CountingHooks, HotplugError, HotplugTarget, HotplugZone, KernelConfig, KernelVersion, Memmap,
    MigrateType, OnlineOptions, Page64, Page72, Strategy, StructPage, online_pages, pageblocks_needed,
};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

const POISON1: u64 = 0xdead_0000_0000_0100;
const POISON2: u64 = 0xdead_0000_0000_0122;

/// A memmap of `nr` struct pages from `base`, guard pages around it untouched.
struct Storage<P: StructPage> {
    pages: Vec<P>,
    pageblocks: Vec<u8>,
}

impl<P: StructPage> Storage<P> {
    fn new(cfg: &KernelConfig, base: u64, nr: u64) -> Self {
        Storage { pages: vec![P::ZEROED; nr as usize], pageblocks: vec![0; pageblocks_needed(cfg, base, nr)] }
    }
}

/// What one run leaves: bytes, pageblocks, hook counts, free-list order per order.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    words: Vec<u64>,
    pageblocks: Vec<u8>,
    resched: u64,
    events: u64,
    lists: Vec<Vec<u64>>,
    managed: u64,
}

fn run<P: StructPage>(
    cfg: KernelConfig,
    base: u64,
    nr: u64,
    blocks: &[(u64, u64)],
    target: HotplugTarget,
    strategy: Strategy,
    tracepoint: bool,
) -> Outcome {
    let mut st = Storage::<P>::new(&cfg, base, nr);
    let mut m = Memmap::new(cfg, base, &mut st.pages, &mut st.pageblocks).unwrap();
    let mut zone = HotplugZone::for_target(&cfg, 0, target).unwrap();
    let mut hooks = CountingHooks::new(tracepoint);
    for &(s, n) in blocks {
        online_pages(&mut m, &mut zone, s, n, &OnlineOptions::new(strategy), &mut hooks).unwrap();
    }
    let lists = (0..=cfg.max_page_order)
        .map(|o| {
            let mut v = Vec::new();
            zone.for_each_free_block(&m, o, MigrateType::Movable, |p| v.push(p));
            v
        })
        .collect();
    let pageblocks = m.pageblock_bytes().to_vec();
    let words = st.pages.iter().flat_map(|p| p.words().to_vec()).collect();
    Outcome {
        words,
        pageblocks,
        resched: hooks.resched,
        events: hooks.page_ref_events,
        lists,
        managed: zone.managed_pages(),
    }
}

#[test]
#[cfg_attr(miri, ignore = "64 Ki struct pages; the property test covers the paths under Miri")]
fn a_hot_added_dimm_holds_the_list_poison_at_the_second_pageblock_of_every_block() {
    // 256 MiB at 4 GiB, two 128 MiB memory blocks, ZONE_NORMAL, as the oracle's guests.
    let cfg = KernelConfig::X86_64;
    let (base, nr) = (0x100000u64, 0x10000u64);
    let mut st = Storage::<Page64>::new(&cfg, base, nr);
    let mut m = Memmap::new(cfg, base, &mut st.pages, &mut st.pageblocks).unwrap();
    let mut zone = HotplugZone::for_target(&cfg, 0, HotplugTarget::Normal).unwrap();
    for b in 0..2 {
        let r = online_pages(
            &mut m,
            &mut zone,
            base + b * 0x8000,
            0x8000,
            &OnlineOptions::new(Strategy::Streaming),
            &mut memmap_core::NoHooks,
        )
        .unwrap();
        assert_eq!(r.chunks, 32);
    }
    let layout = *m.layout();
    for pfn in base..base + nr {
        let p = m.read(pfn);
        assert_eq!(layout.zone(p.flags()), 2, "pfn {pfn:#x}");
        assert_eq!(p.refcount(), 0, "pfn {pfn:#x}");
        let own = m.vaddr(pfn) + 8;
        match pfn % 0x400 {
            0 => {
                assert_eq!(p.page_type(), 0xf000_0000, "pfn {pfn:#x}: PGTY_buddy << 24");
                assert_eq!(p.u64_at(memmap_core::offsets::PRIVATE), 10);
            }
            0x200 => {
                assert_eq!(
                    (
                        p.u64_at(memmap_core::offsets::LRU_NEXT),
                        p.u64_at(memmap_core::offsets::LRU_PREV),
                        p.u64_at(memmap_core::offsets::PRIVATE)
                    ),
                    (POISON1, POISON2, 0),
                    "pfn {pfn:#x}"
                );
                assert_eq!(p.page_type(), u32::MAX);
            }
            _ => {
                assert_eq!(
                    (
                        p.u64_at(memmap_core::offsets::LRU_NEXT),
                        p.u64_at(memmap_core::offsets::LRU_PREV),
                        p.page_type()
                    ),
                    (own, own, u32::MAX),
                    "pfn {pfn:#x}"
                );
            }
        }
        if pfn % 512 == 0 {
            assert_eq!(m.pageblock_migratetype(pfn), Some(MigrateType::Movable));
        }
    }
    let mut order = Vec::new();
    zone.for_each_free_block(&m, 10, MigrateType::Movable, |p| order.push(p));
    let expect: Vec<u64> = (0..64).map(|k| base + k * 0x400).collect();
    assert_eq!(order, expect, "ascending pfn order");
    assert_eq!((zone.nr_free(10, MigrateType::Movable), zone.nr_free(9, MigrateType::Isolate)), (64, 0));
    assert_eq!((zone.managed_pages(), zone.present_pages()), (nr, nr));
}

#[test]
#[cfg_attr(miri, ignore = "32 Ki struct pages; the property test covers the paths under Miri")]
fn before_6_10_blocks_go_to_the_tail_unpoisoned() {
    let cfg = KernelConfig::X86_64_6_12.with_version(KernelVersion::V6_1);
    let (base, nr) = (0x100000u64, 0x8000u64);
    let mut st = Storage::<Page64>::new(&cfg, base, nr);
    let mut m = Memmap::new(cfg, base, &mut st.pages, &mut st.pageblocks).unwrap();
    let mut zone = HotplugZone::for_target(&cfg, 0, HotplugTarget::Movable).unwrap();
    online_pages(&mut m, &mut zone, base, nr, &OnlineOptions::new(Strategy::Slow), &mut memmap_core::NoHooks)
        .unwrap();
    let mut order = Vec::new();
    zone.for_each_free_block(&m, 10, MigrateType::Movable, |p| order.push(p));
    assert_eq!(order, (0..32).map(|k| base + k * 0x400).collect::<Vec<_>>());
    let p = m.read(base + 0x200);
    assert_eq!(p.u64_at(memmap_core::offsets::LRU_NEXT), m.vaddr(base + 0x200) + 8);
    assert_eq!(m.layout().zone(p.flags()), 3);
    // 6.1's page_type encoding: ~PG_buddy.
    assert_eq!(m.read(base).page_type(), 0xffff_ff7f);
}

#[test]
fn bad_ranges_are_typed_errors_and_write_nothing() {
    let cfg = KernelConfig::X86_64;
    let (base, nr) = (0x100000u64, 0x8000u64);
    let mut st = Storage::<Page64>::new(&cfg, base, nr);
    {
        let mut m = Memmap::new(cfg, base, &mut st.pages, &mut st.pageblocks).unwrap();
        let mut zone = HotplugZone::for_target(&cfg, 0, HotplugTarget::Normal).unwrap();
        let o = OnlineOptions::new(Strategy::Streaming);
        let mut h = memmap_core::NoHooks;
        assert!(matches!(
            online_pages(&mut m, &mut zone, base + 1, nr - 1, &o, &mut h),
            Err(HotplugError::Misaligned { .. })
        ));
        assert!(matches!(
            online_pages(&mut m, &mut zone, base, 512, &o, &mut h),
            Err(HotplugError::Misaligned { .. })
        ));
        assert!(matches!(
            online_pages(&mut m, &mut zone, base, 2 * nr, &o, &mut h),
            Err(HotplugError::Init(_))
        ));
        assert_eq!(online_pages(&mut m, &mut zone, base, 0, &o, &mut h).map(|r| r.chunks), Ok(0));
        let mut other =
            HotplugZone::for_target(&KernelConfig::X86_64_6_12, 0, HotplugTarget::Normal).unwrap();
        assert_eq!(
            online_pages(&mut m, &mut other, base, nr, &o, &mut h),
            Err(HotplugError::ZoneConfigMismatch)
        );
        assert!(matches!(HotplugZone::new(&cfg, 0, cfg.zone_device()), Err(HotplugError::BadZone { .. })));
    }
    assert!(st.pages.iter().all(|p| *p == Page64::ZEROED));
}

fn configs() -> impl proptest::strategy::Strategy<Value = KernelConfig> {
    if cfg!(miri) {
        // 256-page sections, 16-page pageblocks, MAX_PAGE_ORDER 6 (support::tiny): ranges Miri
        // can run, in the newest release and in 6.1 (the other free path).
        return prop_oneof![Just(support::tiny()), Just(support::tiny().with_version(KernelVersion::V6_1)),]
            .boxed();
    }
    prop_oneof![
        Just(KernelConfig::X86_64),
        Just(KernelConfig::X86_64_6_12),
        Just(KernelConfig::X86_64_6_12.with_version(KernelVersion::V6_1)),
        Just(KernelConfig::ARM64),
        Just(KernelConfig::X86_64_CLASSIC_SPARSE),
    ]
    .boxed()
}

proptest! {
    // Under Miri one case (each runs the slow, template and streaming paths).
    #![proptest_config(support::sized(24, 1))]

    /// Slow, template and streaming leave the same everything, over one to three memory blocks
    /// onlined in a random order, each starting at a random pageblock (as with
    /// `memmap_on_memory`) and ending at a section boundary.
    #[test]
    fn the_template_paths_equal_the_slow_path(
        cfg in configs(),
        layout72 in any::<bool>(),
        movable in any::<bool>(),
        tracepoint in any::<bool>(),
        skips in proptest::collection::vec(0u64..64, 1..=3),
        reverse in any::<bool>(),
    ) {
        let pps = cfg.pages_per_section();
        let pb = cfg.pageblock_nr_pages();
        let base = 4 * pps;
        let nsec = skips.len() as u64;
        let mut blocks: Vec<(u64, u64)> = skips
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let start = base + i as u64 * pps + (s * pb) % pps;
                (start, base + (i as u64 + 1) * pps - start)
            })
            .collect();
        if reverse {
            blocks.reverse();
        }
        let cfg = KernelConfig { debug_page_ref: tracepoint, ..cfg };
        let target = if movable { HotplugTarget::Movable } else { HotplugTarget::Normal };
        let nr = nsec * pps;
        let go = |s: Strategy| {
            if layout72 {
                run::<Page72>(cfg, base, nr, &blocks, target, s, tracepoint)
            } else {
                run::<Page64>(cfg, base, nr, &blocks, target, s, tracepoint)
            }
        };
        let slow = go(Strategy::Slow);
        prop_assert!(slow.lists.iter().any(|l| !l.is_empty()));
        for s in [Strategy::Template, Strategy::Streaming, Strategy::Auto] {
            prop_assert_eq!(&go(s), &slow, "{:?}", s);
        }
    }
}
