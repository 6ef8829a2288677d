//! A NUMA node's memmap at boot, shared between threads: the home of deferred init
//! ([`crate::deferred`]), on-demand init ([`crate::ondemand`]) and the buddy allocator
//! ([`crate::buddy`]).
//!
//! [`Node::boot`] is the boot-time part of `mm/mm_init.c` for one node:
//!
//! 1. `memmap_init()`: for every memory range and zone, `memmap_init_range()` initializes the
//!    struct pages (`__init_single_page`, `MIGRATE_MOVABLE` and `cond_resched()` at
//!    pageblock-aligned PFNs); holes between ranges get `init_unavailable_range()`
//!    (initialized and `PG_reserved`). What happens in the highest zone depends on the
//!    [`InitMode`]: everything ([`InitMode::Eager`]), up to the first deferred PFN chosen by
//!    `defer_init()` ([`InitMode::Deferred`]), or only the first struct page of each 2 MiB block
//!    ([`InitMode::OnDemand`], the 2013 RFC, applied to every zone of the node as the RFC did).
//! 2. `memmap_init_reserved_pages()`: `reserve_bootmem_region()` on every reserved range that is
//!    not `MEMBLOCK_RSRV_NOINIT`: deferred struct pages are initialized now
//!    (`__init_deferred_page`), on-demand blocks expanded, and every page gets `PG_reserved`.
//! 3. `free_low_memory_core_early()`: every free range is handed to the buddy allocator in the
//!    largest naturally aligned chunks (`__free_pages_memory()`), except the deferred ones
//!    (`memblock_free_pages()` skips PFNs that are not `early_page_initialised()`).
//!
//! The kernel runs each step over the whole node before the next ([`BootOrder::Kernel`]). By
//! default the node runs all three on one `MAX_PAGE_ORDER`-aligned window before the next
//! ([`BootOrder::Fused`]), which leaves the same bytes, lists and counters but lets step 3 find
//! the struct pages step 1 wrote still in the cache; on-demand windows without reserved pages
//! or range edges take a single pass that writes each first struct page once, in its final
//! state. On a 64 GiB node (`memmap-bench deferred`) the fused boot is about 1.15x faster eager
//! and 1.5x faster on demand; `Node::fused_boot` in the source explains why it is
//! byte-identical and why it is faster.
//!
//! ## Sharing
//!
//! A node is `Sync`. Struct pages are written through raw pointers, always by the one thread
//! that owns them at that moment: the booting thread, a padata worker for its chunk, the zone
//! lock holder for free pages, an allocating thread for its allocation. Ownership moves only
//! through a [`SpinLock`] (the zone locks, the resize lock, the memmap lock) or a
//! [`BlockStates`] release/acquire pair, so there is no data race. The existing
//! [`Memmap`] view sits behind the *memmap lock* together with the [`InitHooks`]: the slow
//! paths, pageblock migrate types and tracepoint events go through it.

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::arena::{InitPolicy, PhysArena};
use crate::buddy::FreeArea;
use crate::config::{FlagsLayout, KernelConfig};
use crate::flags::{MigrateType, PG};
use crate::hooks::{InitHooks, NoHooks};
use crate::init::{rd64, wr64};
use crate::memblock::{LayoutError, NodeLayout, PfnRange};
use crate::memmap::Memmap;
use crate::page::{StructPage, offsets};
use crate::sync::{BlockStates, SpinLock};
use crate::{InitError, Strategy, StrategyReason};

/// Zone slots of a node (`MAX_NR_ZONES` is at most 8).
pub(crate) const MAX_ZONES: usize = 8;
/// Orders the allocator supports (`MAX_PAGE_ORDER` must be below this).
pub const MAX_ORDERS: usize = 24;

/// How the node's struct pages are initialized at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InitMode {
    /// Everything at boot (no `CONFIG_DEFERRED_STRUCT_PAGE_INIT`).
    Eager,
    /// `CONFIG_DEFERRED_STRUCT_PAGE_INIT`: the highest zone past its first section is left to
    /// [`Node::deferred_init_memmap`] and [`Node::deferred_grow_zone`].
    Deferred,
    /// The 2013 RFC: one struct page per 2 MiB block at boot, the rest on first allocator use.
    OnDemand,
}

impl InitMode {
    /// All modes.
    pub const ALL: [InitMode; 3] = [InitMode::Eager, InitMode::Deferred, InitMode::OnDemand];

    /// `eager`, `deferred` or `on-demand`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            InitMode::Eager => "eager",
            InitMode::Deferred => "deferred",
            InitMode::OnDemand => "on-demand",
        }
    }

    /// Parses [`InitMode::name`].
    #[must_use]
    pub fn from_name(s: &str) -> Option<InitMode> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl fmt::Display for InitMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of [`Node::boot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOptions {
    /// The init mode.
    pub mode: InitMode,
    /// How runs of struct pages are written (boot init, deferred init, on-demand expansion):
    /// the slow path, or a template copied with normal or streaming stores. `Auto` streams
    /// unless the kernel's rules (tracepoint, KASAN/KMSAN, sanitizer build) require the slow
    /// path.
    pub strategy: Strategy,
    /// init_on_alloc / init_on_free and the clear mode.
    pub policy: InitPolicy,
    /// `is_check_pages_enabled()` (`CONFIG_DEBUG_VM`): check every page of an allocation at
    /// prep and every page of a free, not only the first.
    pub check_pages: bool,
    /// The order of the boot passes ([`BootOrder::Fused`] by default).
    pub order: BootOrder,
}

/// The order in which [`Node::boot`] runs its three passes: `memmap_init` (initialize the
/// struct pages), `reserve_bootmem_regions` (`PG_reserved` on reserved memory) and the free
/// pass (`memblock_free_all`: every free page to the buddy allocator).
///
/// Every order leaves the same bytes: memmap, pageblock bits, free lists (linked in the same
/// order), counters and `cond_resched()` calls (`tests/fused_boot.rs` compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BootOrder {
    /// The kernel's: each pass over the whole node in turn. The free pass then reads back
    /// struct pages written long before, out of the cache by then.
    Kernel,
    /// Window by window: the three passes on one `MAX_PAGE_ORDER`-aligned window of the node,
    /// then on the next, with a window size that keeps the window's struct pages cached from
    /// initialization to freeing. On-demand windows that lie in one memory range of one zone
    /// without reserved pages take a single pass that writes each first struct page once, in
    /// its final state. Falls back to [`BootOrder::Kernel`] in [`InitMode::Deferred`] (its
    /// boot initializes one section per node) and while the `page_ref_set` tracepoint is
    /// active (its events keep the kernel's order).
    #[default]
    Fused,
    /// [`BootOrder::Fused`] with windows of `2^order` pages (raised to `MAX_PAGE_ORDER` if
    /// below), for tuning and tests.
    FusedWindow {
        /// log2 of the window in pages.
        order: u32,
    },
}

impl BootOptions {
    /// `mode` with [`Strategy::Auto`], no memory auto-init, page checks on.
    #[must_use]
    pub const fn new(mode: InitMode) -> Self {
        BootOptions {
            mode,
            strategy: Strategy::Auto,
            policy: policy_off(),
            check_pages: true,
            order: BootOrder::Fused,
        }
    }
}

const fn policy_off() -> InitPolicy {
    InitPolicy {
        init_on_alloc: false,
        init_on_free: false,
        page_poisoning: false,
        kasan_hw_tags: false,
        clear: crate::arena::ClearMode::Batch,
    }
}

/// What a node is built from.
pub struct NodeParts<'a, P: StructPage, H: InitHooks + Send = NoHooks> {
    /// The memmap view; it must cover the node span. The node keeps it (and its pageblock
    /// array) until [`Node::into_memmap`].
    pub memmap: Memmap<'a, P>,
    /// The memblock-shaped layout.
    pub layout: NodeLayout<'a>,
    /// One state byte per pageblock overlapping the node span ([`Node::states_needed`]); any
    /// content (boot resets them). The node keeps the exclusive borrow for its lifetime, so no
    /// other code can change a block's state while the node's threads rely on it.
    pub states: &'a mut [u8],
    /// Page contents, for init_on_alloc/init_on_free; must cover the node span.
    pub arena: Option<PhysArena<'a>>,
    /// `cond_resched()` and the `page_ref_set` tracepoint.
    pub hooks: H,
}

/// Why a node could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeError {
    /// The layout is invalid.
    Layout(LayoutError),
    /// The memmap does not cover the node span, or the configuration is invalid.
    Init(InitError),
    /// Too few state bytes.
    StatesTooShort {
        /// Needed.
        needed: usize,
        /// Given.
        got: usize,
    },
    /// The arena does not cover the node span.
    ArenaTooSmall,
    /// `MAX_PAGE_ORDER` is not below [`MAX_ORDERS`], or `pageblock_order` is above it.
    UnsupportedOrders {
        /// `max_page_order`.
        max_page_order: u32,
        /// `pageblock_order`.
        pageblock_order: u32,
    },
    /// There is no free `page->flags` bit for `PG_uninitialized_2m` in this configuration.
    NoFlagBitForOnDemand,
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NodeError::Layout(e) => write!(f, "bad node layout: {e}"),
            NodeError::Init(e) => write!(f, "{e}"),
            NodeError::StatesTooShort { needed, got } => {
                write!(f, "{got} block state bytes, {needed} needed")
            }
            NodeError::ArenaTooSmall => f.write_str("the arena does not cover the node span"),
            NodeError::UnsupportedOrders { max_page_order, pageblock_order } => {
                write!(f, "MAX_PAGE_ORDER {max_page_order} / pageblock_order {pageblock_order} not supported")
            }
            NodeError::NoFlagBitForOnDemand => f.write_str("no free page flag bit for PG_uninitialized_2m"),
        }
    }
}

impl core::error::Error for NodeError {}

impl From<LayoutError> for NodeError {
    fn from(e: LayoutError) -> Self {
        NodeError::Layout(e)
    }
}

impl From<InitError> for NodeError {
    fn from(e: InitError) -> Self {
        NodeError::Init(e)
    }
}

/// What [`Node::boot`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootReport {
    /// `NODE_DATA(nid)->first_deferred_pfn` after boot (`None`: nothing deferred).
    pub first_deferred_pfn: Option<u64>,
    /// Struct pages written by `__init_single_page` at boot.
    pub pages_initialized: u64,
    /// Pages handed to the buddy allocator at boot.
    pub pages_freed: u64,
    /// The strategy used for runs of struct pages.
    pub strategy: Strategy,
    /// Why.
    pub reason: StrategyReason,
    /// Wall time (`std` only).
    pub elapsed: Option<core::time::Duration>,
}

/// Counters of a node (relaxed atomics; read them when the node is quiescent).
#[derive(Debug)]
pub struct NodeStats {
    /// `__free_pages_core()` calls per order.
    pub free_core_calls: [AtomicU64; MAX_ORDERS],
    /// Struct pages written by `__init_single_page` (boot, deferred, on-demand, grow).
    pub pages_initialized: AtomicU64,
    /// On-demand block expansions.
    pub expansions: AtomicU64,
    /// `deferred_grow_zone()` calls that grew the zone.
    pub grows: AtomicU64,
}

impl NodeStats {
    fn new() -> Self {
        NodeStats {
            free_core_calls: core::array::from_fn(|_| AtomicU64::new(0)),
            pages_initialized: AtomicU64::new(0),
            expansions: AtomicU64::new(0),
            grows: AtomicU64::new(0),
        }
    }

    /// `__free_pages_core()` calls of `order` (0 for orders the allocator does not have).
    #[must_use]
    pub fn free_core(&self, order: u32) -> u64 {
        self.free_core_calls.get(order as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// The memmap view and the hooks, behind the memmap lock.
pub(crate) struct Inner<'a, P: StructPage, H> {
    pub(crate) memmap: Memmap<'a, P>,
    pub(crate) hooks: H,
}

/// Raw access to the node's struct pages.
#[derive(Clone, Copy)]
pub(crate) struct RawPages<P> {
    ptr: core::ptr::NonNull<P>,
    base_pfn: u64,
    vaddr_base: u64,
}

// SAFETY: `RawPages` is a pointer into storage exclusively borrowed by the node for its lifetime
// (`Memmap` is `Send`). Every access through it follows the ownership rules of the module
// documentation, so sharing the pointer between threads introduces no data race.
unsafe impl<P: Send> Send for RawPages<P> {}
// SAFETY: as above.
unsafe impl<P: Sync> Sync for RawPages<P> {}

impl<P: StructPage> RawPages<P> {
    /// # Safety
    ///
    /// `pfn` must be in the memmap.
    #[inline(always)]
    pub(crate) unsafe fn ptr(&self, pfn: u64) -> *mut P {
        // SAFETY: the caller guarantees `pfn - base_pfn` is inside the storage.
        unsafe { self.ptr.as_ptr().add((pfn - self.base_pfn) as usize) }
    }

    /// The modelled kernel address of the struct page of `pfn`.
    #[inline(always)]
    pub(crate) fn vaddr(&self, pfn: u64) -> u64 {
        self.vaddr_base.wrapping_add(pfn.wrapping_sub(self.base_pfn).wrapping_mul(P::SIZE as u64))
    }

    /// The PFN of the struct page whose `lru` list node is at `list_vaddr`.
    #[inline(always)]
    pub(crate) fn pfn_of_list(&self, list_vaddr: u64) -> u64 {
        self.base_pfn + (list_vaddr - offsets::LRU_NEXT as u64 - self.vaddr_base) / P::SIZE as u64
    }
}

/// How [`Node::init_run`] treats pageblock-aligned PFNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PbMode {
    /// Nothing (`deferred_init_pages`, `init_unavailable_range`, on-demand expansion).
    None,
    /// `set_pageblock_migratetype(MOVABLE)` (`__init_page_from_nid`).
    Movable,
    /// `set_pageblock_migratetype(MOVABLE)` and `cond_resched()` (`memmap_init_range`).
    MovableResched,
}

/// One run of [`Node::init_run`]: `__init_single_page` on each PFN, then `extra_flags` ORed
/// in, then `set_page_count(count)` when `count != 1`, then the pageblock work.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunKind {
    pub(crate) pageblock: PbMode,
    pub(crate) extra_flags: u64,
    pub(crate) count: i32,
}

impl RunKind {
    pub(crate) const fn plain(pageblock: PbMode) -> Self {
        RunKind { pageblock, extra_flags: 0, count: 1 }
    }
}

/// A node: its memmap, layout, per-zone free lists and deferred/on-demand state.
pub struct Node<'a, P: StructPage, H: InitHooks + Send = NoHooks> {
    pub(crate) inner: SpinLock<Inner<'a, P, H>>,
    pub(crate) pages: RawPages<P>,
    pub(crate) cfg: KernelConfig,
    pub(crate) flags_layout: FlagsLayout,
    pub(crate) layout: NodeLayout<'a>,
    pub(crate) span: PfnRange,
    pub(crate) opts: BootOptions,
    pub(crate) strategy: Strategy,
    pub(crate) reason: StrategyReason,
    pub(crate) states: BlockStates<'a>,
    pub(crate) trace: bool,
    pub(crate) uninit_bit: u32,
    /// `pgdat_resize_lock` around `NODE_DATA(nid)->first_deferred_pfn`.
    pub(crate) resize_lock: SpinLock<u64>,
    /// The `deferred_pages` static key: on from boot until deferred init has finished.
    pub(crate) deferred_pages: AtomicBool,
    /// Set during a fused boot with [`Strategy::Auto`]: template copies use normal stores (the
    /// window's free pass reads them right back).
    pub(crate) boot_cached: AtomicBool,
    pub(crate) zones: [SpinLock<FreeArea>; MAX_ZONES],
    pub(crate) arena: Option<PhysArena<'a>>,
    pub(crate) stats: NodeStats,
    /// Unique id (so that a [`crate::PageBlock`] of another node is refused).
    pub(crate) node_id: u64,
}

impl<P: StructPage, H: InitHooks + Send> fmt::Debug for Node<'_, P, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("nid", &self.layout.nid)
            .field("span", &self.span)
            .field("mode", &self.opts.mode)
            .field("strategy", &self.strategy)
            .finish()
    }
}

#[cfg(feature = "std")]
pub(crate) type Clock = std::time::Instant;
#[cfg(feature = "std")]
pub(crate) fn clock_start() -> Option<Clock> {
    Some(Clock::now())
}
#[cfg(not(feature = "std"))]
pub(crate) fn clock_start() -> Option<()> {
    None
}
#[cfg(feature = "std")]
pub(crate) fn clock_elapsed(start: Option<Clock>) -> Option<core::time::Duration> {
    start.map(|s| s.elapsed())
}
#[cfg(not(feature = "std"))]
pub(crate) fn clock_elapsed(_start: Option<()>) -> Option<core::time::Duration> {
    None
}

/// The strategy actually used for runs, by the rules of `zone_device`: the slow path when the
/// `page_ref_set` tracepoint is active, with KASAN/KMSAN, or (for `Auto`) in a sanitizer build.
fn resolve(cfg: &KernelConfig, trace: bool, s: Strategy) -> (Strategy, StrategyReason) {
    match s {
        Strategy::Slow => (Strategy::Slow, StrategyReason::Requested),
        _ if trace => (Strategy::Slow, StrategyReason::PageRefTracepoint),
        _ if cfg.kasan || cfg.kmsan => (Strategy::Slow, StrategyReason::KasanOrKmsan),
        Strategy::Template | Strategy::Streaming => (s, StrategyReason::Requested),
        Strategy::Auto => {
            if let stream_hal::Backend::Generic(stream_hal::GenericReason::Sanitizer(_)) =
                stream_hal::backend()
            {
                (Strategy::Slow, StrategyReason::SanitizerBuild)
            } else {
                (Strategy::Streaming, StrategyReason::AboveThreshold)
            }
        }
    }
}

/// The lowest bit used by a non-flag field of `page->flags` (64 if none).
fn lowest_field_bit(l: &FlagsLayout) -> u32 {
    [
        (l.sections_width, l.sections_pgshift),
        (l.nodes_width, l.nodes_pgshift),
        (l.zones_width, l.zones_pgshift),
        (l.last_cpupid_width, l.last_cpupid_pgshift),
        (l.kasan_tag_width, l.kasan_tag_pgshift),
        (l.lru_gen_width, l.lru_gen_pgshift),
        (l.lru_refs_width, l.lru_refs_pgshift),
    ]
    .into_iter()
    .filter(|&(w, _)| w != 0)
    .map(|(_, s)| s)
    .min()
    .unwrap_or(64)
}

/// The model's `PG_uninitialized_2m` bit for `cfg`: the first bit after the baseline's
/// `__NR_PAGEFLAGS` flags (see [`crate::ondemand`]), or `None` if a `page->flags` field starts
/// there.
#[must_use]
pub fn pg_uninitialized_2m(cfg: &KernelConfig) -> Option<u32> {
    let l = cfg.flags_layout().ok()?;
    (cfg.nr_pageflags < lowest_field_bit(&l)).then_some(cfg.nr_pageflags)
}

impl<'a, P: StructPage, H: InitHooks + Send> Node<'a, P, H> {
    /// State bytes a node spanning `span` needs: one per pageblock overlapping it.
    #[must_use]
    pub fn states_needed(cfg: &KernelConfig, span: PfnRange) -> usize {
        crate::memmap::pageblocks_needed(cfg, span.start, span.len())
    }

    /// Boot-time init of the node (see the module documentation).
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
        let clock = clock_start();
        let NodeParts { memmap, layout, states, arena, hooks } = parts;
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
        if cfg.max_page_order as usize >= MAX_ORDERS || cfg.pageblock_order > cfg.max_page_order {
            return Err(NodeError::UnsupportedOrders {
                max_page_order: cfg.max_page_order,
                pageblock_order: cfg.pageblock_order,
            });
        }
        let needed = Self::states_needed(&cfg, span);
        if states.len() < needed {
            return Err(NodeError::StatesTooShort { needed, got: states.len() });
        }
        let states = &mut states[..needed];
        states.fill(crate::sync::BLOCK_UNINIT);
        let states: &'a mut [u8] = states;
        // SAFETY: `AtomicU8` has the same size, alignment and bit validity as `u8` (its
        // documentation guarantees it), so the slice is a valid `[AtomicU8]` of the same length;
        // the `&'a mut` borrow is exclusive and moves into the node, so for `'a` every access
        // to these bytes goes through the atomics.
        let states: &'a [AtomicU8] = unsafe { &*(core::ptr::from_mut(states) as *const [AtomicU8]) };
        if arena.as_ref().is_some_and(|a| !a.covers(span.start, span.len())) {
            return Err(NodeError::ArenaTooSmall);
        }
        let uninit_bit = match (opts.mode, pg_uninitialized_2m(&cfg)) {
            (InitMode::OnDemand, None) => return Err(NodeError::NoFlagBitForOnDemand),
            (_, bit) => bit.unwrap_or(63),
        };
        let trace = memmap.page_ref_tracepoint_active(&hooks);
        let (strategy, reason) = resolve(&cfg, trace, opts.strategy);
        // SAFETY: the span is non-empty (zones are non-empty) and inside the memmap (checked).
        let first = unsafe { memmap.page_ptr(memmap.base_pfn()) };
        let pages = RawPages {
            ptr: core::ptr::NonNull::new(first).expect("memmap storage is non-null"),
            base_pfn: memmap.base_pfn(),
            vaddr_base: memmap.vaddr(memmap.base_pfn()),
        };
        let zones = core::array::from_fn(|z| {
            SpinLock::new(FreeArea::new(crate::buddy::zone_struct_addr(&cfg, layout.nid, z as u32)))
        });
        let node = Node {
            inner: SpinLock::new(Inner { memmap, hooks }),
            pages,
            cfg,
            flags_layout,
            layout,
            span,
            opts: *opts,
            strategy,
            reason,
            states: BlockStates::new(states),
            trace,
            uninit_bit,
            resize_lock: SpinLock::new(u64::MAX),
            deferred_pages: AtomicBool::new(false),
            boot_cached: AtomicBool::new(false),
            zones,
            arena,
            stats: NodeStats::new(),
            node_id: crate::buddy::next_node_id(),
        };
        let (fdp, freed) = if opts.order != BootOrder::Kernel && opts.mode != InitMode::Deferred && !trace {
            node.fused_boot()
        } else {
            let (lo, hi) = (span.start, span.end);
            let fdp = node.memmap_init(lo, hi);
            *node.resize_lock.lock() = fdp;
            node.mark_boot_states(fdp);
            node.reserve_bootmem_regions(fdp, lo, hi);
            (fdp, node.free_boot_memory(fdp, lo, hi))
        };
        node.deferred_pages.store(fdp != u64::MAX, Ordering::Release);
        let report = BootReport {
            first_deferred_pfn: (fdp != u64::MAX).then_some(fdp),
            pages_initialized: node.stats.pages_initialized.load(Ordering::Relaxed),
            pages_freed: freed,
            strategy,
            reason,
            elapsed: clock_elapsed(clock),
        };
        Ok((node, report))
    }

    /// The kernel configuration.
    #[must_use]
    pub fn config(&self) -> &KernelConfig {
        &self.cfg
    }

    /// The layout the node was booted with.
    #[must_use]
    pub fn layout(&self) -> &NodeLayout<'a> {
        &self.layout
    }

    /// The node span.
    #[must_use]
    pub fn span(&self) -> PfnRange {
        self.span
    }

    /// The boot options.
    #[must_use]
    pub fn options(&self) -> &BootOptions {
        &self.opts
    }

    /// The strategy used for runs of struct pages, and why.
    #[must_use]
    pub fn strategy(&self) -> (Strategy, StrategyReason) {
        (self.strategy, self.reason)
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// `NODE_DATA(nid)->first_deferred_pfn` (`u64::MAX`: nothing left deferred), read under the
    /// resize lock.
    #[must_use]
    pub fn first_deferred_pfn(&self) -> u64 {
        *self.resize_lock.lock()
    }

    /// Whether the `deferred_pages` static key is still on (deferred init not finished).
    #[must_use]
    pub fn deferred_pending(&self) -> bool {
        self.deferred_pages.load(Ordering::Acquire)
    }

    /// The struct page of `pfn`, by value, through exclusive access (no thread can be writing).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the node span.
    #[must_use]
    pub fn read_page(&mut self, pfn: u64) -> P {
        assert!(self.span.contains(pfn), "pfn {pfn:#x} outside the node");
        self.inner.get_mut().memmap.read(pfn)
    }

    /// The pageblock migrate type of `pfn`, through exclusive access.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the node span.
    #[must_use]
    pub fn pageblock_migratetype(&mut self, pfn: u64) -> Option<MigrateType> {
        assert!(self.span.contains(pfn), "pfn {pfn:#x} outside the node");
        self.inner.get_mut().memmap.pageblock_migratetype(pfn)
    }

    /// The hooks, through exclusive access.
    pub fn hooks_mut(&mut self) -> &mut H {
        &mut self.inner.get_mut().hooks
    }

    /// The arena, through exclusive access.
    pub fn arena_mut(&mut self) -> Option<&mut PhysArena<'a>> {
        self.arena.as_mut()
    }

    /// Gives the memmap view and the hooks back.
    #[must_use]
    pub fn into_memmap(self) -> (Memmap<'a, P>, H) {
        let Inner { memmap, hooks } = self.inner.into_inner();
        (memmap, hooks)
    }

    /// Index of `pfn`'s block in the state array.
    #[inline(always)]
    pub(crate) fn block_index(&self, pfn: u64) -> usize {
        ((pfn >> self.cfg.pageblock_order) - (self.span.start >> self.cfg.pageblock_order)) as usize
    }

    /// First PFN of `pfn`'s block.
    #[inline(always)]
    pub(crate) fn block_start(&self, pfn: u64) -> u64 {
        pfn & !(self.cfg.pageblock_nr_pages() - 1)
    }

    /// Whether the struct page of `pfn` may be read by a thread that holds the zone lock:
    /// its block is published as initialized, or (on-demand) it is a block's first page, which
    /// boot always initializes.
    #[inline]
    pub(crate) fn initialized(&self, pfn: u64) -> bool {
        if !self.span.contains(pfn) {
            return false;
        }
        self.states.is_done(self.block_index(pfn))
            || (self.opts.mode == InitMode::OnDemand
                && pfn == self.block_start(pfn)
                && self.layout.is_memory(pfn))
    }

    /// Whether `pfn`'s struct page was initialized, as far as the node's bookkeeping knows
    /// (the block is published as done, or it is an on-demand block's first page).
    #[must_use]
    pub fn is_initialized(&self, pfn: u64) -> bool {
        self.initialized(pfn)
    }

    /// Reads the struct page of `pfn`.
    ///
    /// # Safety
    ///
    /// `pfn` in the node span, and no other thread writing it (the caller owns it).
    #[inline(always)]
    pub(crate) unsafe fn rd(&self, pfn: u64) -> P {
        // SAFETY: per the caller.
        unsafe { self.pages.ptr(pfn).read() }
    }

    /// Reads a word of the struct page of `pfn`.
    ///
    /// # Safety
    ///
    /// As for [`Node::rd`].
    #[inline(always)]
    pub(crate) unsafe fn rd_word(&self, pfn: u64, offset: usize) -> u64 {
        // SAFETY: per the caller; the field is inside the page.
        unsafe { rd64(self.pages.ptr(pfn), offset) }
    }

    /// Writes a word of the struct page of `pfn`.
    ///
    /// # Safety
    ///
    /// `pfn` in the node span, owned by the caller.
    #[inline(always)]
    pub(crate) unsafe fn wr_word(&self, pfn: u64, offset: usize, v: u64) {
        // SAFETY: per the caller; the field is inside the page.
        unsafe { wr64(self.pages.ptr(pfn), offset, v) }
    }

    /// `set_page_count(page, v)`: a raw store, or the memmap's version (with the tracepoint)
    /// when the tracepoint is active.
    ///
    /// # Safety
    ///
    /// As for [`Node::wr_word`].
    #[inline]
    pub(crate) unsafe fn set_count(&self, pfn: u64, v: i32) {
        if self.trace {
            let mut g = self.inner.lock();
            let Inner { memmap, hooks } = &mut *g;
            memmap.set_page_count(pfn, v, hooks);
        } else {
            // SAFETY: per the caller.
            unsafe { crate::init::wr32_once(self.pages.ptr(pfn), offsets::REFCOUNT, v as u32) };
        }
    }

    /// `__init_single_page` on `[from, to)` of `zone` with the node's strategy, plus `kind`'s
    /// extras (see [`RunKind`]). Returns the number of pages written.
    ///
    /// The caller owns the PFNs. Template and streaming runs build the template through the
    /// slow path at `from` and copy it with the address-dependent fields refreshed (`lru`
    /// self-pointers, `virtual`, section bits); pageblock-aligned PFNs are stored normally
    /// because `set_pageblock_migratetype` may read them back; streaming runs drain before
    /// returning.
    pub(crate) fn init_run(&self, from: u64, to: u64, zone: u32, kind: RunKind) -> u64 {
        if from >= to {
            return 0;
        }
        let nid = self.layout.nid;
        let slow_one = |inner: &mut Inner<'a, P, H>, pfn: u64| {
            let Inner { memmap, hooks } = inner;
            memmap.init_single_page(pfn, zone, nid, hooks);
            if kind.extra_flags != 0 {
                // SAFETY: `pfn` is in the memmap (init_single_page checked it) and owned.
                unsafe {
                    let p = memmap.page_ptr(pfn);
                    wr64(p, offsets::FLAGS, rd64(p, offsets::FLAGS) | kind.extra_flags);
                }
            }
            if kind.count != 1 {
                memmap.set_page_count(pfn, kind.count, hooks);
            }
            if memmap.pageblock_aligned(pfn) {
                match kind.pageblock {
                    PbMode::None => {}
                    PbMode::Movable => memmap.set_pageblock_migratetype(pfn, MigrateType::Movable),
                    PbMode::MovableResched => memmap.pageblock_init(pfn, hooks),
                }
            }
        };
        let n = to - from;
        self.stats.pages_initialized.fetch_add(n, Ordering::Relaxed);
        if self.strategy == Strategy::Slow {
            let mut g = self.inner.lock();
            for pfn in from..to {
                slow_one(&mut g, pfn);
            }
            return n;
        }
        let mut tmpl = {
            let mut g = self.inner.lock();
            slow_one(&mut g, from);
            g.memmap.read(from)
        };
        if self.strategy == Strategy::Streaming && !self.boot_cached.load(Ordering::Relaxed) {
            self.template_run::<Streamed>(from + 1, to, &mut tmpl, kind);
            stream_hal::drain();
        } else {
            self.template_run::<Cached>(from + 1, to, &mut tmpl, kind);
        }
        n
    }

    fn template_run<S: Store>(&self, from: u64, to: u64, tmpl: &mut P, kind: RunKind) {
        let pb = self.cfg.pageblock_nr_pages();
        let section_dep = self.flags_layout.section_in_page_flags();
        let mut pfn = from;
        while pfn < to {
            let seg_end = (pfn | (pb - 1)).saturating_add(1).min(to);
            if section_dep {
                let f = self.flags_layout.set_section(tmpl.flags(), self.cfg.pfn_to_section_nr(pfn));
                tmpl.set_flags(f);
            }
            if pfn & (pb - 1) == 0 {
                let rec = self.refreshed(tmpl, pfn);
                // SAFETY: the caller owns `[from, to)`, inside the memmap.
                unsafe { self.pages.ptr(pfn).write(rec) };
                if kind.pageblock != PbMode::None {
                    let mut g = self.inner.lock();
                    let Inner { memmap, hooks } = &mut *g;
                    match kind.pageblock {
                        PbMode::MovableResched => memmap.pageblock_init(pfn, hooks),
                        _ => memmap.set_pageblock_migratetype(pfn, MigrateType::Movable),
                    }
                }
                pfn += 1;
            }
            let t = *tmpl;
            for p in pfn..seg_end {
                let rec = self.refreshed(&t, p);
                // SAFETY: `p` is in the caller's range; `S::store` callers drain before reads.
                unsafe { S::store(self.pages.ptr(p), &rec) };
            }
            pfn = seg_end;
        }
    }

    /// The template with `pfn`'s address-dependent fields: `lru` self-pointers and `virtual`.
    #[inline(always)]
    pub(crate) fn refreshed(&self, t: &P, pfn: u64) -> P {
        let mut r = *t;
        let list = self.pages.vaddr(pfn) + offsets::LRU_NEXT as u64;
        r.set_u64_at(offsets::LRU_NEXT, list);
        r.set_u64_at(offsets::LRU_PREV, list);
        if P::WANT_PAGE_VIRTUAL {
            r.set_virtual_address(self.cfg.pfn_to_virt(pfn));
        }
        r
    }

    /// The fused boot ([`BootOrder::Fused`]): the three boot passes on one window after the
    /// other. Returns `(first_deferred_pfn, pages freed)`.
    ///
    /// Why it is byte-identical to the kernel's order: a window is `MAX_PAGE_ORDER`-aligned, so
    /// it holds whole pageblocks (on-demand flags the same blocks), whole free chunks (the
    /// greedy chunking of `__free_pages_memory` never crosses such a boundary) and every buddy
    /// a chunk can merge with. Initialization writes depend on the PFN only; reservation and
    /// freeing of a window read only its own struct pages, which are initialized by then; and
    /// each zone's chunks are freed in the same ascending order, so every free list is linked
    /// in the same order (`tests/fused_boot.rs` checks all of it).
    ///
    /// Why it is faster: the kernel's free pass reads back every struct page it frees (all of
    /// them eagerly; the first one of each 2 MiB block on demand) after `memmap_init` has
    /// written the whole node, and by then they are out of the cache. On demand it is worse
    /// than the size suggests: the first struct pages of 2 MiB blocks sit 32 KiB apart, a
    /// power-of-two stride that maps them to a handful of cache sets, so even the 2 MiB of them
    /// that a 64 GiB node has do not stay cached.
    fn fused_boot(&self) -> (u64, u64) {
        // Streaming stores would send each struct page to memory only for the free pass to
        // read it back from there: with Auto, the fused boot stores normally (measured on the
        // 64 GiB eager boot: 169 ms against 192 ms streamed, 200 ms in the kernel's order).
        self.boot_cached.store(self.opts.strategy == Strategy::Auto, Ordering::Relaxed);
        self.mark_boot_states(u64::MAX);
        let window = self.fused_window();
        let mut freed = 0;
        let mut lo = self.span.start;
        while lo < self.span.end {
            let hi = (lo | (window - 1)).saturating_add(1).min(self.span.end);
            if let Some(zone) = self.ondemand_simple_window(lo, hi, window) {
                freed += self.ondemand_boot_window(zone, lo, hi);
            } else {
                self.memmap_init(lo, hi);
                self.reserve_bootmem_regions(u64::MAX, lo, hi);
                freed += self.free_boot_memory(u64::MAX, lo, hi);
            }
            lo = hi;
        }
        self.boot_cached.store(false, Ordering::Relaxed);
        (u64::MAX, freed)
    }

    /// The zone of `[lo, hi)` if the on-demand boot can take [`Node::ondemand_boot_window`]
    /// for it: a whole window inside one zone and one memory range, without reserved pages,
    /// with template stores and no init_on_free.
    fn ondemand_simple_window(&self, lo: u64, hi: u64, window: u64) -> Option<u32> {
        if self.opts.mode != InitMode::OnDemand
            || self.strategy == Strategy::Slow
            || self.opts.policy.want_init_on_free()
            || hi - lo != window
            || lo % window != 0
            || !self.layout.memory.iter().any(|m| m.start <= lo && hi <= m.end)
            || self.layout.reserved.iter().any(|r| r.range.start < hi && lo < r.range.end)
        {
            return None;
        }
        self.layout.zones.iter().find(|z| z.span.start <= lo && hi <= z.span.end).map(|z| z.zone)
    }

    /// Pages per window of [`Self::fused_boot`]: a power of two, a multiple of the
    /// `MAX_PAGE_ORDER` block. [`BootOrder::Fused`] sizes it so that the struct pages a window
    /// writes stay cached until its free pass: 4 `MAX_PAGE_ORDER` blocks when every struct page
    /// is written (256 KiB of struct pages on x86-64, half the L2 of the machines measured),
    /// 1024 pageblocks when only their first struct pages are (64 KiB of them, 32 KiB apart:
    /// they stay in the last-level cache, where a 32 KiB stride spreads over enough sets).
    fn fused_window(&self) -> u64 {
        let max_block = 1u64 << self.cfg.max_page_order;
        match (self.opts.order, self.opts.mode) {
            (BootOrder::FusedWindow { order }, _) => 1u64 << order.clamp(self.cfg.max_page_order, 63),
            (_, InitMode::OnDemand) => (self.cfg.pageblock_nr_pages() << 10).max(max_block),
            _ => max_block << 2,
        }
    }

    /// `memmap_init()` for this node, restricted to `[lo, hi)` (the whole span, or a window of
    /// [`Self::fused_boot`]; [`InitMode::Deferred`] only for the whole span); returns
    /// `first_deferred_pfn`.
    fn memmap_init(&self, lo: u64, hi: u64) -> u64 {
        debug_assert!(self.opts.mode != InitMode::Deferred || (lo, hi) == (self.span.start, self.span.end));
        let mut counter = crate::deferred::DeferCounter::new(self.cfg.pages_per_section());
        let mut fdp = u64::MAX;
        let pgdat_end = self.span.end;
        let mut hole = self.span.start;
        let mut last_zone = self.layout.zones[0].zone;
        for m in self.layout.memory.iter().filter(|m| !m.is_empty()) {
            for z in self.layout.zones {
                let s = m.start.clamp(z.span.start, z.span.end);
                let e = m.end.clamp(z.span.start, z.span.end);
                if s >= e {
                    continue;
                }
                let (ws, we) = (s.max(lo), e.min(hi));
                match self.opts.mode {
                    _ if ws >= we => {}
                    InitMode::Eager => {
                        self.init_run(ws, we, z.zone, RunKind::plain(PbMode::MovableResched));
                    }
                    InitMode::Deferred => {
                        let stop = counter.defer_point(s, e, z.span.end, pgdat_end, &mut fdp).unwrap_or(e);
                        self.init_run(s, stop, z.zone, RunKind::plain(PbMode::MovableResched));
                    }
                    InitMode::OnDemand => self.ondemand_memmap_init_range(ws, we, z.zone),
                }
                if hole < s {
                    self.init_unavailable_range(hole.max(lo), s.min(hi), z.zone);
                }
                hole = e;
                last_zone = z.zone;
            }
        }
        if hole < self.span.end {
            self.init_unavailable_range(hole.max(lo), self.span.end.min(hi), last_zone);
        }
        fdp
    }

    /// `init_unavailable_range()`: holes are initialized and `PG_reserved`.
    fn init_unavailable_range(&self, from: u64, to: u64, zone: u32) {
        let kind = RunKind { pageblock: PbMode::None, extra_flags: 1 << PG::RESERVED, count: 1 };
        self.init_run(from, to, zone, kind);
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
                // Exactly the blocks `ondemand_memmap_init_range` flagged stay unexpanded. The
                // predicate is computed from the layout rather than by reading every base page
                // back (a cache miss per 2 MiB block, most of the on-demand boot time).
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
    fn reserve_bootmem_regions(&self, fdp: u64, lo: u64, hi: u64) {
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
                        self.set_reserved(pfn, from);
                        let kind =
                            RunKind { pageblock: PbMode::Movable, extra_flags: 1 << PG::RESERVED, count: 1 };
                        self.init_run(from, end, z.zone, kind);
                    }
                    InitMode::OnDemand => {
                        self.ensure_range_initialized(pfn, end - pfn);
                        self.set_reserved(pfn, end);
                    }
                    _ => self.set_reserved(pfn, end),
                }
                pfn = end;
            }
        }
    }

    /// `__SetPageReserved` on `[from, to)` (boot: single-threaded).
    fn set_reserved(&self, from: u64, to: u64) {
        for pfn in from..to {
            // SAFETY: boot is single-threaded and `pfn` is in a zone of the node.
            unsafe {
                let f = self.rd_word(pfn, offsets::FLAGS);
                self.wr_word(pfn, offsets::FLAGS, f | 1 << PG::RESERVED);
            }
        }
    }

    /// `free_low_memory_core_early()` for this node, restricted to `[lo, hi)`; returns the
    /// pages freed.
    fn free_boot_memory(&self, fdp: u64, lo: u64, hi: u64) -> u64 {
        let mut freed = 0;
        for z in self.layout.zones.iter().filter(|z| z.span.start < hi && lo < z.span.end) {
            for r in self.layout.free_ranges(*z, z.span.start.max(lo)) {
                if r.start >= hi {
                    break;
                }
                freed += self.free_pages_memory(z.zone, r.start, r.end.min(hi), fdp);
            }
        }
        freed
    }

    /// `__free_pages_memory(start, end)`: the largest naturally aligned chunks, each through
    /// `memblock_free_pages()`, which skips deferred PFNs.
    ///
    /// Runs of `MAX_PAGE_ORDER` chunks (all of a range but its unaligned ends) go to
    /// `__free_pages_core` [`FREE_BATCH`] at a time under one zone lock hold, which prefetches
    /// ahead of each chunk (see [`Node::free_pages_core_run`]): each lock round trip is a locked
    /// instruction, which waits for earlier loads, so the loop's cache misses would queue
    /// behind one lock each instead of overlapping. Timing only; the bytes written are the same.
    fn free_pages_memory(&self, zone: u32, mut start: u64, end: u64, fdp: u64) -> u64 {
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
            self.free_pages_core_run(zone, start, order, count, limit);
            freed += count << order;
            start += count << order;
        }
        freed
    }
}

/// How many `__free_pages_core` chunks ahead the boot free pass prefetches. Measured on the
/// 64 GiB on-demand boot with a cold cache: the free pass drops from about 1.1 ms to 0.9 ms
/// with 4 or 8, and gets slower again with 16 (prefetched lines evicted before use).
pub(crate) const FREE_PREFETCH_AHEAD: u64 = 8;

/// How many `MAX_PAGE_ORDER` chunks the boot free pass frees under one hold of the zone lock.
const FREE_BATCH: u64 = 64;

/// How template copies are stored.
pub(crate) trait Store {
    /// # Safety
    ///
    /// `dst` valid for writes of one `P`; streaming stores must be drained before any read.
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P);
}

/// Normal stores.
pub(crate) struct Cached;
impl Store for Cached {
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P) {
        // SAFETY: the caller guarantees `dst` is writable.
        unsafe { dst.write(*src) }
    }
}

/// stream-hal streaming stores.
pub(crate) struct Streamed;
impl Store for Streamed {
    #[inline(always)]
    unsafe fn store<P: StructPage>(dst: *mut P, src: &P) {
        // SAFETY: the caller guarantees `dst` is writable (struct pages are 8-aligned) and
        // drains before any read. The record was just patched per page (`lru` self-pointers):
        // it goes to the streaming stores by value, from registers, not reloaded from memory
        // with wider loads (a store-forwarding stall, 3x slower).
        unsafe { (*src).store_streaming(dst) }
    }
}
