//! The template paths (cached and streaming) for ZONE_DEVICE pages and compound pages, with
//! the drains of [`DrainPolicy`].

use core::marker::PhantomData;

use super::plan::Plan;
use super::{DevPagemap, DrainPolicy};
use crate::FolioLayout;
use crate::hooks::InitHooks;
use crate::memmap::engine::{Cached, ListSelf, Refresh, Store};
use crate::memmap::{AtPageblockFn, Memmap, PageblockWork, Streaming};
use crate::model::config::{FlagsLayout, KernelConfig};
use crate::model::page::{StructPage, offsets};

/// The template (cached or streaming, `S`) loop over a validated plan; returns the number of
/// drains (see the [module documentation](self)).
pub(super) fn run_template<P: StructPage, H: InitHooks, S: Store>(
    m: &mut Memmap<'_, P>,
    plan: &Plan,
    pgmap: &DevPagemap,
    policy: DrainPolicy,
    hooks: &mut H,
) -> u64 {
    let mut run = Run::<P, S> {
        plan,
        cfg: *m.config(),
        layout: *m.layout(),
        session: Streaming::new(S::STREAMING),
        upstream: policy == DrainPolicy::Upstream,
        drains: 0,
        streamed: false,
        _store: PhantomData,
    };
    // Seed the head template from the first real struct page, through the slow path.
    m.init_zone_device_page(plan.start, plan.zone, plan.nid, pgmap, hooks);
    run.head_resched(hooks, plan.start);
    let head_tmpl = m.read(plan.start);
    if plan.pfns_per_compound == 1 {
        run.single_pages(m, hooks, head_tmpl);
    } else if run.upstream {
        // The series' last drain is its own (counted); the session's is then a no-op fence.
        run.upstream(m, pgmap, hooks, head_tmpl);
        return run.drains;
    } else {
        run.minimal(m, pgmap, hooks);
    }
    let Run { session, drains, .. } = run;
    drains + u64::from(session.finish())
}

/// One template run's context and drain bookkeeping.
struct Run<'p, P, S> {
    plan: &'p Plan,
    cfg: KernelConfig,
    layout: FlagsLayout,
    /// Drains at the end of the run (armed when `S` streams), also on unwinding; the drains
    /// the policy asks for before that are [`Run::drain`]'s.
    session: Streaming,
    upstream: bool,
    drains: u64,
    /// Something was streamed since the last drain.
    streamed: bool,
    _store: PhantomData<(P, S)>,
}

impl<P: StructPage, S: Store> Run<'_, P, S> {
    fn refresh(&self) -> Refresh<'_> {
        Refresh::new(&self.cfg, &self.layout, ListSelf::Neither)
    }

    /// Drains if the policy asks for it here: Upstream at its three points always, Minimal
    /// only when something was streamed since the last drain.
    fn drain(&mut self) {
        if S::STREAMING && (self.streamed || self.upstream) {
            stream_hal::drain();
            self.drains += 1;
            self.streamed = false;
        }
    }

    /// One run of the engine: `[from, to)` from `tmpl`, streamed (`streams`) or not. Before
    /// 7.2 pageblock-aligned pages get `pageblock_init`; from 7.2 the migrate types come in a
    /// later pass and only section-aligned heads (`heads`: single pages) get `cond_resched`.
    fn copy<H: InitHooks>(
        &mut self,
        m: &mut Memmap<'_, P>,
        hooks: &mut H,
        (from, to): (u64, u64),
        tmpl: &mut P,
        streams: bool,
        heads: bool,
    ) {
        let plan = self.plan;
        let mut at_pageblock = |w: &mut PageblockWork<'_, '_, P>| {
            if !plan.pageblock_range {
                w.pageblock_init(hooks);
            } else if heads && plan.section_aligned(w.pfn()) {
                hooks.cond_resched(w.pfn());
            }
        };
        let callback: Option<&mut AtPageblockFn<'_, P>> =
            if plan.pageblock_range && !heads { None } else { Some(&mut at_pageblock) };
        let refresh = Refresh::new(&self.cfg, &self.layout, ListSelf::Neither);
        // The range is inside the plan, validated against the memmap; the session (or an
        // explicit drain) orders the streamed stores before anything reads them.
        if streams {
            self.streamed |= S::STREAMING && from < to;
            m.copy_run_pageblocks::<S>(&mut self.session, &refresh, (from, to), tmpl, callback);
        } else {
            m.copy_run_pageblocks::<Cached>(&mut self.session, &refresh, (from, to), tmpl, callback);
        }
    }

    /// 7.2's `cond_resched()` after a section-aligned head, in the head loop.
    fn head_resched<H: InitHooks>(&self, hooks: &mut H, head: u64) {
        if self.plan.pageblock_range && self.plan.section_aligned(head) {
            hooks.cond_resched(head);
        }
    }

    /// 7.2's pass over the range after the struct pages. Under classic SPARSEMEM
    /// `set_pageblock_migratetype` reads the page's section back: streamed pages are drained
    /// first.
    fn pageblock_pass<H: InitHooks>(&mut self, m: &mut Memmap<'_, P>, hooks: &mut H) {
        if !self.plan.pageblock_range {
            return;
        }
        if S::STREAMING && self.streamed && self.layout.section_in_page_flags() {
            stream_hal::drain();
            self.drains += 1;
            self.streamed = false;
        }
        m.pageblock_migratetype_init_range(self.plan.start, self.plan.end - self.plan.start, hooks);
    }

    /// Single pages (`vmemmap_shift == 0`): the rest of the range from the first page.
    fn single_pages<H: InitHooks>(&mut self, m: &mut Memmap<'_, P>, hooks: &mut H, mut head_tmpl: P) {
        let plan = self.plan;
        self.copy(m, hooks, (plan.start + 1, plan.end), &mut head_tmpl, true, true);
        self.pageblock_pass(m, hooks);
    }

    /// The Linux series: per compound, the head from the head template, a drain before
    /// `memmap_init_compound()` reads it, page\[1\] seeded through the slow path as the tail
    /// template, the tails streamed, a drain before `prep_compound_head()`.
    fn upstream<H: InitHooks>(
        &mut self,
        m: &mut Memmap<'_, P>,
        pgmap: &DevPagemap,
        hooks: &mut H,
        mut head_tmpl: P,
    ) {
        let plan = self.plan;
        let mut head = plan.start;
        while head < plan.end {
            if head != plan.start {
                self.copy(m, hooks, (head, head + 1), &mut head_tmpl, true, true);
            }
            self.drain();
            m.set_flag(head, self.cfg.behaviour().page_flags.head);
            let first_tail = head + 1;
            m.init_zone_device_page(first_tail, plan.zone, plan.nid, pgmap, hooks);
            m.prep_compound_tail(head, 1, plan.order);
            m.set_page_count(first_tail, 0, hooks);
            let mut tail_tmpl = m.read(first_tail);
            let end = head + plan.compound_pages_at(head);
            if head + 2 < end {
                self.copy(m, hooks, (head + 2, end), &mut tail_tmpl, true, false);
            }
            self.drain();
            m.prep_compound_head(head, plan.order);
            head += plan.pfns_per_compound;
        }
        // Everything streamed was drained before prep_compound_head.
        self.pageblock_pass(m, hooks);
        self.drain();
    }

    /// Minimal: the first compound page is built in memory with normal stores, seeding the
    /// final head, page\[1\] and page\[2\] templates; every later compound page is streamed
    /// record by record ([`Run::later_compound`]), and nothing streamed is read back.
    fn minimal<H: InitHooks>(&mut self, m: &mut Memmap<'_, P>, pgmap: &DevPagemap, hooks: &mut H) {
        let plan = self.plan;
        let first = plan.start;
        m.set_flag(first, self.cfg.behaviour().page_flags.head);
        m.init_zone_device_page(first + 1, plan.zone, plan.nid, pgmap, hooks);
        m.prep_compound_tail(first, 1, plan.order);
        m.set_page_count(first + 1, 0, hooks);
        let mut tails = m.read(first + 1);
        let end = first + plan.compound_pages_at(first);
        if first + 2 < end {
            self.copy(m, hooks, (first + 2, first + 3), &mut tails, false, false);
        }
        if first + 3 < end {
            self.copy(m, hooks, (first + 3, end), &mut tails, true, false);
        }
        m.prep_compound_head(first, plan.order);
        let finals = Finals {
            head: m.read(first),
            page1: m.read(first + 1),
            // page[2] exists in every compound page when it exists in the first (early
            // sections only add pages).
            page2: (plan.compound_pages_at(first) > 2).then(|| m.read(first + 2)),
            deferred_list: plan.order > 1 && self.cfg.behaviour().folio_layout == FolioLayout::MmIds,
        };
        let mut head = first + plan.pfns_per_compound;
        while head < plan.end {
            self.later_compound(m, hooks, head, &finals, &mut tails);
            head += plan.pfns_per_compound;
        }
        self.pageblock_pass(m, hooks);
    }

    /// A compound page after the first: its head, page\[1\] and page\[2\] from the final
    /// templates, refreshed in registers, then its tails from the tail template.
    fn later_compound<H: InitHooks>(
        &mut self,
        m: &mut Memmap<'_, P>,
        hooks: &mut H,
        head: u64,
        finals: &Finals<P>,
        tails: &mut P,
    ) {
        let plan = self.plan;
        let head_vaddr = m.vaddr(head);
        let tail_word = self.cfg.compound_head_word(head_vaddr, plan.order, P::SIZE);
        let rec = self.refresh().record(&finals.head, head, head_vaddr);
        // Every record below goes to a struct page of the validated range (compound pages have
        // at least two pages, and page[2] when `finals.page2` says so), and nothing reads a
        // streamed one before the session's final drain.
        if !plan.pageblock_range && m.pageblock_aligned(head) {
            // Before 7.2 pageblock-aligned heads get `set_pageblock_migratetype`, which on
            // classic SPARSEMEM reads the page back: those are stored normally.
            if self.layout.section_in_page_flags() {
                m.write(head, rec);
            } else {
                // SAFETY: `set_pageblock_migratetype` reads no page without section bits in
                // the flags, and nothing else reads `head` before the final drain.
                unsafe { m.store_in::<S>(&mut self.session, head, rec) };
                self.streamed |= S::STREAMING;
            }
            m.pageblock_init(head, hooks);
        } else {
            // SAFETY: nothing reads `head` before the final drain.
            unsafe { m.store_in::<S>(&mut self.session, head, rec) };
            self.streamed |= S::STREAMING;
            self.head_resched(hooks, head);
        }
        // page[1]: the folio counters of prep_compound_head, the compound head word.
        let mut rec = finals.page1;
        rec.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
        let rec = self.refresh().record(&rec, head + 1, m.vaddr(head + 1));
        // SAFETY: nothing reads page[1] before the final drain.
        unsafe { m.store_in::<S>(&mut self.session, head + 1, rec) };
        if let Some(p2) = finals.page2 {
            // page[2]: the `_deferred_list` self-pointers (order > 1, 6.15+ folio layout).
            let mut rec = p2;
            rec.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
            if finals.deferred_list {
                let list = m.vaddr(head + 2).wrapping_add(offsets::LRU_PREV as u64);
                rec.set_u64_at(offsets::LRU_PREV, list);
                rec.set_u64_at(offsets::MAPPING, list);
            }
            let rec = self.refresh().record(&rec, head + 2, m.vaddr(head + 2));
            // SAFETY: nothing reads page[2] before the final drain.
            unsafe { m.store_in::<S>(&mut self.session, head + 2, rec) };
        }
        tails.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
        let end = head + plan.compound_pages_at(head);
        if head + 3 < end {
            self.copy(m, hooks, (head + 3, end), tails, true, false);
        }
    }
}

/// The head, page\[1\] and page\[2\] of the first compound page as `__SetPageHead` and
/// `prep_compound_head` leave them: the templates of every later compound page.
struct Finals<P> {
    head: P,
    page1: P,
    page2: Option<P>,
    /// page\[2\] carries the `_deferred_list` self-pointers (order > 1, 6.15+ folio layout).
    deferred_list: bool,
}
