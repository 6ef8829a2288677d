//! Allocation: `__rmqueue_smallest()`, `expand()` and `prep_new_page()` under the zone lock.

use super::{AllocError, PageBlock};
use crate::freelist::ZoneFreeLists;
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};
use crate::node::arena::Gfp;
use crate::node::buddy::LockedZone;
use crate::node::owned::Owned;
use crate::node::{InitMode, Node};

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
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
                let mut z = self.lock_zone(zone);
                if let Some(pfn) = self.rmqueue(&mut z, zone, order) {
                    z.area.free_pages -= 1 << order;
                    // SAFETY: `rmqueue` took `[pfn, pfn + 2^order)` off the free lists under the
                    // zone lock (held), inside the zone and so inside the storage: no free-list
                    // walker reaches it any more and no other thread owns it; this thread owns
                    // it until it hands it out as a `PageBlock` below.
                    let mut own = unsafe { Owned::new(self.pages, pfn, pfn + (1 << order)) };
                    self.prep_new_page(&mut own, zone, pfn, order)?;
                    drop(z);
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

    /// `take_page_off_buddy(page)` without its `SetPageHWPoisonTakenOff()`: the one page `pfn`
    /// taken out of the free block that holds it, the rest of the block going back to the
    /// free lists in halves (`break_down_buddy_pages()`), as memory-failure handling takes a
    /// page. Returns whether `pfn` was free. The page keeps what the free lists left in it and
    /// is owned by nobody: this reproduces a known allocation state, it hands no memory out.
    pub fn take_page_off_buddy(&self, pfn: u64) -> bool {
        let Some(zone) = self.layout.zone_of(pfn).map(|z| z.zone) else { return false };
        let mut z = self.lock_zone(zone);
        for order in 0..=self.cfg.max_page_order {
            let head = pfn & !((1u64 << order) - 1);
            let lists = self.free_lists(&mut z, zone);
            if lists.is_buddy(head) && lists.order_of(head) >= order {
                let high = lists.order_of(head);
                let mut lists = self.free_lists(&mut z, zone);
                lists.del(head, high, MigrateType::Movable);
                if self.opts.mode == InitMode::OnDemand
                    && high > 0
                    && !self.states.is_done(self.block_index(pfn))
                {
                    self.ensure_block(self.block_start(pfn));
                }
                self.free_lists(&mut z, zone).break_down(head, pfn, 0, high, MigrateType::Movable);
                z.area.free_pages -= 1;
                return true;
            }
            // An on-demand block's pages past its first are not initialized yet: free (their
            // block's head says so), never a held page.
            if self.is_initialized(head) && z.read(head).refcount() > 0 {
                return false;
            }
        }
        false
    }

    /// `__rmqueue_smallest()`: the first block of the smallest order that has one, off its list,
    /// and `expand()` of its upper halves back onto the lists. On-demand: the halves below the
    /// block size live inside the block of `pfn`, which is expanded first.
    pub(in crate::node) fn rmqueue(&self, z: &mut LockedZone<'_, P>, zone: u32, order: u32) -> Option<u64> {
        for o in order..=self.cfg.max_page_order {
            let mut lists = self.free_lists(z, zone);
            let Some(pfn) = lists.first_on_list(o, MigrateType::Movable) else { continue };
            lists.del(pfn, o, MigrateType::Movable);
            if self.opts.mode == InitMode::OnDemand
                && order < self.cfg.pageblock_order
                && o > order
                && !self.states.is_done(self.block_index(pfn))
            {
                self.ensure_block(self.block_start(pfn));
            }
            self.free_lists(z, zone).expand(pfn, order, o, MigrateType::Movable);
            return Some(pfn);
        }
        None
    }

    /// `prep_new_page()`: expand (on-demand), `check_new_pages()`, then `post_alloc_hook()`'s
    /// `set_page_private(page, 0)` and `set_page_refcounted(page)`.
    pub(in crate::node) fn prep_new_page(
        &self,
        own: &mut Owned<'_, P>,
        zone: u32,
        pfn: u64,
        order: u32,
    ) -> Result<(), AllocError> {
        let n = 1u64 << order;
        // The on-demand check: one load of the block's state in the common case (the RFC's
        // "flag check once every PTRS_PER_PMD"), the expansion path only when it is not done.
        if self.opts.mode == InitMode::OnDemand
            && !(n <= self.cfg.pageblock_nr_pages() && self.states.is_done(self.block_index(pfn)))
        {
            self.ensure_range_initialized(pfn, n);
        }
        let checked = if self.opts.check_pages { n } else { 1 };
        let mask = self.page_flags_check_at_prep();
        for p in pfn..pfn + checked {
            // Initialized (expanded above) and owned.
            let page = own.read(p);
            // The first page's list words and page_type were just reset by
            // __del_page_from_free_list; the checks below see what the kernel's see.
            self.page_state(&page, zone, mask).map_err(|reason| AllocError::BadPage { pfn: p, reason })?;
        }
        own.set_word(pfn, offsets::PRIVATE, 0);
        self.set_count(own, pfn, 1);
        Ok(())
    }
}
