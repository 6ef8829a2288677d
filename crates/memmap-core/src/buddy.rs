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

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::Strategy;
use crate::arena::Gfp;
use crate::config::KernelConfig;
use crate::flags::{PG, PageType};
use crate::hooks::InitHooks;
use crate::node::{
    Cached, FREE_PREFETCH_AHEAD, InitMode, Inner, MAX_ORDERS, Node, PbMode, RunKind, Store, Streamed,
};
use crate::page::{StructPage, offsets};

/// `LIST_POISON1` (`0x100 + POISON_POINTER_DELTA`).
pub const LIST_POISON1: u64 = 0xdead_0000_0000_0100;
/// `LIST_POISON2` (`0x122 + POISON_POINTER_DELTA`).
pub const LIST_POISON2: u64 = 0xdead_0000_0000_0122;
/// `page_type` of a free block's first page: `PGTY_buddy << 24`.
pub const PAGE_TYPE_BUDDY: u32 = (PageType::BUDDY as u32) << 24;
/// `page_type` of an untyped page (`_mapcount == -1`).
pub const PAGE_TYPE_NONE: u32 = u32::MAX;

/// Modelled offset of `free_area[0]` in `struct zone`.
const FREE_AREA_OFFSET: u64 = 0x100;
/// Modelled `sizeof(struct free_area)`: `MIGRATE_TYPES` (6) list heads and `nr_free`.
const FREE_AREA_SIZE: u64 = 6 * 16 + 8;
/// `MIGRATE_MOVABLE`.
const MOVABLE: u64 = 1;

/// Modelled kernel address of `NODE_DATA(nid)->node_zones[zone]`: a direct-map address, one
/// 256 KiB `pglist_data` per node, 0x1000 bytes per zone. Only used so the free lists hold
/// stable, recognisable list-head addresses.
pub(crate) fn zone_struct_addr(cfg: &KernelConfig, nid: u32, zone: u32) -> u64 {
    cfg.page_offset.wrapping_add(0x7f00_0000 + u64::from(nid) * 0x4_0000 + 0x1000 + u64::from(zone) * 0x1000)
}

/// `struct free_area[MAX_PAGE_ORDER + 1]` of one zone plus its page counters (behind the zone
/// lock).
#[derive(Debug)]
pub(crate) struct FreeArea {
    zone_addr: u64,
    /// `(next, prev)` of each order's list head.
    heads: [(u64, u64); MAX_ORDERS],
    nr_free: [u64; MAX_ORDERS],
    free_pages: u64,
    managed_pages: u64,
}

impl FreeArea {
    pub(crate) fn new(zone_addr: u64) -> Self {
        let mut a = FreeArea {
            zone_addr,
            heads: [(0, 0); MAX_ORDERS],
            nr_free: [0; MAX_ORDERS],
            free_pages: 0,
            managed_pages: 0,
        };
        for o in 0..MAX_ORDERS {
            let h = a.head_addr(o as u32);
            a.heads[o] = (h, h);
        }
        a
    }

    /// Modelled address of `free_area[order].free_list[MIGRATE_MOVABLE]`.
    fn head_addr(&self, order: u32) -> u64 {
        self.zone_addr + FREE_AREA_OFFSET + u64::from(order) * FREE_AREA_SIZE + MOVABLE * 16
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
pub enum FreeError {
    /// `order > MAX_PAGE_ORDER`.
    OrderTooLarge {
        /// Given.
        order: u32,
        /// `MAX_PAGE_ORDER`.
        max: u32,
    },
    /// `pfn` is not aligned to `1 << order`.
    Misaligned {
        /// Given.
        pfn: u64,
        /// Given.
        order: u32,
    },
    /// The block is not inside one zone of the node (or belongs to another node).
    NotInZone {
        /// Given.
        pfn: u64,
    },
    /// A struct page of the block is not (known to be) initialized.
    Uninitialized {
        /// The page.
        pfn: u64,
    },
    /// The page is already free: it lies inside a free buddy block.
    DoubleFree {
        /// Given.
        pfn: u64,
    },
    /// The page was not handed out by the allocator (reference count 0 and not free, or not
    /// taken off a free list).
    NotAllocated {
        /// Given.
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

/// `PAGE_FLAGS_CHECK_AT_FREE`: `PG_lru`, `PG_locked`, `PG_private`, `PG_private_2`,
/// `PG_writeback`, `PG_reserved`, `PG_active`, `PG_unevictable`, `PG_mlocked`.
const CHECK_AT_FREE_FLAGS: u64 = 1 << PG::LRU
    | 1 << PG::LOCKED
    | 1 << PG::PRIVATE
    | 1 << PG::PRIVATE_2
    | 1 << PG::WRITEBACK
    | 1 << PG::RESERVED
    | 1 << PG::ACTIVE
    | 1 << PG::UNEVICTABLE
    | 1 << PG::MLOCKED;

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// The LRU gen and refs fields of `page->flags` (checked at prep and free).
    fn lru_field_mask(&self) -> u64 {
        let l = &self.flags_layout;
        let m = |w: u32, s: u32| if w == 0 { 0 } else { ((1u64 << w) - 1) << s };
        m(l.lru_gen_width, l.lru_gen_pgshift) | m(l.lru_refs_width, l.lru_refs_pgshift)
    }

    fn uninit_mask(&self) -> u64 {
        if self.opts.mode == InitMode::OnDemand { 1 << self.uninit_bit } else { 0 }
    }

    /// `PAGE_FLAGS_CHECK_AT_PREP`: every page flag, the LRU fields and `PG_uninitialized_2m`.
    pub(crate) fn check_at_prep(&self) -> u64 {
        ((1u64 << self.cfg.nr_pageflags) - 1) | self.lru_field_mask() | self.uninit_mask()
    }

    fn check_at_free(&self) -> u64 {
        CHECK_AT_FREE_FLAGS | self.lru_field_mask() | self.uninit_mask()
    }

    /// `page_expected_state()` for `page` of `zone` with `check_flags`.
    fn page_state(&self, page: &P, zone: u32, check_flags: u64) -> Result<(), BadPageReason> {
        let f = page.flags();
        let (z, n) = (self.flags_layout.zone(f), self.flags_layout.node(f));
        if z != zone || n != self.layout.nid {
            return Err(BadPageReason::Links { zone: z, nid: n });
        }
        if page.mapcount() != -1 {
            return Err(BadPageReason::Mapcount(page.mapcount()));
        }
        if page.mapping() != 0 {
            return Err(BadPageReason::Mapping(page.mapping()));
        }
        if page.refcount() != 0 {
            return Err(BadPageReason::Refcount(page.refcount()));
        }
        if page.memcg_data() != 0 {
            return Err(BadPageReason::MemcgData(page.memcg_data()));
        }
        if f & check_flags != 0 {
            return Err(BadPageReason::Flags(f & check_flags));
        }
        Ok(())
    }

    // ------------------------------------------------------------------ free lists

    fn list_set_next(&self, area: &mut FreeArea, order: u32, node_addr: u64, v: u64) {
        if node_addr == area.head_addr(order) {
            area.heads[order as usize].0 = v;
        } else {
            let pfn = self.pages.pfn_of_list(node_addr);
            // SAFETY: list nodes are first pages of free blocks of this zone, owned by the zone
            // lock holder (the caller holds `area`'s lock).
            unsafe { crate::init::wr64_once(self.pages.ptr(pfn), offsets::LRU_NEXT, v) };
        }
    }

    fn list_set_prev(&self, area: &mut FreeArea, order: u32, node_addr: u64, v: u64) {
        if node_addr == area.head_addr(order) {
            area.heads[order as usize].1 = v;
        } else {
            let pfn = self.pages.pfn_of_list(node_addr);
            // SAFETY: as in `list_set_next`.
            unsafe { self.wr_word(pfn, offsets::LRU_PREV, v) };
        }
    }

    /// `__add_to_free_list()` + `set_buddy_order()`: links the block at the head (or tail) of
    /// its order's list and marks it buddy.
    fn add_to_free_list(&self, area: &mut FreeArea, pfn: u64, order: u32, tail: bool) {
        let head = area.head_addr(order);
        let (prev, next) =
            if tail { (area.heads[order as usize].1, head) } else { (head, area.heads[order as usize].0) };
        let new = self.pages.vaddr(pfn) + offsets::LRU_NEXT as u64;
        // __list_add(new, prev, next)
        self.list_set_prev(area, order, next, new);
        // SAFETY: `pfn` heads a block being freed into this zone; the caller holds the lock.
        unsafe {
            self.wr_word(pfn, offsets::LRU_NEXT, next);
            self.wr_word(pfn, offsets::LRU_PREV, prev);
        }
        self.list_set_next(area, order, prev, new);
        // set_buddy_order(): set_page_private(page, order); __SetPageBuddy(page)
        // SAFETY: as above.
        unsafe {
            self.wr_word(pfn, offsets::PRIVATE, u64::from(order));
            crate::init::wr32(self.pages.ptr(pfn), offsets::PAGE_TYPE, PAGE_TYPE_BUDDY);
        }
        area.nr_free[order as usize] += 1;
    }

    /// `__del_page_from_free_list()`.
    fn del_from_free_list(&self, area: &mut FreeArea, pfn: u64, order: u32) {
        // SAFETY: `pfn` heads a free block of this zone; the caller holds the lock.
        let (next, prev) =
            unsafe { (self.rd_word(pfn, offsets::LRU_NEXT), self.rd_word(pfn, offsets::LRU_PREV)) };
        // __list_del(prev, next), then the poison of list_del().
        self.list_set_prev(area, order, next, prev);
        self.list_set_next(area, order, prev, next);
        // SAFETY: as above.
        unsafe {
            self.wr_word(pfn, offsets::LRU_NEXT, LIST_POISON1);
            self.wr_word(pfn, offsets::LRU_PREV, LIST_POISON2);
            // __ClearPageBuddy(page); set_page_private(page, 0)
            crate::init::wr32(self.pages.ptr(pfn), offsets::PAGE_TYPE, PAGE_TYPE_NONE);
            self.wr_word(pfn, offsets::PRIVATE, 0);
        }
        area.nr_free[order as usize] -= 1;
    }

    fn list_first(&self, area: &FreeArea, order: u32) -> Option<u64> {
        let next = area.heads[order as usize].0;
        (next != area.head_addr(order)).then(|| self.pages.pfn_of_list(next))
    }

    /// `page_is_buddy(page, buddy, order)`: the buddy heads a free block of exactly `order`
    /// in the same zone.
    fn page_is_buddy(&self, zone: u32, buddy: u64, order: u32) -> bool {
        let Some(z) = self.layout.zone(zone) else { return false };
        if !z.span.contains(buddy) || !self.initialized(buddy) {
            return false;
        }
        // SAFETY: the buddy is an initialized page of this zone: only the zone lock holder
        // (the caller) writes it.
        let p = unsafe { self.rd(buddy) };
        p.page_type() == PAGE_TYPE_BUDDY
            && p.private() == u64::from(order)
            && self.flags_layout.zone(p.flags()) == zone
    }

    /// `__free_one_page()`: merges with free buddies up to `MAX_PAGE_ORDER`, then links.
    fn free_one_page(&self, area: &mut FreeArea, zone: u32, mut pfn: u64, order: u32, to_tail: bool) {
        area.free_pages += 1 << order;
        let mut order = order;
        while order < self.cfg.max_page_order {
            let buddy = pfn ^ (1 << order);
            if !self.page_is_buddy(zone, buddy, order) {
                break;
            }
            self.del_from_free_list(area, buddy, order);
            pfn &= buddy;
            order += 1;
        }
        self.add_to_free_list(area, pfn, order, to_tail);
    }

    /// `__free_pages_core(page, order, MEMINIT_EARLY)`: every page gets `PG_reserved` cleared
    /// and a zero count (on-demand: only the first page of a block not expanded yet; the others
    /// copy the count when expanded), then the block goes to the buddy allocator at the tail.
    pub(crate) fn free_pages_core(&self, zone: u32, pfn: u64, order: u32) {
        self.free_pages_core_run(zone, pfn, order, 1, pfn);
    }

    /// `__free_pages_core()` on `count` consecutive blocks of `order` from `pfn`, in ascending
    /// order, under one hold of the zone lock (the boot free pass: nothing else runs yet, so
    /// the kernel's per-block lock round trip only costs time; the bytes, lists and counters are
    /// the same). While it frees a block it prefetches the first struct page of each pageblock
    /// [`FREE_PREFETCH_AHEAD`] blocks ahead, below `prefetch_end`.
    pub(crate) fn free_pages_core_run(&self, zone: u32, pfn: u64, order: u32, count: u64, prefetch_end: u64) {
        let n = 1u64 << order;
        if self.opts.policy.want_init_on_free() {
            if let Some(a) = &self.arena {
                // SAFETY: the node's arena covers its span; these pages are not in the buddy
                // allocator yet, so this thread owns their contents.
                unsafe { a.clear(pfn, n * count, self.opts.policy.clear) };
            }
        }
        let bs = self.cfg.pageblock_nr_pages();
        let on_demand = self.opts.mode == InitMode::OnDemand;
        let mut area = self.zones[zone as usize].lock();
        for c in 0..count {
            let chunk = pfn + c * n;
            let ahead = chunk + (FREE_PREFETCH_AHEAD << order);
            let mut b = ahead;
            while b < (ahead + n).min(prefetch_end) {
                // SAFETY: `b` is below `prefetch_end`, inside the free range being freed, so its
                // struct page is inside the memmap storage; only the address is computed.
                stream_hal::prefetch(unsafe { self.pages.ptr(b) });
                b += bs;
            }
            let end = chunk + n;
            if on_demand && order >= self.cfg.pageblock_order {
                // Whole pageblocks (the bulk of the boot free pass): an unexpanded block's
                // base page, or every page of an expanded one.
                for base in (chunk..end).step_by(bs as usize) {
                    let pages = if self.states.is_done(self.block_index(base)) { bs } else { 1 };
                    for q in base..base + pages {
                        // SAFETY: as below.
                        unsafe { self.clear_reserved_zero_count(q) };
                    }
                }
                self.free_one_page(&mut area, zone, chunk, order, true);
                continue;
            }
            let mut p = chunk;
            while p < end {
                let block_end = ((p | (bs - 1)) + 1).min(end);
                let mut stop = block_end;
                if on_demand && !self.states.is_done(self.block_index(p)) {
                    if p == self.block_start(p) && block_end == p + bs {
                        // The whole block is freed and only its base page is initialized: the
                        // others copy its (zero) count when the block is expanded.
                        stop = p + 1;
                    } else {
                        // Part of the block stays out of the allocator (a NOINIT reservation):
                        // those pages keep the count of 1 they were initialized with, so the
                        // block is expanded before its free part gets a zero count.
                        self.ensure_block(self.block_start(p));
                    }
                }
                for q in p..stop {
                    // SAFETY: the pages are initialized (or an unexpanded block's base) and owned
                    // by this thread until linked; the zone lock is held.
                    unsafe { self.clear_reserved_zero_count(q) };
                }
                p = block_end;
            }
            self.free_one_page(&mut area, zone, chunk, order, true);
        }
        self.stats.free_core_calls[order as usize].fetch_add(count, Ordering::Relaxed);
        area.managed_pages += n * count;
    }

    /// The on-demand boot of one window `[lo, hi)` of `zone` that lies inside one memory range,
    /// with no reserved page: `memmap_init` (the flagged first struct page of every block),
    /// then `__free_pages_core` of each `MAX_PAGE_ORDER` block, at the tail of its free list,
    /// with each first struct page written once, in its final state. Returns the pages freed.
    ///
    /// The kernel writes such a struct page three times (`__init_single_page`, then
    /// `__ClearPageReserved` and `set_page_count(0)`, then the buddy fields and list links of
    /// the block head); the bytes left are the same, and so are the pageblock bits, the
    /// `cond_resched()` calls, the free lists and the counters (the fused-boot tests compare
    /// all of it with the kernel's order). The first block goes through the slow path and is
    /// the template of the others, as in [`Node::init_run`].
    pub(crate) fn ondemand_boot_window(&self, zone: u32, lo: u64, hi: u64) -> u64 {
        let max = self.cfg.max_page_order;
        let (n, bs) = (1u64 << max, self.cfg.pageblock_nr_pages());
        debug_assert!(lo % n == 0 && hi % n == 0 && lo < hi);
        let kind = RunKind { pageblock: PbMode::MovableResched, extra_flags: 1 << self.uninit_bit, count: 1 };
        self.init_run(lo, lo + 1, zone, kind);
        // SAFETY: boot is single-threaded; `lo` was just initialized.
        let mut t = unsafe { self.rd(lo) };
        let section_dep = self.flags_layout.section_in_page_flags();
        // Streamed only when asked for explicitly: with Auto the fused boot stores normally. A
        // streamed line per 2 MiB block sent the 64 GiB boot anywhere from 1.0 to 4.7 ms from
        // one round to the next (write-combining flushes to scattered DRAM rows), where normal
        // stores stay within about 1.6 to 2.6 ms.
        let stream = self.strategy == Strategy::Streaming && !self.boot_cached.load(Ordering::Relaxed);
        let mut area = self.zones[zone as usize].lock();
        let mut g = self.inner.lock();
        let Inner { memmap, hooks } = &mut *g;
        // The window's blocks go to the tail of the MAX_PAGE_ORDER list in ascending order:
        // each one's links are known before it is written (the previous block of the window, or
        // the list's tail before it; the next block, or the list head after the last). Nothing
        // reads these struct pages back during the pass, so they can be streamed.
        let head = area.head_addr(max);
        let old_tail = area.heads[max as usize].1;
        let list_of = |pfn: u64| self.pages.vaddr(pfn) + offsets::LRU_NEXT as u64;
        let mut b = lo;
        while b < hi {
            if section_dep {
                t.set_flags(self.flags_layout.set_section(t.flags(), self.cfg.pfn_to_section_nr(b)));
            }
            let mut rec = self.refreshed(&t, b);
            // __free_pages_core(): __ClearPageReserved(), set_page_count(0).
            rec.set_flags(rec.flags() & !(1 << PG::RESERVED));
            rec.set_u32_at(offsets::REFCOUNT, 0);
            if b % n == 0 {
                // __add_to_free_list(tail) + set_buddy_order().
                rec.set_u64_at(offsets::LRU_NEXT, if b + n < hi { list_of(b + n) } else { head });
                rec.set_u64_at(offsets::LRU_PREV, if b > lo { list_of(b - n) } else { old_tail });
                rec.set_u64_at(offsets::PRIVATE, u64::from(max));
                rec.set_u32_at(offsets::PAGE_TYPE, PAGE_TYPE_BUDDY);
            }
            // SAFETY: `b` is in the node's span (inside a zone), so inside the memmap storage,
            // and owned by the booting thread; a streaming pass drains before anything reads it.
            unsafe {
                let dst = self.pages.ptr(b);
                if stream { Streamed::store(dst, &rec) } else { Cached::store(dst, &rec) }
            }
            b += bs;
        }
        // set_pageblock_migratetype(MOVABLE) + cond_resched() of every block but the first
        // (init_run did that one), in one run: they touch the pageblock bits only.
        memmap.pageblock_init_run(lo + bs, (hi - lo) / bs - 1, hooks);
        drop(g);
        if stream {
            stream_hal::drain();
        }
        // The list ends: the old tail (or the head) points to the first block, the head back to
        // the last.
        self.list_set_next(&mut area, max, old_tail, list_of(lo));
        self.list_set_prev(&mut area, max, head, list_of(hi - n));
        let pages = hi - lo;
        area.nr_free[max as usize] += pages / n;
        self.stats.pages_initialized.fetch_add(pages / bs - 1, Ordering::Relaxed);
        self.stats.free_core_calls[max as usize].fetch_add(pages / n, Ordering::Relaxed);
        area.managed_pages += pages;
        area.free_pages += pages;
        pages
    }

    /// `__ClearPageReserved(p); set_page_count(p, 0)`.
    ///
    /// # Safety
    ///
    /// `q` initialized and owned by the caller (a block being freed, under the zone lock).
    #[inline(always)]
    unsafe fn clear_reserved_zero_count(&self, q: u64) {
        // SAFETY: per the caller.
        unsafe {
            let f = self.rd_word(q, offsets::FLAGS);
            self.wr_word(q, offsets::FLAGS, f & !(1 << PG::RESERVED));
            self.set_count(q, 0);
        }
    }

    // ------------------------------------------------------------------ allocation

    /// `alloc_pages(gfp, order)` from zone `zone` of the node.
    ///
    /// # Errors
    ///
    /// [`AllocError::OrderTooLarge`], [`AllocError::NoSuchZone`], [`AllocError::NoMemory`], and
    /// [`AllocError::BadPage`] if `check_new_page()` fails (a bug: tests assert it never does).
    pub fn alloc_pages(&self, zone: u32, order: u32, gfp: Gfp) -> Result<PageBlock, AllocError> {
        if order > self.cfg.max_page_order {
            return Err(AllocError::OrderTooLarge { order, max: self.cfg.max_page_order });
        }
        if self.layout.zone(zone).is_none() {
            return Err(AllocError::NoSuchZone { zone });
        }
        loop {
            {
                let mut area = self.zones[zone as usize].lock();
                if let Some(pfn) = self.rmqueue(&mut area, order) {
                    area.free_pages -= 1 << order;
                    self.prep_new_page(zone, pfn, order)?;
                    drop(area);
                    if self.opts.policy.init_at_alloc(gfp) {
                        if let Some(a) = &self.arena {
                            // SAFETY: the block was just taken off the free lists: this thread
                            // owns its contents; the arena covers the node.
                            unsafe { a.clear(pfn, 1 << order, self.opts.policy.clear) };
                        }
                    }
                    return Ok(PageBlock { pfn, order, zone, node_id: self.node_id });
                }
            }
            if self.deferred_pending() && self.deferred_grow_zone(zone, order) {
                continue;
            }
            return Err(AllocError::NoMemory);
        }
    }

    /// `__rmqueue_smallest()`.
    fn rmqueue(&self, area: &mut FreeArea, order: u32) -> Option<u64> {
        for o in order..=self.cfg.max_page_order {
            if let Some(pfn) = self.list_first(area, o) {
                self.del_from_free_list(area, pfn, o);
                self.expand(area, pfn, order, o);
                return Some(pfn);
            }
        }
        None
    }

    /// `expand(zone, page, low, high)`: gives back the upper halves. On-demand: the halves
    /// below the block size live inside the block of `pfn`, which is expanded first.
    fn expand(&self, area: &mut FreeArea, pfn: u64, low: u32, mut high: u32) {
        if self.opts.mode == InitMode::OnDemand
            && low < self.cfg.pageblock_order
            && high > low
            && !self.states.is_done(self.block_index(pfn))
        {
            self.ensure_block(self.block_start(pfn));
        }
        let mut size = 1u64 << high;
        while high > low {
            high -= 1;
            size >>= 1;
            self.add_to_free_list(area, pfn + size, high, false);
        }
    }

    /// `prep_new_page()`: expand (on-demand), `check_new_pages()`, then `post_alloc_hook()`'s
    /// `set_page_private(page, 0)` and `set_page_refcounted(page)`.
    fn prep_new_page(&self, zone: u32, pfn: u64, order: u32) -> Result<(), AllocError> {
        let n = 1u64 << order;
        // The on-demand check: one load of the block's state in the common case (the RFC's
        // "flag check once every PTRS_PER_PMD"), the expansion path only when it is not done.
        if self.opts.mode == InitMode::OnDemand
            && !(n <= self.cfg.pageblock_nr_pages() && self.states.is_done(self.block_index(pfn)))
        {
            self.ensure_range_initialized(pfn, n);
        }
        let checked = if self.opts.check_pages { n } else { 1 };
        let mask = self.check_at_prep();
        for p in pfn..pfn + checked {
            // SAFETY: the block was taken off the free lists under the zone lock (held): its
            // pages are initialized (expanded above) and owned by this thread.
            let page = unsafe { self.rd(p) };
            // The first page's list words and page_type were just reset by
            // __del_page_from_free_list; the checks below see what the kernel's see.
            self.page_state(&page, zone, mask).map_err(|reason| AllocError::BadPage { pfn: p, reason })?;
        }
        // SAFETY: as above.
        unsafe {
            self.wr_word(pfn, offsets::PRIVATE, 0);
            self.set_count(pfn, 1);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ free

    /// `__free_pages(page, order)` of an allocation.
    ///
    /// # Errors
    ///
    /// A [`FreeError`] if the struct pages are not in the state the allocator left them in
    /// (then nothing is modified), or if the block belongs to another node.
    pub fn free_pages(&self, block: PageBlock) -> Result<(), FreeError> {
        if block.node_id != self.node_id {
            return Err(FreeError::NotInZone { pfn: block.pfn });
        }
        self.free_inner(block.pfn, block.order)
    }

    /// `__free_pages(pfn_to_page(pfn), order)` by PFN, with every check of
    /// [`Node::free_pages`]: a double free, a free of pages never handed out, a misaligned or
    /// out-of-zone block are [`FreeError`]s and change nothing.
    ///
    /// # Errors
    ///
    /// See above.
    ///
    /// # Safety
    ///
    /// No [`PageBlock`] of this node that overlaps the block may be alive (otherwise its
    /// holder could still reach the pages' contents after they are reallocated).
    pub unsafe fn free_pages_raw(&self, pfn: u64, order: u32) -> Result<(), FreeError> {
        self.free_inner(pfn, order)
    }

    fn free_inner(&self, pfn: u64, order: u32) -> Result<(), FreeError> {
        let max = self.cfg.max_page_order;
        if order > max {
            return Err(FreeError::OrderTooLarge { order, max });
        }
        if pfn & ((1 << order) - 1) != 0 {
            return Err(FreeError::Misaligned { pfn, order });
        }
        let n = 1u64 << order;
        let Some(z) = self.layout.zone_of(pfn).copied() else { return Err(FreeError::NotInZone { pfn }) };
        if pfn + n > z.span.end {
            return Err(FreeError::NotInZone { pfn });
        }
        let zone = z.zone;
        let mut area = self.zones[zone as usize].lock();
        let checked = if self.opts.check_pages { n } else { 1 };
        if let Some(p) = (pfn..pfn + checked).find(|&p| !self.initialized(p)) {
            return Err(FreeError::Uninitialized { pfn: p });
        }
        if self.is_free_buddy_page(&z, pfn) {
            return Err(FreeError::DoubleFree { pfn });
        }
        // SAFETY: initialized (checked) and in this zone, whose lock is held; allocated pages
        // are only written under it.
        let head = unsafe { self.rd(pfn) };
        if head.refcount() == 0 || head.lru_next() != LIST_POISON1 || head.lru_prev() != LIST_POISON2 {
            return Err(FreeError::NotAllocated { pfn });
        }
        if head.refcount() != 1 {
            return Err(FreeError::BadPage { pfn, reason: BadPageReason::Refcount(head.refcount()) });
        }
        // free_page_is_bad(), as if put_page_testzero() had dropped the count to 0.
        let mask = self.check_at_free();
        let mut as_freed = head;
        as_freed.set_u32_at(offsets::REFCOUNT, 0);
        self.page_state(&as_freed, zone, mask).map_err(|reason| FreeError::BadPage { pfn, reason })?;
        for p in pfn + 1..pfn + checked {
            // SAFETY: as for the head.
            let page = unsafe { self.rd(p) };
            self.page_state(&page, zone, mask).map_err(|reason| FreeError::BadPage { pfn: p, reason })?;
        }
        // put_page_testzero(), then free_pages_prepare(): flags &= ~PAGE_FLAGS_CHECK_AT_PREP.
        // SAFETY: as above.
        unsafe {
            self.set_count(pfn, 0);
            let f = self.rd_word(pfn, offsets::FLAGS);
            self.wr_word(pfn, offsets::FLAGS, f & !self.check_at_prep());
        }
        if self.opts.policy.want_init_on_free() {
            if let Some(a) = &self.arena {
                // SAFETY: the block is still allocated (not linked yet): the caller owns it.
                unsafe { a.clear(pfn, n, self.opts.policy.clear) };
            }
        }
        self.free_one_page(&mut area, zone, pfn, order, false);
        Ok(())
    }

    /// `is_free_buddy_page(page)`: some naturally aligned block around `pfn` is a free buddy
    /// block covering it.
    fn is_free_buddy_page(&self, z: &crate::memblock::ZoneSpan, pfn: u64) -> bool {
        (0..=self.cfg.max_page_order).any(|o| {
            let head = pfn & !((1u64 << o) - 1);
            z.span.contains(head) && self.initialized(head) && {
                // SAFETY: initialized page of this zone; the caller holds its lock.
                let p = unsafe { self.rd(head) };
                p.page_type() == PAGE_TYPE_BUDDY && p.private() >= u64::from(o)
            }
        })
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
        self.zones[zone as usize].lock().nr_free[order as usize]
    }

    /// Calls `f(pfn, order)` for every free block of zone `zone`, walking the free lists (under
    /// the zone lock: `f` must not call back into the node).
    pub fn for_each_free_block(&self, zone: u32, mut f: impl FnMut(u64, u32)) {
        if self.layout.zone(zone).is_none() {
            return;
        }
        let area = self.zones[zone as usize].lock();
        for o in 0..=self.cfg.max_page_order {
            let head = area.head_addr(o);
            let mut cur = area.heads[o as usize].0;
            while cur != head {
                let pfn = self.pages.pfn_of_list(cur);
                f(pfn, o);
                // SAFETY: list members are free pages of this zone; the lock is held.
                cur = unsafe { self.rd_word(pfn, offsets::LRU_NEXT) };
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
        // SAFETY: the block is allocated and owned by the handle's holder; the allocator writes
        // allocated pages only when their holder frees them.
        Some(unsafe { self.rd(pfn) })
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
