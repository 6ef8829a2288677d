//! Running the model into a dump: [`ZoneDeviceDump`] and [`HugetlbDump`](crate::HugetlbDump)
//! describe what to model, their `run` returns the [`Dump`] in memory, and [`Dump::write`]
//! writes it to a checked [`OutputDir`].

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
    pub(crate) bytes: DumpBytes,
}

/// Where a dump's struct pages live: the model's own mapping (not copied) or a buffer.
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
    /// The struct pages in pfn order: the content of `memmap.bin`.
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
    /// End of boot memory ([`ZoneDeviceRange::boot_memory_end_pfn`]; 0: none in its sections).
    pub boot_memory_end_pfn: u64,
    /// Boot memory above the range ([`ZoneDeviceRange::boot_memory_above_pfn`]; `u64::MAX`: none).
    pub boot_memory_above_pfn: u64,
}

impl ZoneDeviceDump {
    /// Runs `move_pfn_range_to_zone` and `memmap_init_zone_device` on a fresh memmap and returns
    /// the dump as the kernel's vmemmap shows it.
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
    /// ([`memmap_core::check_memremap_pages`]); a range the model cannot hold at all is refused by
    /// the run itself.
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
        // The altmap's reserved pfns outside early sections: no init writes them, so they hold
        // what `sparse_add_section()` left in the fresh memmap, poison under `CONFIG_DEBUG_VM`.
        if let Some(a) = pgmap.altmap.filter(|a| cfg.debug_vm && !range.is_early(&cfg, a.base_pfn)) {
            let mut poison = P::ZEROED;
            poison.words_mut().fill(u64::from_ne_bytes([memmap_core::PAGE_POISON_BYTE; 8]));
            let end = a.base_pfn.saturating_add(a.reserve).min(opts.start_pfn + opts.nr_pages);
            for pfn in a.base_pfn.max(opts.start_pfn)..end {
                memmap.write(pfn, poison);
            }
        }
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

/// The struct pages the kernel leaves as they were, as `[start, end)` ranges: the altmap's
/// reserved pfns when they lie in an early section (no init writes them; their struct pages are
/// the boot memmap's, holding what boot or an earlier bind wrote), and before 7.2 the tails of
/// compound pages in early sections that `memmap_init_zone_device` skips.
fn stale_ranges<P: StructPage>(
    cfg: &KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    report: &InitReport,
) -> Vec<(u64, u64)> {
    let mut stale = Vec::new();
    if let Some(a) = pgmap.altmap.filter(|a| a.reserve > 0 && range.is_early(cfg, a.base_pfn)) {
        stale.push((a.base_pfn, a.base_pfn.saturating_add(a.reserve)));
    }
    let ppc = pgmap.vmemmap_nr();
    let written = memmap_core::compound_nr_pages(cfg, P::SIZE, pgmap);
    if cfg.behaviour().zone_device_early_sections || written >= ppc || report.nr_pages == 0 {
        return stale;
    }
    let end = report.start_pfn + report.nr_pages;
    stale.extend(
        (report.start_pfn..end)
            .step_by(usize::try_from(ppc).unwrap_or(usize::MAX))
            .filter(|&head| range.is_early(cfg, head))
            .map(|head| (head + written, head + ppc)),
    );
    stale
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

    /// The altmap's reserved pfns, which no init writes, read as the fresh memmap's bytes:
    /// `page_init_poison()`'s pattern with `CONFIG_DEBUG_VM`, zeros without; in an early section
    /// neither (the boot memmap's old bytes, declared stale).
    #[test]
    fn the_altmaps_reserved_pfns_hold_the_fresh_memmap_debug_vm_poisons() {
        let dump = |debug_vm: bool, start_pfn: u64, boot_end: u64| {
            let opts = ZoneDeviceDump {
                config: KernelConfig { debug_vm, ..KernelConfig::X86_64 },
                altmap: Some((2, 510)),
                boot_memory_end_pfn: boot_end,
                ..fsdax(start_pfn, 0x8000)
            };
            opts.run().unwrap().memmap()[..3 * 64].to_vec()
        };
        let poisoned = dump(true, 0x100000, 0);
        assert!(poisoned[..128].iter().all(|&b| b == memmap_core::PAGE_POISON_BYTE));
        assert!(poisoned[128..].iter().any(|&b| b != memmap_core::PAGE_POISON_BYTE), "pfn 2 is written");
        assert!(dump(false, 0x100000, 0)[..128].iter().all(|&b| b == 0));
        // The namespace starts 0x4000 pfns into a section whose first pages are boot memory.
        assert!(dump(true, 0x104000, 0x104000)[..128].iter().all(|&b| b == 0));
    }
}
