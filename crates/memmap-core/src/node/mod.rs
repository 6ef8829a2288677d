//! A NUMA node's memmap at boot, shared between threads: deferred init, on-demand init and the
//! buddy allocator.
//!
//! [`Node::boot`] is `mm/mm_init.c` for one node: `memmap_init()` (what the highest zone gets
//! depends on the [`InitMode`]), `memmap_init_reserved_pages()` and
//! `free_low_memory_core_early()`. [`BootOrder::Kernel`] runs each step over the node before
//! the next; [`BootOrder::Fused`] runs all three per `MAX_PAGE_ORDER` window, with the same
//! result (`window.rs` says why).
//!
//! A struct page is written only by the thread that owns it (the booting thread, a padata
//! worker, the zone lock holder, an allocating thread); ownership moves through a [`SpinLock`]
//! or a [`BlockStates`] release/acquire pair, and is a type (`owned.rs`). The locks nest as
//! resize lock, zone lock, memmap lock; the hooks run under the memmap lock, so a hook must not
//! call into its own node (with `std` that panics, without it deadlocks).

mod arena;
mod boot;
mod buddy;
mod deferred;
mod layout;
mod ondemand;
mod owned;
mod run;
mod window;

#[cfg(feature = "std")]
pub use arena::OwnedArena;
pub use arena::{ArenaError, ClearMode, Gfp, InitPolicy, PhysArena};
pub use buddy::{AllocError, BadPageReason, FreeError, PageBlock};
pub use deferred::DeferredReport;
pub use layout::{LayoutError, NodeLayout, PfnRange, ReservedRange, ZoneSpan};

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::InitError;
use crate::fill::{FillOptions, Strategy, StrategyReason};
use crate::freelist::{MAX_ORDERS, Rules};
use crate::hooks::{InitHooks, NoHooks};
use crate::memmap::Memmap;
use crate::memmap::engine::Pages;
use crate::model::config::{FlagsLayout, KernelConfig};
use crate::model::flags::MigrateType;
use crate::model::page::StructPage;
use crate::model::version::PageFlagBits;
use crate::node::buddy::FreeArea;
use crate::sync::{BlockStates, SpinLock};
use buddy::LockedZone;

/// Zone slots of a node (`MAX_NR_ZONES` is at most 8).
pub(crate) const MAX_ZONES: usize = 8;

/// How the node's struct pages are initialized at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InitMode {
    /// Everything at boot (no `CONFIG_DEFERRED_STRUCT_PAGE_INIT`).
    Eager,
    /// `CONFIG_DEFERRED_STRUCT_PAGE_INIT`: the highest zone past its first section is left to
    /// [`Node::deferred_init_memmap`] and [`Node::deferred_grow_zone`].
    Deferred,
    /// The 2013 RFC: one struct page per 2 MiB block at boot, the rest on first allocator use.
    OnDemand,
}

crate::named!(InitMode { Eager => "eager", Deferred => "deferred", OnDemand => "on-demand" });

/// Options of [`Node::boot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOptions {
    /// The init mode.
    pub mode: InitMode,
    /// How runs of struct pages are written (boot init, deferred init, on-demand expansion).
    pub fill: FillOptions,
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
#[non_exhaustive]
pub enum BootOrder {
    /// The kernel's: each pass over the whole node in turn.
    Kernel,
    /// Window by window: the three passes on one `MAX_PAGE_ORDER`-aligned window, then the
    /// next, so the window's struct pages stay cached from initialization to freeing (runs that
    /// can be are written once, in their final state). Falls back to [`BootOrder::Kernel`]
    /// while the `page_ref_set` tracepoint is active (its events keep the kernel's order).
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
            fill: FillOptions::new(Strategy::Auto),
            policy: InitPolicy {
                init_on_alloc: false,
                init_on_free: false,
                page_poisoning: false,
                kasan_hw_tags: false,
                clear: crate::node::arena::ClearMode::Batch,
            },
            check_pages: true,
            order: BootOrder::Fused,
        }
    }
}

/// What a node is built from.
pub struct NodeParts<'a, P: StructPage, H: InitHooks + Send = NoHooks> {
    /// The memmap view; it must cover the node span. Given back by [`Node::into_memmap`].
    pub memmap: Memmap<'a, P>,
    /// The memblock-shaped layout.
    pub layout: NodeLayout<'a>,
    /// One state byte per pageblock overlapping the node span ([`Node::states_needed`]), any
    /// content (boot resets them), borrowed for the node's lifetime.
    pub states: &'a mut [u8],
    /// Page contents, for init_on_alloc/init_on_free; must cover the node span.
    pub arena: Option<PhysArena<'a>>,
    /// `cond_resched()` and the `page_ref_set` tracepoint.
    pub hooks: H,
}

/// Why a node could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeError {
    /// The layout is invalid.
    Layout(LayoutError),
    /// The memmap does not cover the node span, or the configuration is invalid.
    Init(InitError),
    /// Too few state bytes.
    StatesTooShort {
        /// State bytes the node needs (one per pageblock).
        needed: usize,
        /// State bytes the caller gave.
        got: usize,
    },
    /// The arena does not cover the node span.
    ArenaTooSmall,
    /// An arena holds 4 KiB per PFN: a configuration with other pages cannot have one.
    ArenaPageSize {
        /// The configuration's `PAGE_SIZE`.
        page_size: u64,
    },
    /// `MAX_PAGE_ORDER` is not below 24 (the orders the allocator keeps), or `pageblock_order` is above it.
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
            NodeError::ArenaPageSize { page_size } => {
                write!(f, "an arena holds 4 KiB pages, the configuration's are {page_size} bytes")
            }
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
#[non_exhaustive]
pub struct BootReport {
    /// `NODE_DATA(nid)->first_deferred_pfn` after boot (`None`: nothing deferred).
    pub first_deferred_pfn: Option<u64>,
    /// Struct pages written by `__init_single_page` at boot.
    pub pages_initialized: u64,
    /// Pages handed to the buddy allocator at boot.
    pub pages_freed: u64,
    /// The strategy the boot used for runs of struct pages.
    pub strategy: Strategy,
    /// Why that strategy ran.
    pub reason: StrategyReason,
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
    /// Pages the fused boot wrote in one final-state pass (a run of whole free
    /// `MAX_PAGE_ORDER` blocks without reserved pages) rather than init, reserve and free.
    pub single_pass_pages: AtomicU64,
}

impl NodeStats {
    fn new() -> Self {
        NodeStats {
            free_core_calls: core::array::from_fn(|_| AtomicU64::new(0)),
            pages_initialized: AtomicU64::new(0),
            expansions: AtomicU64::new(0),
            grows: AtomicU64::new(0),
            single_pass_pages: AtomicU64::new(0),
        }
    }
}

/// The memmap view and the hooks, behind the memmap lock.
struct Inner<'a, P: StructPage, H> {
    memmap: Memmap<'a, P>,
    hooks: H,
}

/// A node: its memmap, layout, per-zone free lists and deferred/on-demand state.
pub struct Node<'a, P: StructPage, H: InitHooks + Send = NoHooks> {
    /// The memmap view and the hooks (the *memmap lock*).
    inner: SpinLock<Inner<'a, P, H>>,
    /// The struct pages, written by the thread that owns each page (see the module docs).
    pages: Pages<P>,
    cfg: KernelConfig,
    flags_layout: FlagsLayout,
    layout: NodeLayout<'a>,
    span: PfnRange,
    opts: BootOptions,
    /// The node's strategy and why: runs after boot (deferred init, on-demand expansion,
    /// growing) and the boot's runs written in their final state.
    strategy: (Strategy, StrategyReason),
    /// The strategy of the current phase's other runs: the boot's (read back right away)
    /// while [`Node::boot`] runs, set to the node's before the node is returned.
    run: Strategy,
    /// One state per pageblock: the node's exclusive borrow of the caller's bytes.
    states: BlockStates<'a>,
    /// The `page_ref_set` tracepoint is active.
    trace: bool,
    /// The `PG_uninitialized_2m` bit.
    uninit_bit: u32,
    pg: PageFlagBits,
    rules: Rules,
    /// `pgdat_resize_lock` around `NODE_DATA(nid)->first_deferred_pfn`.
    resize_lock: SpinLock<u64>,
    /// The `deferred_pages` static key: on from boot until deferred init has finished.
    deferred_pages: AtomicBool,
    /// Free lists and counters, one lock per zone (the *zone lock*).
    zones: [SpinLock<FreeArea>; MAX_ZONES],
    arena: Option<PhysArena<'a>>,
    stats: NodeStats,
    /// Unique id (so that a [`crate::PageBlock`] of another node is refused).
    node_id: u64,
}

impl<P: StructPage, H: InitHooks + Send> fmt::Debug for Node<'_, P, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("nid", &self.layout.nid)
            .field("span", &self.span)
            .field("mode", &self.opts.mode)
            .field("strategy", &self.strategy.0)
            .finish()
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
/// `__NR_PAGEFLAGS` flags (see [`InitMode::OnDemand`]), or `None` if a `page->flags` field starts
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

    /// The boot options.
    #[must_use]
    pub fn options(&self) -> &BootOptions {
        &self.opts
    }

    /// The strategy of runs of struct pages after boot (deferred init, on-demand expansion),
    /// and why. The boot's own is in its [`BootReport`].
    #[must_use]
    pub fn strategy(&self) -> (Strategy, StrategyReason) {
        self.strategy
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
        // Acquire: pairs with the Release stores in `Node::boot` and at the end of
        // `deferred_init_memmap_with`. Nothing is read through the flag (an allocator that sees
        // it on grows the zone under the resize lock), so no test fails with Relaxed here.
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

    /// Whether `pfn`'s struct page was initialized, as far as the node's bookkeeping knows, and
    /// so may be read by a thread that holds the zone lock: its block is published as
    /// initialized, or (on-demand) it is a block's first page, which boot always initializes.
    #[inline]
    #[must_use]
    pub fn is_initialized(&self, pfn: u64) -> bool {
        if !self.span.contains(pfn) {
            return false;
        }
        self.states.is_done(self.block_index(pfn))
            || (self.opts.mode == InitMode::OnDemand
                && pfn == self.block_start(pfn)
                && self.layout.is_memory(pfn))
    }

    /// The zone lock of `zone` with access to the struct pages of its free blocks: the one
    /// place where the zone lock's ownership of free pages is made a type.
    pub(in crate::node) fn lock_zone(&self, zone: u32) -> LockedZone<'_, P> {
        let span = self.layout.zone(zone).map_or((0, 0), |z| (z.span.start, z.span.end));
        let area = self.zones[zone as usize].lock();
        // SAFETY: `area` guards zone `zone`, whose span is inside the node's span and so inside
        // the memmap storage; every access to a free block's struct pages in this crate goes
        // through a `LockedZone` of the block's zone (the buddy allocator's rule), so the
        // holder of this guard is the only thread touching them.
        unsafe { LockedZone::new(area, self.pages, span) }
    }
}
