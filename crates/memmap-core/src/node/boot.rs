//! Boot-time init of a node: `memmap_init()`, `memmap_init_reserved_pages()` and the free pass
//! of `memblock_free_all()`, in the kernel's order or fused window by window (see the
//! [node documentation](super)).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::buddy::{CoreRun, FreeArea};
use super::run::{PbMode, RunKind};
use super::{
    BootOptions, BootOrder, BootReport, InitMode, Inner, Node, NodeError, NodeParts, NodeStats,
    pg_uninitialized_2m,
};
use crate::InitError;
use crate::fill::{Job, resolve};
use crate::freelist::{Rules, zone_struct_addr};
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::model::config::KernelConfig;
use crate::model::page::{StructPage, offsets};
use crate::node::owned::Owned;
use crate::sync::{BlockStates, SpinLock};

impl<'a, P: StructPage, H: InitHooks + Send> Node<'a, P, H> {
    /// Boots the node as `mm/mm_init.c` does: `memmap_init()` (the highest zone as the
    /// [`InitMode`] says), `memmap_init_reserved_pages()` and `free_low_memory_core_early()`,
    /// in the [`BootOrder`] of `opts`.
    ///
    /// # Errors
    ///
    /// [`NodeError`] for a bad layout, a memmap that does not cover the node, too few state
    /// bytes, an arena that does not cover the node, unsupported orders, or (on-demand) a
    /// configuration without a free flag bit. Nothing is written on error.
    ///
    /// # Panics
    ///
    /// Never for a validated layout (the internal `expect`s state invariants checked above).
    pub fn boot(parts: NodeParts<'a, P, H>, opts: &BootOptions) -> Result<(Self, BootReport), NodeError> {
        let NodeParts { memmap, layout, states, arena, hooks } = parts;
        let cfg = *memmap.config();
        let flags_layout = *memmap.layout();
        // Checked first: `span()` needs a zone, which `check_parts` makes sure of.
        let states = check_parts(&memmap, &layout, states, arena.as_ref())?;
        let span = layout.span();
        let uninit_bit = match (opts.mode, pg_uninitialized_2m(&cfg)) {
            (InitMode::OnDemand, None) => return Err(NodeError::NoFlagBitForOnDemand),
            (_, bit) => bit.unwrap_or(63),
        };
        let trace = memmap.page_ref_tracepoint_active(&hooks);
        let fused = opts.order != BootOrder::Kernel && !trace;
        let eager_windows = fused && opts.mode != InitMode::OnDemand;
        let job = opts.fill.job(span.len().saturating_mul(P::SIZE as u64), trace);
        let (strategy, reason) = resolve(&cfg, opts.fill.strategy, &job);
        // Runs the fused boot initializes and then frees are read back right away: `Auto`
        // treats them as read-soon jobs of one window (docs/performance/fill-notes.md). Runs
        // written once in their final state (`window::final_pass`) take `strategy`.
        let window_bytes = fused_window_written(&cfg, opts).saturating_mul(P::SIZE as u64);
        let (boot_strategy, boot_reason) = if fused {
            resolve(&cfg, opts.fill.strategy, &Job::read_back_soon(window_bytes, trace))
        } else {
            (strategy, reason)
        };
        let pages = memmap.raw_pages();
        let node_id = NEXT_NODE_ID.fetch_add(1, Ordering::Relaxed);
        let zones = core::array::from_fn(|z| {
            let area = FreeArea::new(zone_struct_addr(&cfg, layout.nid, z as u32));
            SpinLock::of_node(area, node_id)
        });
        let mut node = Node {
            // The hooks run under this lock: the innermost (see `SpinLock::hooks_of_node`).
            inner: SpinLock::hooks_of_node(Inner { memmap, hooks }, node_id),
            pages,
            cfg,
            flags_layout,
            layout,
            span,
            opts: *opts,
            strategy: (strategy, reason),
            run: boot_strategy,
            states,
            trace,
            uninit_bit,
            pg: cfg.behaviour().page_flags,
            rules: Rules::of(&cfg),
            resize_lock: SpinLock::of_node(u64::MAX, node_id),
            deferred_pages: AtomicBool::new(false),
            zones,
            arena,
            stats: NodeStats::new(),
            node_id,
        };
        // SAFETY: the node's span is inside the memmap storage (checked above), and the node
        // is not shared yet: until `boot` returns it, this thread is the only one that can
        // reach its struct pages (the handle is last used below, before the node is returned).
        let mut own = unsafe { Owned::new(node.pages, span.start, span.end) };
        let (fdp, freed) = if fused {
            node.fused_boot(&mut own)
        } else {
            let (lo, hi) = (span.start, span.end);
            let fdp = node.memmap_init(&mut own, lo, hi);
            *node.resize_lock.lock() = fdp;
            node.mark_boot_states(fdp);
            node.reserve_bootmem_regions(&mut own, fdp, lo, hi);
            (fdp, node.free_boot_memory(&mut own, fdp, (lo, hi), false))
        };
        node.run = strategy;
        // Release: pairs with the Acquire load in `Node::deferred_pending` (other threads get
        // the node after this; the release makes the boot's writes visible with the flag).
        node.deferred_pages.store(fdp != u64::MAX, Ordering::Release);
        let report = BootReport {
            first_deferred_pfn: (fdp != u64::MAX).then_some(fdp),
            pages_initialized: node.stats.pages_initialized.load(Ordering::Relaxed),
            pages_freed: freed,
            // An eager fused boot writes the bulk of the node in final-state windows, with the
            // node's strategy; the others with the boot's.
            strategy: if eager_windows { strategy } else { boot_strategy },
            reason: if eager_windows { reason } else { boot_reason },
        };
        Ok((node, report))
    }

    /// The fused boot ([`BootOrder::Fused`]): the three boot passes on one window after the
    /// other. Returns `(first_deferred_pfn, pages freed)`.
    ///
    /// Byte-identical to the kernel's order: a `MAX_PAGE_ORDER`-aligned window holds whole
    /// pageblocks, whole free chunks and every buddy a chunk can merge with, its reservation and
    /// free read only its own (already initialized) struct pages, and chunks are freed in the
    /// same ascending order (`tests/fused_boot.rs`).
    ///
    /// Deferred: the windows end at `first_deferred_pfn` (a window boundary); above it only
    /// holes and reserved pages are initialized.
    fn fused_boot(&self, own: &mut Owned<'_, P>) -> (u64, u64) {
        let fdp = if self.opts.mode == InitMode::Deferred { self.layout_defer_point() } else { u64::MAX };
        *self.resize_lock.lock() = fdp;
        self.mark_boot_states(fdp);
        let window = fused_window(&self.cfg, &self.opts);
        let end = self.span.end.min(fdp);
        let mut freed = 0;
        let mut lo = self.span.start;
        while lo < end {
            let next = |at: u64| (at | (window - 1)).saturating_add(1).min(end);
            let mut hi = next(lo);
            if let Some(zone) = self.simple_window(lo, hi) {
                // Consecutive simple windows of the zone go in one final-state pass.
                while hi < end && self.simple_window(hi, next(hi)) == Some(zone) {
                    hi = next(hi);
                }
                freed += self.boot_window(own, zone, lo, hi);
            } else {
                // Eager and deferred write the window's reserved memory in its final state.
                if self.opts.mode == InitMode::OnDemand {
                    self.memmap_init(own, lo, hi);
                    self.reserve_bootmem_regions(own, fdp, lo, hi);
                } else {
                    self.memmap_init_inner(own, lo, hi, true);
                    self.reserve_outside_memory(own, lo, hi);
                }
                let ready = self.opts.mode != InitMode::OnDemand;
                freed += self.free_boot_memory(own, fdp, (lo, hi), ready);
            }
            lo = hi;
        }
        if end < self.span.end {
            self.memmap_init(own, end, self.span.end);
            self.reserve_bootmem_regions(own, fdp, end, self.span.end);
        }
        (fdp, freed)
    }

    /// The `first_deferred_pfn` that [`Self::memmap_init`] finds in deferred mode (`u64::MAX`
    /// if nothing is deferred), from the layout alone.
    fn layout_defer_point(&self) -> u64 {
        let mut counter = crate::node::deferred::DeferCounter::new(self.cfg.pages_per_section());
        let mut fdp = u64::MAX;
        for m in self.layout.memory.iter().filter(|m| !m.is_empty()) {
            for z in self.layout.zones {
                let s = m.start.clamp(z.span.start, z.span.end);
                let e = m.end.clamp(z.span.start, z.span.end);
                counter.defer_point(s, e, z.span.end, self.span.end, &mut fdp);
            }
        }
        fdp
    }

    /// `memmap_init()` for this node, restricted to `[lo, hi)` (the whole span, or a window of
    /// [`Self::fused_boot`]); returns `first_deferred_pfn`.
    fn memmap_init(&self, own: &mut Owned<'_, P>, lo: u64, hi: u64) -> u64 {
        self.memmap_init_inner(own, lo, hi, false)
    }

    /// [`Self::memmap_init`]; with `reserved_too` (a fused window below `first_deferred_pfn`)
    /// the reserved memory (not `MEMBLOCK_RSRV_NOINIT`) is written in the state
    /// `reserve_bootmem_region()` leaves, with the node's strategy (nothing reads it back).
    fn memmap_init_inner(&self, own: &mut Owned<'_, P>, lo: u64, hi: u64, reserved_too: bool) -> u64 {
        // defer_init() stops the node's highest zone at first_deferred_pfn, found from the
        // layout (every range counted, inside the window or not).
        let fdp = if self.opts.mode == InitMode::Deferred { self.layout_defer_point() } else { u64::MAX };
        let mut hole = self.span.start;
        let mut last_zone = self.layout.zones[0].zone;
        for m in self.layout.memory.iter().filter(|m| !m.is_empty()) {
            for z in self.layout.zones {
                let s = m.start.clamp(z.span.start, z.span.end);
                let e = m.end.clamp(z.span.start, z.span.end);
                if s >= e {
                    continue;
                }
                let stop = if z.span.end >= self.span.end { fdp.clamp(s, e) } else { e };
                let (ws, we) = (s.max(lo), stop.min(hi));
                match self.opts.mode {
                    _ if ws >= we => {}
                    InitMode::Eager | InitMode::Deferred if reserved_too => {
                        self.init_memory_run(own, ws, we, z.zone);
                    }
                    InitMode::Eager | InitMode::Deferred => {
                        self.init_run(own, ws, we, z.zone, RunKind::plain(PbMode::MovableResched));
                    }
                    InitMode::OnDemand => self.ondemand_memmap_init_range(own, ws, we, z.zone),
                }
                if hole < s {
                    self.init_unavailable_range(own, hole.max(lo), s.min(hi), z.zone);
                }
                hole = e;
                last_zone = z.zone;
            }
        }
        if hole < self.span.end {
            self.init_unavailable_range(own, hole.max(lo), self.span.end.min(hi), last_zone);
        }
        fdp
    }

    /// `memmap_init_range()` on `[from, to)` of `zone` in a fused window, with the later passes
    /// folded in: reserved parts (not NOINIT) as `reserve_bootmem_region()` leaves them, free
    /// parts as `__free_pages_core()` does, both with the node's strategy.
    fn init_memory_run(&self, own: &mut Owned<'_, P>, from: u64, to: u64, zone: u32) {
        let plain = RunKind::plain(PbMode::MovableResched);
        let reserved = RunKind { extra_flags: 1 << self.pg.reserved, final_state: true, ..plain };
        let free = RunKind { count: 0, final_state: true, ..plain };
        let mut p = from;
        // Sorted and disjoint once the empty ones are left out (validated; an empty range may
        // sit anywhere).
        for r in self
            .layout
            .reserved
            .iter()
            .filter(|r| !r.range.is_empty() && r.range.start < to && from < r.range.end)
        {
            let (a, b) = (r.range.start.max(from), r.range.end.min(to));
            self.init_run(own, p, a, zone, free);
            self.init_run(own, a, b, zone, if r.noinit { plain } else { reserved });
            p = b;
        }
        self.init_run(own, p, to, zone, free);
    }

    /// `reserve_bootmem_region()` on the reserved pages of `[lo, hi)` outside memory, after
    /// [`Self::memmap_init_inner`] wrote those inside.
    fn reserve_outside_memory(&self, own: &mut Owned<'_, P>, lo: u64, hi: u64) {
        for r in
            self.layout.reserved.iter().filter(|r| !r.noinit && r.range.start.max(lo) < r.range.end.min(hi))
        {
            let (start, stop) = (r.range.start.max(lo), r.range.end.min(hi));
            let mut p = start;
            for m in self.layout.memory.iter().filter(|m| !m.is_empty() && m.start < stop && start < m.end) {
                set_reserved(own, p, m.start.max(p), self.pg.reserved);
                p = p.max(m.end.min(stop));
            }
            set_reserved(own, p, stop, self.pg.reserved);
        }
        self.rehome_reserved_outside_memory(own, lo, hi);
    }

    /// Before 6.12 ([`Behaviour::reserved_page_nid_by_pfn`](crate::Behaviour::reserved_page_nid_by_pfn)),
    /// in deferred mode: `init_reserved_page()` looks a reserved page's node up by pfn, and
    /// outside memory `early_pfn_to_nid()` answers the first online node (node 0), whose
    /// `first_deferred_pfn` the page lies above when node 0 lies below this node and defers its
    /// highest zone (the layouts the model is given); no zone of node 0 spans the page, so it is
    /// initialized as node 0's, zone `MAX_NR_ZONES`, and `PG_reserved`.
    fn rehome_reserved_outside_memory(&self, own: &mut Owned<'_, P>, lo: u64, hi: u64) {
        let b = self.cfg.behaviour();
        if !b.reserved_page_nid_by_pfn || self.opts.mode != InitMode::Deferred || self.layout.nid == 0 {
            return;
        }
        for r in
            self.layout.reserved.iter().filter(|r| !r.noinit && r.range.start.max(lo) < r.range.end.min(hi))
        {
            for pfn in r.range.start.max(lo)..r.range.end.min(hi) {
                if self.layout.memory.iter().any(|m| m.contains(pfn)) {
                    continue;
                }
                let mut g = self.inner.lock();
                let Inner { memmap, hooks } = &mut *g;
                memmap.init_single_page(pfn, self.cfg.max_nr_zones, 0, hooks);
                drop(g);
                set_reserved(own, pfn, pfn + 1, self.pg.reserved);
            }
        }
    }

    /// `init_unavailable_range()`: holes are initialized and `PG_reserved`, in the sections that
    /// hold memory; a section without any has no memmap (`pfn_valid()` is false there, and the
    /// kernel skips it).
    fn init_unavailable_range(&self, own: &mut Owned<'_, P>, from: u64, to: u64, zone: u32) {
        let kind = RunKind {
            pageblock: PbMode::None,
            extra_flags: 1 << self.pg.reserved,
            count: 1,
            final_state: false,
        };
        let pps = self.cfg.pages_per_section();
        let mut a = from;
        while a < to {
            let b = ((a / pps + 1) * pps).min(to);
            let (lo, hi) = (a / pps * pps, a / pps * pps + pps);
            if self.layout.memory.iter().any(|r| r.start < hi && lo < r.end) {
                self.init_run(own, a, b, zone, kind);
            }
            a = b;
        }
    }

    /// Publishes the blocks boot initialized completely.
    fn mark_boot_states(&self, fdp: u64) {
        let pb = self.cfg.pageblock_nr_pages();
        let mut b = self.block_start(self.span.start);
        // On-demand: the memory-and-zone range that held the last flagged block (blocks come in
        // ascending order, so consecutive blocks mostly hit it and skip the layout scan).
        let mut flagged_range: Option<(u64, u64)> = None;
        while b < self.span.end {
            let done = match self.opts.mode {
                InitMode::Eager => true,
                InitMode::Deferred => b + pb <= fdp,
                // Exactly the blocks `ondemand_memmap_init_range` flagged stay unexpanded, found
                // from the layout (reading each block's first page back would miss the cache).
                InitMode::OnDemand => {
                    if !matches!(flagged_range, Some((s, e)) if s <= b && b + pb <= e) {
                        flagged_range = self.ondemand_flagging_range(b);
                    }
                    match flagged_range {
                        Some((_, e)) => {
                            // Every whole block up to `e` stays unexpanded: skip to the first
                            // block that is not whole inside the range.
                            b += (e - b) / pb * pb;
                            continue;
                        }
                        None => true,
                    }
                }
            };
            if done {
                self.states.mark_done(self.block_index(b.max(self.span.start)));
            }
            b += pb;
        }
    }

    /// `memmap_init_reserved_pages()`: `reserve_bootmem_region()` on every reserved range that
    /// is not `MEMBLOCK_RSRV_NOINIT`, restricted to `[lo, hi)`.
    fn reserve_bootmem_regions(&self, own: &mut Owned<'_, P>, fdp: u64, lo: u64, hi: u64) {
        for r in
            self.layout.reserved.iter().filter(|r| !r.noinit && r.range.start.max(lo) < r.range.end.min(hi))
        {
            let (start, stop) = (r.range.start.max(lo), r.range.end.min(hi));
            let mut pfn = start;
            while pfn < stop {
                let z = *self.layout.zone_of(pfn).expect("validated: reserved ranges are inside zones");
                let end = stop.min(z.span.end);
                match self.opts.mode {
                    InitMode::Deferred if end > fdp => {
                        // Below fdp: initialized by memmap_init. From fdp on:
                        // __init_deferred_page() -> __init_page_from_nid(), then PG_reserved.
                        let from = pfn.max(fdp);
                        set_reserved(own, pfn, from, self.pg.reserved);
                        // Deferred init frees around them and never writes them again.
                        let kind = RunKind {
                            pageblock: PbMode::Movable,
                            extra_flags: 1 << self.pg.reserved,
                            count: 1,
                            final_state: true,
                        };
                        self.init_run(own, from, end, z.zone, kind);
                    }
                    InitMode::OnDemand => {
                        self.ensure_range_initialized(pfn, end - pfn);
                        set_reserved(own, pfn, end, self.pg.reserved);
                    }
                    _ => set_reserved(own, pfn, end, self.pg.reserved),
                }
                pfn = end;
            }
        }
        self.rehome_reserved_outside_memory(own, lo, hi);
    }

    /// `free_low_memory_core_early()` for this node, restricted to `[lo, hi)`; returns the
    /// pages freed. `ready`: [`Self::init_memory_run`] initialized the free pages as
    /// `__free_pages_core()` leaves them.
    fn free_boot_memory(&self, own: &mut Owned<'_, P>, fdp: u64, (lo, hi): (u64, u64), ready: bool) -> u64 {
        let mut freed = 0;
        for z in self.layout.zones.iter().filter(|z| z.span.start < hi && lo < z.span.end) {
            for r in self.layout.free_ranges(*z, z.span.start.max(lo)) {
                if r.start >= hi {
                    break;
                }
                freed += self.free_pages_memory(own, z.zone, (r.start, r.end.min(hi)), fdp, ready);
            }
        }
        freed
    }

    /// `__free_pages_memory(start, end)`: the largest naturally aligned chunks, each through
    /// `memblock_free_pages()`, which skips deferred PFNs.
    ///
    /// Runs of `MAX_PAGE_ORDER` chunks go to `__free_pages_core` [`FREE_BATCH`] at a time under
    /// one zone lock hold, so their cache misses overlap (timing only; the same bytes).
    fn free_pages_memory(
        &self,
        own: &mut Owned<'_, P>,
        zone: u32,
        (mut start, end): (u64, u64),
        fdp: u64,
        ready: bool,
    ) -> u64 {
        let max = self.cfg.max_page_order;
        let limit = end.min(fdp);
        let mut freed = 0;
        while start < end {
            let mut order = if start == 0 { max } else { max.min(start.trailing_zeros()) };
            while start + (1 << order) > end {
                order -= 1;
            }
            if start >= fdp {
                start += 1 << order;
                continue;
            }
            let count = if order == max { ((limit - start) >> order).clamp(1, FREE_BATCH) } else { 1 };
            self.free_pages_core_run(
                own,
                zone,
                CoreRun { pfn: start, order, count, prefetch_end: limit, ready },
            );
            freed += count << order;
            start += count << order;
        }
        freed
    }
}

/// Unique ids of nodes, so a [`crate::PageBlock`] cannot be used with another node.
static NEXT_NODE_ID: AtomicU64 = AtomicU64::new(1);

/// Pages per window of the fused boot: a power of two, a multiple of the `MAX_PAGE_ORDER`
/// block, sized so that the struct pages a window writes stay cached until its free pass
/// (4 blocks when every struct page is written, 1024 pageblocks when only their first are).
fn fused_window(cfg: &KernelConfig, opts: &BootOptions) -> u64 {
    let max_block = 1u64 << cfg.max_page_order;
    match (opts.order, opts.mode) {
        (BootOrder::FusedWindow { order }, _) => 1u64 << order.clamp(cfg.max_page_order, 63),
        (_, InitMode::OnDemand) => (cfg.pageblock_nr_pages() << 10).max(max_block),
        _ => max_block << 2,
    }
}

/// Struct pages one window of the fused boot writes before its free pass reads them back:
/// all of them eagerly, the first of each pageblock on demand (a block expanded at boot is
/// one pageblock).
fn fused_window_written(cfg: &KernelConfig, opts: &BootOptions) -> u64 {
    let pages = fused_window(cfg, opts);
    if opts.mode == InitMode::OnDemand {
        (pages / cfg.pageblock_nr_pages()).max(cfg.pageblock_nr_pages())
    } else {
        pages
    }
}

/// Checks what a node is built from before anything is written: the layout, the node id, the
/// memmap covering the span, the orders, the state bytes (reset and returned as the block
/// states) and the arena.
fn check_parts<'a, P: StructPage>(
    memmap: &crate::memmap::Memmap<'a, P>,
    layout: &super::NodeLayout<'a>,
    states: &'a mut [u8],
    arena: Option<&super::PhysArena<'a>>,
) -> Result<BlockStates<'a>, NodeError> {
    let cfg = *memmap.config();
    let flags_layout = *memmap.layout();
    layout.validate(cfg.max_nr_zones - 1)?;
    if u64::from(layout.nid) > flags_layout.nodes_mask() {
        return Err(
            InitError::NodeOutOfRange { nid: layout.nid, max: flags_layout.nodes_mask() as u32 }.into()
        );
    }
    let span = layout.span();
    if !memmap.contains_range(span.start, span.len()) {
        return Err(InitError::OutOfRange {
            start_pfn: span.start,
            nr_pages: span.len(),
            memmap_start: memmap.base_pfn(),
            memmap_end: memmap.end_pfn(),
        }
        .into());
    }
    if !Rules::orders_supported(&cfg) {
        return Err(NodeError::UnsupportedOrders {
            max_page_order: cfg.max_page_order,
            pageblock_order: cfg.pageblock_order,
        });
    }
    let needed = crate::memmap::pageblocks_needed(&cfg, span.start, span.len());
    if states.len() < needed {
        return Err(NodeError::StatesTooShort { needed, got: states.len() });
    }
    if arena.is_some() && cfg.page_size() != crate::node::arena::ARENA_PAGE_SIZE as u64 {
        return Err(NodeError::ArenaPageSize { page_size: cfg.page_size() });
    }
    if arena.is_some_and(|a| !a.covers(span.start, span.len())) {
        return Err(NodeError::ArenaTooSmall);
    }
    Ok(BlockStates::from_bytes(&mut states[..needed]))
}

/// How many `MAX_PAGE_ORDER` chunks the boot free pass frees under one hold of the zone lock.
const FREE_BATCH: u64 = 64;

/// `__SetPageReserved` on `[from, to)`, pages `own` owns (`PG_reserved` is bit `reserved`).
fn set_reserved<P: StructPage>(own: &mut Owned<'_, P>, from: u64, to: u64, reserved: u32) {
    for pfn in from..to {
        let f = own.word(pfn, offsets::FLAGS);
        own.set_word(pfn, offsets::FLAGS, f | 1 << reserved);
    }
}
