//! The fused boot ([`BootOrder::Fused`]: `memmap_init`, `reserve_bootmem_regions` and the free
//! pass window by window, and on demand a single pass over simple windows) leaves exactly what
//! the kernel's order ([`BootOrder::Kernel`]: each pass over the whole node in turn) leaves:
//! every struct page byte (guards included), the pageblock bits, the block states, the free
//! lists in their order, the zone counters, the node statistics, the boot report and the
//! `cond_resched()` calls; and both nodes then allocate the same pages in the same order.

mod support;

use memmap_core::Named;
use std::sync::atomic::Ordering;

use memmap_core::{
    BootOptions, BootOrder, FillOptions, Gfp, InitMode, InitPolicy, KernelConfig, Node, NodeLayout, Page64,
    PfnRange, RecordingHooks, ReservedRange, Strategy as InitStrategy, ZoneSpan,
};
use proptest::prelude::*;
use support::{Layout, Storage, layouts, tiny};

const NID: u32 = 1;

/// Everything a boot leaves that the two orders must agree on.
#[derive(Debug, PartialEq)]
struct Outcome {
    pages: Vec<Page64>,
    pageblocks: Vec<u8>,
    states: Vec<u8>,
    free_lists: Vec<(u32, Vec<(u64, u32)>)>,
    zone_pages: Vec<(u64, u64)>,
    free_core_calls: Vec<u64>,
    pages_initialized: u64,
    expansions: u64,
    /// First deferred pfn, pages initialized, pages freed (the strategy differs on purpose:
    /// with `Auto` the fused boot stores normally, see [`strategies_say_what_ran`]).
    report: (Option<u64>, u64, u64),
    resched: Vec<u64>,
    allocations: Vec<Vec<(u32, u64)>>,
}

/// Boots `layout` with `opts` and returns the pages the boot wrote in single passes.
/// The pages that took the single pass, and the strategy the boot used.
fn single_pass_pages(cfg: KernelConfig, layout: &NodeLayout<'_>, opts: &BootOptions) -> (u64, InitStrategy) {
    let mut st = Storage::new(&cfg, layout.span(), false);
    let (node, report) = st.boot_with(cfg, *layout, opts, RecordingHooks::default());
    (node.stats().single_pass_pages.load(Ordering::Relaxed), report.strategy)
}

/// Boots `layout` with `opts`, records the outcome, then drains every zone (highest order
/// first, so the list order shows) and records the allocations.
fn boot(cfg: KernelConfig, layout: &NodeLayout<'_>, opts: &BootOptions, arena: bool) -> Outcome {
    let mut st = Storage::new(&cfg, layout.span(), arena);
    let (node, report) = st.boot_with(cfg, *layout, opts, RecordingHooks::default());
    let mut o = outcome_of(&node, layout, report);
    o.allocations = drain(&node, layout, cfg.max_page_order);
    let (_, hooks) = node.into_memmap();
    o.resched = hooks.resched_pfns;
    o.pages = st.pages.clone();
    o.pageblocks = st.pageblocks.clone();
    o.states = st.states.clone();
    o
}

fn outcome_of(
    node: &Node<'_, Page64, RecordingHooks>,
    layout: &NodeLayout<'_>,
    r: memmap_core::BootReport,
) -> Outcome {
    let free_lists = support::free_lists(node, layout.zones);
    let zone_pages = layout
        .zones
        .iter()
        .map(|z| (node.zone_free_pages(z.zone), node.zone_managed_pages(z.zone)))
        .collect();
    let stats = node.stats();
    Outcome {
        pages: Vec::new(),
        pageblocks: Vec::new(),
        states: Vec::new(),
        free_lists,
        zone_pages,
        free_core_calls: stats.free_core_calls.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        pages_initialized: stats.pages_initialized.load(Ordering::Relaxed),
        expansions: stats.expansions.load(Ordering::Relaxed),
        report: (r.first_deferred_pfn, r.pages_initialized, r.pages_freed),
        resched: Vec::new(),
        allocations: Vec::new(),
    }
}

/// Allocates everything, order by order from the highest, and frees it again.
fn drain(
    node: &Node<'_, Page64, RecordingHooks>,
    layout: &NodeLayout<'_>,
    max_order: u32,
) -> Vec<Vec<(u32, u64)>> {
    layout
        .zones
        .iter()
        .map(|z| {
            let mut held = Vec::new();
            for order in (0..=max_order).rev() {
                while let Ok(b) = node.alloc_pages(z.zone, order, Gfp::NONE) {
                    held.push(b);
                }
            }
            let seq = held.iter().map(|b| (b.order(), b.pfn())).collect();
            for b in held {
                node.free_pages(b).expect("free");
            }
            seq
        })
        .collect()
}

fn check(
    cfg: KernelConfig,
    layout: &NodeLayout<'_>,
    mode: InitMode,
    strategy: InitStrategy,
    order: BootOrder,
    arena: bool,
) {
    let policy = InitPolicy { init_on_free: arena, ..BootOptions::new(mode).policy };
    let kernel = BootOptions {
        fill: FillOptions::new(strategy),
        policy,
        order: BootOrder::Kernel,
        ..BootOptions::new(mode)
    };
    let fused = BootOptions { order, ..kernel };
    let a = boot(cfg, layout, &kernel, arena);
    let b = boot(cfg, layout, &fused, arena);
    if a != b {
        let first = a.pages.iter().zip(&b.pages).position(|(x, y)| x != y);
        panic!(
            "{mode} {strategy:?} {order:?}: fused boot differs (first differing struct page index {first:?}; \
             pageblocks equal {}, states equal {}, lists equal {}, counters equal {}, stats equal {}, \
             report {:?} vs {:?}, resched equal {}, allocations equal {})",
            a.pageblocks == b.pageblocks,
            a.states == b.states,
            a.free_lists == b.free_lists,
            a.zone_pages == b.zone_pages,
            (
                a.free_core_calls == b.free_core_calls,
                a.pages_initialized == b.pages_initialized,
                a.expansions == b.expansions
            ) == (true, true, true),
            a.report,
            b.report,
            a.resched == b.resched,
            a.allocations == b.allocations,
        );
    }
}

/// Every strategy; under Miri the template one only (the others share its code paths here).
fn strategies() -> Vec<InitStrategy> {
    if cfg!(miri) { vec![InitStrategy::Template] } else { InitStrategy::ALL.to_vec() }
}

proptest! {
    #![proptest_config(support::sized(64, 2))]

    /// Random layouts (two zones, holes, reserved and NOINIT ranges), every mode and strategy,
    /// automatic and small windows (down to one `MAX_PAGE_ORDER` block), with and without
    /// init_on_free.
    #[test]
    fn fused_boot_equals_the_kernel_order(
        layout in layouts(NID),
        mode in prop::sample::select(InitMode::ALL.to_vec()),
        strategy in prop::sample::select(InitStrategy::ALL.to_vec()),
        window in prop::option::of(0u32..10),
        arena in any::<bool>(),
    ) {
        let order = window.map_or(BootOrder::Fused, |order| BootOrder::FusedWindow { order });
        check(tiny(), &layout.node(), mode, strategy, order, arena && !cfg!(miri));
    }
}

/// A node whose every window is simple (one memory range, one zone, nothing reserved): the
/// eager and on-demand boots take the single-pass path for all of it (except with the slow
/// strategy, which writes page by page), and leave what the kernel's order leaves.
#[test]
#[cfg_attr(miri, ignore = "the single pass's stores are windows_cut_by_every_boundary_match's under Miri")]
fn simple_windows_take_the_single_pass_and_match() {
    let cfg = tiny();
    let pps = cfg.pages_per_section();
    let zones = [ZoneSpan::new(2, 4 * pps, 8 * pps)];
    let memory = [PfnRange::new(4 * pps, 8 * pps)];
    let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: &[] };
    let orders: &[BootOrder] = if cfg!(miri) {
        &[BootOrder::FusedWindow { order: 0 }]
    } else {
        &[BootOrder::Fused, BootOrder::FusedWindow { order: 0 }, BootOrder::FusedWindow { order: 8 }]
    };
    for &order in orders {
        for strategy in strategies() {
            for mode in [InitMode::OnDemand, InitMode::Eager] {
                check(cfg, &l, mode, strategy, order, false);
                let opts = BootOptions { fill: FillOptions::new(strategy), order, ..BootOptions::new(mode) };
                let (single, used) = single_pass_pages(cfg, &l, &opts);
                // Auto is the slow path in a sanitizer build.
                let expect = if used == InitStrategy::Slow { 0 } else { l.span().len() };
                assert_eq!(single, expect, "{mode} {strategy:?} {order:?}");
                assert!(
                    strategy == InitStrategy::Auto
                        || (strategy == InitStrategy::Slow) == (used == InitStrategy::Slow)
                );
                let kernel = BootOptions { order: BootOrder::Kernel, ..opts };
                assert_eq!(single_pass_pages(cfg, &l, &kernel).0, 0, "the kernel's order has no single pass");
            }
        }
    }
}

/// Windows cut by every kind of boundary: a zone boundary inside a `MAX_PAGE_ORDER` block,
/// memory ranges ending mid-pageblock, reserved and NOINIT ranges, a node span that does not
/// start on a window.
#[test]
fn windows_cut_by_every_boundary_match() {
    let cfg = tiny();
    let pps = cfg.pages_per_section();
    let zones = [ZoneSpan::new(1, pps + 8, 2 * pps + 40), ZoneSpan::new(2, 2 * pps + 40, 6 * pps)];
    let memory = [PfnRange::new(pps + 9, 3 * pps + 5), PfnRange::new(3 * pps + 70, 6 * pps - 3)];
    let reserved =
        [ReservedRange::new(2 * pps + 100, 2 * pps + 180), ReservedRange::noinit(4 * pps, 4 * pps + 64)];
    let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: &reserved };
    let windows: &[Option<u32>] =
        if cfg!(miri) { &[Some(6)] } else { &[None, Some(0), Some(6), Some(7), Some(9), Some(12)] };
    for &w in windows {
        let order = w.map_or(BootOrder::Fused, |order| BootOrder::FusedWindow { order });
        for mode in InitMode::ALL.iter().copied() {
            for strategy in strategies() {
                check(cfg, &l, mode, strategy, order, false);
            }
        }
    }
}

/// The x86-64 preset (512-page pageblocks, `MAX_PAGE_ORDER` 10): 64 MiB of memory in windows of
/// 1 GiB (automatic, larger than the node) and of 4 and 8 MiB.
#[test]
#[cfg_attr(miri, ignore = "16384 struct pages: minutes under Miri; the tiny cases cover the logic")]
fn x86_64_preset_matches() {
    let cfg = KernelConfig::X86_64;
    let base = 1u64 << 20;
    let zones = [ZoneSpan::new(2, base, base + (1 << 14))];
    let memory = [PfnRange::new(base, base + (1 << 14))];
    let reserved = [ReservedRange::new(base + 5000, base + 5003)];
    for res in [&reserved[..], &[]] {
        let l = NodeLayout { nid: NID, zones: &zones, memory: &memory, reserved: res };
        for order in
            [BootOrder::Fused, BootOrder::FusedWindow { order: 10 }, BootOrder::FusedWindow { order: 11 }]
        {
            for mode in [InitMode::Eager, InitMode::OnDemand] {
                check(cfg, &l, mode, InitStrategy::Auto, order, false);
            }
        }
    }
}

/// The layouts the property test draws include simple windows (so it exercises the single
/// pass), and a window order below `MAX_PAGE_ORDER` is raised to it rather than splitting a
/// free block.
#[test]
fn layouts_include_simple_windows() {
    use proptest::strategy::ValueTree;
    let cfg = tiny();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut simple = 0;
    for _ in 0..32 {
        let l: Layout = layouts(NID).new_tree(&mut runner).unwrap().current();
        let n = l.node();
        let w = 1u64 << cfg.max_page_order;
        let span = n.span();
        let mut lo = span.start.div_ceil(w) * w;
        while lo + w <= span.end {
            let hi = lo + w;
            if n.memory.iter().any(|m| m.start <= lo && hi <= m.end)
                && !n.reserved.iter().any(|r| r.range.start < hi && lo < r.range.end)
                && n.zones.iter().any(|z| z.span.start <= lo && hi <= z.span.end)
            {
                simple += 1;
            }
            lo = hi;
        }
    }
    assert!(simple > 32, "only {simple} simple windows in 32 layouts");
}

/// The boot report says what ran: with `Auto`, the kernel's order streams a node that is large
/// enough, and the fused boot stores normally because its free pass reads the pages right back;
/// explicit requests are honoured in both orders. (Not under Miri: the threshold needs a node
/// of 65536 struct pages booted four times, and what it checks is a report, not memory safety;
/// it runs natively, under qemu-aarch64 and under ASan.)
#[test]
#[cfg_attr(miri, ignore)]
fn strategies_say_what_ran() {
    use memmap_core::StrategyReason;
    let cfg = KernelConfig::X86_64;
    let mo = cfg.max_order_nr_pages();
    let zones = [ZoneSpan::new(2, 4 * mo, 4 * mo + 64 * mo)];
    let memory = [PfnRange::new(4 * mo, 4 * mo + 64 * mo)];
    let layout = NodeLayout { nid: 0, zones: &zones, memory: &memory, reserved: &[] };
    let sanitizer = matches!(
        stream_hal::backend(),
        stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_))
    );
    for (strategy, order, expect) in [
        (InitStrategy::Auto, BootOrder::Kernel, (InitStrategy::Streaming, StrategyReason::AboveThreshold)),
        // Eager fused: the final-state windows stream (nothing is read back).
        (InitStrategy::Auto, BootOrder::Fused, (InitStrategy::Streaming, StrategyReason::AboveThreshold)),
        (InitStrategy::Streaming, BootOrder::Fused, (InitStrategy::Streaming, StrategyReason::Requested)),
        (InitStrategy::Template, BootOrder::Kernel, (InitStrategy::Template, StrategyReason::Requested)),
    ] {
        if sanitizer && strategy == InitStrategy::Auto {
            continue;
        }
        let mut st = Storage::new(&cfg, layout.span(), false);
        let opts =
            BootOptions { fill: FillOptions::new(strategy), order, ..BootOptions::new(InitMode::Eager) };
        let (node, report) = st.boot(cfg, layout, &opts);
        assert_eq!((report.strategy, report.reason), expect, "{strategy:?} {order:?}");
        if strategy == InitStrategy::Auto {
            assert_eq!(
                node.strategy(),
                (InitStrategy::Streaming, StrategyReason::AboveThreshold),
                "runs after boot"
            );
        }
    }
}

/// A fuzzed layout (`fuzz/regressions/node_boot/fused-noinit-gap`): a memory range that starts
/// inside the first zone and ends inside the second, a gap between the zones, a NOINIT range
/// and empty reserved ranges, booted eagerly in one window larger than the node.
#[test]
#[cfg_attr(miri, ignore = "a layout case: windows_cut_by_every_boundary_match has its stores under Miri")]
fn a_window_over_a_zone_gap_and_noinit_memory_matches() {
    let zones = [ZoneSpan::new(0, 518, 1541), ZoneSpan::new(3, 1548, 2559)];
    let memory = [PfnRange::new(553, 1576)];
    let reserved =
        [ReservedRange::new(1535, 1535), ReservedRange::noinit(566, 830), ReservedRange::new(568, 568)];
    let l = NodeLayout { nid: 44, zones: &zones, memory: &memory, reserved: &reserved };
    for mode in InitMode::ALL.iter().copied() {
        for strategy in strategies() {
            check(tiny(), &l, mode, strategy, BootOrder::FusedWindow { order: 13 }, false);
        }
    }
}
