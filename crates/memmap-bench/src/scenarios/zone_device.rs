//! `zone-device`: `memmap_init_zone_device` for the two cases of the upstream series.
//!
//! * `zone-device-fsdax`: the nd_pmem case: fsdax, `--align 4K`, one struct page per compound
//!   (no compound pages), every struct page written.
//! * `zone-device-devdax-2m`: the dax_pmem case: devdax (`MEMORY_DEVICE_GENERIC`), `--align 2M`:
//!   2 MiB compound pages with the DAX vmemmap dedup, so 128 of every 512 struct pages written.
//!
//! Each strategy runs on one thread (the kernel's `memmap_init_zone_device`) and on the
//! all-core count (`memmap_init_zone_device_parallel`), interleaved in the same rounds. Each
//! (strategy, thread count) gets its own mmap-backed memmap, faulted in before the rounds (the
//! fault time is reported apart), so every first round starts from the same state. After the
//! rounds every memmap is compared with the one-thread slow one byte for byte.

use std::cell::RefCell;
use std::time::Instant;

use memmap_core::{
    DevPagemap, InitOptions, KernelConfig, Memmap, MemoryType, OwnedMemmap, Page64, Strategy, Threads,
    ZoneDeviceRange, memmap_init_zone_device, memmap_init_zone_device_parallel,
};

use super::{Context, RunError, Scenario, Setup, calibrate, limit_run, prefault, thread_counts};
use crate::budget::{Knob, KnobUnit};
use crate::limits::FillKind;
use crate::measure::{Runner, interleaved_paired};
use crate::memory::{MemoryNeed, Overflow, mul};
use crate::progress::ProgressHooks;
use crate::report::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
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

    /// The device's `dev_pagemap`.
    #[must_use]
    pub fn pgmap(self) -> DevPagemap {
        match self {
            Case::Fsdax => DevPagemap::new(MemoryType::FsDax),
            Case::Devdax2m => DevPagemap::new(MemoryType::Generic).with_vmemmap_shift(9),
        }
    }
}

/// The `--align` spelling of a case: `4K` (fsdax) or `2M` (devdax).
impl crate::cli::Named for Case {
    fn all() -> &'static [Self] {
        &Case::ALL
    }
    fn name(&self) -> &'static str {
        match self {
            Case::Fsdax => "4K",
            Case::Devdax2m => "2M",
        }
    }
    fn from_name(s: &str) -> Option<Self> {
        Case::ALL.into_iter().find(|c| crate::cli::Named::name(c) == s)
    }
}

/// First PFN of the modelled device (64 GiB physical: section- and 1 GiB-aligned).
pub const DEVICE_START_PFN: u64 = 1 << 24;

/// The devdax alignment the device size must be a multiple of.
pub const SIZE_UNIT: u64 = 2 << 20;

/// The default device size: the upstream series' 100 GiB namespace (1.56 GiB of memmap).
pub const DEFAULT_SIZE: u64 = 100 << 30;

/// The `--quick` device size.
pub const QUICK_SIZE: u64 = 1 << 30;

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
        let (size, fixed) = setup.pick(setup.zone_device_size, DEFAULT_SIZE, QUICK_SIZE);
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
        let memmap = mul(self.size / 4096, 64, "the zone-device memmap")?;
        MemoryNeed::resident(memmap).times(6)
    }

    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size % SIZE_UNIT != 0 {
            return Err(format!(
                "zone-device size {} is not a whole number of 2 MiB pages (the devdax alignment)",
                Bytes(self.size)
            ));
        }
        let end = DEVICE_START_PFN.checked_add(self.size / 4096);
        if end.is_none_or(|e| e > self.config.max_pfn()) {
            return Err(super::past_the_pfns("device", self.size, DEVICE_START_PFN, &self.config, SIZE_UNIT));
        }
        Ok(())
    }

    fn knob(&self) -> Option<Knob> {
        Some(Knob {
            value: self.size,
            step: SIZE_UNIT,
            min: MIN_SIZE,
            fixed: self.fixed,
            unit: KnobUnit::Bytes,
        })
    }

    fn resized(&self, value: u64) -> Option<Box<dyn Scenario>> {
        Some(Box::new(ZoneDevice { size: value, ..self.clone() }))
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
        run(self, ctx)
    }
}

fn run(p: &ZoneDevice, ctx: &Context<'_>) -> Result<Vec<ScenarioReport>, RunError> {
    let (case, common, limits) = (p.case, ctx.common, ctx.limits);
    let cfg = p.config;
    let nr = p.size / 4096;
    let pgmap = case.pgmap();
    // 10: nine rebinds give a stable median, and at the default 100 GiB a round of the six runs
    // and their limit runs takes a few seconds.
    let rounds = common.rounds(10, 5);
    let range = device_range(&cfg, nr);
    let strategies = [Strategy::Slow, Strategy::Template, Strategy::Streaming];
    let counts = thread_counts(ctx.threads);
    let phase = ctx.phase(case.name());
    phase.step(format!("{}: map and fault in {} memmaps", case.name(), counts.len() * 3));
    let runs: Vec<(usize, Strategy)> =
        counts.iter().flat_map(|&t| strategies.iter().map(move |&s| (t, s))).collect();
    let mut memmaps: Vec<OwnedMemmap<Page64>> = runs
        .iter()
        .map(|_| OwnedMemmap::new(cfg, DEVICE_START_PFN, nr))
        .collect::<Result<_, _>>()
        .map_err(RunError::of(case.name(), format!("map a memmap of {}", Bytes(nr * 64))))?;
    // The same starting state for every strategy's first round: resident, zero-filled.
    let mut fault_ms = Vec::new();
    for m in &mut memmaps {
        fault_ms.push(prefault(m).map_err(RunError::of(case.name(), "fault the memmap in"))?);
    }
    let pb = phase.bar().clone();
    let written_cell = std::cell::Cell::new(0u64);
    // The limit methods of each thread count, chosen on the first memmap of that count.
    let limit_methods: Vec<Vec<String>> = counts
        .iter()
        .map(|&t| {
            let k = runs.iter().position(|r| r.0 == t).unwrap_or(0);
            calibrate(limits, FillKind::Nonzero, t, memmaps[k].as_bytes_mut())
        })
        .collect();
    let memmaps: Vec<RefCell<OwnedMemmap<Page64>>> = memmaps.into_iter().map(RefCell::new).collect();
    let samples = {
        let mut runners: Vec<Runner<'_>> = runs
            .iter()
            .zip(&memmaps)
            .map(|(&(threads, strategy), owned)| {
                let pb = pb.clone();
                let written = &written_cell;
                Runner::new(strategy.name(), move |_round| {
                    let mut owned = owned.borrow_mut();
                    let mut memmap = owned.memmap();
                    let t = Instant::now();
                    let pages =
                        init_threads(&mut memmap, &range, &pgmap, strategy, threads, &pb).pages_initialized;
                    let elapsed = t.elapsed();
                    written.set(pages);
                    elapsed
                })
                .weight(nr)
            })
            .collect();
        // Each strategy's round right after the limit run of its thread count on its memmap.
        let mut companions: Vec<Runner<'_>> = runs
            .iter()
            .zip(&memmaps)
            .map(|(&(threads, _), owned)| {
                let methods = &limit_methods[counts.iter().position(|&c| c == threads).unwrap_or(0)];
                Runner::new("limit", move |round| {
                    limit_run(methods, FillKind::Nonzero, threads, round, owned.borrow_mut().as_bytes_mut())
                })
                .weight(nr / 4)
            })
            .collect();
        let pair: Vec<Option<usize>> = (0..runs.len()).map(Some).collect();
        phase.step(format!("{}: {rounds} rounds", case.name()));
        interleaved_paired(rounds, &mut runners, &mut companions, &pair, &phase)
    };
    let (samples, paired) = samples;
    phase.finish();
    let written = written_cell.get();
    let memmaps: Vec<OwnedMemmap<Page64>> = memmaps.into_iter().map(RefCell::into_inner).collect();
    let memmap_bytes = memmaps[0].bytes() as u64;
    let identical = memmaps[1..].iter().all(|m| m.as_bytes() == memmaps[0].as_bytes());
    assert!(identical, "{}: a memmap differs from the one-thread slow path", case.name());
    let fault = crate::measure::median_f64(&fault_ms);
    let m =
        Measured { counts, samples, paired, limit_methods, written, memmap_bytes, fault, rounds, identical };
    Ok(reports(p, limits, &m))
}

/// What the rounds measured, for [`reports`].
struct Measured {
    counts: Vec<usize>,
    samples: Vec<crate::measure::Samples>,
    paired: Vec<crate::measure::Samples>,
    limit_methods: Vec<Vec<String>>,
    written: u64,
    memmap_bytes: u64,
    fault: f64,
    rounds: usize,
    identical: bool,
}

/// One report per thread count.
fn reports(p: &ZoneDevice, limits: &crate::limits::Limits, m: &Measured) -> Vec<ScenarioReport> {
    let (case, cfg, nr) = (p.case, p.config, p.size / 4096);
    let Measured { counts, samples, paired, limit_methods, written, memmap_bytes, fault, rounds, identical } =
        m;
    let (written, memmap_bytes, fault, rounds, identical) =
        (*written, *memmap_bytes, *fault, *rounds, *identical);
    let n = 3;
    let mut out = Vec::new();
    for (k, &threads) in counts.iter().enumerate() {
        let description = format!(
            "{} device, {} struct pages ({} of memmap) written per round, {}, {} rounds, {}; faulting one memmap in: {:.1} ms (not in \"first\")",
            Bytes(p.size),
            written,
            Bytes(written * 64),
            match case {
                Case::Fsdax => "fsdax, 4 KiB: one struct page per page",
                Case::Devdax2m => "devdax, 2 MiB compound pages, vmemmap dedup: 128 of 512 struct pages",
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
            limit: LimitKind::FillNonzero,
            figure: Figure::Bandwidth,
        };
        let mut sc = ScenarioReport::from_samples(spec, limits, &samples[k * n..(k + 1) * n]);
        sc.set_paired_limit(&limit_methods[k].join(" or "), memmap_bytes, &paired[k * n..(k + 1) * n]);
        sc.extra.insert("device_bytes".into(), p.size.into());
        sc.extra.insert("memmap_pfns".into(), nr.into());
        sc.extra.insert("identical_to_slow".into(), identical.into());
        sc.extra.insert("config".into(), cfg.name.into());
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
    memmap_init_zone_device_parallel(memmap, range, pgmap, &opts, Threads::Fixed(threads), |start, _| {
        ProgressHooks::new(pb.clone(), start)
    })
    .expect("valid range")
    .report
}
