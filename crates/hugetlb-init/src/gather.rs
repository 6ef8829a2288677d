//! `gather_bootmem_prealloc()` per node and `prep_and_add_bootmem_folios()` with HVO and the
//! fallback tail init (`docs/hugetlb-init.md`).

#[cfg(feature = "std")]
use crate::folio::Folio;
use crate::phase;
use memmap_core::{InitHooks, StructPage};
#[cfg(feature = "std")]
use memmap_core::{NoHooks, Strategy};
#[cfg(feature = "std")]
use stream_par::Threads;

use crate::HugetlbError;
use crate::MaybeSend;
use crate::bootmem::{HugeBootmemPage, ZONES_VALID};
use crate::folio::TailInit;
use crate::folio::{
    enqueue_hugetlb_folio, hugetlb_bootmem_init_migratetype, hugetlb_folio_init_tail_vmemmap,
    hugetlb_folio_init_vmemmap, init_new_hugetlb_folio,
};
use crate::hstate::{Hstate, hugepage_freelist_addr};
use crate::hvo::HvoOutcome;
use crate::hvo::{VmemmapRemap, hugetlb_vmemmap_optimize_folio, hvo_availability};
use stream_par::PadataJob;

use crate::node::{
    BootParams, BootReport, HugetlbNode, take_group, take_group_mut, validate_nodes, validate_records,
};

/// `gather_bootmem_prealloc()`: a padata job with one work item per node, each
/// [`gather_bootmem_prealloc_node`]; in node order on the calling thread without `std` or with
/// one worker ([`BootParams::gather`]).
///
/// # Errors
///
/// Validated before any write: [`HugetlbError::RecordsNotGrouped`],
/// [`HugetlbError::HstateNotOfConfig`], [`HugetlbError::FolioOutsideNode`],
/// [`HugetlbError::HeadNotReserved`] (a head did not come
/// from `memmap_init_reserved_heads`: refcount 1 and `PG_reserved`).
pub(crate) fn gather_bootmem_prealloc<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) -> Result<BootReport, HugetlbError>
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    validate_nodes(nodes)?;
    validate_records(nodes, records)?;
    let mut rest: &[HugeBootmemPage] = records;
    for n in nodes.iter() {
        for r in take_group(&mut rest, n.spec.nid) {
            let head = n.memmap.read(r.head_pfn);
            if head.refcount() != 1 || !head.test_flag(n.memmap.config().behaviour().page_flags.reserved) {
                return Err(HugetlbError::HeadNotReserved { pfn: r.head_pfn });
            }
        }
    }
    let with_memory = nodes.iter().filter(|n| n.spec.nr_pages > 0).count();
    let job = PadataJob::gather_bootmem(nodes.len() as u64, with_memory.min(params.gather.count(u64::MAX)));
    let nworks = run_gather(nodes, records, params, &job);

    let cfg = nodes.first().map(|n| *n.memmap.config());
    let hstate = records.first().map(|r| r.hstate);
    let mut rep = BootReport {
        hstate,
        folios: 0,
        optimized: 0,
        hvo_failed: 0,
        hvo: match (cfg, hstate) {
            (Some(c), Some(h)) => hvo_availability::<P>(&c, &params.hvo, h),
            _ => Ok(()),
        },
        requested: params.tail.strategy,
        fallback_strategy: None,
        fallback_folios: 0,
        fallback_pages: 0,
        drains: 0,
        backend: stream_hal::backend(),
        nworks,
    };
    for n in nodes.iter() {
        let r = &n.report;
        rep.folios += r.folios;
        rep.optimized += r.optimized;
        rep.hvo_failed += r.hvo_failed;
        rep.fallback_folios += r.fallback_folios;
        rep.fallback_pages += r.fallback_pages;
        rep.drains += r.drains;
        rep.fallback_strategy = rep.fallback_strategy.or(r.fallback_strategy);
    }
    Ok(rep)
}

/// Runs the per-node gathers; returns `nworks`.
#[cfg(feature = "std")]
fn run_gather<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &mut [HugeBootmemPage],
    params: &BootParams,
    job: &PadataJob,
) -> u64
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    if job.plan().is_none_or(|p| p.nworks <= 1) {
        gather_sequential(nodes, records, params);
        return 1;
    }
    use std::sync::Mutex;
    let caller = std::thread::current().id();
    // One work item per node: its node and its record group. Each is taken exactly once.
    let mut items = std::vec::Vec::with_capacity(nodes.len());
    let mut rest = records;
    for n in nodes.iter_mut() {
        let mine = take_group_mut(&mut rest, n.spec.nid);
        items.push(Mutex::new(Some((n, mine))));
    }
    // One item per node from 0: the job cannot end past u64::MAX, padata's only error.
    let report = stream_par::padata_do_multithreaded(job, |start, end| {
        for i in start..end {
            let taken = items[i as usize].lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            if let Some((node, recs)) = taken {
                gather_bootmem_prealloc_node(node, recs, params);
                node.report.on_caller_thread = std::thread::current().id() == caller;
            }
        }
    });
    report.ok().and_then(|r| r.plan).map_or(1, |p| p.nworks as u64)
}

#[cfg(not(feature = "std"))]
fn run_gather<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &mut [HugeBootmemPage],
    params: &BootParams,
    _job: &PadataJob,
) -> u64
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    gather_sequential(nodes, records, params);
    1
}

fn gather_sequential<P: StructPage, R: VmemmapRemap<P>, H: InitHooks>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) {
    let mut rest = records;
    for n in nodes.iter_mut() {
        let mine = take_group_mut(&mut rest, n.spec.nid);
        gather_bootmem_prealloc_node(n, mine, params);
        n.report.on_caller_thread = true;
    }
}

/// `gather_bootmem_prealloc_node(nid)` over the node's `records`, in list order, with a flush
/// of the pending folios ([`prep_and_add_bootmem_folios`]) when the hstate changes and at the
/// end.
///
/// # Panics
///
/// If a folio is not inside the node's memmap or its head is not reserved with refcount 1
/// (the kernel's `VM_BUG_ON`); [`gather_bootmem_prealloc`] checks both and returns an error.
pub(crate) fn gather_bootmem_prealloc_node<P: StructPage, R: VmemmapRemap<P>, H: InitHooks>(
    node: &mut HugetlbNode<'_, P, R, H>,
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) {
    node.hooks.phase(phase::GATHER_NODE, true);
    let mut list_start = 0;
    let mut prev: Option<Hstate> = None;
    for i in 0..records.len() {
        let h = records[i].hstate;
        records[i].flags |= ZONES_VALID;
        if prev.is_some_and(|p| p != h) {
            prep_and_add_bootmem_folios(node, &mut records[list_start..i], params);
            list_start = i;
        }
        prev = Some(h);
        let head = records[i].head_pfn;
        let reserve = h.vmemmap_reserve_pages::<P>().min(h.nr_pages());
        let tails =
            hugetlb_folio_init_vmemmap(&mut node.memmap, head, h, reserve, &params.tail, &mut node.hooks);
        node.report.drains += tails.drains;
        init_new_hugetlb_folio(&mut node.memmap, head);
        records[i].outcome.initialized = true;
        node.report.managed_pages += h.nr_pages();
        node.hooks.cond_resched(head);
    }
    prep_and_add_bootmem_folios(node, &mut records[list_start..], params);
    node.hooks.phase(phase::GATHER_NODE, false);
}

/// `prep_and_add_bootmem_folios(h, folio_list)` for `records` (one hstate, walked in reverse
/// as the kernel's `list_add()`-built list): HVO on every folio, then per folio the fallback
/// tails if HVO did not optimize it, the migratetype and [`enqueue_hugetlb_folio`]. The
/// hstate's counters are not modelled.
pub(crate) fn prep_and_add_bootmem_folios<P: StructPage, R: VmemmapRemap<P>, H: InitHooks>(
    node: &mut HugetlbNode<'_, P, R, H>,
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) {
    // hugetlb_vmemmap_optimize_bootmem_folios(h, folio_list): a no-op stub without
    // CONFIG_HUGETLB_PAGE_OPTIMIZE_VMEMMAP, otherwise each folio in list order.
    // What memmap_init() initialized at boot: the first section of the node's memory (see
    // TailPageOrigin::Boot).
    let early_end =
        node.spec.start_pfn.saturating_add(node.memmap.config().pages_per_section()).min(node.spec.end_pfn());
    let early_init = node.spec.start_pfn..early_end;
    for (pos, r) in records.iter_mut().rev().enumerate() {
        r.outcome.hvo = hugetlb_vmemmap_optimize_folio(
            &mut node.memmap,
            &mut node.remap,
            r.head_pfn,
            r.hstate,
            &params.hvo,
            pos as u64,
            early_init.clone(),
        );
        match r.outcome.hvo {
            HvoOutcome::Optimized { .. } => node.report.optimized += 1,
            HvoOutcome::Failed(_) => node.report.hvo_failed += 1,
            HvoOutcome::Unavailable(_) | HvoOutcome::NotAttempted => {}
        }
    }
    let done = parallel_tails(node, records, params);
    // The kernel walks its `list_add()`-built folio_list, the gather's order reversed; before
    // the batch (6.1) each folio was enqueued as it was gathered.
    let batched = node.memmap.config().behaviour().hugetlb_bootmem_batched;
    let n = records.len();
    for k in 0..n {
        let i = if batched { n - 1 - k } else { k };
        let r = &mut records[i];
        let h = r.hstate;
        if !r.outcome.optimized() {
            let reserve = h.vmemmap_reserve_pages::<P>().min(h.nr_pages());
            let t: TailInit = if let Some(t) = done.as_ref().and_then(|d| d[i]) {
                t
            } else {
                node.hooks.phase(phase::FALLBACK_TAILS, true);
                let t = hugetlb_folio_init_tail_vmemmap(
                    &mut node.memmap,
                    r.head_pfn,
                    h.order(),
                    reserve,
                    h.nr_pages(),
                    &params.tail,
                    &mut node.hooks,
                );
                node.hooks.phase(phase::FALLBACK_TAILS, false);
                t
            };
            node.report.fallback_folios += 1;
            node.report.fallback_pages += t.pages;
            node.report.drains += t.drains;
            node.report.fallback_strategy = Some((t.used, t.reason));
            r.outcome.fallback = Some(t);
        }
        hugetlb_bootmem_init_migratetype(&mut node.memmap, r.head_pfn, h);
        // account_new_hugetlb_folio() (counters only) and enqueue_hugetlb_folio().
        let slot = h.index();
        let list_head = hugepage_freelist_addr(h, node.spec.nid);
        node.free_list_first[slot] =
            Some(enqueue_hugetlb_folio(&mut node.memmap, r.head_pfn, list_head, node.free_list_first[slot]));
        node.report.folios += 1;
    }
}

/// The fallback tails of the list's folios as one padata job over `params.tail_threads`
/// workers: `Some(per-record result)` when it ran, `None` when the per-folio loop does them.
#[cfg(feature = "std")]
fn parallel_tails<P: StructPage, R, H: InitHooks>(
    node: &mut HugetlbNode<'_, P, R, H>,
    records: &[HugeBootmemPage],
    params: &BootParams,
) -> Option<std::vec::Vec<Option<TailInit>>> {
    use memmap_core::Piece;
    use std::vec::Vec;

    if params.tail_threads == Threads::One || node.memmap.page_ref_tracepoint_active(&node.hooks) {
        return None;
    }
    let reserve_of = |h: Hstate| h.vmemmap_reserve_pages::<P>().min(h.nr_pages());
    // Pieces end at pageblock boundaries: a list with a folio smaller than a pageblock (2 MiB
    // pages of 16 KiB base pages) is left to the per-folio loop, on one thread.
    let pageblock = node.memmap.config().pageblock_nr_pages();
    if records.iter().any(|r| r.hstate.nr_pages() < pageblock) {
        return None;
    }
    let mut results: Vec<Option<TailInit>> = std::vec![None; records.len()];
    let mut total = 0u64;
    for (i, r) in records.iter().enumerate() {
        if r.outcome.optimized() {
            continue;
        }
        let h = r.hstate;
        let pages = h.nr_pages() - reserve_of(h);
        let (used, reason) =
            params.tail.resolve(node.memmap.config(), &node.hooks, pages.saturating_mul(P::SIZE as u64));
        total = total.saturating_add(pages.saturating_mul(P::SIZE as u64));
        results[i] = Some(TailInit { used, reason, pages, drains: 0 });
    }
    let workers = params.tail_threads.count(total);
    if workers <= 1 {
        return None;
    }
    // Pieces: a folio's PFNs cut at section boundaries (whole folios below a section), each
    // writing the tails it holds, in PFN order. Folio heads and section boundaries are
    // pageblock-aligned (no folio is smaller than a pageblock, checked above), so the memmap
    // splits there.
    let pps = node.memmap.config().pages_per_section();
    let layout = *node.memmap.layout();
    let mut pieces: Vec<Piece<(Folio, u64, Strategy, usize)>> = Vec::new();
    for (i, (r, res)) in records.iter().zip(&results).enumerate() {
        let Some(t) = res else { continue };
        let f = node.memmap.read(r.head_pfn).flags();
        let folio = Folio {
            head_pfn: r.head_pfn,
            order: r.hstate.order(),
            zone: layout.zone(f),
            nid: layout.node(f),
        };
        let nr = r.hstate.nr_pages();
        let unit = nr.min(pps);
        let from = reserve_of(r.hstate);
        for at in (r.head_pfn..r.head_pfn + nr).step_by(unit as usize) {
            pieces.push(Piece {
                start: at,
                end: at + unit,
                data: (folio, (at - r.head_pfn).max(from), t.used, i),
            });
        }
    }
    pieces.sort_unstable_by_key(|p| p.start);
    let min_pieces = (pps / pieces.first().map_or(1, |p| p.end - p.start)).max(1);
    node.hooks.phase(phase::FALLBACK_TAILS, true);
    let done = memmap_core::run_views(&mut node.memmap, pieces, min_pieces, workers, |view, data| {
        let (folio, from, used, _) = *data;
        let end = (view.end_pfn() - folio.head_pfn).min(1 << folio.order);
        folio.init_tails(view, from, end, used, &mut NoHooks)
    });
    node.hooks.phase(phase::FALLBACK_TAILS, false);
    for ((.., i), drains) in done.ok()?.pieces {
        if let Some(t) = &mut results[i] {
            t.drains += drains;
        }
    }
    Some(results)
}

#[cfg(not(feature = "std"))]
fn parallel_tails<P: StructPage, R, H: InitHooks>(
    _node: &mut HugetlbNode<'_, P, R, H>,
    _records: &[HugeBootmemPage],
    _params: &BootParams,
) -> Option<[Option<TailInit>; 0]> {
    None
}
