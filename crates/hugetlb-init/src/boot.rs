//! The boot sequence: reserved heads, then `gather_bootmem_prealloc()` per node (in parallel
//! under `std`), `prep_and_add_bootmem_folios()` with HVO and the fallback tail init.
//!
//! ## Parallel tail init within a node
//!
//! The kernel gathers nodes in parallel (one padata work per node) but initializes a node's
//! fallback tails on that node's one worker. With [`BootParams::tail_threads`] above one
//! (`std`), [`prep_and_add_bootmem_folios`] first initializes the fallback tails of every
//! folio of its list as one padata job: each folio's tails are cut at memory-section
//! boundaries (whole folios for hstates smaller than a section), each piece runs the
//! one-thread tail init on its own view of the memmap, and each worker drains its streaming
//! stores before it reports a piece done. The per-folio loop then does the rest (migrate type,
//! free list) in kernel order. The memmap is byte-identical to one thread: the tails are written
//! by nothing else and depend on nothing the rest of the loop writes (property tests check it).
//! What changes:
//!
//! * the [`crate::phase::FALLBACK_TAILS`] hook brackets the whole job once per list instead of
//!   once per folio (the time is that of all the list's fallback tails);
//! * `drains` counts one drain per streamed piece instead of one per folio;
//! * `cond_resched` is not called by the tail init in either case;
//! * `page_ref_set` events: when the tracepoint is active the tails are initialized on the
//!   node's worker in kernel order, as with one thread (the events' order is part of the
//!   result).

#[cfg(feature = "std")]
use crate::folio::Folio;
use crate::phase;
use memmap_core::{FillOptions, InitHooks, Memmap, NoHooks, Strategy, StrategyReason, StructPage, Threads};

use crate::HugetlbError;
use crate::MaybeSend;
use crate::bootmem::{BootRequest, HugeBootmemPage, NodeSpec, alloc_with, bootmem_flags};
use crate::folio::TailInit;
use crate::folio::{
    enqueue_hugetlb_folio, hugetlb_bootmem_init_migratetype, hugetlb_folio_init_tail_vmemmap,
    hugetlb_folio_init_vmemmap, init_new_hugetlb_folio, reserve_bootmem_head,
};
use crate::hstate::{HUGE_MAX_HSTATE, Hstate, Hstates, hugepage_freelist_addr};
use crate::hvo::{HvoOutcome, HvoUnavailable};
use crate::hvo::{HvoParams, ModelRemap, VmemmapRemap, hugetlb_vmemmap_optimize_folio, hvo_availability};
use memmap_core::PadataJob;

/// One node of the simulated machine: its memory, its memmap (which must cover the memory),
/// its vmemmap remapper and its hooks. Each node is gathered by one worker, so everything here
/// belongs to that worker.
pub struct HugetlbNode<'a, P: StructPage, R = ModelRemap, H = NoHooks> {
    /// The node's memory.
    pub spec: NodeSpec,
    /// Struct pages of (at least) the node's memory.
    pub memmap: Memmap<'a, P>,
    /// HVO backend.
    pub remap: R,
    /// `cond_resched` and tracepoint hooks of this node's worker.
    pub hooks: H,
    /// Filled by [`gather_bootmem_prealloc`].
    pub report: NodeReport,
    /// The first folio (head PFN) on each hstate's free list of this node
    /// (`h->hugepage_freelists[nid]`), by [`Hstate::index`]: where the next
    /// `enqueue_hugetlb_folio` links in.
    pub free_list_first: [Option<u64>; HUGE_MAX_HSTATE],
}

impl<'a, P: StructPage, R: VmemmapRemap<P>, H> HugetlbNode<'a, P, R, H> {
    /// A node with an empty report.
    pub fn new(spec: NodeSpec, memmap: Memmap<'a, P>, remap: R, hooks: H) -> Self {
        HugetlbNode {
            spec,
            memmap,
            remap,
            hooks,
            report: NodeReport::default(),
            free_list_first: [None; HUGE_MAX_HSTATE],
        }
    }

    /// The struct page at `pfn` as the kernel would read it through the vmemmap (HVO-aliased
    /// tails show the head vmemmap page's struct pages).
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the memmap.
    #[must_use]
    pub fn read(&self, pfn: u64) -> P {
        self.memmap.read(self.remap.storage_pfn(&self.memmap, pfn))
    }

    /// The bytes of the struct pages `[start, start + nr)` as [`HugetlbNode::read`] sees them, in PFN
    /// order, into `out` (`nr * sizeof(struct page)` bytes).
    ///
    /// # Panics
    ///
    /// If the range is outside the memmap or `out` has the wrong length.
    pub fn copy_bytes(&self, start: u64, nr: u64, out: &mut [u8]) {
        assert!(self.memmap.contains_range(start, nr), "range outside memmap");
        // In the memmap, so `nr` struct pages fit in its storage and the product in a u64.
        assert_eq!(out.len() as u64, nr * P::SIZE as u64, "output length");
        for (i, chunk) in out.chunks_exact_mut(P::SIZE).enumerate() {
            self.read(start + i as u64).to_bytes(chunk);
        }
    }
}

impl<P: StructPage, R, H> core::fmt::Debug for HugetlbNode<'_, P, R, H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HugetlbNode")
            .field("spec", &self.spec)
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

/// What the gather did on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NodeReport {
    /// Folios prepared.
    pub folios: u64,
    /// Folios HVO optimized.
    pub optimized: u64,
    /// Folios on which HVO failed.
    pub hvo_failed: u64,
    /// Folios whose tails `RESERVE..nr` went through the fallback.
    pub fallback_folios: u64,
    /// Tail struct pages the fallback wrote.
    pub fallback_pages: u64,
    /// Strategy of the fallback tail init (the last one; all folios of one hstate resolve the
    /// same way).
    pub fallback_strategy: Option<(Strategy, StrategyReason)>,
    /// `stream_hal::drain()` calls.
    pub drains: u64,
    /// `adjust_managed_page_count()` total.
    pub managed_pages: u64,
    /// The node was gathered on the thread that called [`gather_bootmem_prealloc`].
    pub on_caller_thread: bool,
}

/// How to boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootParams {
    /// Tail init strategy and the [`Strategy::Auto`] threshold.
    pub tail: FillOptions,
    /// HVO boot option and fault injection.
    pub hvo: HvoParams,
    /// Workers of the gather (`std`; one without it), at most one per node with memory:
    /// [`Threads::Each`] is the kernel's job, [`Threads::One`] gathers the nodes in order on
    /// the calling thread.
    pub gather: Threads,
    /// Workers for the fallback tail init within one node (`std`; see the module
    /// documentation). [`Threads::One`] is the kernel's one worker per node.
    pub tail_threads: Threads,
}

impl BootParams {
    /// `strategy` with the default Auto threshold, HVO as given, the kernel's gather (one
    /// worker per node), tails on the node's one worker.
    #[must_use]
    pub const fn new(strategy: Strategy, hvo: HvoParams) -> Self {
        BootParams {
            tail: FillOptions::new(strategy),
            hvo,
            gather: Threads::Each,
            tail_threads: Threads::One,
        }
    }

    /// With `threads` workers for the fallback tails within each node.
    #[must_use]
    pub const fn with_tail_threads(mut self, threads: Threads) -> Self {
        self.tail_threads = threads;
        self
    }
}

/// What one boot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootReport {
    /// The hstate of the first record (`None` without records).
    pub hstate: Option<Hstate>,
    /// Folios prepared.
    pub folios: u64,
    /// Folios HVO optimized.
    pub optimized: u64,
    /// Folios on which HVO failed (and the fallback ran).
    pub hvo_failed: u64,
    /// Whether HVO could run at all for [`BootReport::hstate`], and why not.
    pub hvo: Result<(), HvoUnavailable>,
    /// Requested tail strategy.
    pub requested: Strategy,
    /// Strategy of the fallback tail init and why (`None`: no folio needed the fallback).
    pub fallback_strategy: Option<(Strategy, StrategyReason)>,
    /// Folios that went through the fallback.
    pub fallback_folios: u64,
    /// Tail struct pages written by the fallback.
    pub fallback_pages: u64,
    /// `stream_hal::drain()` calls.
    pub drains: u64,
    /// The stream-hal backend.
    pub backend: stream_hal::Backend,
    /// padata `nworks` of the gather (threads, the caller included; 1 without `std`).
    pub nworks: u64,
}

/// Checks what the whole boot needs from the nodes: each node's memory inside its memmap, node
/// ids and zones that fit.
fn validate_nodes<P: StructPage, R, H>(nodes: &[HugetlbNode<'_, P, R, H>]) -> Result<(), HugetlbError> {
    for n in nodes {
        let cfg = n.memmap.config();
        let s = n.spec;
        let max = n.memmap.layout().nodes_mask();
        if u64::from(s.nid) > max {
            return Err(HugetlbError::NodeOutOfRange { nid: s.nid, max: max as u32 });
        }
        if s.zone >= cfg.zone_device() {
            return Err(HugetlbError::BadZone { nid: s.nid, zone: s.zone, zone_device: cfg.zone_device() });
        }
        if s.nr_pages != 0 && !n.memmap.contains_range(s.start_pfn, s.nr_pages) {
            return Err(HugetlbError::NodeOutsideMemmap {
                nid: s.nid,
                start_pfn: s.start_pfn,
                nr_pages: s.nr_pages,
                memmap_start: n.memmap.base_pfn(),
                memmap_end: n.memmap.end_pfn(),
            });
        }
    }
    Ok(())
}

/// The whole boot: [`hugetlb_bootmem_alloc`] (records), [`memmap_init_reserved_heads`]
/// (heads), [`gather_bootmem_prealloc`] (everything else). Fills `records[..n]` (the per-folio
/// summary: head PFN, hstate (order), nid, HVO outcome, fallback strategy) and each node's
/// report.
///
/// # Errors
///
/// Everything is validated before the first write; on error nothing is written (struct pages,
/// pageblocks, records, hooks). See [`HugetlbError`].
pub fn boot<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    request: &BootRequest<'_>,
    params: &BootParams,
    records: &mut [HugeBootmemPage],
) -> Result<BootReport, HugetlbError>
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    let n = hugetlb_bootmem_alloc(nodes, request, records)?;
    memmap_init_reserved_heads(nodes, &records[..n])?;
    gather_bootmem_prealloc(nodes, &mut records[..n], params)
}

/// The boot with the folios where the caller puts them, rather than where memblock's top-down
/// allocation would: `records` holds each folio's head pfn, hstate and node, grouped by node in
/// node order, each node's group in the order its free list is to hold them (the first record
/// ends up first on `h->hugepage_freelists[nid]`). This is how a model reproduces what a
/// kernel did with huge pages it did not take from memblock, such as boot-time 2 MiB pages,
/// which `alloc_pool_huge_folio()` takes from the buddy allocator wherever it hands them out:
/// the oracle learns the heads and the list order from the guest. The rest is
/// [`memmap_init_reserved_heads`] and [`gather_bootmem_prealloc`], as in [`boot()`].
///
/// # Errors
///
/// Nothing is written on error: the node errors of [`hugetlb_bootmem_alloc`],
/// [`HugetlbError::ZeroPages`] for no record, [`HugetlbError::RecordsNotGrouped`],
/// [`HugetlbError::FolioOutsideNode`], [`HugetlbError::FoliosOverlap`].
pub fn boot_placed<P, R, H>(
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
    if records.is_empty() {
        return Err(HugetlbError::ZeroPages);
    }
    // First each folio inside its node (so `pfns()` is exact), then the pairs.
    validate_records(nodes, records)?;
    for (i, a) in records.iter().enumerate() {
        for b in &records[..i] {
            if a.head_pfn < b.pfns().end && b.head_pfn < a.pfns().end {
                return Err(HugetlbError::FoliosOverlap { a: b.head_pfn, b: a.head_pfn });
            }
        }
    }
    for r in records.iter_mut() {
        r.flags = 0;
        r.outcome = crate::bootmem::FolioOutcome::default();
    }
    memmap_init_reserved_heads(nodes, records)?;
    // Before the batched enqueue (6.1) the free list ends in the reverse of the gather's order:
    // gather each node's folios in the reverse of the order asked for, and hand the records
    // back in the caller's order.
    let reversed = nodes.first().is_some_and(|n| !n.memmap.config().behaviour().hugetlb_bootmem_batched);
    if reversed {
        reverse_groups(nodes, records);
    }
    let report = gather_bootmem_prealloc(nodes, records, params);
    if reversed {
        reverse_groups(nodes, records);
    }
    report
}

/// Reverses each node's group of `records` (grouped by node in `nodes`' order).
fn reverse_groups<P: StructPage, R, H>(nodes: &[HugetlbNode<'_, P, R, H>], records: &mut [HugeBootmemPage]) {
    let mut rest = records;
    for n in nodes {
        take_group_mut(&mut rest, n.spec.nid).reverse();
    }
}

/// `hugetlb_bootmem_alloc()` on the nodes: validates the nodes and the request and computes the
/// `huge_bootmem_page` records (see [`crate::bootmem::alloc_bootmem_huge_pages`]). Writes no
/// struct page. Returns the number of records.
///
/// # Errors
///
/// Node errors ([`HugetlbError::NodeOutOfRange`], [`HugetlbError::BadZone`],
/// [`HugetlbError::NodeOutsideMemmap`], ...), [`HugetlbError::HstateNotOfConfig`] (the
/// request's hstate is not one of a node's configuration), and request errors
/// ([`HugetlbError::ZeroPages`], [`HugetlbError::NodeWithoutMemory`],
/// [`HugetlbError::RangeTooSmall`], ...). Nothing is written on error.
pub fn hugetlb_bootmem_alloc<P: StructPage, R, H>(
    nodes: &[HugetlbNode<'_, P, R, H>],
    request: &BootRequest<'_>,
    records: &mut [HugeBootmemPage],
) -> Result<usize, HugetlbError> {
    validate_nodes(nodes)?;
    for n in nodes {
        hstate_of_config(n, request.hstate)?;
    }
    alloc_with(nodes.len(), |i| nodes[i].spec, request, records)
}

/// Whether `hstate` is one of the node's configuration (its page size and architecture).
fn hstate_of_config<P: StructPage, R, H>(
    node: &HugetlbNode<'_, P, R, H>,
    hstate: Hstate,
) -> Result<(), HugetlbError> {
    let supported = Hstates::of(node.memmap.config());
    if supported.find(hstate.size()) == Some(hstate) {
        Ok(())
    } else {
        Err(HugetlbError::HstateNotOfConfig { hstate, nid: node.spec.nid, supported })
    }
}

/// Takes the next node's record group off the front of `rest`: the leading records whose nid
/// is the node's, `nid`.
fn take_group<'r>(rest: &mut &'r [HugeBootmemPage], nid: u32) -> &'r [HugeBootmemPage] {
    let (group, tail) = rest.split_at(rest.iter().take_while(|r| r.nid == nid).count());
    *rest = tail;
    group
}

/// [`take_group`] on records the caller may change.
fn take_group_mut<'r>(rest: &mut &'r mut [HugeBootmemPage], nid: u32) -> &'r mut [HugeBootmemPage] {
    let end = rest.iter().take_while(|r| r.nid == nid).count();
    let (group, tail) = core::mem::take(rest).split_at_mut(end);
    *rest = tail;
    group
}

/// Checks that `records` are grouped by node in node order, that each hstate is one of its
/// node's configuration and that each folio lies in its node's memory.
fn validate_records<P: StructPage, R, H>(
    nodes: &[HugetlbNode<'_, P, R, H>],
    records: &[HugeBootmemPage],
) -> Result<(), HugetlbError> {
    let mut rest = records;
    for n in nodes {
        for r in take_group(&mut rest, n.spec.nid) {
            hstate_of_config(n, r.hstate)?;
            let nr = r.hstate.nr_pages();
            let inside = r.head_pfn.checked_add(nr).is_some_and(|end| end <= n.spec.end_pfn());
            if r.head_pfn % nr != 0 || r.head_pfn < n.spec.start_pfn || !inside {
                return Err(HugetlbError::FolioOutsideNode { head_pfn: r.head_pfn, nid: n.spec.nid });
            }
        }
    }
    if !rest.is_empty() {
        return Err(HugetlbError::RecordsNotGrouped { index: records.len() - rest.len() });
    }
    Ok(())
}

/// `memmap_init_reserved_pages()` for the boot pages: only the first base page of each
/// gigantic page is a normal reserved region (the rest is `MEMBLOCK_RSRV_NOINIT`), so only the
/// head struct page is initialized, through [`reserve_bootmem_head`].
///
/// # Errors
///
/// [`HugetlbError::RecordsNotGrouped`], [`HugetlbError::HstateNotOfConfig`] or
/// [`HugetlbError::FolioOutsideNode`] (nothing written).
pub fn memmap_init_reserved_heads<P: StructPage, R, H: InitHooks>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &[HugeBootmemPage],
) -> Result<(), HugetlbError> {
    validate_nodes(nodes)?;
    validate_records(nodes, records)?;
    let mut rest = records;
    for n in nodes.iter_mut() {
        for r in take_group(&mut rest, n.spec.nid) {
            reserve_bootmem_head(&mut n.memmap, r.head_pfn, n.spec.zone, n.spec.nid, &mut n.hooks);
        }
    }
    Ok(())
}

/// `gather_bootmem_prealloc()`: a padata job with one work item per node (`min_chunk = align =
/// 1`, at most one thread per node with memory, the caller participating); each item is
/// [`gather_bootmem_prealloc_node`]. Without `std`, or with one worker
/// ([`BootParams::gather`]), the nodes are gathered in order on the calling thread.
///
/// # Errors
///
/// Validated before any write: [`HugetlbError::RecordsNotGrouped`],
/// [`HugetlbError::HstateNotOfConfig`], [`HugetlbError::FolioOutsideNode`],
/// [`HugetlbError::HeadNotReserved`] (a head did not come
/// from [`memmap_init_reserved_heads`]: refcount 1 and `PG_reserved`).
pub fn gather_bootmem_prealloc<P, R, H>(
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
    let report = memmap_core::padata_do_multithreaded(job, |start, end| {
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

/// `gather_bootmem_prealloc_node(nid)`: for each `huge_bootmem_page` of the node's list
/// (`records`, in list order): the zones check (`HUGE_BOOTMEM_ZONES_VALID`; a node here is one
/// zone, so it always passes), a flush of the pending folios when the hstate changes,
/// [`hugetlb_folio_init_vmemmap`] with `HUGETLB_VMEMMAP_RESERVE_PAGES`,
/// [`init_new_hugetlb_folio`], `list_add()` to the pending list,
/// `adjust_managed_page_count()`, `cond_resched()`; finally
/// [`prep_and_add_bootmem_folios`] for the last hstate.
///
/// The heads must come from [`memmap_init_reserved_heads`] ([`gather_bootmem_prealloc`]
/// checks it).
///
/// # Panics
///
/// If a folio is not inside the node's memmap or its head is not reserved with refcount 1
/// (the kernel's `VM_BUG_ON`); [`gather_bootmem_prealloc`] checks both and returns an error.
pub fn gather_bootmem_prealloc_node<P: StructPage, R: VmemmapRemap<P>, H: InitHooks>(
    node: &mut HugetlbNode<'_, P, R, H>,
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) {
    node.hooks.phase(phase::GATHER_NODE, true);
    let mut list_start = 0;
    let mut prev: Option<Hstate> = None;
    for i in 0..records.len() {
        let h = records[i].hstate;
        records[i].flags |= bootmem_flags::ZONES_VALID;
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

/// `prep_and_add_bootmem_folios(h, folio_list)` for the folios of `records` (all of one
/// hstate, in processing order; the kernel's `folio_list` is built with `list_add()`, so it is
/// walked in reverse): `hugetlb_vmemmap_optimize_bootmem_folios()` on every folio, then per
/// folio the fallback `hugetlb_folio_init_tail_vmemmap(folio, RESERVE, nr)` if HVO did not
/// optimize it (timed), [`hugetlb_bootmem_init_migratetype`], and
/// [`enqueue_hugetlb_folio`] onto the node's free list of
/// the hstate (the head's `lru` links and `HPG_freed`; the list head is at
/// [`hugepage_freelist_addr`]). The hstate's counters are not modelled.
pub fn prep_and_add_bootmem_folios<P: StructPage, R: VmemmapRemap<P>, H: InitHooks>(
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
/// workers (see the module documentation): `Some(per-record result)` when it ran, `None` when
/// the tails are to be initialized by the per-folio loop (one worker, an active tracepoint, or
/// nothing to do).
#[cfg(feature = "std")]
fn parallel_tails<P: StructPage, R, H: InitHooks>(
    node: &mut HugetlbNode<'_, P, R, H>,
    records: &[HugeBootmemPage],
    params: &BootParams,
) -> Option<std::vec::Vec<Option<TailInit>>> {
    use memmap_core::parallel::Piece;
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
    let done =
        memmap_core::parallel::run_views(&mut node.memmap, pieces, min_pieces, workers, |view, data| {
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
