//! Running the model into a dump: [`ZoneDeviceDump`] (`memmap_init_zone_device` of one device
//! range) and [`HugetlbDump`] (boot-time gigantic pages, with real memfd-backed HVO on Linux)
//! describe what to model; [`ZoneDeviceDump::run`] and [`HugetlbDump::run`] run it in this
//! process and return the [`Dump`] in memory, which [`Dump::write`] writes to a checked
//! [`OutputDir`]. Nothing here touches the file system until `write`.

use memmap_core::{
    DevPagemap, InitOptions, InitReport, KernelConfig, MemoryType, MigrateType, OwnedMemmap, Page64, Page72,
    RecordingHooks, Strategy, StructPage, VmemAltmap, ZoneDeviceRange, memmap_init_zone_device,
};

use crate::error::DumpError;
use crate::meta::{AltmapJson, DumpMeta, Placement, Written};
use crate::write::OutputDir;

/// A dump made in memory: its metadata and the struct page bytes of `memmap.bin`.
pub struct Dump {
    /// `meta.json`'s content.
    pub meta: DumpMeta,
    bytes: DumpBytes,
}

/// Where a dump's struct page bytes live: the model's own mapping (a large ZONE_DEVICE range
/// is not copied) or a buffer.
pub(crate) enum DumpBytes {
    Owned64(OwnedMemmap<memmap_core::Page64>, usize),
    Owned72(OwnedMemmap<memmap_core::Page72>, usize),
    Vec(Vec<u8>),
}

impl core::fmt::Debug for Dump {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dump").field("meta", &self.meta).field("bytes", &self.memmap().len()).finish()
    }
}

impl Dump {
    /// The struct pages, `meta.nr_pages * meta.struct_page_size` bytes in pfn order: the
    /// content of `memmap.bin`.
    #[must_use]
    pub fn memmap(&self) -> &[u8] {
        match &self.bytes {
            DumpBytes::Owned64(m, n) => &m.as_bytes()[..*n],
            DumpBytes::Owned72(m, n) => &m.as_bytes()[..*n],
            DumpBytes::Vec(v) => v,
        }
    }

    /// A dump whose bytes are the first `len` bytes of an owned memmap.
    pub(crate) fn from_owned<P: DumpLayout>(meta: DumpMeta, memmap: OwnedMemmap<P>, len: usize) -> Dump {
        Dump { meta, bytes: P::owned(memmap, len) }
    }

    /// Writes `memmap.bin` and `meta.json` to `out` (see [`OutputDir::commit`]).
    ///
    /// # Errors
    ///
    /// The output's errors, naming the path.
    pub fn write(&self, out: &OutputDir) -> Result<(), DumpError> {
        out.commit(self.memmap(), &meta_text(&self.meta)?)
    }
}

/// A struct page layout a dump can be made of (the 64- and 72-byte layouts).
pub(crate) trait DumpLayout: StructPage {
    fn owned(memmap: OwnedMemmap<Self>, len: usize) -> DumpBytes;
}

impl DumpLayout for memmap_core::Page64 {
    fn owned(memmap: OwnedMemmap<Self>, len: usize) -> DumpBytes {
        DumpBytes::Owned64(memmap, len)
    }
}

impl DumpLayout for memmap_core::Page72 {
    fn owned(memmap: OwnedMemmap<Self>, len: usize) -> DumpBytes {
        DumpBytes::Owned72(memmap, len)
    }
}

/// Options of `dump zone-device`.
#[derive(Debug, Clone)]
pub struct ZoneDeviceDump {
    /// Kernel config.
    pub config: KernelConfig,
    /// 72-byte `WANT_PAGE_VIRTUAL` layout instead of 64.
    pub layout72: bool,
    /// `pgmap->type`.
    pub memory_type: MemoryType,
    /// `vmemmap_shift`.
    pub vmemmap_shift: u32,
    /// `(reserve, free)` of an altmap starting at `start_pfn`.
    pub altmap: Option<(u64, u64)>,
    /// First PFN.
    pub start_pfn: u64,
    /// Pages.
    pub nr_pages: u64,
    /// Node id.
    pub nid: u32,
    /// Strategy.
    pub strategy: Strategy,
    /// Enable `CONFIG_DEBUG_PAGE_REF` and the `page_ref_set` tracepoint.
    pub page_ref_trace: bool,
    /// End of boot memory ([`ZoneDeviceRange::boot_memory_end_pfn`]): 0 when the range has
    /// sections of its own.
    pub boot_memory_end_pfn: u64,
    /// Boot memory above the range ([`ZoneDeviceRange::boot_memory_above_pfn`]): `u64::MAX`
    /// when none.
    pub boot_memory_above_pfn: u64,
}

impl ZoneDeviceDump {
    /// Runs `move_pfn_range_to_zone` and `memmap_init_zone_device` on a fresh memmap and
    /// returns the dump (deduplicated struct pages read as their vmemmap page's source, as
    /// the kernel's vmemmap shows them).
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] carrying the kernel's refusal ([`check_mappable`](Self::check_mappable))
    /// or the initializer's typed error, [`DumpError::Map`] when the memmap cannot be mapped.
    pub fn run(&self) -> Result<Dump, DumpError> {
        self.check_mappable().map_err(invalid)?;
        if self.layout72 { zone_device_as::<Page72>(self) } else { zone_device_as::<Page64>(self) }
    }

    /// Refuses what the kernel refuses before `memremap_pages()` makes any struct page
    /// ([`memmap_core::check_memremap_pages`]: a misaligned pmem namespace, a range
    /// `__add_pages()` refuses); [`run`](Self::run) calls it first. A range the model cannot
    /// hold at all (past the configuration's last pfn, or a node id its flags cannot hold)
    /// passes here and is refused by the run with the initializer's own typed error.
    ///
    /// # Errors
    ///
    /// [`InitError::NotMappable`](memmap_core::InitError::NotMappable) with the kernel's reason.
    pub fn check_mappable(&self) -> Result<(), memmap_core::InitError> {
        let cfg = &self.config;
        let fits = self.start_pfn.checked_add(self.nr_pages).is_some_and(|end| end <= cfg.max_pfn());
        let node = cfg.flags_layout().is_ok_and(|l| u64::from(self.nid) <= l.nodes_mask());
        if !fits || !node {
            return Ok(());
        }
        memmap_core::check_memremap_pages(cfg, &self.range(cfg), &self.pgmap())
    }

    /// The device's `dev_pagemap`: memory type, `vmemmap_shift` and the altmap.
    fn pgmap(&self) -> DevPagemap {
        let pgmap = DevPagemap::new(self.memory_type).with_vmemmap_shift(self.vmemmap_shift);
        match self.altmap {
            Some((reserve, free)) => {
                pgmap.with_altmap(VmemAltmap { base_pfn: self.start_pfn, reserve, free })
            }
            None => pgmap,
        }
    }

    /// The device's pfn range in `cfg`'s ZONE_DEVICE zone.
    fn range(&self, cfg: &KernelConfig) -> ZoneDeviceRange {
        ZoneDeviceRange::new(cfg.zone_device(), self.nid, self.start_pfn, self.nr_pages)
            .with_boot_memory_end(self.boot_memory_end_pfn)
            .with_boot_memory_above(self.boot_memory_above_pfn)
    }

    /// `sizeof(struct page)` of the chosen layout.
    #[must_use]
    pub fn struct_page_size(&self) -> u64 {
        struct_page_bytes(self.layout72)
    }
}

/// `sizeof(struct page)`: 72 bytes with `WANT_PAGE_VIRTUAL` (`layout72`), else 64.
pub(crate) const fn struct_page_bytes(layout72: bool) -> u64 {
    if layout72 { 72 } else { 64 }
}

/// `config` with `CONFIG_DEBUG_PAGE_REF` on when the dump traces `page_ref_set`.
pub(crate) fn traced(config: KernelConfig, page_ref_trace: bool) -> KernelConfig {
    KernelConfig { debug_page_ref: page_ref_trace || config.debug_page_ref, ..config }
}

pub(crate) fn invalid(e: impl std::fmt::Display) -> DumpError {
    DumpError::Input(e.to_string())
}

/// An `io::Error` of mapping storage: `InvalidInput` is the library refusing the parameters.
pub(crate) fn map_error(what: String) -> impl FnOnce(std::io::Error) -> DumpError {
    move |e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            DumpError::Input(format!("{what}: {e}"))
        } else {
            DumpError::Map { what, source: e }
        }
    }
}

/// `meta.json`'s text.
fn meta_text(meta: &DumpMeta) -> Result<String, DumpError> {
    let mut text = serde_json::to_string_pretty(meta).map_err(|e| DumpError::Input(e.to_string()))?;
    text.push('\n');
    Ok(text)
}

fn zone_device_as<P: DumpLayout>(opts: &ZoneDeviceDump) -> Result<Dump, DumpError> {
    let cfg = traced(opts.config, opts.page_ref_trace);
    let layout = cfg.flags_layout().map_err(invalid)?;
    let (pgmap, range) = (opts.pgmap(), opts.range(&cfg));
    let n = usize::try_from(opts.nr_pages).map_err(invalid)?;
    let mut owned = OwnedMemmap::<P>::new(cfg, opts.start_pfn, opts.nr_pages)
        .map_err(map_error(format!("map a memmap of {} struct pages", opts.nr_pages)))?;
    let mut hooks = RecordingHooks::new(opts.page_ref_trace);
    let init_opts = InitOptions::new(opts.strategy);
    let (altmap_part, report, page_addr_base, movable, took, aliases) = {
        let mut memmap = owned.memmap();
        // What `memremap_pages()` does: the altmap part (`move_pfn_range_to_zone`), then the
        // device pages.
        let altmap_part =
            memmap_core::move_pfn_range_to_zone(&mut memmap, &range, &pgmap, &init_opts, &mut hooks)
                .map_err(invalid)?;
        let t = std::time::Instant::now();
        let report: InitReport =
            memmap_init_zone_device(&mut memmap, &range, &pgmap, &init_opts, &mut hooks).map_err(invalid)?;
        let took = t.elapsed();
        let movable: Vec<u64> =
            memmap.pageblocks_with(opts.start_pfn, opts.nr_pages, MigrateType::Movable).collect();
        // Deduplicated struct pages read as their vmemmap page's source, as the kernel's
        // vmemmap shows them.
        let mut aliases = 0u64;
        if memmap_core::vmemmap_can_optimize(&cfg, P::SIZE, &pgmap) {
            for pfn in report.start_pfn..report.start_pfn + report.nr_pages {
                if let Some(src) = memmap_core::vmemmap_alias::<P>(&cfg, &range, &pgmap, pfn) {
                    memmap.write(pfn, memmap.read(src));
                    aliases += 1;
                }
            }
        }
        (altmap_part, report, memmap.vaddr(opts.start_pfn), movable, took, aliases)
    };
    let done = ZoneDeviceDone { altmap_part, report, took, aliases };
    let detail = zone_device_detail::<P>(opts, &cfg, &range, &pgmap, &done);

    let at = Placement {
        start_pfn: opts.start_pfn,
        nr_pages: opts.nr_pages,
        page_addr_base,
        zone: cfg.zone_device(),
        nid: opts.nid,
    };
    let how = Written { used: report.used, requested: report.requested, reason: report.reason.to_string() };
    let meta = DumpMeta {
        movable_pageblock_pfns: movable,
        resched_pfns: hooks.resched_pfns.len() as u64,
        page_ref_events: hooks.page_ref_events.len() as u64,
        detail,
        ..DumpMeta::of("zone-device", &cfg, &layout, P::SIZE, at, how)
    };
    Ok(Dump { meta, bytes: P::owned(owned, n * P::SIZE) })
}

/// The struct pages `memmap_init_zone_device` leaves as they were, `[start, end)` ranges:
/// before 7.2, the deduplicated count of struct pages is written for compound pages in early
/// sections too, and the rest of the boot memmap there keeps whatever it held (the dump has
/// zeros; a kernel shows an earlier mapping's pages).
fn stale_ranges<P: StructPage>(
    cfg: &KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    report: &InitReport,
) -> Vec<(u64, u64)> {
    let ppc = pgmap.vmemmap_nr();
    let written = memmap_core::compound_nr_pages(cfg, P::SIZE, pgmap);
    if cfg.behaviour().zone_device_early_sections || written >= ppc || report.nr_pages == 0 {
        return Vec::new();
    }
    let end = report.start_pfn + report.nr_pages;
    (report.start_pfn..end)
        .step_by(usize::try_from(ppc).unwrap_or(usize::MAX))
        .filter(|&head| range.is_early(cfg, head))
        .map(|head| (head + written, head + ppc))
        .collect()
}

/// Byte offset of `lru.prev` in a struct page.
const RUNTIME_LRU_PREV_OFFSET: usize = 16;

/// The tails of gigantic pages allocated at run time whose `lru.prev` still holds the self
/// pointer `memmap_init` wrote (a tail's own, or through an aliased vmemmap page the pointer
/// of the tail it shows), as `[start, end)` ranges. Neither `prep_compound_tail()` nor the
/// hugetlb code writes that word, and at run time the pages come from the buddy allocator: a
/// page that was once the head of a free block was unlinked with `list_del()`, which leaves
/// `LIST_POISON2` ([`KernelConfig::list_poison`]) there. Which pages those were depends on the allocator's history, so the
/// word is either of the two values and not a function of the configuration: the dump's
/// `stale_fields` names the field, the struct pages and the other value (`history_values`).
fn runtime_lru_prev_ranges<P: StructPage>(
    cfg: &KernelConfig,
    bytes: &[u8],
    start_pfn: u64,
    folios: &[hugetlb_init::HugeBootmemPage],
) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for f in folios {
        for pfn in f.head_pfn + 1..f.head_pfn + f.hstate.nr_pages() {
            let off = (pfn - start_pfn) as usize * P::SIZE + RUNTIME_LRU_PREV_OFFSET;
            let Some(word) = bytes.get(off..off + 8) else { continue };
            let word = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
            // The self pointer of a struct page of the folio: the slot's own, or (read through
            // an aliased vmemmap page, 6.12's HVO maps a folio's tail vmemmap pages onto its
            // first frame) the one of the struct page whose bytes it shows, whose history it
            // shares.
            let rel = word.wrapping_sub(cfg.vmemmap_start).wrapping_sub(8);
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
    /// Where the folios are, `(head pfn, nid)`, grouped by node in ascending node order, each
    /// node's folios in the order of its free list (the first is first on
    /// `h->hugepage_freelists[nid]`): what a kernel did, learned from the guest. Empty: `count`
    /// folios per node packed from 4 GiB ([`hugetlb_init::NodeSpec::packed`]). With placed
    /// folios, `memmap.bin` holds every struct page from the lowest head to the end of the
    /// highest folio (the pages between folios as the model's memmap left them: poison).
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
    /// Boots the gigantic pages (real memfd HVO on Linux) and returns the dump: the struct
    /// pages of every gigantic page in PFN order, as the CPU reads them (HVO-optimized tails
    /// read through their read-only alias).
    ///
    /// # Errors
    ///
    /// [`DumpError::Input`] carrying the boot's typed error, [`DumpError::Map`] when the
    /// vmemmap cannot be created.
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

/// The nodes the model's vmemmap covers: `count` folios per node packed from 4 GiB, or, with
/// placed folios, per node the PFN range from its lowest head to the end of its highest folio.
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

/// Boots the gigantic pages on `machine` with `counts` as every node's hooks: `count` per node
/// (the kernel's per-node request), or the placed folios as the bootmem records a kernel had.
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

/// The content of `memmap.bin` from `start_pfn` on: the packed folios' struct pages back to
/// back, or, with placed folios, every struct page up to the end of the highest folio.
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
        for (k, &v) in machine.vmemmap(i).pageblocks().iter().enumerate() {
            if v == MigrateType::Movable.value() {
                movable.push((first + k as u64) << cfg.pageblock_order);
            }
        }
    }
    movable
}

/// Before 6.10 the buddy allocator leaves the free list's migrate type in the head's `index`;
/// hugetlb folios of an hstate that can migrate come from MIGRATE_MOVABLE (`htlb_alloc_mask()`
/// is `GFP_HIGHUSER_MOVABLE`). It is written before HVO remaps the vmemmap, so the fake heads
/// (struct pages read through the head's frame, the only ones whose bytes equal the head's)
/// show it too.
fn mark_alloc_migratetype<P: StructPage>(
    bytes: &mut [u8],
    folios: &[hugetlb_init::HugeBootmemPage],
    start_pfn: u64,
) -> Result<(), DumpError> {
    let index = memmap_core::model::page::offsets::INDEX;
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
                "offset": RUNTIME_LRU_PREV_OFFSET,
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

/// What a zone-device dump's run did, for its `meta.json`.
struct ZoneDeviceDone {
    altmap_part: InitReport,
    report: InitReport,
    took: std::time::Duration,
    aliases: u64,
}

/// The kind-specific fields of a zone-device dump's `meta.json`.
fn zone_device_detail<P: StructPage>(
    opts: &ZoneDeviceDump,
    cfg: &KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    done: &ZoneDeviceDone,
) -> serde_json::Map<String, serde_json::Value> {
    let ZoneDeviceDone { altmap_part, report, took, aliases } = done;
    let mut detail = serde_json::Map::new();
    detail.insert("pgmap_addr".into(), pgmap.addr.into());
    detail.insert("memory_type".into(), opts.memory_type.name().into());
    detail.insert("vmemmap_shift".into(), opts.vmemmap_shift.into());
    detail.insert(
        "altmap".into(),
        match pgmap.altmap {
            Some(a) => {
                serde_json::json!(AltmapJson { base_pfn: a.base_pfn, reserve: a.reserve, free: a.free })
            }
            None => serde_json::Value::Null,
        },
    );
    detail.insert("compound_nr_pages".into(), memmap_core::compound_nr_pages(cfg, P::SIZE, pgmap).into());
    detail.insert("kernel_version".into(), cfg.version.to_string().into());
    detail.insert("boot_memory_end_pfn".into(), opts.boot_memory_end_pfn.into());
    if opts.boot_memory_above_pfn != u64::MAX {
        detail.insert("boot_memory_above_pfn".into(), opts.boot_memory_above_pfn.into());
    }
    detail.insert("altmap_part_pages".into(), altmap_part.pages_initialized.into());
    detail.insert("vmemmap_aliases".into(), (*aliases).into());
    detail.insert(
        "stale_pfn_ranges".into(),
        serde_json::Value::Array(
            stale_ranges::<P>(cfg, range, pgmap, report)
                .into_iter()
                .map(|(a, b)| serde_json::json!([a, b]))
                .collect(),
        ),
    );
    detail.insert("init_start_pfn".into(), report.start_pfn.into());
    detail.insert("pages_initialized".into(), report.pages_initialized.into());
    // The kernel's `pr_debug("%s initialised %lu pages in %ums\n", ...)` line.
    detail.insert(
        "pr_debug".into(),
        format!("memmap_init_zone_device initialised {} pages in {}ms", report.nr_pages, took.as_millis())
            .into(),
    );
    detail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsdax(start_pfn: u64, nr_pages: u64) -> ZoneDeviceDump {
        ZoneDeviceDump {
            config: KernelConfig::X86_64,
            layout72: false,
            memory_type: MemoryType::FsDax,
            vmemmap_shift: 0,
            altmap: None,
            start_pfn,
            nr_pages,
            nid: 0,
            strategy: Strategy::Auto,
            page_ref_trace: false,
            boot_memory_end_pfn: 0,
            boot_memory_above_pfn: u64::MAX,
        }
    }

    fn refusal(opts: &ZoneDeviceDump) -> DumpError {
        match opts.run() {
            Err(e) => e,
            Ok(d) => panic!("dumped {} pages", d.meta.nr_pages),
        }
    }

    /// A library user running a dump gets the kernel's refusal of a misaligned namespace, as
    /// the command line does, not a memmap no kernel would write.
    #[test]
    fn a_misaligned_namespace_is_refused_by_the_run() {
        // memmap=1G!4097M: 1 MiB-aligned at both ends.
        let opts = fsdax(0x100100, 0x40000);
        let e = refusal(&opts);
        let text = e.to_string();
        assert!(matches!(e, DumpError::Input(_)), "{text}");
        assert!(
            text.contains("misaligned, unable to map") && text.contains("nvdimm_namespace_common_probe"),
            "{text}"
        );
        assert_eq!(opts.check_mappable().unwrap_err().to_string(), text);
        // Half a sub-section of pages: __add_pages refuses it for any memory type.
        let e = refusal(&ZoneDeviceDump { memory_type: MemoryType::Generic, ..fsdax(0x100000, 256) });
        assert!(e.to_string().contains("Misaligned __add_pages"), "{e}");
        // The aligned namespace is dumped.
        assert_eq!(fsdax(0x100000, 1024).run().unwrap().meta.nr_pages, 1024);
        // Past the configuration's last pfn: the initializer's own error, not an alignment one.
        let past = fsdax(KernelConfig::X86_64.max_pfn() - 1, 2);
        let e = refusal(&past);
        assert!(past.check_mappable().is_ok() && !e.to_string().contains("isaligned"), "{e}");
    }
}
