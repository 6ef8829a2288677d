//! On-demand struct page init, the 2013 RFC "Transparent on-demand struct page initialization
//! embedded in the buddy allocator".
//!
//! At boot only the first struct page of each 2 MiB block (the pageblock here) lying inside one
//! memory range is initialized and flagged `PG_uninitialized_2m`; blocks cut by a range edge are
//! initialized fully. The allocator's first touch of a block runs
//! `__expand_page_initialization`, once per block (the winner of its state byte's CAS).

use core::sync::atomic::Ordering;

use crate::Strategy;
use crate::hooks::InitHooks;
use crate::memmap::PageAccess;
use crate::memmap::engine::{Cached, PageblockFirsts, with_store};
use crate::model::page::{StructPage, offsets};
use crate::node::owned::Owned;
use crate::node::run::{PbMode, RunKind};
use crate::node::{Inner, Node};
use crate::sync::RunOnce;

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// `memmap_init_zone` of the RFC on `[s, e)` of `zone` (a memory range clamped to the zone).
    pub(in crate::node) fn ondemand_memmap_init_range(
        &self,
        own: &mut Owned<'_, P>,
        s: u64,
        e: u64,
        zone: u32,
    ) {
        let bs = self.cfg.pageblock_nr_pages();
        let mut pfn = s;
        while pfn < e {
            let b = self.block_start(pfn);
            if b == pfn && pfn + bs <= e {
                // Whole blocks: their first struct pages only, flagged.
                let nblocks = (e - pfn) / bs;
                self.ondemand_base_pages(own, pfn, nblocks, zone);
                pfn += nblocks * bs;
            } else {
                let stop = (b + bs).min(e);
                self.init_run(own, pfn, stop, zone, RunKind::plain(PbMode::MovableResched));
                pfn = stop;
            }
        }
    }

    /// The flagged first struct pages of `nblocks` consecutive whole blocks from `first`: the
    /// first through the slow path, the others refreshed copies of it, each with its pageblock
    /// work. Normal stores: the boot's free pass reads every one of them back right away.
    fn ondemand_base_pages(&self, own: &mut Owned<'_, P>, first: u64, nblocks: u64, zone: u32) {
        let kind = RunKind {
            pageblock: PbMode::MovableResched,
            extra_flags: 1 << self.uninit_bit,
            count: 1,
            final_state: false,
        };
        self.init_run(own, first, first + 1, zone, kind);
        let bs = self.cfg.pageblock_nr_pages();
        let template = if nblocks < 2 { Strategy::Slow } else { self.strategy.0 };
        // Template and streaming copies alike are stored normally (see above).
        with_store!(template, _S => {
            let mut t = own.read(first);
            let mut g = self.inner.lock();
            let Inner { memmap, hooks } = &mut *g;
            let no_patch = |_: u64, _: &mut P| {};
            own.copy_run::<Cached, _>(&self.refresh(), (first + bs, first + nblocks * bs), &mut t, &mut PageblockFirsts(no_patch));
            // set_pageblock_migratetype(MOVABLE) + cond_resched() of each of them, in one run:
            // they touch the pageblock bits only.
            memmap.pageblock_init_run(first + bs, nblocks - 1, hooks);
            drop(g);
            self.stats.pages_initialized.fetch_add(nblocks - 1, Ordering::Relaxed);
        }, slow => {
            for k in 1..nblocks {
                let b = first + k * bs;
                self.init_run(own, b, b + 1, zone, kind);
            }
        });
    }

    /// The memory-and-zone intersection `[s, e)` in which the block at `b` is whole (so
    /// [`Self::ondemand_memmap_init_range`] flagged it), if any.
    pub(crate) fn ondemand_flagging_range(&self, b: u64) -> Option<(u64, u64)> {
        let bs = self.cfg.pageblock_nr_pages();
        if b % bs != 0 || !self.span.contains(b) {
            return None;
        }
        self.layout.memory.iter().find_map(|m| {
            self.layout.zones.iter().find_map(|z| {
                let s = m.start.clamp(z.span.start, z.span.end);
                let e = m.end.clamp(z.span.start, z.span.end);
                (s <= b && b + bs <= e).then_some((s, e))
            })
        })
    }

    /// Expands every block overlapping `[start, start + nr)` that is not yet expanded
    /// (`ensure_pages_are_initialized`). The caller holds the lock of the zone of each block, or
    /// is the booting thread. Returns the number of expansions this call made.
    pub(crate) fn ensure_range_initialized(&self, start: u64, nr: u64) -> u64 {
        if nr == 0 {
            return 0;
        }
        let bs = self.cfg.pageblock_nr_pages();
        let mut b = self.block_start(start);
        let mut n = 0;
        while b < start + nr {
            if self.span.contains(b) && self.ensure_block(b) == RunOnce::Ran {
                n += 1;
            }
            b += bs;
        }
        n
    }

    /// `ensure_page_is_initialized` for the block starting at `base`: expands it once.
    pub(crate) fn ensure_block(&self, base: u64) -> RunOnce {
        let i = self.block_index(base);
        if self.states.is_done(i) {
            return RunOnce::AlreadyDone;
        }
        self.states.run_once(i, || self.expand_block(base))
    }

    /// `__expand_page_initialization(basepage)`: clears the flag, then initializes the rest of
    /// the block from the base page's zone, node and count.
    fn expand_block(&self, base: u64) {
        let end = (base + self.cfg.pageblock_nr_pages()).min(self.span.end);
        // SAFETY: the block is inside the node's span; this thread won the block's `run_once`
        // (its only caller), which no other thread passes until the block is published DONE:
        // the allocator and boot reach an unexpanded block's pages only through `run_once`, so
        // this thread owns them until then.
        let mut own = unsafe { Owned::new(self.pages, base, end) };
        let page = own.read(base);
        debug_assert!(page.test_flag(self.uninit_bit), "expanding block {base:#x} without the flag");
        let zone = self.flags_layout.zone(page.flags());
        debug_assert_eq!(self.flags_layout.node(page.flags()), self.layout.nid);
        let count = page.refcount();
        own.set_word(base, offsets::FLAGS, page.flags() & !(1 << self.uninit_bit));
        self.init_run(
            &mut own,
            base + 1,
            end,
            zone,
            RunKind { pageblock: PbMode::None, extra_flags: 0, count, final_state: false },
        );
        self.stats.expansions.fetch_add(1, Ordering::Relaxed);
    }

    /// Expands the blocks overlapping `[start, start + nr)` (taking each block's zone lock), as
    /// the allocator would on first use; returns the expansions made. A no-op outside
    /// [`InitMode::OnDemand`](crate::InitMode::OnDemand) and the node's zones.
    #[must_use = "the number of expansions tells whether anything was still uninitialized"]
    pub fn ensure_initialized(&self, start: u64, nr: u64) -> u64 {
        if self.opts.mode != crate::InitMode::OnDemand {
            return 0;
        }
        let bs = self.cfg.pageblock_nr_pages();
        let end = start.saturating_add(nr).min(self.span.end);
        let mut b = self.block_start(start.max(self.span.start));
        let mut n = 0;
        while b < end {
            if let Some(z) = self.layout.zone_of(b) {
                let _zone = self.zones[z.zone as usize].lock();
                n += self.ensure_range_initialized(b, 1);
            }
            b += bs;
        }
        n
    }

    /// Expands every block of the node: "full availability" of an on-demand node.
    #[must_use = "the number of expansions tells how many blocks were still uninitialized"]
    pub fn expand_all(&self) -> u64 {
        self.ensure_initialized(self.span.start, self.span.len())
    }
}
