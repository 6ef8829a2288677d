//! The buddy allocator over the zones of a [`Node`]: `mm/page_alloc.c` reduced to what the
//! struct pages show.
//!
//! One `MIGRATE_MOVABLE` free list per order, threaded through the free blocks' `lru` words.
//! Allocation is `__rmqueue_smallest()` + `expand()` + `prep_new_page()` under the zone lock,
//! free is `free_pages_prepare()` + `__free_one_page()`; a bad free is a [`FreeError`] that
//! modifies nothing.

mod alloc;
mod check;
mod free;
pub(in crate::node) use free::CoreRun;

use core::fmt;

use crate::freelist::{FreeLists, MAX_ORDERS, Rules, ZoneFreeLists};
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::memmap::engine::Pages;
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};
use crate::node::Node;
use crate::node::owned::Owned;
use crate::sync::SpinGuard;

/// The free lists of one zone and its page counters (behind the zone lock). The node's boot
/// memory is all `MIGRATE_MOVABLE`, so its blocks are on the MOVABLE lists only.
#[derive(Debug)]
pub(in crate::node) struct FreeArea {
    pub(in crate::node) lists: FreeLists,
    pub(in crate::node) free_pages: u64,
    pub(in crate::node) managed_pages: u64,
}

impl FreeArea {
    pub(in crate::node) fn new(zone_addr: u64) -> Self {
        FreeArea { lists: FreeLists::new(zone_addr), free_pages: 0, managed_pages: 0 }
    }

    /// Modelled address of `free_area[order].free_list[MIGRATE_MOVABLE]`.
    #[inline]
    pub(in crate::node) fn head_addr(&self, order: u32) -> u64 {
        self.lists.head_addr(order, MigrateType::Movable)
    }

    /// `(next, prev)` of the MOVABLE list head of `order`.
    #[inline]
    pub(in crate::node) fn head(&self, order: u32) -> (u64, u64) {
        self.lists.head(order, MigrateType::Movable)
    }

    /// `free_area[order].nr_free` (MOVABLE).
    #[inline]
    pub(in crate::node) fn nr_free(&self, order: u32) -> u64 {
        self.lists.nr_free(order, MigrateType::Movable)
    }
}

/// An allocation: `1 << order` pages from `pfn`, owned by the holder. Not `Clone`: freeing it
/// consumes it, and only the holder can reach its contents.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PageBlock {
    pfn: u64,
    order: u32,
    zone: u32,
    node_id: u64,
}

impl PageBlock {
    /// First PFN.
    #[must_use]
    pub fn pfn(&self) -> u64 {
        self.pfn
    }

    /// Order.
    #[must_use]
    pub fn order(&self) -> u32 {
        self.order
    }

    /// Zone index.
    #[must_use]
    pub fn zone(&self) -> u32 {
        self.zone
    }

    /// Number of pages.
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        1 << self.order
    }

    /// Gives up the handle: `(pfn, order)` for [`Node::free_pages_raw`].
    #[must_use]
    pub fn into_raw(self) -> (u64, u32) {
        (self.pfn, self.order)
    }
}

/// Why an allocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// `order > MAX_PAGE_ORDER`.
    OrderTooLarge {
        /// Requested.
        order: u32,
        /// `MAX_PAGE_ORDER`.
        max: u32,
    },
    /// The node has no such zone.
    NoSuchZone {
        /// Requested zone index.
        zone: u32,
    },
    /// No free block of that order (after growing the zone, if deferred init was pending).
    NoMemory,
    /// `check_new_page()` found a bad page (the block is taken off the free lists, as the
    /// kernel leaks such pages).
    BadPage {
        /// The page.
        pfn: u64,
        /// What was wrong.
        reason: BadPageReason,
    },
}

/// Why a free was refused. Nothing was modified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FreeError {
    /// `order > MAX_PAGE_ORDER`.
    OrderTooLarge {
        /// The order of the block freed.
        order: u32,
        /// `MAX_PAGE_ORDER`.
        max: u32,
    },
    /// `pfn` is not aligned to `1 << order`.
    Misaligned {
        /// The first PFN of the block freed.
        pfn: u64,
        /// The order of the block freed.
        order: u32,
    },
    /// The block is not inside one zone of the node (or belongs to another node).
    NotInZone {
        /// The first PFN of the block freed.
        pfn: u64,
    },
    /// A struct page of the block is not (known to be) initialized.
    Uninitialized {
        /// The page.
        pfn: u64,
    },
    /// The page is already free: it lies inside a free buddy block.
    DoubleFree {
        /// The first PFN of the block freed.
        pfn: u64,
    },
    /// The page was not handed out by the allocator (reference count 0 and not free, or not
    /// taken off a free list).
    NotAllocated {
        /// The first PFN of the block freed.
        pfn: u64,
    },
    /// `free_page_is_bad()`.
    BadPage {
        /// The page.
        pfn: u64,
        /// What was wrong.
        reason: BadPageReason,
    },
}

/// What `check_new_page()`/`free_page_is_bad()` found (`page_bad_reason()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadPageReason {
    /// "nonzero mapcount" (or a page type is set).
    Mapcount(i32),
    /// "non-NULL mapping".
    Mapping(u64),
    /// "nonzero _refcount" (or, at free, not exactly one reference).
    Refcount(i32),
    /// "page still charged to cgroup".
    MemcgData(u64),
    /// "PAGE_FLAGS_CHECK_AT_PREP/FREE flag(s) set": the offending bits.
    Flags(u64),
    /// The zone or node in `page->flags` is not this zone's: the struct page was never
    /// initialized for it (model check).
    Links {
        /// Zone found.
        zone: u32,
        /// Node found.
        nid: u32,
    },
}

impl fmt::Display for BadPageReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BadPageReason::Mapcount(m) => write!(f, "nonzero mapcount ({m})"),
            BadPageReason::Mapping(m) => write!(f, "non-NULL mapping ({m:#x})"),
            BadPageReason::Refcount(c) => write!(f, "unexpected _refcount ({c})"),
            BadPageReason::MemcgData(m) => write!(f, "page still charged to cgroup ({m:#x})"),
            BadPageReason::Flags(b) => write!(f, "page flag check failed ({b:#x})"),
            BadPageReason::Links { zone, nid } => {
                write!(f, "flags say zone {zone} node {nid}: not initialized")
            }
        }
    }
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::OrderTooLarge { order, max } => write!(f, "order {order} > MAX_PAGE_ORDER {max}"),
            AllocError::NoSuchZone { zone } => write!(f, "no zone {zone} in this node"),
            AllocError::NoMemory => f.write_str("out of memory"),
            AllocError::BadPage { pfn, reason } => write!(f, "bad page {pfn:#x} at prep: {reason}"),
        }
    }
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FreeError::OrderTooLarge { order, max } => write!(f, "order {order} > MAX_PAGE_ORDER {max}"),
            FreeError::Misaligned { pfn, order } => write!(f, "pfn {pfn:#x} is not aligned to order {order}"),
            FreeError::NotInZone { pfn } => write!(f, "pfn {pfn:#x} block is not inside a zone of this node"),
            FreeError::Uninitialized { pfn } => write!(f, "struct page of pfn {pfn:#x} is not initialized"),
            FreeError::DoubleFree { pfn } => write!(f, "double free of pfn {pfn:#x}"),
            FreeError::NotAllocated { pfn } => write!(f, "pfn {pfn:#x} was not allocated"),
            FreeError::BadPage { pfn, reason } => write!(f, "bad page {pfn:#x} at free: {reason}"),
        }
    }
}

impl core::error::Error for AllocError {}
impl core::error::Error for FreeError {}

/// A zone of a node under its lock, as the free-list model sees it: the MOVABLE lists of the
/// zone's [`FreeArea`] and the struct pages of its free blocks (owned by the lock holder).
pub(in crate::node) struct NodeZone<'n, 'l, 'z, 'a, P: StructPage, H: InitHooks + Send> {
    node: &'n Node<'a, P, H>,
    z: &'l mut LockedZone<'z, P>,
    zone: u32,
}

impl<P: StructPage, H: InitHooks + Send> ZoneFreeLists for NodeZone<'_, '_, '_, '_, P, H> {
    /// The node's lists hold only struct pages of the zone, linked by this model: the checks
    /// would cost two loads per list operation of the boot's free pass and never fail.
    const LIST_HARDENED: bool = false;
    const MERGE_LIKELY: bool = false;

    #[inline(always)]
    fn lists(&self) -> &FreeLists {
        &self.z.area.lists
    }
    #[inline(always)]
    fn lists_mut(&mut self) -> &mut FreeLists {
        &mut self.z.area.lists
    }
    #[inline(always)]
    fn rules(&self) -> Rules {
        self.node.rules
    }
    #[inline(always)]
    fn word(&self, pfn: u64, off: usize) -> u64 {
        self.z.word(pfn, off)
    }
    #[inline(always)]
    fn set_word(&mut self, pfn: u64, off: usize, v: u64) {
        self.z.set_word(pfn, off, v);
    }
    #[inline(always)]
    fn set_u32(&mut self, pfn: u64, off: usize, v: u32) {
        self.z.page_mut(pfn).set_u32_at(off, v);
    }
    #[inline(always)]
    fn list_node(&self, pfn: u64) -> u64 {
        self.z.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64)
    }
    #[inline(always)]
    fn pfn_of_node(&self, entry: u64) -> Option<u64> {
        self.z.pfn_of_list(entry)
    }
    /// An initialized struct page of the zone (read under its lock) with the release's buddy
    /// `page_type`.
    #[inline(always)]
    fn is_buddy(&self, pfn: u64) -> bool {
        self.z.owns(pfn)
            && self.node.is_initialized(pfn)
            && self.z.read(pfn).page_type() == self.node.rules.buddy_type
    }
    /// The buddy's flags name this zone (every struct page of the span carries this node's id).
    #[inline(always)]
    fn same_zone(&self, _pfn: u64, buddy: u64) -> bool {
        self.node.flags_layout.zone(self.z.word(buddy, offsets::FLAGS)) == self.zone
    }
    /// Read under the memmap lock (taken inside the zone lock, the node's lock order); a
    /// pageblock not set yet (deferred) reads as MOVABLE, the type of all boot memory.
    fn migratetype(&self, pfn: u64) -> MigrateType {
        self.node.inner.lock().memmap.pageblock_migratetype(pfn).unwrap_or(MigrateType::Movable)
    }
    /// Under the memmap lock, as [`NodeZone::migratetype`].
    fn set_migratetype(&mut self, pfn: u64, mt: MigrateType) {
        self.node.inner.lock().memmap.set_pageblock_migratetype(pfn, mt);
    }
}

impl<'a, P: StructPage, H: InitHooks + Send> Node<'a, P, H> {
    // ------------------------------------------------------------------ free lists

    /// The free lists of zone `zone` under its lock `z`, as the crate's one free-list model
    /// runs on them ([`ZoneFreeLists`]).
    pub(in crate::node) fn free_lists<'n, 'l, 'z>(
        &'n self,
        z: &'l mut LockedZone<'z, P>,
        zone: u32,
    ) -> NodeZone<'n, 'l, 'z, 'a, P, H> {
        NodeZone { node: self, z, zone }
    }

    /// `__free_one_page()` of a block of the node's boot memory (all `MIGRATE_MOVABLE`):
    /// merges with free buddies up to `MAX_PAGE_ORDER`, then links (at the tail when
    /// `to_tail`); the zone's free pages grow by the block.
    ///
    /// The kernel's `split_large_buddy()` (6.10+) is skipped: the node's pageblocks are all
    /// MOVABLE, so the pieces would merge straight back into the same bytes, lists and counters.
    pub(in crate::node) fn free_one_page(
        &self,
        z: &mut LockedZone<'_, P>,
        zone: u32,
        pfn: u64,
        order: u32,
        to_tail: bool,
    ) {
        z.area.free_pages += 1 << order;
        self.free_lists(z, zone).free_one(pfn, order, MigrateType::Movable, to_tail);
    }

    // ------------------------------------------------------------------ inspection

    /// Pages in zone `zone`'s free lists (0 for a zone the node does not have).
    #[must_use]
    pub fn zone_free_pages(&self, zone: u32) -> u64 {
        if self.layout.zone(zone).is_none() {
            return 0;
        }
        self.zones[zone as usize].lock().free_pages
    }

    /// Pages handed to zone `zone` by `__free_pages_core` (`managed_pages`).
    #[must_use]
    pub fn zone_managed_pages(&self, zone: u32) -> u64 {
        if self.layout.zone(zone).is_none() {
            return 0;
        }
        self.zones[zone as usize].lock().managed_pages
    }

    /// `free_area[order].nr_free` of zone `zone`.
    #[must_use]
    pub fn nr_free(&self, zone: u32, order: u32) -> u64 {
        if self.layout.zone(zone).is_none() || order as usize >= MAX_ORDERS {
            return 0;
        }
        self.zones[zone as usize].lock().nr_free(order)
    }

    /// Calls `f(pfn, order)` for every free block of zone `zone`, walking the free lists (under
    /// the zone lock: `f` must not call back into the node).
    pub fn for_each_free_block(&self, zone: u32, mut f: impl FnMut(u64, u32)) {
        if self.layout.zone(zone).is_none() {
            return;
        }
        let mut z = self.lock_zone(zone);
        let lists = self.free_lists(&mut z, zone);
        for o in 0..=self.cfg.max_page_order {
            lists.for_each_on_list(o, MigrateType::Movable, |pfn| f(pfn, o));
        }
    }

    /// The struct page of `pfn` inside the allocation `block` (`None` if `pfn` is not in it or
    /// the block belongs to another node). The holder of an allocation may read its struct
    /// pages while other threads allocate and free: nobody else writes them.
    #[must_use]
    pub fn block_page(&self, block: &PageBlock, pfn: u64) -> Option<P> {
        if block.node_id != self.node_id || pfn < block.pfn || pfn >= block.pfn + block.nr_pages() {
            return None;
        }
        // SAFETY: the block's pages are inside the node's span (it was allocated from it), and
        // its holder owns them: the allocator writes allocated pages only when their holder
        // frees them, which needs the `PageBlock` this call borrows.
        let own = unsafe { Owned::new(self.pages, block.pfn, block.pfn + block.nr_pages()) };
        Some(own.read(pfn))
    }

    /// The contents of an allocation in the node's arena (`None` without an arena, or for a
    /// block of another node).
    pub fn block_contents<'b>(&'b self, block: &'b mut PageBlock) -> Option<&'b mut [u8]> {
        if block.node_id != self.node_id {
            return None;
        }
        let a = self.arena.as_ref()?;
        // SAFETY: the arena covers the node; `block` is the unique handle of an allocation of
        // this node (handles are not `Clone`, `from_raw` does not exist, and `free_pages_raw`
        // requires no live handle), so its holder owns these bytes for the borrow.
        Some(unsafe { a.range_mut(block.pfn, block.nr_pages()) })
    }
}

/// A zone's free lists under the zone lock, with the struct pages the lock holder owns: those
/// of the zone's free blocks (see the [ownership rules](crate::node::owned)).
pub(in crate::node) struct LockedZone<'z, P: StructPage> {
    /// The free lists and counters.
    pub(in crate::node) area: SpinGuard<'z, FreeArea>,
    pages: Pages<P>,
    span: (u64, u64),
}

impl<'z, P: StructPage> LockedZone<'z, P> {
    /// The zone of `area` with access to the struct pages of its free blocks.
    ///
    /// # Safety
    ///
    /// `area` is the lock guard of the zone spanning `[span.0, span.1)`, inside `pages`'
    /// storage; every thread follows the buddy allocator's rule: a struct page that heads a
    /// free block (or is a buddy being merged) is read or written only under its zone's lock,
    /// and the methods of this type are used on such pages only (and on the block being freed
    /// into the zone, which the caller also owns).
    pub(in crate::node) unsafe fn new(
        area: SpinGuard<'z, FreeArea>,
        pages: Pages<P>,
        span: (u64, u64),
    ) -> Self {
        LockedZone { area, pages, span }
    }
}

// SAFETY: the window is the zone's span, inside the storage (constructor); the struct pages
// its methods are used on are owned by the zone lock's holder (the buddy allocator's rule the
// constructor's caller vouches for); nothing streams through a zone guard.
unsafe impl<P: StructPage> PageAccess<P> for LockedZone<'_, P> {
    #[inline(always)]
    fn pages(&self) -> Pages<P> {
        self.pages
    }
    #[inline(always)]
    fn window(&self) -> (u64, u64) {
        self.span
    }
}
