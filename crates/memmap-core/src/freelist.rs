//! The zone free-list model: what `struct zone`'s `free_area[]` holds and how the buddy
//! allocator encodes a free block in its head's struct page, defined once for the node's
//! allocator ([`Node`](crate::Node)) and memory hotplug ([`HotplugZone`](crate::HotplugZone)).
//!
//! [`FreeLists`] are the list heads `zone->free_area[order].free_list[mt]` (at modelled kernel
//! addresses) with their `nr_free`; [`Rules`] the release's encodings (the free head's
//! `page_type`, [`buddy_page_type`]) and orders.

use crate::model::config::KernelConfig;
use crate::model::flags::{MigrateType, PageType};
use crate::offsets;

/// Orders the model keeps free lists for (`MAX_PAGE_ORDER` must be below this).
pub(crate) const MAX_ORDERS: usize = 24;

/// Migrate types with a free list in the model: UNMOVABLE, MOVABLE, RECLAIMABLE, ISOLATE.
const MT_SLOTS: usize = 4;

/// `page_type` of an untyped page (`_mapcount == -1`): what `__ClearPageBuddy()` leaves.
pub(crate) const PAGE_TYPE_NONE: u32 = u32::MAX;

/// Modelled offset of `free_area[0]` in `struct zone`.
const FREE_AREA_OFFSET: u64 = 0x100;
/// Modelled `sizeof(struct free_area)`: `MIGRATE_TYPES` (6) list heads and `nr_free`.
const FREE_AREA_SIZE: u64 = 6 * 16 + 8;

/// Modelled kernel address of `NODE_DATA(nid)->node_zones[zone]` (one 256 KiB `pglist_data`
/// per node from `page_offset`, 0x1000 bytes per zone), so the list heads are recognisable.
#[must_use]
pub(crate) const fn zone_struct_addr(cfg: &KernelConfig, nid: u32, zone: u32) -> u64 {
    cfg.page_offset.wrapping_add(0x7f00_0000 + nid as u64 * 0x4_0000 + 0x1000 + zone as u64 * 0x1000)
}

/// `page_type` of a free block's head in the release of `cfg`: `PGTY_buddy << 24` from 6.12,
/// `~PG_buddy` (`0xffffff7f`) before
/// ([`Behaviour::page_type_top_byte`](crate::Behaviour::page_type_top_byte)).
#[must_use]
pub const fn buddy_page_type(cfg: &KernelConfig) -> u32 {
    if cfg.behaviour().page_type_top_byte { PageType::word(PageType::BUDDY) } else { 0xffff_ff7f }
}

/// The list slot of a migrate type.
const fn slot(mt: MigrateType) -> usize {
    match mt {
        MigrateType::Unmovable => 0,
        MigrateType::Movable => 1,
        MigrateType::Reclaimable => 2,
        MigrateType::Isolate => 3,
    }
}

/// The migrate types with a list, in slot order.
const SLOT_TYPES: [MigrateType; MT_SLOTS] =
    [MigrateType::Unmovable, MigrateType::Movable, MigrateType::Reclaimable, MigrateType::Isolate];

/// `zone->free_area[]`: the list heads and `nr_free` of every order and migrate type of one
/// zone. A new one has empty lists (each head points at itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FreeLists {
    zone_addr: u64,
    /// `(next, prev)` of each list head, by order and migrate-type slot.
    heads: [[(u64, u64); MT_SLOTS]; MAX_ORDERS],
    nr_free: [[u64; MT_SLOTS]; MAX_ORDERS],
}

impl FreeLists {
    /// Empty lists of the zone at modelled address `zone_addr` ([`zone_struct_addr`]).
    pub(crate) fn new(zone_addr: u64) -> Self {
        let mut l = FreeLists {
            zone_addr,
            heads: [[(0, 0); MT_SLOTS]; MAX_ORDERS],
            nr_free: [[0; MT_SLOTS]; MAX_ORDERS],
        };
        for order in 0..MAX_ORDERS as u32 {
            for mt in SLOT_TYPES {
                let h = l.head_addr(order, mt);
                l.heads[order as usize][slot(mt)] = (h, h);
            }
        }
        l
    }

    /// The modelled address of `zone->free_area[order].free_list[mt]`.
    #[inline]
    #[must_use]
    pub(crate) const fn head_addr(&self, order: u32, mt: MigrateType) -> u64 {
        self.zone_addr
            .wrapping_add(FREE_AREA_OFFSET)
            .wrapping_add(order as u64 * FREE_AREA_SIZE)
            .wrapping_add(mt.value() as u64 * 16)
    }

    /// `(next, prev)` of the list head of `(order, mt)`.
    #[inline]
    #[must_use]
    pub(crate) fn head(&self, order: u32, mt: MigrateType) -> (u64, u64) {
        self.heads[order as usize][slot(mt)]
    }

    /// `(next, prev)` of the list head of `(order, mt)`, to change.
    #[inline]
    pub(crate) fn head_mut(&mut self, order: u32, mt: MigrateType) -> &mut (u64, u64) {
        &mut self.heads[order as usize][slot(mt)]
    }

    /// `free_area[order].nr_free` of migrate type `mt` (0 for orders beyond the model's).
    #[inline]
    #[must_use]
    pub(crate) fn nr_free(&self, order: u32, mt: MigrateType) -> u64 {
        self.nr_free.get(order as usize).map_or(0, |o| o[slot(mt)])
    }

    /// Calls `f` with the first pfn of every block on the list of `(order, mt)`, in list order:
    /// `page_of(node)` is the pfn and `next` link of the struct page whose list node is at
    /// `node`, `None` for a node that is not one. Stops there, and after as many blocks as the
    /// list counts (a list turned into a cycle ends there instead of looping for ever).
    pub(crate) fn walk(
        &self,
        order: u32,
        mt: MigrateType,
        page_of: impl Fn(u64) -> Option<(u64, u64)>,
        mut f: impl FnMut(u64),
    ) {
        if order as usize >= MAX_ORDERS {
            return;
        }
        let head = self.head_addr(order, mt);
        let mut cur = self.head(order, mt).0;
        for _ in 0..self.nr_free(order, mt) {
            if cur == head {
                return;
            }
            let Some((pfn, next)) = page_of(cur) else { return };
            f(pfn);
            cur = next;
        }
    }

    /// Adds `n` blocks to the count of `(order, mt)` (saturating).
    #[inline]
    pub(crate) fn add_free(&mut self, order: u32, mt: MigrateType, n: u64) {
        let c = &mut self.nr_free[order as usize][slot(mt)];
        *c = c.saturating_add(n);
    }

    /// Takes one block off the count of `(order, mt)` (saturating).
    #[inline]
    pub(crate) fn sub_free(&mut self, order: u32, mt: MigrateType) {
        let c = &mut self.nr_free[order as usize][slot(mt)];
        *c = c.saturating_sub(1);
    }
}

/// The buddy allocator's rules in one release and configuration: the encodings it writes and
/// the orders it merges and splits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// `page_type` of a free block's head ([`buddy_page_type`]).
    pub(crate) buddy_type: u32,
    /// `MAX_PAGE_ORDER`.
    pub(crate) max_order: u32,
    /// `pageblock_order`.
    pub(crate) pageblock_order: u32,
    /// 6.10+: `free_one_page()` splits a block larger than a pageblock into pageblocks
    /// (`split_large_buddy()`), and undoing isolation goes through `__isolate_free_page()`
    /// ([`Behaviour::free_splits_pageblocks`](crate::Behaviour::free_splits_pageblocks)).
    pub(crate) split: bool,
    /// `LIST_POISON1` and `LIST_POISON2` ([`KernelConfig::list_poison`]).
    pub(crate) poison: (u64, u64),
}

impl Rules {
    /// The rules of `cfg`'s release.
    #[must_use]
    pub(crate) const fn of(cfg: &KernelConfig) -> Self {
        Rules {
            buddy_type: buddy_page_type(cfg),
            max_order: cfg.max_page_order,
            pageblock_order: cfg.pageblock_order,
            split: cfg.behaviour().free_splits_pageblocks,
            poison: cfg.list_poison(),
        }
    }

    /// `pageblock_nr_pages`.
    #[must_use]
    pub(crate) const fn pageblock_nr_pages(&self) -> u64 {
        1 << self.pageblock_order
    }

    /// Whether `cfg`'s orders fit the model: `MAX_PAGE_ORDER` below [`MAX_ORDERS`] and
    /// `pageblock_order` at most `MAX_PAGE_ORDER`.
    #[must_use]
    pub(crate) const fn orders_supported(cfg: &KernelConfig) -> bool {
        (cfg.max_page_order as usize) < MAX_ORDERS && cfg.pageblock_order <= cfg.max_page_order
    }
}

/// The buddy allocator's free-list routines (`mm/page_alloc.c`, `mm/page_isolation.c`) over
/// one zone's [`FreeLists`] and the struct pages of its free blocks. An implementor says where
/// the lists and struct pages are and what it knows about a page.
pub(crate) trait ZoneFreeLists {
    /// `__list_add_valid()`/`__list_del_entry_valid()` (`CONFIG_LIST_HARDENED`): a list
    /// operation whose neighbours do not point back is skipped. Off where every list node is
    /// known to be one of the zone's (the node).
    const LIST_HARDENED: bool;
    /// `buddy_merge_likely()` sends a freed block that may merge soon to the tail of its list
    /// (the node's model leaves it out: its frees of allocations go to the head).
    const MERGE_LIKELY: bool;

    /// The list heads and counters.
    fn lists(&self) -> &FreeLists;
    /// The list heads and counters, to change.
    fn lists_mut(&mut self) -> &mut FreeLists;
    /// The release's rules.
    fn rules(&self) -> Rules;
    /// The 8-byte word at `off` of the struct page of `pfn`.
    fn word(&self, pfn: u64, off: usize) -> u64;
    /// Sets the 8-byte word at `off` of the struct page of `pfn`.
    fn set_word(&mut self, pfn: u64, off: usize, v: u64);
    /// Sets the 4-byte word at `off` of the struct page of `pfn`.
    fn set_u32(&mut self, pfn: u64, off: usize, v: u32);
    /// The list node of `pfn` (`&page->buddy_list`).
    fn list_node(&self, pfn: u64) -> u64;
    /// The struct page of list node `entry`, if it is one the zone may touch.
    fn pfn_of_node(&self, entry: u64) -> Option<u64>;
    /// `PageBuddy(pfn_to_page(pfn))`, for a pfn the zone may look at (false otherwise).
    fn is_buddy(&self, pfn: u64) -> bool;
    /// The zone and node checks of `page_is_buddy()`: `buddy` is in `pfn`'s zone and node.
    fn same_zone(&self, pfn: u64, buddy: u64) -> bool;
    /// `get_pfnblock_migratetype()`.
    fn migratetype(&self, pfn: u64) -> MigrateType;
    /// `set_pageblock_migratetype()`.
    fn set_migratetype(&mut self, pfn: u64, mt: MigrateType);

    /// `buddy_order(page)`.
    fn order_of(&self, pfn: u64) -> u32 {
        self.word(pfn, offsets::PRIVATE) as u32
    }

    /// `page_is_buddy(page, buddy, order)`: the buddy heads a free block of exactly `order` in
    /// the same zone and node.
    fn page_is_buddy(&self, pfn: u64, buddy: u64, order: u32) -> bool {
        self.is_buddy(buddy) && self.order_of(buddy) == order && self.same_zone(pfn, buddy)
    }

    /// `entry->next` of a list node: the list head of `(order, mt)` or a struct page of the
    /// zone (`None` for anything else).
    fn next_of(&self, order: u32, mt: MigrateType, entry: u64) -> Option<u64> {
        if entry == self.lists().head_addr(order, mt) {
            Some(self.lists().head(order, mt).0)
        } else {
            self.pfn_of_node(entry).map(|pfn| self.word(pfn, offsets::LRU_NEXT))
        }
    }

    /// `entry->prev`, as [`ZoneFreeLists::next_of`].
    fn prev_of(&self, order: u32, mt: MigrateType, entry: u64) -> Option<u64> {
        if entry == self.lists().head_addr(order, mt) {
            Some(self.lists().head(order, mt).1)
        } else {
            self.pfn_of_node(entry).map(|pfn| self.word(pfn, offsets::LRU_PREV))
        }
    }

    /// Sets `entry->next` of a list node: a list head of `(order, mt)` or a struct page (a
    /// node that is neither is left alone).
    fn set_next(&mut self, order: u32, mt: MigrateType, entry: u64, v: u64) {
        if entry == self.lists().head_addr(order, mt) {
            self.lists_mut().head_mut(order, mt).0 = v;
        } else if let Some(pfn) = self.pfn_of_node(entry) {
            self.set_word(pfn, offsets::LRU_NEXT, v);
        }
    }

    /// Sets `entry->prev`, as [`ZoneFreeLists::set_next`].
    fn set_prev(&mut self, order: u32, mt: MigrateType, entry: u64, v: u64) {
        if entry == self.lists().head_addr(order, mt) {
            self.lists_mut().head_mut(order, mt).1 = v;
        } else if let Some(pfn) = self.pfn_of_node(entry) {
            self.set_word(pfn, offsets::LRU_PREV, v);
        }
    }

    /// Whether the block at `pfn` is linked into the list of `(order, mt)`:
    /// `__list_del_entry_valid()`, `prev->next == entry && next->prev == entry`.
    fn linked(&self, pfn: u64, order: u32, mt: MigrateType) -> bool {
        let node = self.list_node(pfn);
        let (next, prev) = (self.word(pfn, offsets::LRU_NEXT), self.word(pfn, offsets::LRU_PREV));
        self.next_of(order, mt, prev) == Some(node) && self.prev_of(order, mt, next) == Some(node)
    }

    /// `__add_to_free_list()`: `list_add()` or `list_add_tail()`.
    fn add(&mut self, pfn: u64, order: u32, mt: MigrateType, tail: bool) {
        let head = self.lists().head_addr(order, mt);
        let (hn, hp) = self.lists().head(order, mt);
        let (prev, next) = if tail { (hp, head) } else { (head, hn) };
        let new = self.list_node(pfn);
        // __list_add_valid(): `next->prev == prev && prev->next == next`. A list whose nodes
        // are not this zone's (another memmap's, or overwritten since) fails it, and the
        // kernel then leaves the list alone.
        if !Self::LIST_HARDENED
            || (self.prev_of(order, mt, next) == Some(prev) && self.next_of(order, mt, prev) == Some(next))
        {
            // __list_add(new, prev, next)
            self.set_prev(order, mt, next, new);
            self.set_word(pfn, offsets::LRU_NEXT, next);
            self.set_word(pfn, offsets::LRU_PREV, prev);
            self.set_next(order, mt, prev, new);
        }
        self.lists_mut().add_free(order, mt, 1);
    }

    /// `__list_del_entry()` of a block on the list of `(order, mt)`: a block that is not
    /// linked there (`__list_del_entry_valid()` fails) is left as it is, as the kernel does.
    fn unlink(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        if !Self::LIST_HARDENED || self.linked(pfn, order, mt) {
            let (next, prev) = (self.word(pfn, offsets::LRU_NEXT), self.word(pfn, offsets::LRU_PREV));
            self.set_prev(order, mt, next, prev);
            self.set_next(order, mt, prev, next);
        }
        self.lists_mut().sub_free(order, mt);
    }

    /// `__del_page_from_free_list()`: `list_del()` (the poison), `__ClearPageBuddy()`,
    /// `set_page_private(page, 0)`.
    fn del(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        self.unlink(pfn, order, mt);
        let (next, prev) = self.rules().poison;
        self.set_word(pfn, offsets::LRU_NEXT, next);
        self.set_word(pfn, offsets::LRU_PREV, prev);
        self.set_u32(pfn, offsets::PAGE_TYPE, PAGE_TYPE_NONE);
        self.set_word(pfn, offsets::PRIVATE, 0);
    }

    /// `move_to_free_list()`: `list_move_tail()` onto the list of `new`.
    fn move_to(&mut self, pfn: u64, order: u32, old: MigrateType, new: MigrateType) {
        self.unlink(pfn, order, old);
        self.add(pfn, order, new, true);
    }

    /// `set_buddy_order()`: the order in `private`, `__SetPageBuddy()` (the release's
    /// `page_type`).
    fn set_buddy_order(&mut self, pfn: u64, order: u32) {
        self.set_word(pfn, offsets::PRIVATE, u64::from(order));
        let t = self.rules().buddy_type;
        self.set_u32(pfn, offsets::PAGE_TYPE, t);
    }

    /// `expand(zone, page, low, high, migratetype)`: the upper halves of the block of `high` at
    /// `pfn` go back to the lists of `mt`, down to a block of `low`.
    fn expand(&mut self, pfn: u64, low: u32, mut high: u32, mt: MigrateType) {
        let mut size = 1u64 << high;
        while high > low {
            high -= 1;
            size >>= 1;
            self.set_buddy_order(pfn + size, high);
            self.add(pfn + size, high, mt, false);
        }
    }

    /// `break_down_buddy_pages(zone, page, target, low, high, migratetype)`: the block of
    /// `high` at `pfn` (off its list) is halved down to `low` around `target`, each half
    /// without `target` going back to the head of `mt`'s list (no guard pages: the model has
    /// no `debug_pagealloc`).
    fn break_down(&mut self, mut pfn: u64, target: u64, low: u32, mut high: u32, mt: MigrateType) {
        let mut size = 1u64 << high;
        while high > low {
            high -= 1;
            size >>= 1;
            let buddy = if target >= pfn + size {
                let b = pfn;
                pfn += size;
                b
            } else {
                pfn + size
            };
            self.add(buddy, high, mt, false);
            self.set_buddy_order(buddy, high);
        }
    }

    /// The first block of the list of `(order, mt)`, if any.
    fn first_on_list(&self, order: u32, mt: MigrateType) -> Option<u64> {
        let next = self.lists().head(order, mt).0;
        if next == self.lists().head_addr(order, mt) { None } else { self.pfn_of_node(next) }
    }

    /// Calls `f` with the first pfn of every block on the list of `(order, mt)`, in list order,
    /// by walking the links; stops at a link that leaves the zone, and after as many blocks as
    /// the list counts (a list turned into a cycle ends there).
    fn for_each_on_list(&self, order: u32, mt: MigrateType, f: impl FnMut(u64)) {
        self.lists().walk(
            order,
            mt,
            |node| self.pfn_of_node(node).map(|pfn| (pfn, self.word(pfn, offsets::LRU_NEXT))),
            f,
        );
    }

    /// `buddy_merge_likely()`: the block that a merge would make has a free buddy.
    fn buddy_merge_likely(&self, pfn: u64, buddy_pfn: u64, order: u32) -> bool {
        if order + 1 >= self.rules().max_order {
            return false;
        }
        let higher = buddy_pfn & pfn;
        self.page_is_buddy(higher, higher ^ (1 << (order + 1)), order + 1)
    }

    /// `__free_one_page(page, pfn, zone, order, migratetype, fpi)`.
    fn free_one(&mut self, mut pfn: u64, mut order: u32, mt: MigrateType, fpi_to_tail: bool) {
        let Rules { max_order: max, pageblock_order: pb, .. } = self.rules();
        let mut buddy_pfn = pfn ^ (1 << order);
        while order < max {
            buddy_pfn = pfn ^ (1 << order);
            if !self.page_is_buddy(pfn, buddy_pfn, order) {
                break;
            }
            let mut buddy_mt = mt;
            if order >= pb {
                // No merge between an isolated pageblock and a normal one.
                buddy_mt = self.migratetype(buddy_pfn);
                if mt != buddy_mt && (!mt.is_mergeable() || !buddy_mt.is_mergeable()) {
                    break;
                }
            }
            self.del(buddy_pfn, order, buddy_mt);
            if self.rules().split && buddy_mt != mt {
                // Match buddy type (6.10+).
                self.set_migratetype(buddy_pfn, mt);
            }
            pfn &= buddy_pfn;
            order += 1;
        }
        self.set_buddy_order(pfn, order);
        let to_tail = fpi_to_tail || (Self::MERGE_LIKELY && self.buddy_merge_likely(pfn, buddy_pfn, order));
        self.add(pfn, order, mt, to_tail);
    }

    /// `free_one_page()` (as `__free_pages_ok()` calls it): from 6.10 through
    /// `split_large_buddy()`, a block larger than a pageblock freed pageblock by pageblock,
    /// each with its own pageblock's migrate type.
    fn free_one_page(&mut self, pfn: u64, order: u32, fpi_to_tail: bool) {
        if self.rules().split {
            self.split_large_buddy(pfn, order, fpi_to_tail);
        } else {
            let mt = self.migratetype(pfn);
            self.free_one(pfn, order, mt, fpi_to_tail);
        }
    }

    /// `split_large_buddy(zone, page, pfn, order, fpi)`.
    fn split_large_buddy(&mut self, mut pfn: u64, order: u32, fpi_to_tail: bool) {
        let end = pfn + (1u64 << order);
        let piece = order.min(self.rules().pageblock_order);
        loop {
            let mt = self.migratetype(pfn);
            self.free_one(pfn, piece, mt, fpi_to_tail);
            pfn += 1 << piece;
            if pfn >= end {
                break;
            }
        }
    }

    /// `undo_isolate_page_range(start, end, MIGRATE_MOVABLE)`.
    fn undo_isolate_page_range(&mut self, start: u64, end: u64) {
        let pb = self.rules().pageblock_nr_pages();
        let mut pfn = start;
        while pfn < end {
            if self.migratetype(pfn) == MigrateType::Isolate {
                self.unset_migratetype_isolate(pfn);
            }
            pfn += pb;
        }
    }

    /// `unset_migratetype_isolate(page, MIGRATE_MOVABLE)` of the pageblock at `pfn`.
    fn unset_migratetype_isolate(&mut self, pfn: u64) {
        let Rules { max_order: max, pageblock_order: pb, .. } = self.rules();
        let mut isolated = None;
        if self.is_buddy(pfn) {
            let order = self.order_of(pfn);
            if order >= pb && order < max {
                let buddy = pfn ^ (1 << order);
                if self.page_is_buddy(pfn, buddy, order) && self.migratetype(buddy) != MigrateType::Isolate {
                    self.isolate_free_page(pfn, order);
                    isolated = Some(order);
                }
            }
        }
        match isolated {
            None if self.rules().split => self.move_freepages_block_isolate(pfn),
            None => {
                let old = self.migratetype(pfn);
                self.move_freepages_block(pfn, old, MigrateType::Movable);
                self.set_migratetype(pfn, MigrateType::Movable);
            }
            Some(order) => {
                self.set_migratetype(pfn, MigrateType::Movable);
                // __putback_isolated_page(page, order, MIGRATE_MOVABLE): "Return isolated page
                // to tail of freelist" (FPI_TO_TAIL).
                self.free_one(pfn, order, MigrateType::Movable, true);
            }
        }
    }

    /// `__isolate_free_page(page, order)` on an isolated pageblock (no watermark check there).
    fn isolate_free_page(&mut self, pfn: u64, order: u32) {
        let mt = self.migratetype(pfn);
        self.del(pfn, order, mt);
        let pb = self.rules().pageblock_order;
        if order + 1 >= pb {
            let step = self.rules().pageblock_nr_pages();
            let endpage = pfn + (1u64 << order) - 1;
            let mut p = pfn;
            while p < endpage {
                let pmt = self.migratetype(p);
                if pmt.is_mergeable() {
                    if self.rules().split {
                        self.move_freepages_block(p, pmt, MigrateType::Movable);
                    }
                    self.set_migratetype(p, MigrateType::Movable);
                }
                p += step;
            }
        }
    }

    /// `move_freepages_block_isolate(zone, page, MIGRATE_MOVABLE)` (6.10+).
    fn move_freepages_block_isolate(&mut self, start: u64) {
        let Rules { max_order: max, pageblock_order: pb, .. } = self.rules();
        if pb != max {
            // A larger buddy that `start` is a tail block of, or the starting block of.
            let large = self.find_large_buddy(start);
            if large != start || (self.is_buddy(start) && self.order_of(start) > pb) {
                let (order, mt) = (self.order_of(large), self.migratetype(large));
                self.del(large, order, mt);
                self.set_migratetype(start, MigrateType::Movable);
                self.split_large_buddy(large, order, false);
                return;
            }
        }
        let old = self.migratetype(start);
        self.move_freepages_block(start, old, MigrateType::Movable);
        self.set_migratetype(start, MigrateType::Movable);
    }

    /// `find_large_buddy(start_pfn)`: the free block that starts at or before `start` and
    /// covers it, else `start`.
    fn find_large_buddy(&self, start: u64) -> u64 {
        let max = self.rules().max_order;
        let mut order = 0;
        let mut pfn = start;
        while !self.is_buddy(pfn) {
            order += 1;
            if order > max {
                return start;
            }
            pfn &= !0u64 << order;
        }
        if pfn + (1u64 << self.order_of(pfn)) > start { pfn } else { start }
    }

    /// `__move_freepages_block()` / `move_freepages()`: every free block in the pageblock of
    /// `start` moves to the tail of `new`'s list.
    fn move_freepages_block(&mut self, start: u64, old: MigrateType, new: MigrateType) {
        let end = start + self.rules().pageblock_nr_pages();
        let mut pfn = start;
        while pfn < end {
            if !self.is_buddy(pfn) {
                pfn += 1;
                continue;
            }
            let order = self.order_of(pfn);
            self.move_to(pfn, order, old, new);
            pfn += 1 << order;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_point_at_their_heads_in_the_modelled_layout() {
        let cfg = KernelConfig::X86_64;
        let l = FreeLists::new(zone_struct_addr(&cfg, 1, 2));
        let zone = cfg.page_offset + 0x7f00_0000 + 0x4_0000 + 0x1000 + 2 * 0x1000;
        assert_eq!(l.head_addr(0, MigrateType::Unmovable), zone + 0x100);
        assert_eq!(l.head_addr(3, MigrateType::Isolate), zone + 0x100 + 3 * 104 + 5 * 16);
        for mt in SLOT_TYPES {
            let h = l.head_addr(10, mt);
            assert_eq!(l.head(10, mt), (h, h));
            assert_eq!(l.nr_free(10, mt), 0);
        }
        assert_eq!(l.nr_free(MAX_ORDERS as u32, MigrateType::Movable), 0);
    }

    #[test]
    fn the_buddy_type_follows_the_release() {
        let cfg = KernelConfig::X86_64;
        assert_eq!(buddy_page_type(&cfg), 0xf000_0000);
        assert_eq!(buddy_page_type(&cfg.with_version(crate::KernelVersion::V6_12)), 0xf000_0000);
        assert_eq!(buddy_page_type(&cfg.with_version(crate::KernelVersion::V6_1)), 0xffff_ff7f);
        assert!(Rules::of(&cfg).split && !Rules::of(&cfg.with_version(crate::KernelVersion::V6_1)).split);
    }
}
