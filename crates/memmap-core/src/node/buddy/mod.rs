//! The buddy allocator over the zones of a [`Node`]: `mm/page_alloc.c` reduced to what the
//! struct pages show.
//!
//! * Free lists per order `0..=MAX_PAGE_ORDER`, threaded through the free blocks' first struct
//!   pages (`page->buddy_list`, the `lru` words at bytes 8 and 16) with the modelled kernel
//!   addresses of the pages and of `zone->free_area[order].free_list[MIGRATE_MOVABLE]`. All boot
//!   memory is `MIGRATE_MOVABLE`, so the model keeps that one list per order (no pcp lists, no
//!   fallback between migrate types, no `buddy_merge_likely()` tail placement).
//! * A free block's first page is marked `PGTY_buddy << 24` in `page_type` with its order in
//!   `private` (`set_buddy_order()`); `__del_page_from_free_list()` poisons the list words
//!   (`LIST_POISON1`/`LIST_POISON2`), resets `page_type` to -1 and `private` to 0.
//! * Allocation is `__rmqueue_smallest()` + `expand()` + `prep_new_page()` under the zone lock;
//!   free is `free_pages_prepare()` + `__free_one_page()` (merging with the buddy while
//!   `page_is_buddy()`).
//! * `check_new_page()` with `PAGE_FLAGS_CHECK_AT_PREP` (every page flag, the LRU gen/refs
//!   fields, and `PG_uninitialized_2m`) runs on the first page of every allocation, and on all
//!   of them with [`BootOptions::check_pages`](crate::BootOptions::check_pages)
//!   (`CONFIG_DEBUG_VM`'s `is_check_pages_enabled()`). The model also checks that the zone and
//!   node in `page->flags` are the zone's: an uninitialized struct page cannot pass. Frees run
//!   `free_page_is_bad()` with `PAGE_FLAGS_CHECK_AT_FREE` (again including the on-demand flag).
//! * A double free (the page is inside a free block: `is_free_buddy_page()`), a free of a page
//!   that was never handed out (its reference count is 0, or its list words are not the
//!   poison `__rmqueue_smallest` leaves), a misaligned or out-of-zone free, and a bad page state
//!   are [`FreeError`]s; nothing is modified when one is returned.
//! * On-demand: `expand()` and `prep_new_page()` expand the blocks they touch first (the RFC's
//!   hooks). Deferred: when the highest zone cannot serve an allocation while deferred init is
//!   pending, [`Node::deferred_grow_zone`] runs and the allocation is retried.
//! * init_on_alloc / `__GFP_ZERO`: the allocation's contents in the node's arena are zeroed after
//!   the zone lock is dropped, in one `clear_pages` call or one per page
//!   ([`ClearMode`](crate::ClearMode)); init_on_free zeroes at free instead and takes precedence.

mod alloc;
mod check;
mod free;

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::freelist::{FreeLists, LIST_POISON1, LIST_POISON2, MAX_ORDERS, PAGE_TYPE_NONE};
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};
use crate::node::Node;
use crate::node::owned::{LockedZone, Owned};

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

/// Unique ids of nodes, so a [`PageBlock`] cannot be used with another node.
static NEXT_NODE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_node_id() -> u64 {
    NEXT_NODE_ID.fetch_add(1, Ordering::Relaxed)
}

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    // ------------------------------------------------------------------ free lists

    pub(in crate::node) fn list_set_next(
        &self,
        z: &mut LockedZone<'_, P>,
        order: u32,
        node_addr: u64,
        v: u64,
    ) {
        if node_addr == z.area.head_addr(order) {
            z.area.lists.set_head_next(order, MigrateType::Movable, v);
        } else {
            // List nodes are first pages of free blocks of this zone.
            let pfn = z.pfn_of_list(node_addr).expect("a list node of a zone is a struct page of it");
            z.set_word_once(pfn, offsets::LRU_NEXT, v);
        }
    }

    pub(in crate::node) fn list_set_prev(
        &self,
        z: &mut LockedZone<'_, P>,
        order: u32,
        node_addr: u64,
        v: u64,
    ) {
        if node_addr == z.area.head_addr(order) {
            z.area.lists.set_head_prev(order, MigrateType::Movable, v);
        } else {
            let pfn = z.pfn_of_list(node_addr).expect("a list node of a zone is a struct page of it");
            z.set_word(pfn, offsets::LRU_PREV, v);
        }
    }

    /// `__add_to_free_list()` + `set_buddy_order()`: links the block at the head (or tail) of
    /// its order's list and marks it buddy.
    pub(in crate::node) fn add_to_free_list(
        &self,
        z: &mut LockedZone<'_, P>,
        pfn: u64,
        order: u32,
        tail: bool,
    ) {
        let head = z.area.head_addr(order);
        let (prev, next) = if tail { (z.area.head(order).1, head) } else { (head, z.area.head(order).0) };
        let new = z.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64);
        // __list_add(new, prev, next)
        self.list_set_prev(z, order, next, new);
        z.set_word(pfn, offsets::LRU_NEXT, next);
        z.set_word(pfn, offsets::LRU_PREV, prev);
        self.list_set_next(z, order, prev, new);
        // set_buddy_order(): set_page_private(page, order); __SetPageBuddy(page)
        z.set_word(pfn, offsets::PRIVATE, u64::from(order));
        z.set_word32(pfn, offsets::PAGE_TYPE, self.rules.buddy_type);
        z.area.lists.add_free(order, MigrateType::Movable, 1);
    }

    /// `__del_page_from_free_list()`.
    pub(in crate::node) fn del_from_free_list(&self, z: &mut LockedZone<'_, P>, pfn: u64, order: u32) {
        let (next, prev) = (z.word(pfn, offsets::LRU_NEXT), z.word(pfn, offsets::LRU_PREV));
        // __list_del(prev, next), then the poison of list_del().
        self.list_set_prev(z, order, next, prev);
        self.list_set_next(z, order, prev, next);
        z.set_word(pfn, offsets::LRU_NEXT, LIST_POISON1);
        z.set_word(pfn, offsets::LRU_PREV, LIST_POISON2);
        // __ClearPageBuddy(page); set_page_private(page, 0)
        z.set_word32(pfn, offsets::PAGE_TYPE, PAGE_TYPE_NONE);
        z.set_word(pfn, offsets::PRIVATE, 0);
        z.area.lists.sub_free(order, MigrateType::Movable);
    }

    pub(in crate::node) fn list_first(&self, z: &LockedZone<'_, P>, order: u32) -> Option<u64> {
        let next = z.area.head(order).0;
        if next == z.area.head_addr(order) { None } else { z.pfn_of_list(next) }
    }

    /// `page_is_buddy(page, buddy, order)`: the buddy heads a free block of exactly `order`
    /// in the same zone.
    pub(in crate::node) fn page_is_buddy(
        &self,
        z: &LockedZone<'_, P>,
        zone: u32,
        buddy: u64,
        order: u32,
    ) -> bool {
        let Some(span) = self.layout.zone(zone).map(|z| z.span) else { return false };
        if !span.contains(buddy) || !self.initialized(buddy) {
            return false;
        }
        // An initialized page of this zone that may head a free block: read under the lock.
        let p = z.read(buddy);
        p.page_type() == self.rules.buddy_type
            && p.private() == u64::from(order)
            && self.flags_layout.zone(p.flags()) == zone
    }

    /// `__free_one_page()`: merges with free buddies up to `MAX_PAGE_ORDER`, then links.
    pub(in crate::node) fn free_one_page(
        &self,
        z: &mut LockedZone<'_, P>,
        zone: u32,
        mut pfn: u64,
        order: u32,
        to_tail: bool,
    ) {
        z.area.free_pages += 1 << order;
        let mut order = order;
        while order < self.cfg.max_page_order {
            let buddy = pfn ^ (1 << order);
            if !self.page_is_buddy(z, zone, buddy, order) {
                break;
            }
            self.del_from_free_list(z, buddy, order);
            pfn &= buddy;
            order += 1;
        }
        self.add_to_free_list(z, pfn, order, to_tail);
    }

    // ------------------------------------------------------------------ inspection

    /// The `PAGE_FLAGS_CHECK_AT_PREP` mask this node applies (includes `PG_uninitialized_2m`
    /// in on-demand mode).
    #[must_use]
    pub fn page_flags_check_at_prep(&self) -> u64 {
        self.check_at_prep()
    }

    /// The `PAGE_FLAGS_CHECK_AT_FREE` mask this node applies (includes `PG_uninitialized_2m`
    /// in on-demand mode).
    #[must_use]
    pub fn page_flags_check_at_free(&self) -> u64 {
        self.check_at_free()
    }

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
        let z = self.lock_zone(zone);
        for o in 0..=self.cfg.max_page_order {
            let head = z.area.head_addr(o);
            let mut cur = z.area.head(o).0;
            while cur != head {
                let Some(pfn) = z.pfn_of_list(cur) else { return };
                f(pfn, o);
                cur = z.word(pfn, offsets::LRU_NEXT);
            }
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
