//! Freeing: `__free_pages_core()` (boot and deferred init) and `__free_pages()` of an allocation.

use core::sync::atomic::Ordering;

use super::{BadPageReason, FreeError, PageBlock};
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::model::page::{StructPage, offsets};
use crate::node::buddy::LockedZone;
use crate::node::owned::Owned;
use crate::node::{InitMode, Node};

/// How many `__free_pages_core` chunks ahead the boot free pass prefetches: far enough to
/// hide a miss, near enough that the lines are not evicted before use
/// (docs/performance/fill-notes.md).
pub(crate) const FREE_PREFETCH_AHEAD: u64 = 8;

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// `__free_pages_core(page, order, MEMINIT_EARLY)`: every page gets `PG_reserved` cleared
    /// and a zero count (on-demand: only a not yet expanded block's first page), then the block
    /// goes to the buddy allocator at the tail.
    pub(in crate::node) fn free_pages_core(&self, own: &mut Owned<'_, P>, zone: u32, pfn: u64, order: u32) {
        self.free_pages_core_run(
            own,
            zone,
            CoreRun { pfn, order, count: 1, prefetch_end: pfn, ready: false },
        );
    }

    /// `__free_pages_core()` on `count` consecutive blocks of `order` from `pfn`, in ascending
    /// order, under one hold of the zone lock (the same bytes as a hold per block), prefetching
    /// [`FREE_PREFETCH_AHEAD`] blocks ahead below `prefetch_end`. `own` owns the blocks.
    pub(in crate::node) fn free_pages_core_run(&self, own: &mut Owned<'_, P>, zone: u32, run: CoreRun) {
        let CoreRun { pfn, order, count, prefetch_end, ready } = run;
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
        let mut z = self.lock_zone(zone);
        for c in 0..count {
            let chunk = pfn + c * n;
            let ahead = chunk + (FREE_PREFETCH_AHEAD << order);
            let mut b = ahead;
            while b < (ahead + n).min(prefetch_end) {
                stream_hal::prefetch(self.pages.addr(b));
                b += bs;
            }
            let end = chunk + n;
            if ready {
                self.free_one_page(&mut z, zone, chunk, order, true);
                continue;
            }
            if on_demand && order >= self.cfg.pageblock_order {
                // Whole pageblocks (the bulk of the boot free pass): an unexpanded block's
                // base page, or every page of an expanded one.
                for base in (chunk..end).step_by(bs as usize) {
                    let pages = if self.states.is_done(self.block_index(base)) { bs } else { 1 };
                    for q in base..base + pages {
                        self.clear_reserved_zero_count(own, q);
                    }
                }
                self.free_one_page(&mut z, zone, chunk, order, true);
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
                    self.clear_reserved_zero_count(own, q);
                }
                p = block_end;
            }
            self.free_one_page(&mut z, zone, chunk, order, true);
        }
        self.stats.free_core_calls[order as usize].fetch_add(count, Ordering::Relaxed);
        z.area.managed_pages += n * count;
    }

    /// `__ClearPageReserved(p); set_page_count(p, 0)` on a page `own` owns.
    #[inline(always)]
    pub(in crate::node) fn clear_reserved_zero_count(&self, own: &mut Owned<'_, P>, q: u64) {
        let f = own.word(q, offsets::FLAGS);
        own.set_word(q, offsets::FLAGS, f & !(1 << self.pg.reserved));
        self.set_count(own, q, 0);
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
        let span = z;
        let mut z = self.lock_zone(zone);
        let checked = if self.opts.check_pages { n } else { 1 };
        if let Some(p) = (pfn..pfn + checked).find(|&p| !self.is_initialized(p)) {
            return Err(FreeError::Uninitialized { pfn: p });
        }
        if self.is_free_buddy_page(&z, &span, pfn) {
            return Err(FreeError::DoubleFree { pfn });
        }
        // Initialized pages of this zone, read under its lock: free pages are owned by it,
        // and an allocation's pages are written by nobody but their holder, who is freeing
        // them now.
        let head = z.read(pfn);
        if head.refcount() == 0
            || (head.u64_at(crate::offsets::LRU_NEXT), head.u64_at(crate::offsets::LRU_PREV))
                != self.cfg.list_poison()
        {
            return Err(FreeError::NotAllocated { pfn });
        }
        if head.refcount() != 1 {
            return Err(FreeError::BadPage { pfn, reason: BadPageReason::Refcount(head.refcount()) });
        }
        // free_page_is_bad(), as if put_page_testzero() had dropped the count to 0.
        let mask = self.page_flags_check_at_free();
        let mut as_freed = head;
        as_freed.set_u32_at(offsets::REFCOUNT, 0);
        self.page_state(&as_freed, zone, mask).map_err(|reason| FreeError::BadPage { pfn, reason })?;
        for p in pfn + 1..pfn + checked {
            let page = z.read(p);
            self.page_state(&page, zone, mask).map_err(|reason| FreeError::BadPage { pfn: p, reason })?;
        }
        // SAFETY: the block is inside the zone (checked) and an allocation (refcount 1 and the
        // list poison `__del_page_from_free_list` left, checked above) that its holder frees
        // now: `free_pages` consumed its `PageBlock`, and `free_pages_raw`'s caller vouches that
        // none is alive; so this thread owns its struct pages until it links them below.
        let mut own = unsafe { Owned::new(self.pages, pfn, pfn + n) };
        // put_page_testzero(), then free_pages_prepare(): flags &= ~PAGE_FLAGS_CHECK_AT_PREP.
        self.set_count(&mut own, pfn, 0);
        let f = own.word(pfn, offsets::FLAGS);
        own.set_word(pfn, offsets::FLAGS, f & !self.page_flags_check_at_prep());
        if self.opts.policy.want_init_on_free() {
            if let Some(a) = &self.arena {
                // SAFETY: the block is still allocated (not linked yet): the caller owns it.
                unsafe { a.clear(pfn, n, self.opts.policy.clear) };
            }
        }
        self.free_one_page(&mut z, zone, pfn, order, false);
        Ok(())
    }

    /// `is_free_buddy_page(page)`: some naturally aligned block around `pfn` is a free buddy
    /// block covering it.
    fn is_free_buddy_page(
        &self,
        z: &LockedZone<'_, P>,
        span: &crate::node::layout::ZoneSpan,
        pfn: u64,
    ) -> bool {
        (0..=self.cfg.max_page_order).any(|o| {
            let head = pfn & !((1u64 << o) - 1);
            span.span.contains(head) && self.is_initialized(head) && {
                let p = z.read(head);
                p.page_type() == self.rules.buddy_type && p.u64_at(crate::offsets::PRIVATE) >= u64::from(o)
            }
        })
    }
}

/// `count` consecutive blocks of `order` from `pfn` for [`Node::free_pages_core_run`], which
/// prefetches below `prefetch_end`. `ready`: every page already has `PG_reserved` clear and a
/// zero count (the fused boot initialized them so), and only the buddy work is left.
#[derive(Debug, Clone, Copy)]
pub(in crate::node) struct CoreRun {
    pub pfn: u64,
    pub order: u32,
    pub count: u64,
    pub prefetch_end: u64,
    pub ready: bool,
}
