//! Deferred struct page init (`CONFIG_DEFERRED_STRUCT_PAGE_INIT`): which pages boot initializes,
//! how `deferred_init_memmap()` splits the rest between padata workers, when pages reach the
//! buddy allocator, and how `deferred_grow_zone()` serves allocations that arrive first.

mod support;

use memmap_core::Named;
use std::collections::BTreeSet;
use std::sync::Mutex;

use memmap_core::{
    BootOptions, Gfp, InitMode, MigrateType, PG, Page64, PfnRange, RecordingHooks, ReservedRange, Strategy,
    StructPage, ZoneSpan,
};
use memmap_core::{Memmap, Node, NodeLayout, NodeParts, pageblocks_needed};
use stream_par::{PadataJob, PadataPlan, padata_do_multithreaded};
use support::{Storage, cfg, free_blocks, free_map, is_guard, layout, maximal_blocks};

const NID: u32 = 1;

/// Initialized for `zone` (a free block's first page carries the buddy page type instead of
/// `_mapcount == -1`).
fn initialized_as(p: &Page64, zone: u32) -> bool {
    let l = cfg().flags_layout().unwrap();
    !is_guard(p)
        && l.zone(p.flags()) == zone
        && l.node(p.flags()) == NID
        && (p.mapcount() == -1 || p.page_type() == 0xf000_0000)
}

// ---------------------------------------------------------------- defer_init

/// Only the highest zone is deferred; lower zones are fully initialized even when they are
/// many sections long; the first deferred PFN is section-aligned and follows more than one
/// section of initialized pages.
#[test]
fn only_the_highest_zone_is_deferred_and_lower_zones_are_fully_initialized() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    let s0 = 4 * pps;
    let zones = [ZoneSpan::new(1, s0, s0 + 2 * pps), ZoneSpan::new(2, s0 + 2 * pps, s0 + 6 * pps)];
    let memory = [PfnRange::new(s0, s0 + 6 * pps)];
    let l = layout(NID, &zones, &memory, &[]);
    let mut st = Storage::new(&cfg, l.span(), false);
    let (mut node, report) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    let fdp = report.first_deferred_pfn.expect("something deferred");
    assert_eq!(fdp % pps, 0, "section-aligned");
    assert_eq!(fdp, s0 + 3 * pps, "after the first full section of the highest zone");
    for pfn in s0..s0 + 2 * pps {
        assert!(initialized_as(&node.read_page(pfn), 1), "lower zone pfn {pfn:#x}");
    }
    for pfn in s0 + 2 * pps..fdp {
        assert!(initialized_as(&node.read_page(pfn), 2), "pfn {pfn:#x} below fdp");
    }
    for pfn in fdp..s0 + 6 * pps {
        assert!(is_guard(&node.read_page(pfn)), "deferred pfn {pfn:#x} was written at boot");
    }
    assert_eq!(node.first_deferred_pfn(), fdp);
    assert!(node.deferred_pending());
}

/// Holes are not counted: a hole in the highest zone's first section pushes the first
/// deferred PFN one section further than without it.
#[test]
fn holes_are_not_counted() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    let s0 = 2 * pps;
    let zones = [ZoneSpan::new(2, s0, s0 + 5 * pps)];
    let fdp_of = |memory: &[PfnRange]| {
        let l = layout(NID, &zones, memory, &[]);
        let mut st = Storage::new(&cfg, l.span(), false);
        let (mut node, r) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
        // Holes are initialized as reserved, whatever the deferral.
        if memory.len() > 1 {
            let hole = memory[0].end;
            let p = node.read_page(hole);
            assert!(p.test_flag(PG::RESERVED) && p.mapcount() == -1);
        }
        r.first_deferred_pfn
    };
    assert_eq!(fdp_of(&[PfnRange::new(s0, s0 + 5 * pps)]), Some(s0 + pps));
    let with_hole = [PfnRange::new(s0, s0 + pps / 2), PfnRange::new(s0 + pps, s0 + 5 * pps)];
    assert_eq!(fdp_of(&with_hole), Some(s0 + 2 * pps));
}

// ---------------------------------------------------------------- reserved, free ranges

fn reserved_layout(pps: u64) -> (Vec<ZoneSpan>, Vec<PfnRange>, Vec<ReservedRange>) {
    let s0 = 2 * pps;
    let zones = vec![ZoneSpan::new(2, s0, s0 + 4 * pps)];
    let memory = vec![
        PfnRange::new(s0, s0 + 3 * pps + pps / 2),
        PfnRange::new(s0 + 3 * pps + pps / 2 + 8, s0 + 4 * pps),
    ];
    let reserved = vec![
        ReservedRange::new(s0 + 10, s0 + 20),
        ReservedRange::new(s0 + 2 * pps + 5, s0 + 2 * pps + 37),
        ReservedRange::noinit(s0 + 3 * pps, s0 + 3 * pps + 40),
    ];
    (zones, memory, reserved)
}

/// Reserved pages above `first_deferred_pfn` are initialized (and `PG_reserved`) at boot,
/// except `MEMBLOCK_RSRV_NOINIT` ones; free pages above it are not.
#[test]
fn reserved_pages_above_first_deferred_pfn_are_initialized_at_boot_unless_noinit() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    let (zones, memory, reserved) = reserved_layout(pps);
    let l = layout(NID, &zones, &memory, &reserved);
    let mut st = Storage::new(&cfg, l.span(), false);
    let (mut node, r) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    let fdp = r.first_deferred_pfn.unwrap();
    assert_eq!(fdp, zones[0].span.start + pps);
    let res = reserved[1].range;
    assert!(res.start > fdp);
    for pfn in res.start..res.end {
        let p = node.read_page(pfn);
        assert!(initialized_as(&p, 2) && p.test_flag(PG::RESERVED), "reserved pfn {pfn:#x}");
        assert_eq!(p.refcount(), 1);
    }
    for pfn in [res.start - 1, res.end] {
        assert!(is_guard(&node.read_page(pfn)), "free deferred pfn {pfn:#x} touched at boot");
    }
    for pfn in reserved[2].range.start..reserved[2].range.end {
        assert!(is_guard(&node.read_page(pfn)), "NOINIT pfn {pfn:#x} touched at boot");
    }
    // Reserved below fdp: initialized by memmap_init, PG_reserved by reserve_bootmem_region.
    assert!(node.read_page(reserved[0].range.start).test_flag(PG::RESERVED));
}

/// Deferred workers touch only free ranges: every non-free struct page is byte-identical
/// before and after `deferred_init_memmap`, NOINIT pages stay uninitialized, and every free
/// page of the zone is initialized and in the buddy allocator; in both job structures (one job
/// per free range before 6.18, one per zone from 6.18).
#[test]
fn deferred_workers_touch_only_free_ranges() {
    for version in [memmap_core::KernelVersion::V6_12, memmap_core::KernelVersion::V7_2] {
        workers_touch_only_free_ranges(cfg().with_version(version));
    }
}

fn workers_touch_only_free_ranges(cfg: memmap_core::KernelConfig) {
    let pps = cfg.pages_per_section();
    let (zones, memory, reserved) = reserved_layout(pps);
    let l = layout(NID, &zones, &memory, &reserved);
    let span = l.span();
    let mut st = Storage::new(&cfg, span, false);
    let (mut node, _) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    let before: Vec<Page64> = (span.start..span.end).map(|p| node.read_page(p)).collect();
    let report = node.deferred_init_memmap(stream_par::Threads::Fixed(2));
    if cfg.behaviour().deferred_job_per_zone {
        assert_eq!(report.jobs, 1, "one job per zone");
    } else {
        assert!(report.jobs >= 2, "one job per free range");
    }
    assert!(!node.deferred_pending());
    assert_eq!(node.first_deferred_pfn(), u64::MAX);
    for pfn in span.start..span.end {
        let p = node.read_page(pfn);
        if l.is_free(pfn) {
            assert!(initialized_as(&p, 2), "free pfn {pfn:#x}");
            assert_eq!(p.refcount(), 0, "free pfn {pfn:#x} handed to the buddy allocator");
        } else {
            assert_eq!(p, before[(pfn - span.start) as usize], "non-free pfn {pfn:#x} touched");
        }
    }
    assert!(is_guard(&node.read_page(reserved[2].range.start)));
    let expected = maximal_blocks(&free_map(&l, zones[0].span), zones[0].span.start, cfg.max_page_order);
    assert_eq!(free_blocks(&node, 2), expected);
}

// ---------------------------------------------------------------- padata

#[test]
fn padata_nworks_and_chunk_follow_the_kernel() {
    // nworks = min(size / max(min_chunk, align), max_threads); chunk = size / (nworks * 4),
    // at least min_chunk, rounded up to align.
    let cases = [
        // 64 GiB zone, 32 CPUs (the spec's worked example).
        (
            PadataJob { start: 0, size: 16_777_216, align: 32768, min_chunk: 32768, max_threads: 32 },
            32,
            131_072,
        ),
        // 100 / 8 = 12 works wanted, 4 threads; 100 / 16 = 6 -> min_chunk 8.
        (PadataJob { start: 3, size: 100, align: 8, min_chunk: 8, max_threads: 4 }, 4, 8),
        // 1000 / 64 = 15, 3 threads; 1000 / 12 = 83 -> roundup(83, 64) = 128.
        (PadataJob { start: 0, size: 1000, align: 64, min_chunk: 16, max_threads: 3 }, 3, 128),
        // Fewer pages than min_chunk: one work.
        (PadataJob { start: 7, size: 10, align: 16, min_chunk: 16, max_threads: 8 }, 1, 10),
        // 3 sections, 8 threads: 3 works; 3 * 32768 / 12 = 8192 -> min_chunk 32768.
        (
            PadataJob { start: 32768, size: 3 * 32768, align: 32768, min_chunk: 32768, max_threads: 8 },
            3,
            32768,
        ),
    ];
    for (job, nworks, chunk) in cases {
        assert_eq!(job.plan(), Some(PadataPlan { nworks, chunk }), "{job:?}");
    }
}

fn some_jobs() -> Vec<PadataJob> {
    let mut v = Vec::new();
    for start in [0u64, 5, 32768, 40_000] {
        for size in [1u64, 100, 32768, 65_537, 300_001] {
            for threads in [1usize, 2, 3, 8] {
                v.push(PadataJob { start, size, align: 32768, min_chunk: 32768, max_threads: threads });
                v.push(PadataJob { start, size, align: 64, min_chunk: 16, max_threads: threads });
            }
        }
    }
    v
}

/// Every call's `[start, end)` ends on a chunk boundary, except the last one.
#[test]
fn padata_calls_are_chunk_aligned_except_the_last() {
    for job in some_jobs() {
        let plan = job.plan().unwrap();
        let calls: Vec<_> = job.chunks().unwrap().collect();
        if plan.nworks == 1 {
            assert_eq!(calls, [(job.start, job.start + job.size)]);
            continue;
        }
        for &(_, end) in &calls[..calls.len() - 1] {
            assert_eq!(end % plan.chunk, 0, "{job:?}: call ending at {end}");
        }
        assert_eq!(calls.last().unwrap().1, job.start + job.size);
        assert!(calls.iter().all(|&(s, e)| e > s && e - s <= plan.chunk));
    }
}

/// The union of the calls made on real threads covers `[start, start + size)` exactly once.
#[test]
fn padata_union_covers_the_range_exactly_once() {
    let jobs: Vec<_> = some_jobs().into_iter().filter(|j| !cfg!(miri) || j.size <= 100).collect();
    for job in jobs {
        let seen = Mutex::new(Vec::new());
        let report = padata_do_multithreaded(&job, |s, e| seen.lock().unwrap().push((s, e))).unwrap();
        let mut calls = seen.into_inner().unwrap();
        calls.sort_unstable();
        let mut at = job.start;
        for &(s, e) in &calls {
            assert_eq!(s, at, "{job:?}: gap or overlap at {at}");
            at = e;
        }
        assert_eq!(at, job.start + job.size);
        let mut reported: Vec<_> = report.calls.concat();
        reported.sort_unstable();
        assert_eq!(reported, calls);
        assert_eq!(report.calls.len(), report.plan.unwrap().nworks);
    }
}

/// The calling thread is one of the works and runs chunks itself.
#[test]
fn padata_caller_participates() {
    let caller = std::thread::current().id();
    let job = PadataJob { start: 0, size: 64, align: 1, min_chunk: 1, max_threads: 2 };
    let threads = Mutex::new(BTreeSet::new());
    let report = padata_do_multithreaded(&job, |_, _| {
        threads.lock().unwrap().insert(format!("{:?}", std::thread::current().id()));
        std::thread::sleep(std::time::Duration::from_millis(if cfg!(miri) { 0 } else { 2 }));
    })
    .unwrap();
    assert_eq!(report.plan.unwrap().nworks, 2);
    assert!(!report.calls[0].is_empty(), "the caller ran no chunk");
    assert!(threads.lock().unwrap().contains(&format!("{caller:?}")));
    // One work: the caller does everything, in one call.
    let single = PadataJob { max_threads: 1, ..job };
    let ran_on = Mutex::new(Vec::new());
    padata_do_multithreaded(&single, |s, e| ran_on.lock().unwrap().push((std::thread::current().id(), s, e)))
        .unwrap();
    assert_eq!(ran_on.into_inner().unwrap(), [(caller, 0, 64)]);
}

// ---------------------------------------------------------------- freeing

/// Pages reach the buddy allocator only after they are initialized: every `set_page_count(0)`
/// of `__free_pages_core` (seen through the `page_ref_set` tracepoint) finds an initialized
/// page, and comes after that page's `init_page_count`.
#[test]
fn pages_are_freed_only_after_they_are_initialized() {
    let cfg = KernelConfig { debug_page_ref: true, ..support::tiny() };
    let pps = cfg.pages_per_section();
    let l_cfg = cfg.flags_layout().unwrap();
    let zones = [ZoneSpan::new(2, pps, 5 * pps)];
    let memory = [PfnRange::new(pps, 5 * pps - 3)];
    let reserved = [ReservedRange::new(2 * pps + 100, 2 * pps + 130)];
    let l = layout(NID, &zones, &memory, &reserved);
    let span = l.span();
    let mut pages = vec![Page64::ZEROED; (span.end + 1) as usize];
    let mut pb = vec![0; pageblocks_needed(&cfg, 0, span.end + 1)];
    let mut states = vec![0u8; Node::<Page64>::states_needed(&cfg, span)];
    let memmap = Memmap::new(cfg, 0, &mut pages, &mut pb).unwrap();
    let parts =
        NodeParts { memmap, layout: l, states: &mut states, arena: None, hooks: RecordingHooks::new(true) };
    let (node, report) = Node::boot(parts, &BootOptions::new(InitMode::Deferred)).unwrap();
    assert_eq!(report.strategy, Strategy::Slow, "tracepoint active: per-page path");
    node.deferred_init_memmap(stream_par::Threads::Fixed(2));
    let (_, hooks) = node.into_memmap();
    let mut inited = BTreeSet::new();
    let mut frees = 0;
    for ev in &hooks.page_ref_events {
        match ev.val {
            1 => {
                inited.insert(ev.pfn);
            }
            0 => {
                frees += 1;
                assert!(inited.contains(&ev.pfn), "pfn {:#x} freed before init", ev.pfn);
                assert_eq!(l_cfg.zone(ev.flags), 2);
                assert_eq!(l_cfg.node(ev.flags), NID);
                assert_eq!(ev.mapcount, -1);
            }
            v => panic!("unexpected set_page_count({v})"),
        }
    }
    let free_pfns = (span.start..span.end).filter(|&p| l.is_free(p)).count();
    assert_eq!(frees, free_pfns, "every free page freed once");
}

use memmap_core::KernelConfig;

/// Full, aligned `MAX_ORDER_NR_PAGES` blocks are freed at `MAX_PAGE_ORDER` with
/// `MIGRATE_MOVABLE` on every pageblock; partial ones page by page at order 0.
#[test]
fn full_max_order_blocks_freed_at_max_order_partial_ones_at_order_0() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    let mo = cfg.max_order_nr_pages();
    let (zones, memory, reserved) = reserved_layout(pps);
    let l = layout(NID, &zones, &memory, &reserved);
    let mut st = Storage::new(&cfg, l.span(), false);
    let (mut node, r) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    let fdp = r.first_deferred_pfn.unwrap();
    let (max0, zero0) = (free_core(&node, cfg.max_page_order), free_core(&node, 0));
    node.deferred_init_memmap(stream_par::Threads::Fixed(2));
    let (mut full, mut partial) = (0, 0);
    let end = zones[0].span.end;
    for b in (fdp..end).step_by(mo as usize) {
        let free = (b..(b + mo).min(end)).filter(|&p| l.is_free(p)).count() as u64;
        if free == mo {
            full += 1;
        } else {
            partial += free;
        }
    }
    assert!(full > 0 && partial > 0, "the layout has both kinds");
    assert_eq!(free_core(&node, cfg.max_page_order) - max0, full);
    assert_eq!(free_core(&node, 0) - zero0, partial);
    let pbn = cfg.pageblock_nr_pages();
    // deferred_free_pages() sets the migrate type at the pageblock-aligned free pfns.
    for pb in (fdp..end).step_by(pbn as usize) {
        if l.is_free(pb) {
            assert_eq!(node.pageblock_migratetype(pb), Some(MigrateType::Movable), "pageblock {pb:#x}");
        }
    }
}

/// `__free_pages_core()` calls of `order` so far.
fn free_core(node: &Node<'_, Page64>, order: u32) -> u64 {
    node.stats().free_core_calls[order as usize].load(std::sync::atomic::Ordering::Relaxed)
}

// ---------------------------------------------------------------- deferred_grow_zone

/// `deferred_grow_zone` grows at least `ALIGN(1 << order, PAGES_PER_SECTION)` pages, stops on a
/// section boundary, and only moves `first_deferred_pfn` forward; allocations that arrive
/// before deferred init are served by it.
#[test]
#[cfg_attr(miri, ignore = "the growth's arithmetic: its stores run in the other deferred tests")]
fn grow_zone_grows_a_section_multiple_stops_on_section_boundaries_and_is_monotonic() {
    let cfg = cfg();
    let pps = cfg.pages_per_section();
    let zones = [ZoneSpan::new(2, pps, 7 * pps)];
    let memory = [PfnRange::new(pps, 7 * pps)];
    let l = layout(NID, &zones, &memory, &[]);
    let mut st = Storage::new(&cfg, l.span(), false);
    let (node, r) = st.boot(cfg, l, &BootOptions::new(InitMode::Deferred));
    let mut fdp = r.first_deferred_pfn.unwrap();
    for order in [0, cfg.max_page_order, 0] {
        let free_before = node.zone_free_pages(2);
        assert!(node.deferred_grow_zone(2, order));
        let new = node.first_deferred_pfn();
        assert!(new > fdp, "monotonic");
        assert_eq!(new % pps, 0, "stops on a section boundary");
        let grown = node.zone_free_pages(2) - free_before;
        assert!(grown >= (1u64 << order).next_multiple_of(pps), "grew {grown}");
        assert_eq!(grown, new - fdp);
        fdp = new;
    }
    // Allocations drain the zone, grow it, and eventually get every page.
    let mut got = 0;
    let grows = node.stats().grows.load(std::sync::atomic::Ordering::Relaxed);
    while let Ok(b) = node.alloc_pages(2, 0, Gfp::NONE) {
        got += b.nr_pages();
        let _ = b.into_raw();
    }
    assert_eq!(got, 6 * pps);
    assert!(node.stats().grows.load(std::sync::atomic::Ordering::Relaxed) > grows);
    assert_eq!(node.first_deferred_pfn(), u64::MAX);
    assert!(!node.deferred_grow_zone(2, 0), "nothing left to grow");
}

/// Deferred init done (one worker or two, every strategy), with whole free `MAX_PAGE_ORDER`
/// blocks in the single final-state pass, leaves what the kernel's order (every block through
/// `deferred_init_maxorder`, [`BootOrder::Kernel`]) leaves: every struct page (guards
/// included), the pageblock bits, and with one worker the free lists in their order (with two,
/// the same blocks: the workers' interleaving is the scheduler's, in the kernel too).
mod single_pass_equals_the_kernel_order {
    use super::*;
    use memmap_core::{BootOrder, FillOptions, Strategy};
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};
    use std::sync::atomic::Ordering;
    use stream_par::Threads;
    use support::{layouts, tiny};

    /// Every zone's free list, in list order.
    type Lists = Vec<(u32, Vec<(u64, u32)>)>;

    /// Struct pages, pageblock bits and free lists after boot and deferred init, and the pages
    /// that took the single pass.
    fn outcome(
        cfg: memmap_core::KernelConfig,
        layout: &NodeLayout<'_>,
        opts: &BootOptions,
        threads: Option<Threads>,
    ) -> (Vec<Page64>, Vec<u8>, Lists, u64, Strategy) {
        let mut st = Storage::new(&cfg, layout.span(), false);
        let (node, report) = st.boot(cfg, *layout, opts);
        if let Some(t) = threads {
            node.deferred_init_memmap(t);
        }
        let lists = support::free_lists(&node, layout.zones);
        let single = node.stats().single_pass_pages.load(Ordering::Relaxed);
        let _ = node.into_memmap();
        (st.pages.clone(), st.pageblocks.clone(), lists, single, report.strategy)
    }

    /// The struct pages with the free-list links of every listed block head cleared: with
    /// several workers the order blocks join a list is the scheduler's, and so are the links.
    fn without_links(pages: &[Page64], lists: &Lists, base: u64) -> Vec<Page64> {
        let mut pages = pages.to_vec();
        for (pfn, _) in lists.iter().flat_map(|(_, b)| b) {
            let p = &mut pages[(pfn - base) as usize];
            p.words_mut()[1] = 0;
            p.words_mut()[2] = 0;
        }
        pages
    }

    proptest! {
        #![proptest_config(support::sized(64, 1))]

        #[test]
        fn deferred_init_equals_the_kernel_order(
            l in layouts(NID),
            strategy in prop::sample::select(Strategy::ALL.to_vec()),
            version in prop::sample::select(vec![memmap_core::KernelVersion::V6_12, memmap_core::KernelVersion::V7_2]),
        ) {
            let layout = l.node();
            let cfg = tiny().with_version(version);
            let fill = FillOptions::new(strategy);
            let deferred = BootOptions { fill, ..BootOptions::new(InitMode::Deferred) };
            let kernel = BootOptions { order: BootOrder::Kernel, ..deferred };
            let (pages, pageblocks, lists, none, _) = outcome(cfg, &layout, &kernel, Some(Threads::One));
            prop_assert_eq!(none, 0, "the kernel's order takes no single pass");
            let base = layout.span().start - 1; // Storage's first page is a guard
            for threads in [Threads::One, Threads::Fixed(2)] {
                let (dp, db, dl, _, _) = outcome(cfg, &layout, &deferred, Some(threads));
                let (pages, dp) = if threads == Threads::One {
                    (pages.clone(), dp)
                } else {
                    (without_links(&pages, &lists, base), without_links(&dp, &dl, base))
                };
                let first = pages.iter().zip(&dp).position(|(a, b)| a != b);
                prop_assert!(first.is_none(), "{strategy:?} {threads:?}: struct page index {first:?} differs: eager {:?} deferred {:?} layout {:?}", first.map(|i| pages[i]), first.map(|i| dp[i]), l);
                prop_assert_eq!(&pageblocks, &db);
                if threads == Threads::One {
                    prop_assert_eq!(&lists, &dl, "free lists in their order");
                } else {
                    let sorted = |v: &Lists| {
                        v.iter().map(|(z, b)| (*z, b.iter().copied().collect::<BTreeSet<_>>())).collect::<Vec<_>>()
                    };
                    prop_assert_eq!(sorted(&lists), sorted(&dl), "the same free blocks");
                }
            }
        }
    }

    /// A deferred zone of whole free `MAX_PAGE_ORDER` blocks goes through the single pass, at
    /// boot and in deferred init (except with the slow strategy), and every block is in a
    /// free list.
    #[test]
    #[cfg_attr(miri, ignore = "the single pass's stores run in fused_boot's windows test under Miri")]
    fn whole_blocks_take_the_single_pass() {
        let cfg = tiny();
        let pps = cfg.pages_per_section();
        let zones = [ZoneSpan::new(2, 4 * pps, 12 * pps)];
        let memory = [PfnRange::new(4 * pps, 12 * pps)];
        let l = layout(NID, &zones, &memory, &[]);
        for strategy in Strategy::ALL.iter().copied() {
            let opts =
                BootOptions { fill: FillOptions::new(strategy), ..BootOptions::new(InitMode::Deferred) };
            let (_, _, lists, single, used) = outcome(cfg, &l, &opts, Some(Threads::Fixed(2)));
            let blocks: usize = lists.iter().map(|(_, b)| b.len()).sum();
            assert_eq!(blocks as u64, (12 * pps - 4 * pps) / cfg.max_order_nr_pages(), "{strategy:?}");
            // The zone's first section (boot's, in the fused boot's single pass) and the
            // deferred rest. Auto is the slow path in a sanitizer build.
            let expect = if used == Strategy::Slow { 0 } else { 12 * pps - 4 * pps };
            assert_eq!(single, expect, "{strategy:?}");
        }
    }
}
