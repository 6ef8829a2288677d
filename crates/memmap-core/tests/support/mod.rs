//! The test harness of memmap-core (each test binary includes it with `mod support;`):
//! configurations small enough for Miri, guard pages, the property tests' configuration, node
//! storage and an independent computation of the expected free blocks, and ([`zone_device`])
//! runs of `memmap_init_zone_device` that capture everything observable.
#![allow(dead_code, unreachable_pub)]

pub mod zone_device;
// Not every test binary uses every helper.
#[allow(unused_imports)]
pub use zone_device::*;

use memmap_core::{
    BootOptions, BootReport, InitHooks, KernelConfig, Memmap, NoHooks, Node, NodeLayout, NodeParts, Page64,
    PfnRange, PhysArena, ReservedRange, StructPage, ZoneSpan, pageblocks_needed,
};
use proptest::prelude::*;

/// Word the struct page storage is filled with before boot: untouched pages keep it.
pub const GUARD_WORD: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// A configuration with 256-page sections, 16-page pageblocks and `MAX_PAGE_ORDER` 6, so that
/// nodes of a few sections stay small under Miri; the x86-64 preset otherwise.
pub fn tiny() -> KernelConfig {
    KernelConfig {
        name: "tiny",
        section_size_bits: 12 + 8,
        pageblock_order: 4,
        max_page_order: 6,
        ..KernelConfig::X86_64
    }
}

/// The configuration for tests that may run under Miri.
pub fn cfg() -> KernelConfig {
    if cfg!(miri) { tiny() } else { KernelConfig::X86_64 }
}

/// Storage for one node: guarded struct pages, pageblocks, states and (optionally) an arena.
pub struct Storage {
    pub base: u64,
    pub pages: Vec<Page64>,
    pub pageblocks: Vec<u8>,
    pub states: Vec<u8>,
    pub arena: Vec<u8>,
}

impl Storage {
    /// Storage for the PFNs `[span.start - 1, span.end + 1)` (one guard page each side) and an
    /// arena of `arena_pages` around the span (0: none).
    pub fn new(cfg: &KernelConfig, span: PfnRange, arena: bool) -> Self {
        let base = span.start - 1;
        let n = span.len() + 2;
        let mut p = Page64::ZEROED;
        p.words_mut().fill(GUARD_WORD);
        Storage {
            base,
            pages: vec![p; n as usize],
            pageblocks: vec![0; pageblocks_needed(cfg, base, n)],
            states: vec![0u8; Node::<Page64>::states_needed(cfg, span)],
            arena: if arena { vec![0xa5; (n as usize) * 4096] } else { Vec::new() },
        }
    }

    /// Boots a node over this storage.
    pub fn boot<'a>(
        &'a mut self,
        cfg: KernelConfig,
        layout: NodeLayout<'a>,
        opts: &BootOptions,
    ) -> (Node<'a, Page64>, BootReport) {
        self.boot_with(cfg, layout, opts, NoHooks)
    }

    /// Boots a node over this storage with `hooks`.
    pub fn boot_with<'a, H: InitHooks + Send>(
        &'a mut self,
        cfg: KernelConfig,
        layout: NodeLayout<'a>,
        opts: &BootOptions,
        hooks: H,
    ) -> (Node<'a, Page64, H>, BootReport) {
        let memmap = Memmap::new(cfg, self.base, &mut self.pages, &mut self.pageblocks).expect("memmap");
        let arena = if self.arena.is_empty() {
            None
        } else {
            Some(PhysArena::new(self.base, &mut self.arena).expect("arena"))
        };
        let parts = NodeParts { memmap, layout, states: &mut self.states, arena, hooks };
        Node::boot(parts, opts).expect("boot")
    }
}

/// A struct page filled with the guard pattern.
pub fn guard_page<P: StructPage>() -> P {
    let mut p = P::ZEROED;
    p.words_mut().fill(GUARD_WORD);
    p
}

/// Whether a struct page was never written.
pub fn is_guard<P: StructPage>(p: &P) -> bool {
    p.words().iter().all(|&w| w == GUARD_WORD)
}

/// The canonical decomposition of the free PFNs of `[start, end)` into the largest naturally
/// aligned blocks of at most `max_order`: what a buddy allocator with every buddy merged holds.
pub fn maximal_blocks(free: &[bool], start: u64, max_order: u32) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let end = start + free.len() as u64;
    let mut pfn = start;
    while pfn < end {
        if !free[(pfn - start) as usize] {
            pfn += 1;
            continue;
        }
        let mut order = max_order;
        loop {
            let n = 1u64 << order;
            if pfn % n == 0 && pfn + n <= end && (pfn..pfn + n).all(|p| free[(p - start) as usize]) {
                break;
            }
            order -= 1;
        }
        out.push((pfn, order));
        pfn += 1 << order;
    }
    out.sort_unstable();
    out
}

/// The free blocks of `zone` as `(pfn, order)`, in free-list order.
pub fn free_list<P: StructPage, H: InitHooks + Send>(node: &Node<'_, P, H>, zone: u32) -> Vec<(u64, u32)> {
    let mut v = Vec::new();
    node.for_each_free_block(zone, |pfn, o| v.push((pfn, o)));
    v
}

/// The free blocks of `zone`, sorted.
pub fn free_blocks<P: StructPage, H: InitHooks + Send>(node: &Node<'_, P, H>, zone: u32) -> Vec<(u64, u32)> {
    let mut v = free_list(node, zone);
    v.sort_unstable();
    v
}

/// Each zone of `zones` with its [`free_list`].
pub fn free_lists<P: StructPage, H: InitHooks + Send>(
    node: &Node<'_, P, H>,
    zones: &[ZoneSpan],
) -> Vec<(u32, Vec<(u64, u32)>)> {
    zones.iter().map(|z| (z.zone, free_list(node, z.zone))).collect()
}

/// Per-PFN free flags of a zone span according to the layout.
pub fn free_map(layout: &NodeLayout<'_>, span: PfnRange) -> Vec<bool> {
    (span.start..span.end).map(|p| layout.is_free(p)).collect()
}

/// The layout of node `nid`.
pub fn layout<'a>(
    nid: u32,
    zones: &'a [ZoneSpan],
    memory: &'a [PfnRange],
    reserved: &'a [ReservedRange],
) -> NodeLayout<'a> {
    NodeLayout { nid, zones, memory, reserved }
}

#[derive(Debug, Clone)]
pub struct Layout {
    pub nid: u32,
    pub zones: Vec<ZoneSpan>,
    pub memory: Vec<PfnRange>,
    pub reserved: Vec<ReservedRange>,
}

impl Layout {
    pub fn node(&self) -> NodeLayout<'_> {
        layout(self.nid, &self.zones, &self.memory, &self.reserved)
    }
}

/// A node of the tiny configuration (256-page sections): a lower zone of 1-2 sections and a
/// highest zone of 2-4, memory with up to two holes, up to three reserved ranges (some NOINIT).
pub fn layouts(nid: u32) -> impl proptest::strategy::Strategy<Value = Layout> {
    let pps = tiny().pages_per_section();
    (
        1u64..3,
        2u64..5,
        prop::collection::vec((0u64..1, 1u64..40), 0..3),
        prop::collection::vec((1u64..100, 1u64..30, any::<bool>()), 0..4),
        0u64..7,
    )
        .prop_map(move |(low, high, holes, res, head)| {
            let s0 = 2 * pps;
            let mid = s0 + low * pps;
            let end = mid + high * pps;
            let zones = vec![ZoneSpan::new(1, s0, mid), ZoneSpan::new(2, mid, end)];
            // Memory: the span minus the holes (each at a pseudo-random place).
            let mut cuts: Vec<(u64, u64)> = holes
                .iter()
                .enumerate()
                .map(|(i, &(_, len))| {
                    let at = s0 + head + (i as u64 + 1) * (end - s0) / 4 + len * 3;
                    (at, (at + len).min(end))
                })
                .collect();
            cuts.sort_unstable();
            let mut memory = Vec::new();
            let mut at = s0 + head;
            for (hs, he) in cuts {
                if hs > at {
                    memory.push(PfnRange::new(at, hs));
                }
                at = at.max(he);
            }
            if at < end - 2 {
                memory.push(PfnRange::new(at, end - 2));
            }
            let mut reserved = Vec::new();
            let mut at = s0;
            for (gap, len, noinit) in res {
                let start = at + gap * 5;
                let stop = (start + len).min(end);
                if start >= end {
                    break;
                }
                reserved.push(if noinit {
                    ReservedRange::noinit(start, stop)
                } else {
                    ReservedRange::new(start, stop)
                });
                at = stop;
            }
            Layout { nid, zones, memory, reserved }
        })
}

/// A property test's configuration: `native` cases, or `PROPTEST_CASES` where that is set (CI
/// lowers it under emulation and sanitizers, a long run raises it; docs/testing.md, "Sizes");
/// `miri` cases under Miri, whatever the environment says. No failure persistence (Miri's
/// isolation forbids the file system it needs; CI's runs keep no files).
pub fn sized(native: u32, miri: u32) -> ProptestConfig {
    let env = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok());
    ProptestConfig {
        cases: if cfg!(miri) { miri } else { env.unwrap_or(native) },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
