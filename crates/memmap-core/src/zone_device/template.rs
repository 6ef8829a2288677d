//! The template paths (cached and streaming): the fill engine applied to ZONE_DEVICE pages and
//! compound pages.

use super::plan::Plan;
use super::{DevPagemap, DrainPolicy};
use crate::fill::{Cached, DrainGuard, ListSelf, Refresh, Store, copy_run};
use crate::hooks::InitHooks;
use crate::memmap::Memmap;
use crate::model::flags::PG;
use crate::model::page::{StructPage, offsets};
use crate::model::version::FolioLayout;

/// The template (cached or streaming) loop; returns the number of drains.
///
/// With [`DrainPolicy::Minimal`] every page that is later read back or partly rewritten with
/// normal stores is itself written with normal stores: the compound head (`__SetPageHead` reads
/// it), page\[1\] (seeded through the slow path) and page\[2\] (`prep_compound_head` writes its
/// `_deferred_list`), and every pageblock-aligned page (`set_pageblock_migratetype` may read it).
/// No streamed byte is ever touched again before the drain at return, so that one drain is the
/// only one needed. [`DrainPolicy::Upstream`] streams the head and page\[2\] like the other
/// tails and drains where the Linux series does: before `memmap_init_compound` reads the head,
/// before `prep_compound_head`, and before returning.
///
/// The final drain runs through a [`DrainGuard`], so it also runs when a hook panics.
pub(super) fn run_template<P: StructPage, H: InitHooks, S: Store>(
    m: &mut Memmap<'_, P>,
    plan: &Plan,
    pgmap: &DevPagemap,
    policy: DrainPolicy,
    hooks: &mut H,
) -> u64 {
    let guard = DrainGuard::new(S::STREAMING);
    let mut drains = 0;
    let mut streamed = false;
    let upstream = policy == DrainPolicy::Upstream;
    // Upstream drains at its three points unconditionally; the minimal policy only when
    // something was streamed since the last drain.
    let drain = |drains: &mut u64, streamed: &mut bool| {
        if S::STREAMING && (*streamed || upstream) {
            stream_hal::drain();
            *drains += 1;
            *streamed = false;
        }
    };
    let (cfg, layout) = (*m.config(), *m.layout());
    let refresh = Refresh::new(&cfg, &layout, ListSelf::Neither);
    let pages = m.raw_pages();
    // One run of the engine: `[from, to)` from `tmpl`. Before 7.2, `__init_zone_device_page`
    // sets the migrate type (and calls `cond_resched`) at every pageblock-aligned PFN it
    // initializes, so those pages are stored normally and get `pageblock_init`. From 7.2 the
    // migrate types come in a pass after the loop, and the loop only calls `cond_resched` at
    // section-aligned compound heads: `heads` says the run's pages are heads (single pages).
    let pageblock_range = plan.pageblock_range;
    let run = |m: &mut Memmap<'_, P>,
               hooks: &mut H,
               from: u64,
               to: u64,
               tmpl: &mut P,
               streams: bool,
               heads: bool| {
        let mut at_pageblock = |pfn: u64| {
            if !pageblock_range {
                m.pageblock_init(pfn, hooks);
            } else if heads && plan.section_aligned(pfn) {
                hooks.cond_resched(pfn);
            }
        };
        let callback: Option<&mut dyn FnMut(u64)> =
            if pageblock_range && !heads { None } else { Some(&mut at_pageblock) };
        if streams {
            // SAFETY: `[from, to)` is inside the range the plan validated against the memmap,
            // which `m` borrows exclusively; the guard (or an explicit drain) orders the stores
            // before anything reads them; the pages handed to the callback are stored normally.
            unsafe { copy_run::<P, S>(pages, &refresh, from, to, tmpl, callback) };
        } else {
            // SAFETY: as above, with normal stores.
            unsafe { copy_run::<P, Cached>(pages, &refresh, from, to, tmpl, callback) };
        }
    };
    // 7.2's `cond_resched()` after a section-aligned head, in the head loop.
    let head_resched = |hooks: &mut H, head: u64| {
        if pageblock_range && plan.section_aligned(head) {
            hooks.cond_resched(head);
        }
    };
    // 7.2's pass over the range after the struct pages. Under classic SPARSEMEM
    // `set_pageblock_migratetype` reads the page's section back: streamed pages are drained
    // first.
    let section_dep = layout.section_in_page_flags();
    let pageblock_pass = |m: &mut Memmap<'_, P>, hooks: &mut H, drains: &mut u64, streamed: bool| {
        if !pageblock_range {
            return;
        }
        if S::STREAMING && streamed && section_dep {
            stream_hal::drain();
            *drains += 1;
        }
        m.pageblock_migratetype_init_range(plan.start, plan.end - plan.start, hooks);
    };
    // Seed the head template from the first real struct page, through the slow path.
    m.init_zone_device_page(plan.start, plan.zone, plan.nid, pgmap, hooks);
    head_resched(hooks, plan.start);
    let mut head_tmpl = m.read(plan.start);

    if plan.pfns_per_compound == 1 {
        run(m, hooks, plan.start + 1, plan.end, &mut head_tmpl, true, true);
        pageblock_pass(m, hooks, &mut drains, plan.end > plan.start + 1);
        if guard.finish() {
            drains += 1;
        }
        return drains;
    }

    if upstream {
        // The Linux series: per compound, the head from the head template, a drain before
        // memmap_init_compound() reads it, page[1] seeded through the slow path as the tail
        // template, the tails streamed, a drain before prep_compound_head().
        let mut head = plan.start;
        while head < plan.end {
            if head != plan.start {
                run(m, hooks, head, head + 1, &mut head_tmpl, true, true);
                streamed = true;
            }
            drain(&mut drains, &mut streamed);
            m.set_flag(head, PG::HEAD);
            let first_tail = head + 1;
            m.init_zone_device_page(first_tail, plan.zone, plan.nid, pgmap, hooks);
            m.prep_compound_tail(head, 1, plan.order);
            m.set_page_count(first_tail, 0, hooks);
            let mut tail_tmpl = m.read(first_tail);
            let end = head + plan.compound_pages_at(head);
            if head + 2 < end {
                run(m, hooks, head + 2, end, &mut tail_tmpl, true, false);
                streamed = true;
            }
            drain(&mut drains, &mut streamed);
            m.prep_compound_head(head, plan.order);
            head += plan.pfns_per_compound;
        }
        // Everything streamed was drained before prep_compound_head.
        pageblock_pass(m, hooks, &mut drains, false);
        drain(&mut drains, &mut streamed);
        drop(guard);
        return drains;
    }

    // Minimal: the first compound page is built in memory with normal stores where it is read
    // back (head, page[1], page[2]), which seeds three more templates: the final head, page[1]
    // and page[2] as `__SetPageHead` and `prep_compound_head` leave them. Every later compound
    // page is then streamed record by record, each template refreshed in registers with its
    // PFN-dependent fields (section bits, `virtual`) and its compound-dependent words (the
    // compound head, the `_deferred_list` self-pointers). Nothing streamed is ever read back
    // or rewritten, so the one drain before returning is the only one needed (and, from 7.2
    // under classic SPARSEMEM, one before the pageblock pass).
    let first = plan.start;
    m.set_flag(first, PG::HEAD);
    m.init_zone_device_page(first + 1, plan.zone, plan.nid, pgmap, hooks);
    m.prep_compound_tail(first, 1, plan.order);
    m.set_page_count(first + 1, 0, hooks);
    let mut tail_tmpl = m.read(first + 1);
    let end = first + plan.compound_pages_at(first);
    if first + 2 < end {
        run(m, hooks, first + 2, first + 3, &mut tail_tmpl, false, false);
    }
    if first + 3 < end {
        run(m, hooks, first + 3, end, &mut tail_tmpl, true, false);
        streamed = true;
    }
    m.prep_compound_head(first, plan.order);
    let head_final = m.read(first);
    let page1_final = m.read(first + 1);
    // page[2] exists in every compound page when it exists in the first (early sections only
    // add pages).
    let page2_final = (plan.compound_pages_at(first) > 2).then(|| m.read(first + 2));
    let deferred_list = plan.order > 1 && cfg.behaviour().folio_layout == FolioLayout::MmIds;

    let mut head = first + plan.pfns_per_compound;
    while head < plan.end {
        let head_vaddr = m.vaddr(head);
        let tail_word = cfg.compound_head_word(head_vaddr, plan.order, P::SIZE);
        let rec = refresh.record(&head_final, head, head_vaddr);
        // SAFETY: `head` is inside the validated range.
        let dst = unsafe { pages.ptr(head) };
        if !pageblock_range && m.pageblock_aligned(head) {
            // Before 7.2 pageblock-aligned heads get `set_pageblock_migratetype`, which on
            // classic SPARSEMEM reads the page back: those are stored normally.
            if section_dep {
                // SAFETY: `dst` is a writable struct page of the memmap.
                unsafe { Cached::store(dst, rec) };
            } else {
                // SAFETY: as above; nothing reads it before the final drain.
                unsafe { S::store(dst, rec) };
                streamed = true;
            }
            m.pageblock_init(head, hooks);
        } else {
            // SAFETY: as above.
            unsafe { S::store(dst, rec) };
            streamed = true;
            head_resched(hooks, head);
        }
        // page[1]: the folio counters of prep_compound_head, the compound head word.
        let mut rec = page1_final;
        rec.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
        let rec = refresh.record(&rec, head + 1, m.vaddr(head + 1));
        // SAFETY: `head + 1` is inside the range (compound pages have at least two pages).
        unsafe { S::store(pages.ptr(head + 1), rec) };
        if let Some(p2) = page2_final {
            // page[2]: the `_deferred_list` self-pointers (order > 1, 6.15+ folio layout).
            let mut rec = p2;
            rec.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
            if deferred_list {
                let list = m.vaddr(head + 2).wrapping_add(offsets::LRU_PREV as u64);
                rec.set_u64_at(offsets::LRU_PREV, list);
                rec.set_u64_at(offsets::MAPPING, list);
            }
            let rec = refresh.record(&rec, head + 2, m.vaddr(head + 2));
            // SAFETY: `head + 2` is inside the range (`compound_pages > 2`).
            unsafe { S::store(pages.ptr(head + 2), rec) };
        }
        tail_tmpl.set_u64_at(offsets::COMPOUND_HEAD, tail_word);
        let end = head + plan.compound_pages_at(head);
        if head + 3 < end {
            run(m, hooks, head + 3, end, &mut tail_tmpl, true, false);
        }
        head += plan.pfns_per_compound;
    }
    pageblock_pass(m, hooks, &mut drains, streamed);
    if guard.finish() {
        drains += 1;
    }
    drains
}
