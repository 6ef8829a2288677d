//! memmap-core's node boot with arbitrary small layouts (zones, memory ranges, reserved and
//! NOINIT ranges, possibly invalid), init modes, strategies, boot orders and init_on_free.
//!
//! Every input is either a typed error (the same one the reference gives, nothing written), or
//! a boot that leaves what the kernel-order slow boot of the same layout and mode leaves: every
//! struct page byte (guard pages around the node included), the pageblock bits, the block
//! states, the free lists, the boot report's counts and the `cond_resched()` calls; and after
//! deferred init or on-demand expansion of the whole node, the same struct pages again. The
//! booted node also answers queries with arbitrary zones, orders and pfn ranges, and a padata
//! job of arbitrary sizes (the top of the `u64` space included) splits without overflow or is
//! refused with its typed error.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use memmap_core::Named;
use memmap_core::{
    BootOptions, BootOrder, FillOptions, InitMode, InitPolicy, KernelConfig, Memmap, Node, NodeError,
    NodeLayout, NodeParts, Page64, PfnRange, PhysArena, RecordingHooks, ReservedRange, Strategy, StructPage,
    ZoneSpan, pageblocks_needed,
};
use stream_par::{PadataError, PadataJob};

/// A configuration with 256-page sections, 16-page pageblocks and `MAX_PAGE_ORDER` 6 (the
/// test suite's "tiny" one), so that nodes of a few sections stay small.
fn tiny() -> KernelConfig {
    KernelConfig {
        name: "tiny",
        section_size_bits: 12 + 8,
        pageblock_order: 4,
        max_page_order: 6,
        ..KernelConfig::X86_64
    }
}

const GUARD_WORD: u64 = 0x5a5a_5a5a_5a5a_5a5a;
/// The largest node span built, in pages.
const MAX_SPAN: u64 = 2048;

#[derive(Debug, Arbitrary)]
struct Input {
    /// First PFN of the node, in pageblocks (or raw low bits when odd).
    start: u16,
    nid: u8,
    /// Zones: `(zone index, length)`, laid out back to back from the start after a gap.
    zones: Vec<(u8, u16, u8)>,
    /// Memory ranges: `(offset from the span start, length)`.
    memory: Vec<(u16, u16)>,
    /// Reserved ranges: `(offset, length, noinit)`.
    reserved: Vec<(u16, u16, bool)>,
    mode: u8,
    strategy: u8,
    /// `None`: the kernel's order; `Some(None)`: fused; `Some(Some(o))`: fused windows of 2^o.
    order: Option<Option<u8>>,
    init_on_free: bool,
    threshold: Option<u16>,
    /// The modelled address of the first struct page (default: from the config's vmemmap).
    vaddr_base: Option<u64>,
    /// Calls on the booted node with arbitrary zones, orders and ranges: `(zone, order,
    /// start, nr)`.
    probes: Vec<(u32, u32, u64, u64)>,
    /// A padata job of any sizes, near the top of the `u64` space or past it.
    padata: (u64, u64, u64, u64, u16),
}

/// A bug found by fuzzing, now fixed (`fuzz/regressions/zone_device_init/vaddr-base-overflow`
/// and `fuzz/regressions/node_boot/vaddr-wrap-free-list`, which CI replays): list pointers were
/// computed as `vaddr + offset` without wrapping, in the node code too (the buddy allocator
/// and on-demand init). `true` would keep bases 1 MiB below the top again.
const VADDR_OVERFLOW_OPEN: bool = false;

/// Everything a boot leaves that must match the reference.
#[derive(Debug, PartialEq)]
struct Outcome {
    boot: Result<(Option<u64>, u64, u64), NodeError>,
    pages: Vec<Page64>,
    pageblocks: Vec<u8>,
    states: Vec<u8>,
    free_lists: Vec<(u32, Vec<(u64, u32)>)>,
    resched: Vec<u64>,
    /// Struct pages after deferred init / on-demand expansion of everything.
    completed: Vec<Page64>,
}

struct Layout {
    nid: u32,
    zones: Vec<ZoneSpan>,
    memory: Vec<PfnRange>,
    reserved: Vec<ReservedRange>,
}

impl Layout {
    fn node(&self) -> NodeLayout<'_> {
        NodeLayout { nid: self.nid, zones: &self.zones, memory: &self.memory, reserved: &self.reserved }
    }
}

fn layout(input: &Input, cfg: &KernelConfig) -> Layout {
    let pb = cfg.pageblock_nr_pages();
    let start = if input.start.is_multiple_of(2) {
        u64::from(input.start / 2 % 64) * pb
    } else {
        u64::from(input.start % 4096)
    };
    let start = start + cfg.pages_per_section();
    let mut at = start;
    let mut zones = Vec::new();
    for &(zone, len, gap) in input.zones.iter().take(4) {
        let s = at + u64::from(gap % 8);
        let e = (s + u64::from(len) % 1024).min(start + MAX_SPAN);
        zones.push(ZoneSpan::new(u32::from(zone % 6), s, e));
        at = e;
    }
    let off = |o: u16| start + u64::from(o) % (MAX_SPAN + 64);
    let memory = input
        .memory
        .iter()
        .take(5)
        .map(|&(o, l)| PfnRange::new(off(o), off(o) + u64::from(l) % 1024))
        .collect();
    let reserved = input
        .reserved
        .iter()
        .take(5)
        .map(|&(o, l, noinit)| {
            let (s, e) = (off(o), off(o) + u64::from(l) % 512);
            if noinit { ReservedRange::noinit(s, e) } else { ReservedRange::new(s, e) }
        })
        .collect();
    Layout { nid: u32::from(input.nid % 70), zones, memory, reserved }
}

/// The node span, if there is a zone (what `NodeLayout::span` computes, which needs one).
fn span(l: &NodeLayout<'_>) -> Option<PfnRange> {
    Some(PfnRange::new(l.zones.first()?.span.start, l.zones.last()?.span.end))
}

/// The node's read-only queries with arbitrary zones, orders and ranges: answers, never panics
/// (`ensure_initialized` is outside the node a no-op, and expands nothing on a boot that is
/// not on demand).
fn probe_queries<H: memmap_core::InitHooks + Send>(
    node: &Node<'_, Page64, H>,
    probes: &[(u32, u32, u64, u64)],
) {
    for &(zone, order, start, nr) in probes.iter().take(8) {
        let _ = (node.nr_free(zone, order), node.zone_free_pages(zone), node.zone_managed_pages(zone));
        let _ = node.is_initialized(start);
        node.for_each_free_block(zone, |_, o| assert!(o <= node.config().max_page_order));
        if node.options().mode != InitMode::OnDemand {
            assert_eq!(node.ensure_initialized(start, nr), 0);
        }
    }
}

/// A padata job of arbitrary sizes: its plan never panics, and its calls cover `[start, start +
/// size)` once, in order, each ending on a chunk boundary but the last, or the job is refused
/// because it ends past `u64::MAX`.
fn padata_job((start, size, align, min_chunk, threads): (u64, u64, u64, u64, u16)) {
    let job = PadataJob { start, size, align, min_chunk, max_threads: usize::from(threads) };
    let plan = job.plan();
    match (job.chunks(), start.checked_add(size)) {
        (Err(e), None) => assert_eq!(e, PadataError::RangeOverflow { start, size }),
        (Ok(calls), Some(end)) => {
            let mut at = start;
            for (s, e) in calls.take(4096) {
                assert_eq!(s, at, "{job:?}: a gap or an overlap");
                assert!(e > s && e <= end, "{job:?}: call [{s:#x}, {e:#x})");
                if e != end {
                    let chunk = plan.expect("a plan for a non-empty job").chunk;
                    assert_eq!(e % chunk, 0, "{job:?}: call ending at {e:#x} off the chunk grid");
                }
                at = e;
            }
        }
        (r, end) => panic!("{job:?}: {r:?} for an end of {end:?}"),
    }
}

fn boot(
    cfg: KernelConfig,
    l: &NodeLayout<'_>,
    opts: &BootOptions,
    arena: bool,
    vaddr: Option<u64>,
    probes: &[(u32, u32, u64, u64)],
) -> Outcome {
    fn with_vaddr(m: Memmap<'_, Page64>, vaddr: Option<u64>) -> Memmap<'_, Page64> {
        match vaddr {
            Some(v) => m.with_vaddr_base(v),
            None => m,
        }
    }
    // Storage from one page below the span to one above (guards); an empty or inverted span
    // gets a token memmap (the boot refuses the layout before using it).
    let sp = span(l)
        .filter(|s| !s.is_empty())
        .unwrap_or(PfnRange::new(l.zones.first().map_or(64, |z| z.span.start), 0));
    let base = sp.start.saturating_sub(1);
    let n = (sp.len() + 2) as usize;
    let mut g = Page64::ZEROED;
    g.words_mut().fill(GUARD_WORD);
    let mut pages = vec![g; n];
    let mut pageblocks = vec![0u8; pageblocks_needed(&cfg, base, n as u64)];
    let mut states = vec![0u8; Node::<Page64>::states_needed(&cfg, sp)];
    let mut arena_bytes = if arena { vec![0xa5u8; n * 4096] } else { Vec::new() };
    let mut resched = Vec::new();
    let mut free_lists = Vec::new();
    let boot = {
        let memmap =
            Memmap::new(cfg, base, &mut pages, &mut pageblocks).expect("a memmap over valid storage");
        let arena = if arena { Some(PhysArena::new(base, &mut arena_bytes).expect("arena")) } else { None };
        let parts =
            NodeParts { memmap, layout: *l, states: &mut states, arena, hooks: RecordingHooks::default() };
        match Node::boot(parts, opts) {
            Ok((node, report)) => {
                for z in l.zones {
                    let mut v = Vec::new();
                    node.for_each_free_block(z.zone, |pfn, o| v.push((pfn, o)));
                    free_lists.push((z.zone, v));
                }
                probe_queries(&node, probes);
                let (_, hooks) = node.into_memmap();
                resched = hooks.resched_pfns;
                Ok((report.first_deferred_pfn, report.pages_initialized, report.pages_freed))
            }
            Err(e) => Err(e),
        }
    };
    let states_after = states.clone();
    let pages_after = pages.clone();
    let pageblocks_after = pageblocks.clone();
    if boot.is_err() {
        assert!(pages.iter().all(|p| *p == g), "a refused boot wrote struct pages");
    } else {
        assert!(pages[0] == g && pages[n - 1] == g, "a guard struct page was written");
    }
    // Complete the init (deferred init, or expanding every on-demand block) on a second boot of
    // the same storage, and keep the struct pages.
    let completed = if boot.is_ok() && opts.mode != InitMode::Eager {
        let memmap = with_vaddr(Memmap::new(cfg, base, &mut pages, &mut pageblocks).expect("memmap"), vaddr);
        let arena = if arena { Some(PhysArena::new(base, &mut arena_bytes).expect("arena")) } else { None };
        let parts =
            NodeParts { memmap, layout: *l, states: &mut states, arena, hooks: RecordingHooks::default() };
        let (node, _) = Node::boot(parts, opts).expect("the same boot succeeds twice");
        match opts.mode {
            InitMode::Deferred => {
                node.deferred_init_memmap_serial();
            }
            InitMode::OnDemand => {
                let _expanded = node.expand_all();
            }
            _ => {}
        }
        drop(node);
        pages.clone()
    } else {
        Vec::new()
    };
    Outcome {
        boot,
        pages: pages_after,
        pageblocks: pageblocks_after,
        states: states_after,
        free_lists,
        resched,
        completed,
    }
}

fuzz_target!(|input: Input| {
    let cfg = tiny();
    let l = layout(&input, &cfg);
    let mode = InitMode::ALL[usize::from(input.mode) % InitMode::ALL.len()];
    let strategy = Strategy::ALL[usize::from(input.strategy) % Strategy::ALL.len()];
    let order = match input.order {
        None => BootOrder::Kernel,
        Some(None) => BootOrder::Fused,
        Some(Some(o)) => BootOrder::FusedWindow { order: u32::from(o % 16) },
    };
    // Page contents for init_on_free only on small nodes (4 KiB per page, four boots per input).
    let arena = input.init_on_free && span(&l.node()).is_some_and(|s| s.len() <= 512);
    let policy = InitPolicy { init_on_free: arena, ..BootOptions::new(mode).policy };
    let mut opts = BootOptions { fill: FillOptions::new(strategy), policy, order, ..BootOptions::new(mode) };
    if let Some(t) = input.threshold {
        opts.fill.threshold_bytes = Some(usize::from(t));
    }
    let reference = BootOptions { fill: FillOptions::new(Strategy::Slow), order: BootOrder::Kernel, ..opts };
    let node = l.node();
    let vaddr = input.vaddr_base.map(|v| if VADDR_OVERFLOW_OPEN { v.min(u64::MAX - (1 << 20)) } else { v });
    padata_job(input.padata);
    let got = boot(cfg, &node, &opts, arena, vaddr, &input.probes);
    let want = boot(cfg, &node, &reference, arena, vaddr, &input.probes);
    assert_eq!(got.boot, want.boot, "{mode} {strategy:?} {order:?}: boot result differs");
    if got.pages != want.pages {
        let first = got.pages.iter().zip(&want.pages).position(|(a, b)| a != b);
        panic!(
            "{mode} {strategy:?} {order:?}: struct pages differ from the kernel-order slow boot (first at index {first:?})"
        );
    }
    assert_eq!(got.pageblocks, want.pageblocks, "pageblocks differ");
    assert_eq!(got.states, want.states, "block states differ");
    assert_eq!(got.free_lists, want.free_lists, "free lists differ");
    assert_eq!(got.resched, want.resched, "cond_resched calls differ");
    if got.completed != want.completed {
        let first = got.completed.iter().zip(&want.completed).position(|(a, b)| a != b);
        panic!(
            "{mode} {strategy:?} {order:?}: struct pages differ after completing the init (first at index {first:?})"
        );
    }
});
