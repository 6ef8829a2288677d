//! `zone-device`: `memmap_init_zone_device` for the fsdax and devdax cases, on one thread and on
//! all cores. `crates/memmap-bench/METHODOLOGY.md` describes each strategy and how it is timed.

use std::time::Instant;

use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, Memmap, MemoryType, Page64, Strategy, ZoneDeviceRange,
    memmap_init_zone_device, memmap_init_zone_device_parallel,
};

use super::paired::{self, Grid, Measured};
use super::scenario::{
    CatalogEntry, Context, INIT_STRATEGIES, INIT_STRATEGY_NAMES, RunError, Scenario, Setup,
};
use super::spec::{CommandSpec, PickSpec, Rounds, SizeSpec};
use crate::budget::Knob;
use crate::limits::FillKind;
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::progress::ProgressHooks;
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
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
    /// Both cases.
    pub const ALL: [Case; 2] = [Case::Fsdax, Case::Devdax2m];

    /// Scenario name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Case::Fsdax => "zone-device-fsdax",
            Case::Devdax2m => "zone-device-devdax-2m",
        }
    }

    /// The device's `dev_pagemap` on `cfg` (a 2 MiB compound page is `21 - PAGE_SHIFT` orders).
    #[must_use]
    pub fn pgmap(self, cfg: &KernelConfig) -> DevPagemap {
        match self {
            Case::Fsdax => DevPagemap::new(MemoryType::FsDax),
            Case::Devdax2m => {
                DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(21u32.saturating_sub(cfg.page_shift))
            }
        }
    }
}

/// The `zone-device` subcommand.
pub const COMMAND: CommandSpec = CommandSpec::new(
    "zone-device",
    "memmap_init_zone_device: nd_pmem (fsdax, 4 KiB) and dax_pmem (devdax, 2 MiB compound pages)",
    SizeSpec::bytes(
        "zone-device-size",
        SIZE_UNIT,
        "Device (namespace) size, whole 2 MiB pages; the default is the upstream series' namespace",
        100 << 30,
        1 << 30,
    ),
)
.pick(PickSpec::value(
    "align",
    "ALIGN",
    None,
    "Only one case (default: both): 4K (fsdax, nd_pmem) or 2M (devdax, dax_pmem)",
));

/// 10: nine rebinds give a stable median, and at the default 100 GiB a round of the six runs
/// and their limit runs takes a few seconds.
const ROUNDS: Rounds = Rounds::new(10, 5);

/// The catalog row of `zone-device-fsdax`.
pub const FSDAX: CatalogEntry =
    CatalogEntry::new(Case::Fsdax.name(), &COMMAND, &INIT_STRATEGY_NAMES, ROUNDS, |s| {
        Box::new(ZoneDevice::new(Case::Fsdax, s))
    })
    .picked_by("4K");

/// The catalog row of `zone-device-devdax-2m`.
pub const DEVDAX_2M: CatalogEntry =
    CatalogEntry::new(Case::Devdax2m.name(), &COMMAND, &INIT_STRATEGY_NAMES, ROUNDS, |s| {
        Box::new(ZoneDevice::new(Case::Devdax2m, s))
    })
    .picked_by("2M");

/// First PFN of the modelled device (64 GiB physical: section- and 1 GiB-aligned).
pub const DEVICE_START_PFN: u64 = 1 << 24;

/// The devdax alignment the device size must be a multiple of.
pub const SIZE_UNIT: u64 = 2 << 20;

/// The smallest device the suite scales down to.
pub const MIN_SIZE: u64 = 64 << 20;

/// One case over a device of `size` bytes.
#[derive(Debug, Clone)]
pub struct ZoneDevice {
    /// The case.
    pub case: Case,
    /// Device size in bytes (whole 2 MiB pages).
    pub size: u64,
    /// Whether the user gave the size (it is then never scaled).
    pub fixed: bool,
    /// Kernel config.
    pub config: KernelConfig,
}

impl ZoneDevice {
    /// The case with `setup`'s size and config.
    #[must_use]
    pub fn new(case: Case, setup: &Setup) -> Self {
        let (size, fixed) = setup.size(&COMMAND.size);
        ZoneDevice { case, size, fixed, config: setup.config }
    }
}

impl Scenario for ZoneDevice {
    fn name(&self) -> &'static str {
        self.case.name()
    }

    fn description(&self) -> String {
        format!("{}: a {} device", self.case.name(), Bytes(self.size))
    }

    /// One memmap per strategy and thread count (one thread and all cores), all written.
    fn memory_needed(&self) -> Result<MemoryNeed, Overflow> {
        let memmap = mul(self.size >> self.config.page_shift, 64, "the zone-device memmap")?;
        MemoryNeed::resident(memmap).times(6)
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % SIZE_UNIT != 0 {
            return Err(format!(
                "zone-device size {} is not a whole number of 2 MiB pages (the devdax alignment)",
                Bytes(self.size)
            ));
        }
        let end = DEVICE_START_PFN.checked_add(self.size >> self.config.page_shift);
        if end.is_none_or(|e| e > self.config.max_pfn()) {
            return Err(super::scenario::past_the_pfns(
                "device",
                self.size,
                DEVICE_START_PFN,
                &self.config,
                SIZE_UNIT,
            ));
        }
        Ok(())
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob::bytes(self.size, SIZE_UNIT, MIN_SIZE, self.fixed))
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(ZoneDevice { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx)
    }
}

fn run(p: &ZoneDevice, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let (case, cfg, nr) = (p.case, p.config, p.size >> p.config.page_shift);
    let (range, pgmap) = (device_range(&cfg, nr), case.pgmap(&cfg));
    let rounds = ctx.common.rounds(ROUNDS);
    let counts = ctx.threads.counts();
    let phase = ctx.phase(case.name());
    phase.step(format!("{}: map and fault in {} memmaps", case.name(), counts.len() * 3));
    let grid = Grid::new(&counts, &INIT_STRATEGY_NAMES, FillKind::StructPage, rounds).weights(nr, nr / 4);
    let (memmaps, fault_ms) = paired::memmaps(case.name(), grid.runs.len(), cfg, DEVICE_START_PFN, nr)?;
    let written = std::cell::Cell::new(0u64);
    let pb = phase.bar().clone();
    phase.step(format!("{}: {rounds} rounds", case.name()));
    let m = paired::measure(&grid, memmaps, ctx.limits, &phase, |i, owned| {
        let (threads, strategy) = (grid.runs[i].0, INIT_STRATEGIES[i % INIT_STRATEGIES.len()]);
        let mut memmap = owned.memmap();
        let t = Instant::now();
        let r = init_threads(&mut memmap, &range, &pgmap, strategy, threads, &pb);
        let elapsed = t.elapsed();
        written.set(r.pages_initialized);
        elapsed
    });
    phase.finish();
    assert!(m.identical(), "{}: a memmap differs from the one-thread slow path", case.name());
    let fault = crate::measure::median_f64(&fault_ms);
    Ok(reports(p, ctx, &counts, &m, written.get(), fault))
}

/// One report per thread count.
fn reports(
    p: &ZoneDevice,
    ctx: &Context<'_>,
    counts: &[usize],
    m: &Measured<memmap_core::OwnedMemmap<Page64>>,
    written: u64,
    fault: f64,
) -> Vec<ScenarioReport> {
    let (case, nr, n) = (p.case, p.size >> p.config.page_shift, INIT_STRATEGIES.len());
    let memmap_bytes = m.storage[0].bytes() as u64;
    let rounds = ctx.common.rounds(ROUNDS);
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        let description = format!(
            "{} device, {} struct pages ({} of memmap) written per round, {}, {} rounds, {}; faulting one memmap in: {:.1} ms (not in \"first\")",
            Bytes(p.size),
            written,
            Bytes(written * 64),
            match case {
                Case::Fsdax =>
                    format!("fsdax, {} pages: one struct page per page", Bytes(p.config.page_size())),
                Case::Devdax2m => format!(
                    "devdax, 2 MiB compound pages of {} struct pages{}",
                    2u64 << 20 >> p.config.page_shift,
                    if written < nr { ", vmemmap dedup" } else { "" }
                ),
            },
            rounds,
            if threads > 1 {
                format!("{threads} threads (memmap_init_zone_device_parallel)")
            } else {
                "1 thread (the kernel's memmap_init_zone_device)".to_string()
            },
            fault,
        );
        let spec = ScenarioSpec {
            name: case.name().into(),
            description,
            struct_pages: written,
            bytes: written * 64,
            threads,
            limit: LimitKind::FillStructPage,
            figure: Figure::Bandwidth,
        };
        let mut sc = m.report(spec, ctx.limits, k * n..(k + 1) * n, memmap_bytes);
        sc.extra.insert("device_bytes".into(), p.size.into());
        sc.extra.insert("memmap_pfns".into(), nr.into());
        sc.extra.insert("identical_to_slow".into(), true.into());
        sc.extra.insert("config".into(), p.config.name.into());
        sc.extra.insert("fault_ms".into(), fault.into());
        out.push(sc);
    }
    out
}

/// The device range of `nr` pfns at [`DEVICE_START_PFN`] in `ZONE_DEVICE`, node 0.
#[must_use]
pub(crate) fn device_range(cfg: &KernelConfig, nr: u64) -> ZoneDeviceRange {
    ZoneDeviceRange::new(cfg.zone_device(), 0, DEVICE_START_PFN, nr)
}

/// Initializes `range` on `threads` workers (one: the kernel's function; more:
/// [`memmap_init_zone_device_parallel`]); returns what the init reported (struct pages
/// written, the strategy used). `sweep` runs the one-thread form of it too.
pub(crate) fn init_threads(
    memmap: &mut Memmap<'_, Page64>,
    range: &ZoneDeviceRange,
    pgmap: &DevPagemap,
    strategy: Strategy,
    threads: usize,
    pb: &indicatif::ProgressBar,
) -> memmap_core::InitReport {
    let opts = InitOptions::new(strategy);
    if threads <= 1 {
        let mut hooks = ProgressHooks::new(pb.clone(), range.start_pfn);
        return memmap_init_zone_device(memmap, range, pgmap, &opts, &mut hooks).expect("valid range");
    }
    memmap_init_zone_device_parallel(
        memmap,
        range,
        pgmap,
        &opts,
        crate::threads::policy(threads),
        |start, _| ProgressHooks::new(pb.clone(), start),
    )
    .expect("valid range")
    .report
}
