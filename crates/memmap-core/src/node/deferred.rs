//! Deferred struct page init (`CONFIG_DEFERRED_STRUCT_PAGE_INIT`): [`DeferCounter`]
//! (`defer_init()`) picks `first_deferred_pfn` at boot; [`Node::deferred_init_memmap`] is the
//! `pgdatinit` kthread (padata jobs whose chunks run `deferred_init_maxorder`);
//! [`Node::deferred_grow_zone`] serves allocations that arrive first. Each block is published
//! as initialized ([`BlockStates`](crate::BlockStates)) before its pages are freed.

use core::sync::atomic::Ordering;

use crate::hooks::InitHooks;
use crate::model::flags::MigrateType;
use crate::model::page::StructPage;
use crate::node::Node;
use crate::node::layout::ZoneSpan;
use crate::node::owned::Owned;
use crate::node::run::{PbMode, RunKind};
use stream_par::PadataJob;

/// The static state of `defer_init()` (`prev_end_pfn`, `nr_initialised`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeferCounter {
    prev_end_pfn: u64,
    nr_initialised: u64,
    pages_per_section: u64,
}

impl DeferCounter {
    /// Fresh state for sections of `pages_per_section` PFNs.
    #[must_use]
    pub(crate) const fn new(pages_per_section: u64) -> Self {
        DeferCounter { prev_end_pfn: 0, nr_initialised: 0, pages_per_section }
    }

    /// `nr_initialised`.
    #[must_use]
    #[cfg(test)]
    pub(crate) const fn nr_initialised(&self) -> u64 {
        self.nr_initialised
    }

    /// `defer_init(nid, pfn, end_pfn)` for one PFN, `end_pfn` being the zone's end and
    /// `pgdat_end_pfn` the node's; updates `first_deferred_pfn` when it decides to defer.
    ///
    /// ```text
    /// if (end_pfn < pgdat_end_pfn(NODE_DATA(nid))) return false;   // only the highest zone
    /// if (NODE_DATA(nid)->first_deferred_pfn != ULONG_MAX) return true;
    /// if (prev_end_pfn != end_pfn) { prev_end_pfn = end_pfn; nr_initialised = 0; }
    /// nr_initialised++;
    /// if (nr_initialised > PAGES_PER_SECTION && (pfn & (PAGES_PER_SECTION - 1)) == 0) {
    ///     NODE_DATA(nid)->first_deferred_pfn = pfn; return true; }
    /// return false;
    /// ```
    #[cfg(test)]
    pub(crate) fn defer_init(
        &mut self,
        pfn: u64,
        end_pfn: u64,
        pgdat_end_pfn: u64,
        first_deferred_pfn: &mut u64,
    ) -> bool {
        if end_pfn < pgdat_end_pfn {
            return false;
        }
        if *first_deferred_pfn != u64::MAX {
            return true;
        }
        if self.prev_end_pfn != end_pfn {
            self.prev_end_pfn = end_pfn;
            self.nr_initialised = 0;
        }
        self.nr_initialised += 1;
        if self.nr_initialised > self.pages_per_section && pfn & (self.pages_per_section - 1) == 0 {
            *first_deferred_pfn = pfn;
            return true;
        }
        false
    }

    /// [`DeferCounter::defer_init`] applied to every PFN of `[from, to)` in order, stopping at
    /// the first that defers: returns that PFN (`None` if none does). Same state afterwards as
    /// the per-PFN loop, in O(1).
    pub(crate) fn defer_point(
        &mut self,
        from: u64,
        to: u64,
        end_pfn: u64,
        pgdat_end_pfn: u64,
        first_deferred_pfn: &mut u64,
    ) -> Option<u64> {
        if from >= to || end_pfn < pgdat_end_pfn {
            return None;
        }
        if *first_deferred_pfn != u64::MAX {
            return Some(from);
        }
        if self.prev_end_pfn != end_pfn {
            self.prev_end_pfn = end_pfn;
            self.nr_initialised = 0;
        }
        // The deferring pfn p is the first section-aligned one at which the counter (which
        // counts p itself) exceeds PAGES_PER_SECTION.
        let need = (self.pages_per_section + 1).saturating_sub(self.nr_initialised);
        let min_p = from + need.saturating_sub(1);
        let p = min_p.next_multiple_of(self.pages_per_section);
        if p < to {
            self.nr_initialised += p - from + 1;
            *first_deferred_pfn = p;
            Some(p)
        } else {
            self.nr_initialised += to - from;
            None
        }
    }
}

/// What [`Node::deferred_init_memmap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeferredReport {
    /// `first_deferred_pfn` it started from (`None`: nothing was deferred any more).
    pub first_deferred_pfn: Option<u64>,
    /// padata jobs run (one per free range, extended to the next section boundary).
    pub jobs: u64,
    /// Struct pages it initialized.
    pub pages_initialized: u64,
}

impl<P: StructPage, H: InitHooks + Send> Node<'_, P, H> {
    /// `deferred_init_memmap(pgdat)` on up to `threads` threads (the calling thread is one).
    /// When it returns, every deferred page is initialized and freed, and the `deferred_pages`
    /// static key is off (`page_alloc_init_late`).
    #[cfg(feature = "std")]
    pub fn deferred_init_memmap(&self, threads: stream_par::Threads) -> DeferredReport {
        self.deferred_init_memmap_with(|job, f| {
            let max_threads = threads.count(job.size.saturating_mul(P::SIZE as u64));
            let job = PadataJob { max_threads, ..*job };
            // Every job lies in the node's span, below the configuration's `max_pfn`, so it
            // cannot end past u64::MAX (the only error).
            let ran = stream_par::padata_do_multithreaded(&job, f);
            debug_assert!(ran.is_ok(), "a deferred-init job inside the node: {ran:?}");
        })
    }

    /// `deferred_init_memmap(pgdat)` on the calling thread only (`max_threads` = 1: each job is
    /// one call), usable without `std`.
    pub fn deferred_init_memmap_serial(&self) -> DeferredReport {
        self.deferred_init_memmap_with(|job, f| {
            if job.size != 0 {
                f(job.start, job.start + job.size);
            }
        })
    }

    /// `deferred_init_memmap(pgdat)` with a caller-supplied padata runner: `run(job, thread_fn)`
    /// must call `thread_fn` on chunks that cover `[job.start, job.start + job.size)` exactly
    /// once (any threads, any order) and return when they are done.
    pub(crate) fn deferred_init_memmap_with<R>(&self, mut run: R) -> DeferredReport
    where
        R: FnMut(&PadataJob, &(dyn Fn(u64, u64) + Sync)),
    {
        let before = self.stats.pages_initialized.load(Ordering::Relaxed);
        let first = {
            let mut g = self.resize_lock.lock();
            core::mem::replace(&mut *g, u64::MAX)
        };
        let mut jobs = 0;
        if first != u64::MAX && self.cfg.behaviour().deferred_job_per_zone {
            // One job over the zone's deferred part; the chunks skip what is not free memory.
            let zone = self.layout.highest_zone();
            let pps = self.cfg.pages_per_section();
            let end = zone.span.end.next_multiple_of(pps);
            let job =
                PadataJob { start: first, size: end - first, align: pps, min_chunk: pps, max_threads: 1 };
            run(&job, &|s, e| self.deferred_init_memmap_chunk(s, e, &zone));
            jobs = 1;
        } else if first != u64::MAX {
            let zone = self.layout.highest_zone();
            let pps = self.cfg.pages_per_section();
            let mut first_init_pfn = first;
            while let Some(r) = self.layout.next_free_range(&zone, first_init_pfn) {
                first_init_pfn = r.end.next_multiple_of(pps);
                let job = PadataJob {
                    start: r.start,
                    size: first_init_pfn - r.start,
                    align: pps,
                    min_chunk: pps,
                    max_threads: 1,
                };
                run(&job, &|s, e| self.deferred_init_memmap_chunk(s, e, &zone));
                jobs += 1;
            }
        }
        // page_alloc_init_late(): all kthreads are done, disable the deferred_pages key.
        // Release: pairs with the Acquire load in `Node::deferred_pending`.
        self.deferred_pages.store(false, Ordering::Release);
        DeferredReport {
            first_deferred_pfn: (first != u64::MAX).then_some(first),
            jobs,
            pages_initialized: self.stats.pages_initialized.load(Ordering::Relaxed) - before,
        }
    }

    /// `deferred_init_memmap_chunk(start_pfn, end_pfn, zone)`.
    fn deferred_init_memmap_chunk(&self, start: u64, end: u64, zone: &ZoneSpan) {
        let Some(first) = self.layout.next_free_range(zone, start) else { return };
        // SAFETY: `[start, end)` is a chunk of a padata job over the deferred range, which
        // `deferred_init_memmap_with` took out of `first_deferred_pfn` under the resize lock:
        // padata hands the chunk to this call only, and no allocator reaches deferred pages
        // before they are freed below. Chunks end at section boundaries, inside the node, and
        // `deferred_init_maxorder` stays below the chunk's end (a max-order block is inside a
        // section). The zone's end rounds up to a section, hence the clamp to the node.
        let mut own = unsafe { Owned::new(self.pages, start, end.min(self.span.end)) };
        let mut spfn = first.start;
        let n = self.cfg.max_order_nr_pages();
        while spfn < end {
            // Whole free MAX_PAGE_ORDER blocks (the bulk of a chunk) in one final-state pass;
            // `cond_resched()` after each, as after each `deferred_init_maxorder`.
            if let Some(run_end) = self.final_run_end(zone, spfn, end) {
                self.deferred_run(&mut own, zone.zone, spfn, run_end);
                for b in (spfn..run_end).step_by(n as usize) {
                    self.inner.lock().hooks.cond_resched(b + n);
                }
                spfn = match self.layout.next_free_range(zone, run_end) {
                    Some(r) if r.start < end => r.start,
                    _ => end,
                };
                continue;
            }
            let (_, next) = self.deferred_init_maxorder(&mut own, zone, spfn);
            spfn = next;
            // cond_resched()
            self.inner.lock().hooks.cond_resched(spfn.min(end));
        }
    }

    /// The end of the run of whole free `MAX_PAGE_ORDER` blocks of `zone` from `spfn`, below
    /// `end`, that [`Node::deferred_run`] can write in one pass (`None`: no such run, or the
    /// pass is off: `BootOrder::Kernel`, the slow strategy, or init_on_free).
    fn final_run_end(&self, zone: &ZoneSpan, spfn: u64, end: u64) -> Option<u64> {
        let n = self.cfg.max_order_nr_pages();
        if spfn % n != 0
            || self.opts.order == crate::BootOrder::Kernel
            || self.strategy.0 == crate::Strategy::Slow
            || self.opts.policy.want_init_on_free()
        {
            return None;
        }
        let r = self.layout.next_free_range(zone, spfn).filter(|r| r.start == spfn)?;
        let run_end = r.end.min(end) / n * n;
        (run_end > spfn).then_some(run_end)
    }

    /// `deferred_init_maxorder()`: initialize the free pages of `[spfn, mo_pfn)`, publish their
    /// blocks, then free them. Returns the pages initialized and the next `spfn` (`u64::MAX`
    /// when the zone has no free range left).
    fn deferred_init_maxorder(&self, own: &mut Owned<'_, P>, zone: &ZoneSpan, spfn: u64) -> (u64, u64) {
        let mo_pfn = (spfn + 1).next_multiple_of(self.cfg.max_order_nr_pages());
        let mut nr = 0;
        let mut next = u64::MAX;
        let mut from = spfn;
        while let Some(r) = self.layout.next_free_range(zone, from) {
            if mo_pfn <= r.start {
                next = r.start;
                break;
            }
            let t = mo_pfn.min(r.end);
            nr += self.init_run(own, r.start, t, zone.zone, RunKind::plain(PbMode::None));
            if mo_pfn < r.end {
                next = mo_pfn;
                break;
            }
            from = r.end;
        }
        // Publish the blocks: everything in them is now initialized (below spfn in the same
        // block there is no free page left to initialize).
        let bs = self.cfg.pageblock_nr_pages();
        let mut b = self.block_start(spfn);
        while b < mo_pfn.min(self.span.end) {
            self.states.mark_done(self.block_index(b));
            b += bs;
        }
        let mut from = spfn;
        while let Some(r) = self.layout.next_free_range(zone, from) {
            if mo_pfn <= r.start {
                break;
            }
            let t = mo_pfn.min(r.end);
            self.deferred_free_pages(own, zone.zone, r.start, t - r.start);
            if mo_pfn <= r.end {
                break;
            }
            from = r.end;
        }
        (nr, next)
    }

    /// `deferred_free_pages(pfn, nr_pages)`: in `MAX_PAGE_ORDER` chunks, or before 6.5 in
    /// pageblock chunks (`deferred_free_range()` per pageblock,
    /// [`Behaviour::deferred_free_max_order`](crate::Behaviour::deferred_free_max_order)).
    fn deferred_free_pages(&self, own: &mut Owned<'_, P>, zone: u32, pfn: u64, nr: u64) {
        let pb = self.cfg.pageblock_nr_pages();
        if self.cfg.behaviour().deferred_free_max_order {
            self.deferred_free_chunk(own, zone, pfn, nr, self.cfg.max_page_order);
            return;
        }
        let end = pfn + nr;
        let mut p = pfn;
        while p < end {
            let t = (p + 1).next_multiple_of(pb).min(end);
            self.deferred_free_chunk(own, zone, p, t - p, self.cfg.pageblock_order);
            p = t;
        }
    }

    /// Frees `[pfn, pfn + nr)`, inside one aligned block of `order`: the whole block at once
    /// when it is one, else page by page; the pageblocks it starts become MOVABLE.
    fn deferred_free_chunk(&self, own: &mut Owned<'_, P>, zone: u32, pfn: u64, nr: u64, order: u32) {
        if nr == 0 {
            return;
        }
        let max_nr = 1u64 << order;
        let pb = self.cfg.pageblock_nr_pages();
        if nr == max_nr && pfn % max_nr == 0 {
            {
                let mut g = self.inner.lock();
                for p in (pfn..pfn + nr).step_by(pb as usize) {
                    g.memmap.set_pageblock_migratetype(p, MigrateType::Movable);
                }
            }
            self.free_pages_core(own, zone, pfn, order);
            return;
        }
        for p in pfn..pfn + nr {
            if p % pb == 0 {
                self.inner.lock().memmap.set_pageblock_migratetype(p, MigrateType::Movable);
            }
            self.free_pages_core(own, zone, p, 0);
        }
    }

    /// `deferred_grow_zone(zone, order)`: called by the allocator when `zone` cannot serve an
    /// allocation of `order` while deferred init is pending. Returns whether the caller should
    /// retry (pages were added, or someone else grew the zone meanwhile).
    pub fn deferred_grow_zone(&self, zone: u32, order: u32) -> bool {
        let Some(z) = self.layout.zone(zone).copied() else { return false };
        // Only the last zone may have deferred pages.
        if z.span.end != self.span.end {
            return false;
        }
        let pps = self.cfg.pages_per_section();
        let nr_pages_needed = (1u64 << order.min(63)).next_multiple_of(pps);
        let first_deferred_pfn = *self.resize_lock.lock();
        let mut g = self.resize_lock.lock();
        // If someone grew this zone while we were waiting for the lock, there may be enough
        // pages already.
        if first_deferred_pfn != *g {
            return true;
        }
        let Some(r) = self.layout.next_free_range(&z, first_deferred_pfn) else {
            *g = u64::MAX;
            // Retry only once.
            return first_deferred_pfn != u64::MAX;
        };
        // SAFETY: the resize lock (held by `g` until the new `first_deferred_pfn` is stored)
        // owns the deferred pages from `first_deferred_pfn` to the node's end: no allocator
        // reaches them before they are freed, and deferred init takes them only under the
        // same lock.
        let mut own = unsafe { Owned::new(self.pages, first_deferred_pfn, self.span.end) };
        let mut spfn = r.start;
        let mut nr_pages = 0;
        loop {
            let section_start = spfn;
            let (n, next) = self.deferred_init_maxorder(&mut own, &z, spfn);
            nr_pages += n;
            spfn = next;
            if spfn == u64::MAX {
                break;
            }
            // We should only stop along section boundaries.
            if (section_start ^ spfn) < pps {
                continue;
            }
            // If our quota has been met we can stop here.
            if nr_pages >= nr_pages_needed {
                break;
            }
        }
        *g = spfn;
        drop(g);
        self.stats.grows.fetch_add(1, Ordering::Relaxed);
        nr_pages > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter counts the deferring PFN itself: at the first deferred PFN it is
    /// `PAGES_PER_SECTION + 1`, so exactly `PAGES_PER_SECTION` PFNs were initialized before it.
    #[test]
    fn the_counter_includes_the_deferring_pfn() {
        let pps = 32768;
        let mut c = DeferCounter::new(pps);
        let mut fdp = u64::MAX;
        let end = 10 * pps;
        let mut first = None;
        for pfn in pps..end {
            if c.defer_init(pfn, end, end, &mut fdp) {
                first = Some(pfn);
                break;
            }
        }
        assert_eq!(first, Some(2 * pps));
        assert_eq!(fdp, 2 * pps);
        assert_eq!(c.nr_initialised(), pps + 1);
        // Afterwards every call defers.
        assert!(c.defer_init(2 * pps + 5, end, end, &mut fdp));
        // A zone that does not end the node is never deferred nor counted.
        let mut c = DeferCounter::new(pps);
        let mut fdp = u64::MAX;
        assert!((0..3 * pps).all(|pfn| !c.defer_init(pfn, 5 * pps, end, &mut fdp)));
        assert_eq!(c.nr_initialised(), 0);
    }

    /// The counter resets when `end_pfn` changes (a new zone or node).
    #[test]
    fn the_counter_resets_when_end_pfn_changes() {
        let pps = 64;
        let mut c = DeferCounter::new(pps);
        let mut fdp = u64::MAX;
        for pfn in 0..pps - 1 {
            assert!(!c.defer_init(pfn, 1000, 1000, &mut fdp));
        }
        assert_eq!(c.nr_initialised(), pps - 1);
        // Same node end reached through another end_pfn: the counter starts again.
        assert!(!c.defer_init(pps, 2000, 1000, &mut fdp));
        assert_eq!(c.nr_initialised(), 1);
        // With the reset, pfn 2*pps is the 1 + pps-th counted pfn... not more than pps: no defer.
        for pfn in pps + 1..2 * pps {
            assert!(!c.defer_init(pfn, 2000, 1000, &mut fdp));
        }
        assert_eq!(c.nr_initialised(), pps);
        assert!(c.defer_init(2 * pps, 2000, 1000, &mut fdp));
        assert_eq!(fdp, 2 * pps);
    }

    /// `defer_point` (the bulk form used by boot) agrees with the per-PFN `defer_init` loop.
    #[test]
    fn the_bulk_defer_point_equals_the_per_pfn_loop() {
        let pps = 16;
        for start_count in [0u64, 3, 15, 16, 17, 40] {
            for from in [0u64, 1, 15, 16, 33] {
                for len in [0u64, 1, 5, 16, 17, 40, 80] {
                    let end = 1000;
                    let mut a = DeferCounter::new(pps);
                    let mut b = DeferCounter::new(pps);
                    let (mut fa, mut fb) = (u64::MAX, u64::MAX);
                    for i in 0..start_count {
                        a.defer_init(1 + i % 7, end, end, &mut fa);
                        b.defer_init(1 + i % 7, end, end, &mut fb);
                    }
                    if fa != u64::MAX {
                        continue;
                    }
                    let bulk = a.defer_point(from, from + len, end, end, &mut fa);
                    let looped = (from..from + len).find(|&p| b.defer_init(p, end, end, &mut fb));
                    assert_eq!(bulk, looped, "count {start_count} from {from} len {len}");
                    assert_eq!(fa, fb);
                    assert_eq!(a, b);
                }
            }
        }
    }
}
