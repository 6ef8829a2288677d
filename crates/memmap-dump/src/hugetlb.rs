//! `dump hugetlb`: boot-time or run-time gigantic pages ([`hugetlb_init`]), with real
//! memfd-backed HVO on Linux, in memory.

use memmap_core::offsets;
use memmap_core::{KernelConfig, MigrateType, Page64, Page72, Strategy, StructPage};

use crate::error::DumpError;
use crate::meta::{DumpMeta, Placement, Written};
use crate::model::{Dump, DumpBytes, invalid, map_error, struct_page_bytes, traced};

/// The tails of run-time gigantic pages whose `lru.prev` still holds the self pointer
/// `memmap_init` wrote, as `[start, end)` ranges. A page that was once the head of a free buddy
/// block holds `LIST_POISON2` ([`KernelConfig::list_poison`]) there instead, which depends on the
/// allocator's history: the dump's `stale_fields` names the field and both values.
fn runtime_lru_prev_ranges<P: StructPage>(
    cfg: &KernelConfig,
    bytes: &[u8],
    start_pfn: u64,
    folios: &[hugetlb_init::HugeBootmemPage],
) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for f in folios {
        for pfn in f.head_pfn + 1..f.head_pfn + f.hstate.nr_pages() {
            let off = (pfn - start_pfn) as usize * P::SIZE + offsets::LRU_PREV;
            let Some(word) = bytes.get(off..off + 8) else { continue };
            let word = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
            // The self pointer of a struct page of the folio: the slot's own, or (read through
            // an aliased vmemmap page, 6.12's HVO maps a folio's tail vmemmap pages onto its
            // first frame) the one of the struct page whose bytes it shows, whose history it
            // shares.
            let rel = word.wrapping_sub(cfg.vmemmap_start).wrapping_sub(offsets::LRU_NEXT as u64);
            let of = rel / P::SIZE as u64;
            let folio_self =
                rel % P::SIZE as u64 == 0 && (f.head_pfn..f.head_pfn + f.hstate.nr_pages()).contains(&of);
            if !folio_self || of == f.head_pfn {
                continue;
            }
            match ranges.last_mut() {
                Some(last) if last.1 == pfn => last.1 = pfn + 1,
                _ => ranges.push((pfn, pfn + 1)),
            }
        }
    }
    ranges
}

/// Options of `dump hugetlb`.
#[derive(Debug, Clone)]
pub struct HugetlbDump {
    /// Kernel config.
    pub config: KernelConfig,
    /// 72-byte layout.
    pub layout72: bool,
    /// Page size.
    pub hstate: hugetlb_init::Hstate,
    /// Pages per node.
    pub count: u64,
    /// Nodes.
    pub nodes: u32,
    /// HVO mode.
    pub hvo: hugetlb_init::HvoMode,
    /// Tail init strategy.
    pub strategy: Strategy,
    /// Enable `CONFIG_DEBUG_PAGE_REF` and the tracepoint.
    pub page_ref_trace: bool,
    /// Zone index of the memory the gigantic pages come from.
    pub zone: u32,
    /// Pages allocated at run time rather than at boot ([`hugetlb_init::TailPageOrigin`]).
    /// Boot-time pages of an hstate no larger than `MAX_PAGE_ORDER` (2 MiB of 4 KiB pages, 32
    /// MiB of 16 KiB) come from the buddy allocator too (`alloc_pool_huge_folio()`, after the
    /// memmap is up) and are modelled as such whatever this says.
    pub runtime: bool,
    /// Where the folios are, `(head pfn, nid)`, grouped by node in ascending order, each node's in
    /// its free list's order: what a kernel did, learned from the guest. Empty: `count` folios per
    /// node packed from 4 GiB ([`hugetlb_init::NodeSpec::packed`]). With placed folios,
    /// `memmap.bin` holds every struct page from the lowest head to the end of the highest folio.
    pub placed: Vec<(u64, u32)>,
}

impl HugetlbDump {
    /// Whether the folios come from the buddy allocator: run-time pages, and boot-time pages
    /// of an hstate the buddy allocator can hand out (order up to `MAX_PAGE_ORDER`).
    #[must_use]
    pub fn from_buddy(&self) -> bool {
        self.runtime || self.hstate.order() <= self.config.max_page_order
    }
}

/// Counts hook calls across node threads.
#[derive(Clone)]
struct SharedCounts {
    resched: std::sync::Arc<std::sync::atomic::AtomicU64>,
    events: std::sync::Arc<std::sync::atomic::AtomicU64>,
    tracepoint: bool,
}

impl memmap_core::InitHooks for SharedCounts {
    fn cond_resched(&mut self, _pfn: u64) {
        self.resched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn page_ref_tracepoint_enabled(&self) -> bool {
        self.tracepoint
    }
    fn page_ref_set(&mut self, _event: &memmap_core::PageRefEvent) {
        self.events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl HugetlbDump {
    /// Boots the gigantic pages (real memfd HVO on Linux) and returns the dump of their struct
    /// pages as the CPU reads them.
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] carrying the boot's typed error, [`DumpError::Map`] when the vmemmap
    /// cannot be created.
    pub fn run(&self) -> Result<Dump, DumpError> {
        if self.layout72 { hugetlb_as::<Page72>(self) } else { hugetlb_as::<Page64>(self) }
    }

    /// `sizeof(struct page)` of the chosen layout.
    #[must_use]
    pub fn struct_page_size(&self) -> u64 {
        struct_page_bytes(self.layout72)
    }
}

fn hugetlb_as<P: StructPage>(opts: &HugetlbDump) -> Result<Dump, DumpError> {
    use hugetlb_init::OwnedBoot;
    let cfg = traced(opts.config, opts.page_ref_trace);
    let layout = cfg.flags_layout().map_err(invalid)?;
    check_hugetlb(opts, &cfg, &layout)?;
    let specs = hugetlb_node_specs(opts)?;
    let mut machine = OwnedBoot::<P>::new(cfg, &specs, true)
        .map_err(map_error(format!("create the vmemmap of {} x {} pages", opts.count, opts.hstate)))?;
    let counts = SharedCounts {
        resched: std::sync::Arc::default(),
        events: std::sync::Arc::default(),
        tracepoint: opts.page_ref_trace,
    };
    let report = hugetlb_boot(&mut machine, opts, &counts)?;
    let mut folios: Vec<_> = machine.folios().to_vec();
    folios.sort_by_key(|r| r.head_pfn);
    let start_pfn = folios.first().map_or(0, |r| r.head_pfn);
    let mut bytes = hugetlb_bytes(&machine, opts, &folios, start_pfn)?;
    if opts.from_buddy() && cfg.behaviour().alloc_migratetype_in_index {
        mark_alloc_migratetype::<P>(&mut bytes, &folios, start_pfn)?;
    }
    let nr_pages = (bytes.len() / P::SIZE) as u64;
    let movable = hugetlb_movable_pageblocks(&machine, &cfg);
    let (used, reason) =
        report.fallback_strategy.unwrap_or((opts.strategy, memmap_core::StrategyReason::Requested));
    let resident = machine.resident_vmemmap_bytes().unwrap_or(0);
    let nids: Vec<u32> = machine.specs().iter().map(|s| s.nid).collect();
    let detail = hugetlb_detail::<P>(opts, &cfg, &report, &folios, (&bytes, start_pfn), (resident, &nids));
    let page_addr_base = cfg.vmemmap_start.wrapping_add(start_pfn.wrapping_mul(P::SIZE as u64));
    let first = machine.specs().first();
    let at = Placement {
        start_pfn,
        nr_pages,
        page_addr_base,
        zone: first.map_or(0, |s| s.zone),
        nid: first.map_or(0, |s| s.nid),
    };
    let how = Written { used, requested: opts.strategy, reason: reason.to_string() };
    let meta = DumpMeta {
        movable_pageblock_pfns: movable,
        resched_pfns: counts.resched.load(std::sync::atomic::Ordering::Relaxed),
        page_ref_events: counts.events.load(std::sync::atomic::Ordering::Relaxed),
        detail,
        ..DumpMeta::of("hugetlb", &cfg, &layout, P::SIZE, at, how)
    };
    Ok(Dump { meta, bytes: DumpBytes::Vec(bytes) })
}

/// The nodes the model's vmemmap covers: packed folios, or each node's placed folios' pfn range.
///
/// # Errors
///
/// [`DumpError::Input`] when the placed folios are not grouped by node in ascending order.
fn hugetlb_node_specs(opts: &HugetlbDump) -> Result<Vec<hugetlb_init::NodeSpec>, DumpError> {
    if opts.placed.is_empty() {
        return Ok((0..opts.nodes)
            .map(|nid| hugetlb_init::NodeSpec {
                zone: opts.zone,
                ..hugetlb_init::NodeSpec::packed(nid, opts.hstate, opts.count)
            })
            .collect());
    }
    let nr = opts.hstate.nr_pages();
    let mut nids: Vec<u32> = opts.placed.iter().map(|p| p.1).collect();
    nids.dedup();
    if nids.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid("placed folios must be grouped by node in ascending node order"));
    }
    Ok(nids
        .iter()
        .map(|&nid| {
            let heads = opts.placed.iter().filter(|p| p.1 == nid).map(|p| p.0);
            let lo = heads.clone().min().unwrap_or(0);
            let hi = heads.max().unwrap_or(0).saturating_add(nr);
            hugetlb_init::NodeSpec { nid, zone: opts.zone, start_pfn: lo, nr_pages: hi - lo }
        })
        .collect())
}

/// Boots the gigantic pages on `machine` with `counts` as every node's hooks.
///
/// # Errors
///
/// [`DumpError::Input`] for the boot's invalid-input errors (and any later error kind),
/// [`DumpError::Map`] when the vmemmap cannot be reset.
fn hugetlb_boot<P: StructPage>(
    machine: &mut hugetlb_init::OwnedBoot<P>,
    opts: &HugetlbDump,
    counts: &SharedCounts,
) -> Result<hugetlb_init::BootReport, DumpError> {
    use hugetlb_init::{BootParams, BootRequest};
    let tail_page = if opts.from_buddy() {
        hugetlb_init::TailPageOrigin::Runtime
    } else {
        hugetlb_init::TailPageOrigin::Boot
    };
    let params = BootParams {
        tail: memmap_core::FillOptions::new(opts.strategy),
        hvo: hugetlb_init::HvoParams { tail_page, ..opts.hvo.params() },
        gather: stream_par::Threads::Each,
        tail_threads: stream_par::Threads::One,
    };
    let booted = if opts.placed.is_empty() {
        machine.boot_with_hooks(&BootRequest::per_node(opts.hstate, opts.count), &params, |_| counts.clone())
    } else {
        let records: Vec<hugetlb_init::HugeBootmemPage> = opts
            .placed
            .iter()
            .map(|&(head_pfn, nid)| hugetlb_init::HugeBootmemPage {
                head_pfn,
                nid,
                hstate: opts.hstate,
                ..hugetlb_init::HugeBootmemPage::EMPTY
            })
            .collect();
        machine.boot_placed_with_hooks(&records, &params, |_| counts.clone())
    };
    booted.map_err(|e| match e {
        hugetlb_init::BootError::Invalid(e) => invalid(e),
        hugetlb_init::BootError::Io(e) => DumpError::Map { what: "reset the vmemmap".into(), source: e },
        // `BootError` is `#[non_exhaustive]`: a later error kind is reported as bad input.
        e => invalid(e),
    })
}

/// The content of `memmap.bin` from `start_pfn` on.
///
/// # Errors
///
/// [`DumpError::Input`] when packed folios are not contiguous or the range does not fit in
/// memory.
fn hugetlb_bytes<P: StructPage>(
    machine: &hugetlb_init::OwnedBoot<P>,
    opts: &HugetlbDump,
    folios: &[hugetlb_init::HugeBootmemPage],
    start_pfn: u64,
) -> Result<Vec<u8>, DumpError> {
    if opts.placed.is_empty() {
        // The packed node layout puts the folios back to back, so `memmap.bin` is one PFN range.
        let contiguous = folios.windows(2).all(|w| w[0].head_pfn + w[0].hstate.nr_pages() == w[1].head_pfn);
        if !contiguous {
            return Err(invalid("gigantic pages are not contiguous"));
        }
        return Ok(machine.folio_bytes());
    }
    // Every struct page from the lowest head to the end of the highest folio.
    let end = folios.last().map_or(start_pfn, |r| r.head_pfn + r.hstate.nr_pages());
    let mut out = vec![0u8; usize::try_from(end - start_pfn).map_err(invalid)? * P::SIZE];
    for (pfn, chunk) in (start_pfn..end).zip(out.chunks_exact_mut(P::SIZE)) {
        if let Some(p) = machine.read(pfn) {
            p.to_bytes(chunk);
        }
    }
    Ok(out)
}

/// The first PFN of every pageblock the boot left `MIGRATE_MOVABLE`, node by node.
fn hugetlb_movable_pageblocks<P: StructPage>(
    machine: &hugetlb_init::OwnedBoot<P>,
    cfg: &KernelConfig,
) -> Vec<u64> {
    let mut movable = Vec::new();
    for (i, spec) in machine.specs().iter().enumerate() {
        let first = spec.start_pfn >> cfg.pageblock_order;
        for (k, &v) in machine.pageblocks(i).iter().enumerate() {
            if v == MigrateType::Movable.value() {
                movable.push((first + k as u64) << cfg.pageblock_order);
            }
        }
    }
    movable
}

/// Before 6.10 the buddy allocator leaves the free list's migrate type (MOVABLE for a migratable
/// hstate) in the head's `index`; it is written before HVO remaps the vmemmap, so the fake heads
/// show it too.
fn mark_alloc_migratetype<P: StructPage>(
    bytes: &mut [u8],
    folios: &[hugetlb_init::HugeBootmemPage],
    start_pfn: u64,
) -> Result<(), DumpError> {
    let index = offsets::INDEX;
    let mt = u64::from(MigrateType::Movable.value()).to_ne_bytes();
    for r in folios {
        let first = usize::try_from(r.head_pfn - start_pfn).map_err(invalid)? * P::SIZE;
        let n = usize::try_from(r.hstate.nr_pages()).map_err(invalid)?;
        let Some(folio) = bytes.get_mut(first..first + n * P::SIZE) else { continue };
        let head = folio[..P::SIZE].to_vec();
        for page in folio.chunks_exact_mut(P::SIZE) {
            if *page == *head {
                page[index..index + 8].copy_from_slice(&mt);
            }
        }
    }
    Ok(())
}

/// The kind-specific fields of a hugetlb dump's `meta.json`.
fn hugetlb_detail<P: StructPage>(
    opts: &HugetlbDump,
    cfg: &KernelConfig,
    report: &hugetlb_init::BootReport,
    folios: &[hugetlb_init::HugeBootmemPage],
    (bytes, start_pfn): (&[u8], u64),
    (resident, nids): (u64, &[u32]),
) -> serde_json::Map<String, serde_json::Value> {
    let from_buddy = opts.from_buddy();
    let mut detail = serde_json::Map::new();
    detail.insert("kernel_version".into(), cfg.version.to_string().into());
    detail.insert("hstate".into(), opts.hstate.name().into());
    detail.insert("order".into(), opts.hstate.order().into());
    detail.insert("nodes".into(), opts.nodes.into());
    detail.insert("count_per_node".into(), opts.count.into());
    detail.insert("hvo".into(), opts.hvo.name().into());
    detail.insert("runtime".into(), opts.runtime.into());
    detail.insert("from_buddy".into(), from_buddy.into());
    detail.insert("placed".into(), (!opts.placed.is_empty()).into());
    detail.insert("hvo_available".into(), report.hvo.is_ok().into());
    detail.insert("optimized".into(), report.optimized.into());
    detail.insert("fallback_folios".into(), report.fallback_folios.into());
    detail.insert(
        "folios".into(),
        serde_json::Value::Array(
            folios
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "head_pfn": r.head_pfn,
                        "order": r.hstate.order(),
                        "nid": r.nid,
                        "optimized": r.outcome.optimized(),
                    })
                })
                .collect(),
        ),
    );
    detail.insert("resident_vmemmap_bytes".into(), resident.into());
    if from_buddy {
        let ranges = runtime_lru_prev_ranges::<P>(cfg, bytes, start_pfn, folios);
        detail.insert(
            "stale_fields".into(),
            serde_json::json!([{
                "field": "lru.prev",
                "offset": offsets::LRU_PREV,
                "len": 8,
                "pfn_ranges": ranges,
                "history_values": [format!("{:#x}", cfg.list_poison().1)],
            }]),
        );
    }
    // The modelled kernel-image addresses the struct pages point to: the free list heads.
    let symbols: serde_json::Map<String, serde_json::Value> = nids
        .iter()
        .map(|&nid| {
            let addr = hugetlb_init::hugepage_freelist_addr(opts.hstate, nid);
            (
                format!("{addr:#x}"),
                format!("hstates[{}].hugepage_freelists[{nid}]", opts.hstate.name()).into(),
            )
        })
        .collect();
    detail.insert("kernel_symbols".into(), symbols.into());
    detail
}

/// The parameters of a hugetlb dump the boot itself does not check.
fn check_hugetlb(
    opts: &HugetlbDump,
    cfg: &KernelConfig,
    layout: &memmap_core::FlagsLayout,
) -> Result<(), DumpError> {
    if opts.nodes == 0 || u64::from(opts.nodes - 1) > layout.nodes_mask() {
        return Err(invalid(format!("--nodes must be in 1..={}", layout.nodes_mask() + 1)));
    }
    if opts.count == 0 && opts.placed.is_empty() {
        return Err(invalid("--count must be at least 1"));
    }
    if opts.zone >= cfg.zone_device() {
        return Err(invalid(format!("--zone must be below ZONE_DEVICE ({})", cfg.zone_device())));
    }
    Ok(())
}
