//! `memmap_init_zone_device` on a guarded memmap, capturing everything observable (bytes,
//! pageblocks, hook calls, report).

use super::{guard_page, is_guard};
use memmap_core::{
    DevPagemap, InitError, InitOptions, InitReport, KernelConfig, Memmap, PageRefEvent, RecordingHooks,
    Strategy, StructPage, ZoneDeviceRange, memmap_init_zone_device, pageblocks_needed,
};

/// Struct pages on each side of the range that must stay untouched.
pub const GUARD_PAGES: u64 = 3;

/// Everything one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Run<P> {
    pub base_pfn: u64,
    pub pages: Vec<P>,
    pub pageblocks: Vec<u8>,
    pub resched: Vec<u64>,
    pub events: Vec<PageRefEvent>,
    pub report: InitReport,
}

impl<P: StructPage> Run<P> {
    pub fn page(&self, pfn: u64) -> &P {
        &self.pages[(pfn - self.base_pfn) as usize]
    }
    pub fn guard_intact(&self, range: &ZoneDeviceRange) -> bool {
        let n = self.pages.len() as u64;
        let inner = |pfn: u64| pfn >= range.start_pfn && pfn < range.start_pfn + range.nr_pages;
        (0..n).map(|i| self.base_pfn + i).filter(|&pfn| !inner(pfn)).all(|pfn| is_guard(self.page(pfn)))
    }
}

/// Runs one init over `[range.start - GUARD, range.end + GUARD)` filled with guard pages.
pub fn run<P: StructPage>(
    cfg: KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    strategy: Strategy,
    tracepoint: bool,
) -> Result<Run<P>, (InitError, bool)> {
    run_opts(cfg, range, pgmap, InitOptions::new(strategy), tracepoint)
}

/// [`run`] with full options.
pub fn run_opts<P: StructPage>(
    cfg: KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    opts: InitOptions,
    tracepoint: bool,
) -> Result<Run<P>, (InitError, bool)> {
    run_full(cfg, range, pgmap, opts, tracepoint, false)
}

/// [`run_opts`], with `hotplug` first `move_pfn_range_to_zone` (the altmap part) as
/// `memremap_pages()` runs it; `report` is then the `memmap_init_zone_device` one.
pub fn run_full<P: StructPage>(
    cfg: KernelConfig,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    opts: InitOptions,
    tracepoint: bool,
    hotplug: bool,
) -> Result<Run<P>, (InitError, bool)> {
    let base = range.start_pfn.saturating_sub(GUARD_PAGES);
    let n = range.start_pfn - base + range.nr_pages + GUARD_PAGES;
    let mut pages = vec![guard_page::<P>(); n as usize];
    let mut pageblocks = vec![0u8; pageblocks_needed(&cfg, base, n)];
    let mut hooks = RecordingHooks::new(tracepoint);
    let result = {
        let mut memmap = Memmap::new(cfg, base, &mut pages, &mut pageblocks).expect("memmap");
        if hotplug {
            memmap_core::move_pfn_range_to_zone(&mut memmap, range, pgmap, &opts, &mut hooks)
                .and_then(|_| memmap_init_zone_device(&mut memmap, range, pgmap, &opts, &mut hooks))
        } else {
            memmap_init_zone_device(&mut memmap, range, pgmap, &opts, &mut hooks)
        }
    };
    match result {
        Ok(report) => Ok(Run {
            base_pfn: base,
            pages,
            pageblocks,
            resched: hooks.resched_pfns,
            events: hooks.page_ref_events,
            report,
        }),
        Err(e) => {
            let untouched = pages.iter().all(is_guard)
                && hooks.resched_pfns.is_empty()
                && hooks.page_ref_events.is_empty();
            Err((e, untouched))
        }
    }
}

/// A config with the tracepoint compiled in (`CONFIG_DEBUG_PAGE_REF`).
pub fn with_debug_page_ref(cfg: KernelConfig) -> KernelConfig {
    KernelConfig { debug_page_ref: true, ..cfg }
}

pub fn range(cfg: &KernelConfig, start_pfn: u64, nr_pages: u64) -> ZoneDeviceRange {
    ZoneDeviceRange::new(cfg.zone_device(), 1, start_pfn, nr_pages)
}

/// The modelled address of the struct page of `pfn` (default vmemmap base).
pub fn vaddr<P: StructPage>(cfg: &KernelConfig, pfn: u64) -> u64 {
    cfg.vmemmap_start + pfn * P::SIZE as u64
}
