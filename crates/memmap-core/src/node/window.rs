//! The fused boot's windows written once, in their final state: for a run of whole free
//! `MAX_PAGE_ORDER` blocks of one zone and memory range without reserved pages, `memmap_init`,
//! `reserve_bootmem_regions` and the free pass collapse into one pass.
//!
//! The kernel writes such a struct page up to three times, but every final value is known up
//! front (a head's list neighbours too: the run's blocks go to the list's tail in ascending
//! order), and nothing reads them back during the pass, so eager runs may stream.

use core::sync::atomic::Ordering;

use crate::Strategy;
use crate::freelist::ZoneFreeLists;
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::memmap::engine::{PageblockFirsts, PageblockHeads, Stores, with_store};
use crate::model::flags::MigrateType;
use crate::model::page::{StructPage, offsets};
use crate::node::owned::Owned;
use crate::node::run::{PbMode, RunKind};
use crate::node::{InitMode, Inner, Node};

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// The zone of `[lo, hi)` if the fused boot can write it in one final-state pass
    /// ([`Node::boot_window`]): whole `MAX_PAGE_ORDER` blocks inside one zone and one memory
    /// range, without reserved pages, with template stores and no init_on_free (deferred: the
    /// caller keeps the windows below `first_deferred_pfn`).
    pub(in crate::node) fn simple_window(&self, lo: u64, hi: u64) -> Option<u32> {
        let block = self.cfg.max_order_nr_pages();
        if self.run == Strategy::Slow
            || self.opts.policy.want_init_on_free()
            || lo >= hi
            || lo % block != 0
            || hi % block != 0
            || !self.layout.memory.iter().any(|m| m.start <= lo && hi <= m.end)
            || self.layout.reserved.iter().any(|r| r.range.start < hi && lo < r.range.end)
        {
            return None;
        }
        self.layout.zones.iter().find(|z| z.span.start <= lo && hi <= z.span.end).map(|z| z.zone)
    }

    /// The boot of `[lo, hi)` of `zone`, consecutive windows that [`Node::simple_window`]
    /// accepted, in one pass (see the [module documentation](self)). Returns the pages freed.
    pub(in crate::node) fn boot_window(&self, own: &mut Owned<'_, P>, zone: u32, lo: u64, hi: u64) -> u64 {
        self.final_pass(own, zone, (lo, hi), Pass::Boot)
    }

    /// `deferred_init_maxorder` on the whole free `MAX_PAGE_ORDER` blocks `[lo, hi)` of `zone`
    /// (`deferred_init_pages`, then `deferred_free_pages` of each block), in one pass: the
    /// pageblocks MOVABLE, the blocks published as initialized, then linked at the tail of the
    /// free list in ascending order under one hold of the zone lock.
    pub(in crate::node) fn deferred_run(&self, own: &mut Owned<'_, P>, zone: u32, lo: u64, hi: u64) -> u64 {
        self.final_pass(own, zone, (lo, hi), Pass::Deferred)
    }

    fn final_pass(&self, own: &mut Owned<'_, P>, zone: u32, (lo, hi): (u64, u64), pass: Pass) -> u64 {
        let max = self.cfg.max_page_order;
        let (n, bs) = (1u64 << max, self.cfg.pageblock_nr_pages());
        debug_assert!(lo % n == 0 && hi % n == 0 && lo < hi);
        let every_page = self.opts.mode != InitMode::OnDemand;
        // The first page through the slow path is the template of the others: at boot
        // `memmap_init_range` (migrate type and `cond_resched()` at the pageblock), in deferred
        // init `deferred_init_pages` (nothing at pageblocks).
        let kind = match pass {
            Pass::Boot => RunKind {
                pageblock: PbMode::MovableResched,
                extra_flags: if every_page { 0 } else { 1 << self.uninit_bit },
                count: 1,
                final_state: false,
            },
            Pass::Deferred => RunKind::plain(PbMode::None),
        };
        self.init_run(own, lo, lo + 1, zone, kind);
        let mut t = own.read(lo);
        // __free_pages_core(): __ClearPageReserved(), set_page_count(0), on every page.
        t.set_u64_at(crate::offsets::FLAGS, t.flags() & !(1 << self.pg.reserved));
        t.set_u32_at(offsets::REFCOUNT, 0);
        let list_of = |pfn: u64| self.pages.vaddr(pfn).wrapping_add(offsets::LRU_NEXT as u64);
        // __add_to_free_list(tail) + set_buddy_order() of a block head. The run's blocks go to
        // the tail in ascending order, so their links to each other are known now; the two
        // ends (the list's old tail before the first, the list head after the last) are
        // written under the zone lock below.
        let block_head = |b: u64, rec: &mut P| {
            rec.set_u64_at(offsets::LRU_NEXT, if b + n < hi { list_of(b + n) } else { 0 });
            rec.set_u64_at(offsets::LRU_PREV, if b > lo { list_of(b - n) } else { 0 });
            rec.set_u64_at(offsets::PRIVATE, u64::from(max));
            rec.set_u32_at(offsets::PAGE_TYPE, self.rules.buddy_type);
        };
        let refresh = self.refresh();
        if every_page {
            // Nothing is read back, so the node's own strategy (streaming from the threshold
            // up) rather than the fused boot's.
            with_store!(Stores::of(self.strategy.0), S => {
                own.copy_run::<S, _>(&refresh, (lo, hi), &mut t, &mut PageblockHeads { block: n, head: block_head })
            });
        } else {
            // The first page of every pageblock.
            let base = |b: u64, rec: &mut P| {
                if b % n == 0 {
                    block_head(b, rec);
                }
            };
            with_store!(Stores::of(self.run), S => {
                own.copy_run::<S, _>(&refresh, (lo, hi), &mut t, &mut PageblockFirsts(base))
            });
        }
        {
            let mut g = self.inner.lock();
            let Inner { memmap, hooks } = &mut *g;
            match pass {
                // set_pageblock_migratetype(MOVABLE) + cond_resched() of every pageblock but
                // the first (init_run did that one), in one run.
                Pass::Boot => memmap.pageblock_init_run(lo + bs, (hi - lo) / bs - 1, hooks),
                // deferred_free_pages(): set_pageblock_migratetype(MOVABLE) of every pageblock.
                Pass::Deferred => memmap.pageblock_movable_run(lo, (hi - lo) / bs),
            }
        }
        if pass == Pass::Deferred {
            // Publish the blocks (release): an allocator that finds them free sees their
            // struct pages initialized.
            for b in (lo..hi).step_by(bs as usize) {
                self.states.mark_done(self.block_index(b));
            }
        }
        let mut z = self.lock_zone(zone);
        let head = z.area.head_addr(max);
        let old_tail = z.area.head(max).1;
        // The run's ends, and the list around it.
        z.set_word(lo, offsets::LRU_PREV, old_tail);
        z.set_word(hi - n, offsets::LRU_NEXT, head);
        let mut lists = self.free_lists(&mut z, zone);
        lists.set_next(max, MigrateType::Movable, old_tail, list_of(lo));
        lists.set_prev(max, MigrateType::Movable, head, list_of(hi - n));
        let pages = hi - lo;
        z.area.lists.add_free(max, MigrateType::Movable, pages / n);
        z.area.managed_pages += pages;
        z.area.free_pages += pages;
        drop(z);
        let written = if every_page { pages } else { pages / bs };
        self.stats.pages_initialized.fetch_add(written - 1, Ordering::Relaxed);
        self.stats.free_core_calls[max as usize].fetch_add(pages / n, Ordering::Relaxed);
        self.stats.single_pass_pages.fetch_add(pages, Ordering::Relaxed);
        pages
    }
}

/// Which path a final-state pass stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The fused boot: `memmap_init`, `reserve_bootmem_regions` and the free pass.
    Boot,
    /// Deferred init: `deferred_init_pages` and `deferred_free_pages`.
    Deferred,
}
