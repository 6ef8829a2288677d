//! A node of the boot ([`HugetlbNode`]: its memory, memmap, remapper and hooks), what the boot
//! is asked ([`BootParams`]) and reports ([`NodeReport`], [`BootReport`]), and the checks of
//! nodes and records every entry point makes before it writes.

use memmap_core::{FillOptions, Memmap, NoHooks, Strategy, StrategyReason, StructPage};
use stream_par::Threads;

use crate::HugetlbError;
use crate::bootmem::{HugeBootmemPage, NodeSpec};
use crate::hstate::{HUGE_MAX_HSTATE, Hstate, Hstates};
use crate::hvo::HvoUnavailable;
use crate::hvo::{HvoParams, ModelRemap, VmemmapRemap};

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
    /// Filled by `gather_bootmem_prealloc`.
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
    /// The node was gathered on the thread that called `gather_bootmem_prealloc`.
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
pub(crate) fn validate_nodes<P: StructPage, R, H>(
    nodes: &[HugetlbNode<'_, P, R, H>],
) -> Result<(), HugetlbError> {
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

/// Whether `hstate` is one of the node's configuration (its page size and architecture).
pub(crate) fn hstate_of_config<P: StructPage, R, H>(
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
pub(crate) fn take_group<'r>(rest: &mut &'r [HugeBootmemPage], nid: u32) -> &'r [HugeBootmemPage] {
    let (group, tail) = rest.split_at(rest.iter().take_while(|r| r.nid == nid).count());
    *rest = tail;
    group
}

/// [`take_group`] on records the caller may change.
pub(crate) fn take_group_mut<'r>(
    rest: &mut &'r mut [HugeBootmemPage],
    nid: u32,
) -> &'r mut [HugeBootmemPage] {
    let end = rest.iter().take_while(|r| r.nid == nid).count();
    let (group, tail) = core::mem::take(rest).split_at_mut(end);
    *rest = tail;
    group
}

/// Checks that `records` are grouped by node in node order, that each hstate is one of its
/// node's configuration and that each folio lies in its node's memory.
pub(crate) fn validate_records<P: StructPage, R, H>(
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
