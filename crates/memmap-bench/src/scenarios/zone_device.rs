//! `zone-device`: `memmap_init_zone_device` for the two cases of the upstream series.
//!
//! * `zone-device-fsdax`: the nd_pmem case: fsdax, `--align 4K`, one struct page per compound
//!   (no compound pages), every struct page written.
//! * `zone-device-devdax-2m`: the dax_pmem case: devdax (`MEMORY_DEVICE_GENERIC`), `--align 2M`:
//!   2 MiB compound pages with the DAX vmemmap dedup, so 128 of every 512 struct pages written.
//!
//! Each strategy gets its own fresh mmap-backed memmap, so its first round runs on fresh memory
//! (page faults included, the "first binding"); later rounds are "rebinds". After the rounds the
//! template and streaming memmaps are compared with the slow one byte for byte.

use std::time::Instant;

use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, Memmap, MemoryType, OwnedMemmap, Page64, Strategy,
    ZoneDeviceRange, memmap_init_zone_device,
};

use super::{Common, split};
use crate::limits::Limits;
use crate::measure::{Runner, interleaved};
use crate::progress::{ProgressHooks, bar};
use crate::report::{LimitKind, Scenario, ScenarioSpec};
use crate::size::Bytes;

/// The two cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// nd_pmem: fsdax, 4 KiB alignment.
    Fsdax,
    /// dax_pmem: devdax, 2 MiB alignment.
    Devdax2m,
}

impl Case {
    /// Scenario name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Case::Fsdax => "zone-device-fsdax",
            Case::Devdax2m => "zone-device-devdax-2m",
        }
    }

    fn pgmap(self) -> DevPagemap {
        match self {
            Case::Fsdax => DevPagemap::new(MemoryType::FsDax),
            Case::Devdax2m => DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9),
        }
    }
}

/// Parameters of the scenario.
#[derive(Debug, Clone)]
pub struct Params {
    /// Device size in bytes.
    pub size: u64,
    /// Kernel config.
    pub config: KernelConfig,
}

/// First PFN of the modelled device (64 GiB physical: section- and 1 GiB-aligned).
pub const DEVICE_START_PFN: u64 = 1 << 24;

/// Memory the scenario needs: one memmap per strategy.
#[must_use]
pub fn memory_needed(size: u64) -> u64 {
    3 * (size / 4096) * 64
}

/// Runs one case.
///
/// # Panics
///
/// If the memmap cannot be mapped or the range is rejected (sizes are validated by the caller).
pub fn run(case: Case, p: &Params, common: &Common, limits: &Limits) -> Scenario {
    let cfg = p.config;
    let nr = p.size / 4096;
    let pgmap = case.pgmap();
    let rounds = common.rounds(30, 5);
    let range =
        ZoneDeviceRange { zone: cfg.zone_device(), nid: 0, start_pfn: DEVICE_START_PFN, nr_pages: nr };
    let strategies = [Strategy::Slow, Strategy::Template, Strategy::Streaming];
    let mut memmaps: Vec<OwnedMemmap<Page64>> = strategies
        .iter()
        .map(|_| OwnedMemmap::new(cfg, DEVICE_START_PFN, nr).expect("mmap the memmap"))
        .collect();
    let pb = bar(nr * rounds as u64 * strategies.len() as u64, case.name(), common.progress);
    let step = cfg.pageblock_nr_pages();
    let threads = common.threads;
    let written_cell = std::cell::Cell::new(0u64);
    {
        let mut runners: Vec<Runner<'_>> = strategies
            .iter()
            .zip(memmaps.iter_mut())
            .map(|(&strategy, owned)| {
                let pb = pb.clone();
                let written = &written_cell;
                Runner::new(strategy.name(), move |_round| {
                    let mut memmap = owned.memmap();
                    let t = Instant::now();
                    let pages = init_threads(&mut memmap, &range, &pgmap, strategy, threads, &pb, step);
                    let elapsed = t.elapsed();
                    written.set(pages);
                    elapsed
                })
            })
            .collect();
        let samples = interleaved(rounds, &mut runners);
        drop(runners);
        pb.finish_and_clear();
        let written = written_cell.get();
        let identical = memmaps[1..].iter().all(|m| m.as_bytes() == memmaps[0].as_bytes());
        let description = format!(
            "{} device, {} struct pages ({} of memmap) written per round, {}, {} rounds{}",
            Bytes(p.size),
            written,
            Bytes(written * 64),
            match case {
                Case::Fsdax => "fsdax, 4 KiB: one struct page per page",
                Case::Devdax2m => "devdax, 2 MiB compound pages, vmemmap dedup: 128 of 512 struct pages",
            },
            rounds,
            if threads > 1 { format!(", {threads} threads") } else { String::new() },
        );
        let spec = ScenarioSpec {
            name: case.name().into(),
            description,
            struct_pages: written,
            bytes: written * 64,
            threads,
            limit: LimitKind::FillNonzero,
        };
        let mut sc = Scenario::from_samples(spec, limits, &samples);
        sc.extra.insert("device_bytes".into(), p.size.into());
        sc.extra.insert("memmap_pfns".into(), nr.into());
        sc.extra.insert("identical_to_slow".into(), identical.into());
        sc.extra.insert("config".into(), cfg.name.into());
        assert!(identical, "{}: template/streaming memmap differs from the slow path", case.name());
        sc
    }
}

/// Initializes `range` on `threads` threads (section-aligned chunks); returns struct pages
/// written.
fn init_threads(
    memmap: &mut Memmap<'_, Page64>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    strategy: Strategy,
    threads: usize,
    pb: &indicatif::ProgressBar,
    step: u64,
) -> u64 {
    let opts = InitOptions::new(strategy);
    if threads <= 1 {
        let mut hooks = ProgressHooks::new(pb.clone(), step);
        return memmap_init_zone_device(memmap, range, pgmap, &opts, &mut hooks)
            .expect("valid range")
            .pages_initialized;
    }
    let align = memmap.config().pages_per_section().max(pgmap.vmemmap_nr());
    let parts = split(range.start_pfn, range.nr_pages, threads, align);
    // Carve the memmap into one view per chunk.
    let mut views = Vec::new();
    let mut rest = memmap.reborrow();
    for (i, &(s, n)) in parts.iter().enumerate() {
        let sub = ZoneDeviceRange { start_pfn: s, nr_pages: n, ..*range };
        if i + 1 == parts.len() {
            views.push((rest, sub));
            break;
        }
        let (head, tail) = rest.split_at(s + n).expect("chunk ends are section-aligned");
        views.push((head, sub));
        rest = tail;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = views
            .into_iter()
            .map(|(mut view, sub)| {
                let pb = pb.clone();
                scope.spawn(move || {
                    let mut hooks = ProgressHooks::new(pb, step);
                    memmap_init_zone_device(&mut view, &sub, pgmap, &opts, &mut hooks)
                        .expect("valid chunk")
                        .pages_initialized
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("init thread")).sum()
    })
}
