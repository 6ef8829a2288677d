//! `memmap-bench dump`: writes a memmap to `DIR/memmap.bin` + `DIR/meta.json`.
//!
//! See the [crate documentation](crate) for the format.

use std::fs;
use std::io;
use std::path::Path;

use memmap_core::{
    DevPagemap, FlagsLayout, InitOptions, InitReport, KernelConfig, Memmap, MemoryType, MigrateType, PG,
    RecordingHooks, Strategy, StructPage, VmemAltmap, ZoneDeviceRange, memmap_init_zone_device,
};
use serde::{Deserialize, Serialize};

/// Version of the dump format.
pub const FORMAT_VERSION: u32 = 1;

/// `flags_layout` in `meta.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagsLayoutJson {
    /// `ZONES_PGSHIFT`.
    pub zones_pgshift: u32,
    /// `ZONES_WIDTH`.
    pub zones_width: u32,
    /// `NODES_PGSHIFT`.
    pub nodes_pgshift: u32,
    /// `NODES_WIDTH`.
    pub nodes_width: u32,
    /// `SECTIONS_PGSHIFT`.
    pub sections_pgshift: u32,
    /// `SECTIONS_WIDTH`.
    pub sections_width: u32,
    /// `LAST_CPUPID_PGSHIFT`.
    pub last_cpupid_pgshift: u32,
    /// `LAST_CPUPID_WIDTH`.
    pub last_cpupid_width: u32,
}

impl From<&FlagsLayout> for FlagsLayoutJson {
    fn from(l: &FlagsLayout) -> Self {
        FlagsLayoutJson {
            zones_pgshift: l.zones_pgshift,
            zones_width: l.zones_width,
            nodes_pgshift: l.nodes_pgshift,
            nodes_width: l.nodes_width,
            sections_pgshift: l.sections_pgshift,
            sections_width: l.sections_width,
            last_cpupid_pgshift: l.last_cpupid_pgshift,
            last_cpupid_width: l.last_cpupid_width,
        }
    }
}

/// `pg_bits` in `meta.json`: page flag bit numbers and type values of the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgBits {
    /// `PG_reserved`.
    pub reserved: u32,
    /// `PG_head`.
    pub head: u32,
    /// `PGTY_hugetlb << 24`, the `page_type` word of a hugetlb folio head.
    pub hugetlb_page_type: u32,
}

impl PgBits {
    /// The baseline's bits.
    #[must_use]
    pub fn baseline() -> Self {
        PgBits {
            reserved: PG::RESERVED,
            head: PG::HEAD,
            hugetlb_page_type: memmap_core::PageType::word(memmap_core::PageType::HUGETLB),
        }
    }
}

/// `altmap` in `meta.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AltmapJson {
    /// `base_pfn`.
    pub base_pfn: u64,
    /// `reserve`.
    pub reserve: u64,
    /// `free`.
    pub free: u64,
}

/// Fields common to every dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpMeta {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    /// `zone-device` or `hugetlb`.
    pub kind: String,
    /// Kernel config preset name.
    pub config: String,
    /// `little` or `big`: byte order of the words in `memmap.bin`.
    pub endianness: String,
    /// First PFN in `memmap.bin`.
    pub start_pfn: u64,
    /// Struct pages in `memmap.bin`.
    pub nr_pages: u64,
    /// `sizeof(struct page)`: 64, or 72 with `virtual`.
    pub struct_page_size: usize,
    /// Modelled kernel address of the struct page of `start_pfn` at init time.
    pub page_addr_base: u64,
    /// `page_addr_base` in hex, for people.
    pub page_addr_base_hex: String,
    /// `ZONE_DEVICE`'s index (the zone of the initialized pages, for `zone-device`).
    pub zone: u32,
    /// Node id.
    pub nid: u32,
    /// Page-flags layout.
    pub flags_layout: FlagsLayoutJson,
    /// Flag bits and type values.
    pub pg_bits: PgBits,
    /// PFN of the first page of every pageblock overlapping the range whose migrate type is
    /// MOVABLE, ascending.
    pub movable_pageblock_pfns: Vec<u64>,
    /// Number of `cond_resched` hook calls.
    pub resched_pfns: u64,
    /// Number of `page_ref_set` tracepoint events.
    pub page_ref_events: u64,
    /// The strategy actually used.
    pub strategy: String,
    /// The strategy requested.
    pub strategy_requested: String,
    /// Why `strategy` was used.
    pub strategy_reason: String,
    /// `stream_hal::backend()` of the build that wrote the dump.
    pub backend: String,
    /// Kind-specific fields.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
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
}

/// Runs the initialization and writes the dump to `dir`.
///
/// # Errors
///
/// An I/O error, or an [`io::ErrorKind::InvalidInput`] error carrying the initializer's typed
/// error.
pub fn dump_zone_device(opts: &ZoneDeviceDump, dir: &Path) -> io::Result<DumpMeta> {
    if opts.layout72 {
        dump_zone_device_as::<memmap_core::Page72>(opts, dir)
    } else {
        dump_zone_device_as::<memmap_core::Page64>(opts, dir)
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn dump_zone_device_as<P: StructPage>(opts: &ZoneDeviceDump, dir: &Path) -> io::Result<DumpMeta> {
    let cfg =
        KernelConfig { debug_page_ref: opts.page_ref_trace || opts.config.debug_page_ref, ..opts.config };
    let layout = cfg.flags_layout().map_err(invalid)?;
    let mut pgmap = DevPagemap::new(opts.memory_type).with_vmemmap_shift(opts.vmemmap_shift);
    if let Some((reserve, free)) = opts.altmap {
        pgmap = pgmap.with_altmap(VmemAltmap { base_pfn: opts.start_pfn, reserve, free });
    }
    let range = ZoneDeviceRange {
        zone: cfg.zone_device(),
        nid: opts.nid,
        start_pfn: opts.start_pfn,
        nr_pages: opts.nr_pages,
    };
    let n = usize::try_from(opts.nr_pages).map_err(invalid)?;
    let mut owned = memmap_core::OwnedMemmap::<P>::new(cfg, opts.start_pfn, opts.nr_pages)?;
    let mut hooks = RecordingHooks::new(opts.page_ref_trace);
    let (report, page_addr_base, movable, took) = {
        let mut memmap = owned.memmap();
        let t = std::time::Instant::now();
        let report: InitReport = memmap_init_zone_device(
            &mut memmap,
            &range,
            &pgmap,
            &InitOptions::new(opts.strategy),
            &mut hooks,
        )
        .map_err(invalid)?;
        let took = t.elapsed();
        let movable: Vec<u64> =
            memmap.pageblocks_with(opts.start_pfn, opts.nr_pages, MigrateType::Movable).collect();
        (report, memmap.vaddr(opts.start_pfn), movable, took)
    };
    fs::create_dir_all(dir)?;
    fs::write(dir.join("memmap.bin"), &owned.as_bytes()[..n * P::SIZE])?;

    let mut detail = serde_json::Map::new();
    detail.insert("pgmap_addr".into(), pgmap.addr.into());
    detail.insert("memory_type".into(), opts.memory_type.name().into());
    detail.insert("vmemmap_shift".into(), opts.vmemmap_shift.into());
    detail.insert(
        "altmap".into(),
        match pgmap.altmap {
            Some(a) => {
                serde_json::to_value(AltmapJson { base_pfn: a.base_pfn, reserve: a.reserve, free: a.free })?
            }
            None => serde_json::Value::Null,
        },
    );
    detail.insert("compound_nr_pages".into(), memmap_core::compound_nr_pages(&cfg, P::SIZE, &pgmap).into());
    detail.insert("init_start_pfn".into(), report.start_pfn.into());
    detail.insert("pages_initialized".into(), report.pages_initialized.into());
    // The kernel's `pr_debug("%s initialised %lu pages in %ums\n", ...)` line.
    detail.insert(
        "pr_debug".into(),
        format!("memmap_init_zone_device initialised {} pages in {}ms", report.nr_pages, took.as_millis())
            .into(),
    );

    let meta = DumpMeta {
        format: FORMAT_VERSION,
        kind: "zone-device".into(),
        config: cfg.name.into(),
        endianness: if cfg!(target_endian = "little") { "little" } else { "big" }.into(),
        start_pfn: opts.start_pfn,
        nr_pages: opts.nr_pages,
        struct_page_size: P::SIZE,
        page_addr_base,
        page_addr_base_hex: format!("{page_addr_base:#x}"),
        zone: cfg.zone_device(),
        nid: opts.nid,
        flags_layout: FlagsLayoutJson::from(&layout),
        pg_bits: PgBits::baseline(),
        movable_pageblock_pfns: movable,
        resched_pfns: hooks.resched_pfns.len() as u64,
        page_ref_events: hooks.page_ref_events.len() as u64,
        strategy: report.used.name().into(),
        strategy_requested: report.requested.name().into(),
        strategy_reason: report.reason.to_string(),
        backend: stream_hal::backend().to_string(),
        detail,
    };
    write_meta(dir, &meta)?;
    Ok(meta)
}

/// Writes `meta.json`.
///
/// # Errors
///
/// I/O or serialization errors.
pub fn write_meta(dir: &Path, meta: &DumpMeta) -> io::Result<()> {
    let text = serde_json::to_string_pretty(meta)?;
    fs::write(dir.join("meta.json"), text + "\n")
}

/// Reads a dump back.
///
/// # Errors
///
/// I/O errors, malformed JSON, or a `memmap.bin` whose size disagrees with `meta.json`.
pub fn read_dump(dir: &Path) -> io::Result<(DumpMeta, Vec<u8>)> {
    let meta: DumpMeta = serde_json::from_slice(&fs::read(dir.join("meta.json"))?).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", dir.join("meta.json").display()))
    })?;
    let bytes = fs::read(dir.join("memmap.bin"))?;
    let expect = meta.nr_pages as usize * meta.struct_page_size;
    if bytes.len() != expect || meta.struct_page_size % 8 != 0 || meta.struct_page_size == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {} bytes, meta.json says {} pages of {} bytes",
                dir.join("memmap.bin").display(),
                bytes.len(),
                meta.nr_pages,
                meta.struct_page_size
            ),
        ));
    }
    Ok((meta, bytes))
}

/// Reads a memmap view's struct pages `[start, start + nr)` into bytes (for other dump kinds).
#[must_use]
pub fn memmap_bytes<P: StructPage>(memmap: &Memmap<'_, P>, start: u64, nr: u64) -> Vec<u8> {
    let mut out = vec![0u8; nr as usize * P::SIZE];
    memmap.copy_bytes(start, nr, &mut out);
    out
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

/// Boots the gigantic pages (real memfd HVO on Linux) and writes the dump to `dir`: the struct
/// pages of every gigantic page in PFN order, as the CPU reads them (HVO-optimized tails read
/// through their read-only alias).
///
/// # Errors
///
/// I/O errors, or [`io::ErrorKind::InvalidInput`] carrying the boot's typed error.
pub fn dump_hugetlb(opts: &HugetlbDump, dir: &Path) -> io::Result<DumpMeta> {
    if opts.layout72 {
        dump_hugetlb_as::<memmap_core::Page72>(opts, dir)
    } else {
        dump_hugetlb_as::<memmap_core::Page64>(opts, dir)
    }
}

fn dump_hugetlb_as<P: StructPage>(opts: &HugetlbDump, dir: &Path) -> io::Result<DumpMeta> {
    use hugetlb_init::{BootParams, BootRequest, OwnedBoot};
    let cfg =
        KernelConfig { debug_page_ref: opts.page_ref_trace || opts.config.debug_page_ref, ..opts.config };
    let layout = cfg.flags_layout().map_err(invalid)?;
    if opts.nodes == 0 || u64::from(opts.nodes - 1) > layout.nodes_mask() {
        return Err(invalid(format!("--nodes must be in 1..={}", layout.nodes_mask() + 1)));
    }
    let mut machine = OwnedBoot::<P>::packed(cfg, opts.hstate, opts.nodes, opts.count.max(1), true)?;
    let counts = SharedCounts {
        resched: std::sync::Arc::default(),
        events: std::sync::Arc::default(),
        tracepoint: opts.page_ref_trace,
    };
    let params = BootParams { tail: InitOptions::new(opts.strategy), hvo: opts.hvo.params(), parallel: true };
    let report = machine
        .boot_with_hooks(&BootRequest::per_node(opts.hstate, opts.count), &params, |_| counts.clone())
        .map_err(|e| match e {
            hugetlb_init::BootError::Invalid(e) => invalid(e),
            hugetlb_init::BootError::Io(e) => e,
        })?;
    let bytes = machine.folio_bytes();
    let mut folios: Vec<_> = machine.folios().to_vec();
    folios.sort_by_key(|r| r.head_pfn);
    let start_pfn = folios.first().map_or(0, |r| r.head_pfn);
    let nr_pages = (bytes.len() / P::SIZE) as u64;
    // The packed node layout puts the folios back to back, so `memmap.bin` is one PFN range.
    let contiguous = folios.windows(2).all(|w| w[0].head_pfn + w[0].hstate.nr_pages() == w[1].head_pfn);
    if !contiguous {
        return Err(io::Error::other("gigantic pages are not contiguous"));
    }
    let mut movable = Vec::new();
    for (i, spec) in machine.specs().iter().enumerate() {
        let first = spec.start_pfn >> cfg.pageblock_order;
        for (k, &v) in machine.vmemmap(i).pageblocks().iter().enumerate() {
            if v == MigrateType::Movable.value() {
                movable.push((first + k as u64) << cfg.pageblock_order);
            }
        }
    }
    fs::create_dir_all(dir)?;
    fs::write(dir.join("memmap.bin"), &bytes)?;

    let (used, reason) =
        report.fallback_strategy.unwrap_or((opts.strategy, memmap_core::StrategyReason::Requested));
    let mut detail = serde_json::Map::new();
    detail.insert("hstate".into(), opts.hstate.name().into());
    detail.insert("order".into(), opts.hstate.order().into());
    detail.insert("nodes".into(), opts.nodes.into());
    detail.insert("count_per_node".into(), opts.count.into());
    detail.insert("hvo".into(), opts.hvo.name().into());
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
    detail.insert("resident_vmemmap_bytes".into(), machine.resident_vmemmap_bytes().unwrap_or(0).into());
    let page_addr_base = cfg.vmemmap_start.wrapping_add(start_pfn.wrapping_mul(P::SIZE as u64));
    let meta = DumpMeta {
        format: FORMAT_VERSION,
        kind: "hugetlb".into(),
        config: cfg.name.into(),
        endianness: if cfg!(target_endian = "little") { "little" } else { "big" }.into(),
        start_pfn,
        nr_pages,
        struct_page_size: P::SIZE,
        page_addr_base,
        page_addr_base_hex: format!("{page_addr_base:#x}"),
        zone: machine.specs().first().map_or(0, |s| s.zone),
        nid: machine.specs().first().map_or(0, |s| s.nid),
        flags_layout: FlagsLayoutJson::from(&layout),
        pg_bits: PgBits::baseline(),
        movable_pageblock_pfns: movable,
        resched_pfns: counts.resched.load(std::sync::atomic::Ordering::Relaxed),
        page_ref_events: counts.events.load(std::sync::atomic::Ordering::Relaxed),
        strategy: used.name().into(),
        strategy_requested: opts.strategy.name().into(),
        strategy_reason: reason.to_string(),
        backend: stream_hal::backend().to_string(),
        detail,
    };
    write_meta(dir, &meta)?;
    Ok(meta)
}
