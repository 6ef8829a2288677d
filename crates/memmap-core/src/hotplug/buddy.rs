//! The free-list steps of onlining, as `mm/page_alloc.c` and `mm/page_isolation.c` run them
//! (`__free_one_page()`, `split_large_buddy()`, `unset_migratetype_isolate()`,
//! `__isolate_free_page()`, `move_freepages_block_isolate()`), on the struct pages of a
//! [`Memmap`] and the list heads of a [`HotplugZone`]. Both versions of the algorithm are here:
//! 6.10 and later (`split`: [`Behaviour::free_splits_pageblocks`]) and before.
//!
//! Every struct page these steps read or write heads a free block of at least pageblock order
//! when the range starts pageblock-aligned (which [`online_pages`](super::online_pages)
//! requires): that is what lets the template paths keep only pageblock-aligned struct pages
//! cached. The one exception is `move_freepages_block()` on a pageblock whose first page is not
//! free (before 6.10, the second pageblock of every block), which scans the pageblock's struct
//! pages as the kernel does; the template paths have drained by then.
//!
//! [`Behaviour::free_splits_pageblocks`]: crate::Behaviour::free_splits_pageblocks

use super::HotplugZone;
use crate::freelist::{LIST_POISON1, LIST_POISON2, PAGE_TYPE_NONE, buddy_page_type};
use crate::memmap::Memmap;
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};

/// The zone's free lists over the memmap.
pub(super) struct Buddy<'m, 'a, P: StructPage> {
    pub(super) m: &'m mut Memmap<'a, P>,
    pub(super) z: &'m mut HotplugZone,
    /// 6.10+: `split_large_buddy()` and `__isolate_free_page()` in `unset_migratetype_isolate()`.
    pub(super) split: bool,
}

impl<P: StructPage> Buddy<'_, '_, P> {
    fn word(&self, pfn: u64, off: usize) -> u64 {
        self.m.read(pfn).u64_at(off)
    }

    fn set_word(&mut self, pfn: u64, off: usize, v: u64) {
        let mut p = self.m.read(pfn);
        p.set_u64_at(off, v);
        self.m.write(pfn, p);
    }

    fn set_u32(&mut self, pfn: u64, off: usize, v: u32) {
        let mut p = self.m.read(pfn);
        p.set_u32_at(off, v);
        self.m.write(pfn, p);
    }

    /// `page_type` of a free block's head in the modelled release.
    fn buddy_type(&self) -> u32 {
        buddy_page_type(self.m.config())
    }

    /// `PageBuddy(pfn_to_page(pfn))`; a pfn outside the memmap is no free block, and neither
    /// is a struct page whose order (in `private`) no free block can have: the caller's memmap
    /// may hold anything outside the ranges onlined into this zone.
    fn is_buddy(&self, pfn: u64) -> bool {
        self.m.contains(pfn)
            && self.m.read(pfn).page_type() == self.buddy_type()
            && self.word(pfn, offsets::PRIVATE) <= u64::from(self.m.config().max_page_order)
    }

    /// `buddy_order(page)`.
    fn order_of(&self, pfn: u64) -> u32 {
        self.word(pfn, offsets::PRIVATE) as u32
    }

    /// `get_pfnblock_migratetype()` (a pageblock never set reads as MOVABLE: only pageblocks
    /// of onlined memory hold free blocks).
    fn mt(&self, pfn: u64) -> MigrateType {
        self.m.pageblock_migratetype(pfn).unwrap_or(MigrateType::Movable)
    }

    fn set_mt(&mut self, pfn: u64, mt: MigrateType) {
        self.m.set_pageblock_migratetype(pfn, mt);
    }

    /// `page_is_buddy(page, buddy, order)`: the buddy heads a free block of exactly `order` in
    /// the same zone and node.
    fn page_is_buddy(&self, pfn: u64, buddy: u64, order: u32) -> bool {
        if !self.is_buddy(buddy) || self.order_of(buddy) != order {
            return false;
        }
        let l = self.m.layout();
        let (a, b) = (self.m.read(pfn).flags(), self.m.read(buddy).flags());
        l.zone(a) == l.zone(b) && l.node(a) == l.node(b)
    }

    /// The list node of `pfn` (`&page->buddy_list`).
    fn node(&self, pfn: u64) -> u64 {
        self.m.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64)
    }

    /// The struct page of list node `entry` (`&page->buddy_list`), if it is one of the memmap.
    fn pfn_of(&self, entry: u64) -> Option<u64> {
        self.m.vaddr_to_pfn(entry.wrapping_sub(offsets::LRU_NEXT as u64))
    }

    /// `entry->next` of a list node: the list head of `(order, mt)` or a struct page of the
    /// memmap (`None` for anything else).
    fn next_of(&self, order: u32, mt: MigrateType, entry: u64) -> Option<u64> {
        if entry == self.z.free_list_addr(order, mt) {
            Some(self.z.lists.head(order, mt).0)
        } else {
            self.pfn_of(entry).map(|pfn| self.word(pfn, offsets::LRU_NEXT))
        }
    }

    /// `entry->prev`, as [`Buddy::next_of`].
    fn prev_of(&self, order: u32, mt: MigrateType, entry: u64) -> Option<u64> {
        if entry == self.z.free_list_addr(order, mt) {
            Some(self.z.lists.head(order, mt).1)
        } else {
            self.pfn_of(entry).map(|pfn| self.word(pfn, offsets::LRU_PREV))
        }
    }

    /// Sets `entry->next` of a list node: a list head of `(order, mt)` or a struct page (the
    /// callers checked it is one of the two).
    fn set_next(&mut self, order: u32, mt: MigrateType, entry: u64, v: u64) {
        if entry == self.z.free_list_addr(order, mt) {
            self.z.lists.set_head_next(order, mt, v);
        } else if let Some(pfn) = self.pfn_of(entry) {
            self.set_word(pfn, offsets::LRU_NEXT, v);
        }
    }

    fn set_prev(&mut self, order: u32, mt: MigrateType, entry: u64, v: u64) {
        if entry == self.z.free_list_addr(order, mt) {
            self.z.lists.set_head_prev(order, mt, v);
        } else if let Some(pfn) = self.pfn_of(entry) {
            self.set_word(pfn, offsets::LRU_PREV, v);
        }
    }

    /// Whether the block at `pfn` is linked into the list of `(order, mt)`:
    /// `__list_del_entry_valid()` (`CONFIG_LIST_HARDENED`, on in the kernels modelled),
    /// `prev->next == entry && next->prev == entry`.
    fn linked(&self, pfn: u64, order: u32, mt: MigrateType) -> bool {
        let node = self.node(pfn);
        let (next, prev) = (self.word(pfn, offsets::LRU_NEXT), self.word(pfn, offsets::LRU_PREV));
        self.next_of(order, mt, prev) == Some(node) && self.prev_of(order, mt, next) == Some(node)
    }

    /// `__add_to_free_list()`: `list_add()` or `list_add_tail()`.
    fn add(&mut self, pfn: u64, order: u32, mt: MigrateType, tail: bool) {
        let head = self.z.free_list_addr(order, mt);
        let (hn, hp) = self.z.lists.head(order, mt);
        let (prev, next) = if tail { (hp, head) } else { (head, hn) };
        let new = self.node(pfn);
        // __list_add_valid(): `next->prev == prev && prev->next == next`. A list whose nodes
        // are not this memmap's (another memmap's, or overwritten since) fails it, and the
        // kernel then leaves the list alone.
        if self.prev_of(order, mt, next) == Some(prev) && self.next_of(order, mt, prev) == Some(next) {
            // __list_add(new, prev, next)
            self.set_prev(order, mt, next, new);
            self.set_word(pfn, offsets::LRU_NEXT, next);
            self.set_word(pfn, offsets::LRU_PREV, prev);
            self.set_next(order, mt, prev, new);
        }
        self.z.lists.add_free(order, mt, 1);
    }

    /// `__list_del_entry()` of a block on the list of `(order, mt)`: a block that is not
    /// linked there (`__list_del_entry_valid()` fails) is left as it is, as the kernel does.
    fn unlink(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        if self.linked(pfn, order, mt) {
            let (next, prev) = (self.word(pfn, offsets::LRU_NEXT), self.word(pfn, offsets::LRU_PREV));
            self.set_prev(order, mt, next, prev);
            self.set_next(order, mt, prev, next);
        }
        self.z.lists.sub_free(order, mt);
    }

    /// `__del_page_from_free_list()`: `list_del()` (the poison), `__ClearPageBuddy()`,
    /// `set_page_private(page, 0)`.
    fn del(&mut self, pfn: u64, order: u32, mt: MigrateType) {
        self.unlink(pfn, order, mt);
        self.set_word(pfn, offsets::LRU_NEXT, LIST_POISON1);
        self.set_word(pfn, offsets::LRU_PREV, LIST_POISON2);
        self.set_u32(pfn, offsets::PAGE_TYPE, PAGE_TYPE_NONE);
        self.set_word(pfn, offsets::PRIVATE, 0);
    }

    /// `move_to_free_list()`: `list_move_tail()` onto the list of `new`.
    fn move_to(&mut self, pfn: u64, order: u32, old: MigrateType, new: MigrateType) {
        self.unlink(pfn, order, old);
        self.add(pfn, order, new, true);
    }

    /// `set_buddy_order()`: the order in `private`, `__SetPageBuddy()`.
    fn set_buddy_order(&mut self, pfn: u64, order: u32) {
        self.set_word(pfn, offsets::PRIVATE, u64::from(order));
        let t = self.buddy_type();
        self.set_u32(pfn, offsets::PAGE_TYPE, t);
    }

    /// `buddy_merge_likely()`: the block that a merge would make has a free buddy.
    fn buddy_merge_likely(&self, pfn: u64, buddy_pfn: u64, order: u32) -> bool {
        if order + 1 >= self.m.config().max_page_order {
            return false;
        }
        let higher = buddy_pfn & pfn;
        self.page_is_buddy(higher, higher ^ (1 << (order + 1)), order + 1)
    }

    /// `__free_one_page(page, pfn, zone, order, migratetype, fpi)`.
    fn free_one(&mut self, mut pfn: u64, mut order: u32, mt: MigrateType, fpi_to_tail: bool) {
        let (max, pb) = (self.m.config().max_page_order, self.m.config().pageblock_order);
        let mut buddy_pfn = pfn ^ (1 << order);
        while order < max {
            buddy_pfn = pfn ^ (1 << order);
            if !self.page_is_buddy(pfn, buddy_pfn, order) {
                break;
            }
            let mut buddy_mt = mt;
            if order >= pb {
                // No merge between an isolated pageblock and a normal one.
                buddy_mt = self.mt(buddy_pfn);
                if mt != buddy_mt && (!mt.is_mergeable() || !buddy_mt.is_mergeable()) {
                    break;
                }
            }
            self.del(buddy_pfn, order, buddy_mt);
            if self.split && buddy_mt != mt {
                // Match buddy type (6.10+).
                self.set_mt(buddy_pfn, mt);
            }
            pfn &= buddy_pfn;
            order += 1;
        }
        self.set_buddy_order(pfn, order);
        let to_tail = fpi_to_tail || self.buddy_merge_likely(pfn, buddy_pfn, order);
        self.add(pfn, order, mt, to_tail);
    }

    /// `free_one_page()` (as `__free_pages_ok()` calls it): from 6.10 through
    /// `split_large_buddy()`, a block larger than a pageblock freed pageblock by pageblock,
    /// each with its own pageblock's migrate type.
    pub(super) fn free_one_page(&mut self, pfn: u64, order: u32, fpi_to_tail: bool) {
        if self.split {
            self.split_large_buddy(pfn, order, fpi_to_tail);
        } else {
            let mt = self.mt(pfn);
            self.free_one(pfn, order, mt, fpi_to_tail);
        }
    }

    /// `split_large_buddy(zone, page, pfn, order, fpi)`.
    fn split_large_buddy(&mut self, mut pfn: u64, order: u32, fpi_to_tail: bool) {
        let end = pfn + (1u64 << order);
        let piece = order.min(self.m.config().pageblock_order);
        loop {
            let mt = self.mt(pfn);
            self.free_one(pfn, piece, mt, fpi_to_tail);
            pfn += 1 << piece;
            if pfn >= end {
                break;
            }
        }
    }

    /// Takes the free block at `pfn` (of this zone) off its list; its order, or `None` when no
    /// free block starts there.
    pub(super) fn take(&mut self, pfn: u64) -> Option<u32> {
        if !self.is_buddy(pfn) {
            return None;
        }
        let l = self.m.layout();
        let f = self.m.read(pfn).flags();
        if l.zone(f) != self.z.zone || l.node(f) != self.z.nid {
            return None;
        }
        let order = self.order_of(pfn);
        let mt = self.mt(pfn);
        // A struct page that looks free but is on none of this zone's lists (written by the
        // caller, or onlined through another memmap) is not taken.
        if !self.linked(pfn, order, mt) {
            return None;
        }
        self.del(pfn, order, mt);
        Some(order)
    }

    /// `undo_isolate_page_range(start, end, MIGRATE_MOVABLE)`.
    pub(super) fn undo_isolate_page_range(&mut self, start: u64, end: u64) {
        let pb = self.m.config().pageblock_nr_pages();
        let mut pfn = start;
        while pfn < end {
            if self.mt(pfn) == MigrateType::Isolate {
                self.unset_migratetype_isolate(pfn);
            }
            pfn += pb;
        }
    }

    /// `unset_migratetype_isolate(page, MIGRATE_MOVABLE)` of the pageblock at `pfn`.
    fn unset_migratetype_isolate(&mut self, pfn: u64) {
        let (max, pb) = (self.m.config().max_page_order, self.m.config().pageblock_order);
        let mut isolated = None;
        if self.is_buddy(pfn) {
            let order = self.order_of(pfn);
            if order >= pb && order < max {
                let buddy = pfn ^ (1 << order);
                if self.page_is_buddy(pfn, buddy, order) && self.mt(buddy) != MigrateType::Isolate {
                    self.isolate_free_page(pfn, order);
                    isolated = Some(order);
                }
            }
        }
        match isolated {
            None if self.split => self.move_freepages_block_isolate(pfn),
            None => {
                let old = self.mt(pfn);
                self.move_freepages_block(pfn, old, MigrateType::Movable);
                self.set_mt(pfn, MigrateType::Movable);
            }
            Some(order) => {
                self.set_mt(pfn, MigrateType::Movable);
                // __putback_isolated_page(page, order, MIGRATE_MOVABLE): "Return isolated page
                // to tail of freelist" (FPI_TO_TAIL).
                self.free_one(pfn, order, MigrateType::Movable, true);
            }
        }
    }

    /// `__isolate_free_page(page, order)` on an isolated pageblock (no watermark check there).
    fn isolate_free_page(&mut self, pfn: u64, order: u32) {
        let mt = self.mt(pfn);
        self.del(pfn, order, mt);
        let pb = self.m.config().pageblock_order;
        if order + 1 >= pb {
            let step = self.m.config().pageblock_nr_pages();
            let endpage = pfn + (1u64 << order) - 1;
            let mut p = pfn;
            while p < endpage {
                let pmt = self.mt(p);
                if pmt.is_mergeable() {
                    if self.split {
                        self.move_freepages_block(p, pmt, MigrateType::Movable);
                    }
                    self.set_mt(p, MigrateType::Movable);
                }
                p += step;
            }
        }
    }

    /// `move_freepages_block_isolate(zone, page, MIGRATE_MOVABLE)` (6.10+).
    fn move_freepages_block_isolate(&mut self, start: u64) {
        let (max, pb) = (self.m.config().max_page_order, self.m.config().pageblock_order);
        if pb != max {
            let large = self.find_large_buddy(start);
            if large != start {
                // A tail block of a larger buddy.
                let order = self.order_of(large);
                let mt = self.mt(large);
                self.del(large, order, mt);
                self.set_mt(start, MigrateType::Movable);
                self.split_large_buddy(large, order, false);
                return;
            }
            if self.is_buddy(start) && self.order_of(start) > pb {
                // The starting block of a larger buddy.
                let order = self.order_of(start);
                let mt = self.mt(start);
                self.del(start, order, mt);
                self.set_mt(start, MigrateType::Movable);
                self.split_large_buddy(start, order, false);
                return;
            }
        }
        let old = self.mt(start);
        self.move_freepages_block(start, old, MigrateType::Movable);
        self.set_mt(start, MigrateType::Movable);
    }

    /// `find_large_buddy(start_pfn)`: the free block that starts at or before `start` and
    /// covers it, else `start`.
    fn find_large_buddy(&self, start: u64) -> u64 {
        let max = self.m.config().max_page_order;
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
        let end = start + self.m.config().pageblock_nr_pages();
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
