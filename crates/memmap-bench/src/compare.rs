//! Time your own struct page initializer against the library's slow, template and streaming
//! paths and this machine's fill limit, on the same memory and with the bench's methodology;
//! each candidate's memmap is compared byte for byte with the slow path's afterwards.
//!
//! ```no_run
//! use memmap_bench::compare::{Candidate, Comparison};
//! use memmap_bench::scenarios::zone_device::Case;
//! use memmap_core::{InitOptions, NoHooks, Strategy, memmap_init_zone_device};
//!
//! let mine = Candidate::new("mine", |memmap, range, pgmap| {
//!     // Your initializer here; this one is the library's streaming path.
//!     let opts = InitOptions::new(Strategy::Streaming);
//!     memmap_init_zone_device(memmap, range, pgmap, &opts, &mut NoHooks).map(|r| r.pages_initialized)
//! });
//! let c = Comparison::new(Case::Fsdax, 1 << 30).rounds(9).run(vec![mine])?;
//! print!("{}", c.report.table(false));
//! assert!(c.identical("mine"));
//! # Ok::<(), memmap_bench::scenarios::RunError>(())
//! ```
//!
//! `cargo run --release -p memmap-bench --example custom_strategy` is a complete program.

use std::cell::RefCell;
use std::time::Instant;

use memmap_core::{
    DevPagemap, InitError, InitOptions, KernelConfig, Memmap, NoHooks, Page64, Strategy, ZoneDeviceRange,
    memmap_init_zone_device,
};

use crate::limits::{self, FillKind, Limits};
use crate::progress::{Phase, ProgressMode};
use crate::report::scenario::{Figure, LimitKind, ScenarioReport, ScenarioSpec};
use crate::scenarios::paired::{self, Grid, Storage as _};
use crate::scenarios::scenario::RunError;
use crate::scenarios::zone_device::{Case, DEVICE_START_PFN, SIZE_UNIT};
use crate::size::Bytes;

/// An initializer's body: initializes `range` for `pgmap`, returns the struct pages written.
pub type InitFn<'a> =
    dyn FnMut(&mut Memmap<'_, Page64>, &ZoneDeviceRange, &DevPagemap) -> Result<u64, InitError> + 'a;

/// A strategy to time: a name and its initializer.
pub struct Candidate<'a> {
    name: String,
    init: Box<InitFn<'a>>,
}

impl<'a> Candidate<'a> {
    /// A candidate named `name` (shown in the table; must differ from `slow`, `template`,
    /// `streaming`).
    pub fn new(
        name: impl Into<String>,
        init: impl FnMut(&mut Memmap<'_, Page64>, &ZoneDeviceRange, &DevPagemap) -> Result<u64, InitError> + 'a,
    ) -> Candidate<'a> {
        Candidate { name: name.into(), init: Box::new(init) }
    }

    /// The library's own strategy `s` on one thread.
    #[must_use]
    pub fn library(s: Strategy) -> Candidate<'static> {
        Candidate::new(s.name(), move |memmap, range, pgmap| {
            memmap_init_zone_device(memmap, range, pgmap, &InitOptions::new(s), &mut NoHooks)
                .map(|r| r.pages_initialized)
        })
    }
}

/// A comparison to run: the ZONE_DEVICE case, the device size, the rounds.
#[derive(Debug, Clone)]
pub struct Comparison {
    case: Case,
    size: u64,
    rounds: usize,
    config: KernelConfig,
    progress: ProgressMode,
    limits: Option<Limits>,
}

/// What a comparison measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The figures: slow, template, streaming, then the candidates, against the paired limit.
    pub report: ScenarioReport,
    /// The limits measured before the rounds (or the ones given).
    pub limits: Limits,
    identical: Vec<(String, bool)>,
}

impl Outcome {
    /// Whether `strategy`'s memmap equals the slow path's, byte for byte.
    #[must_use]
    pub fn identical(&self, strategy: &str) -> bool {
        self.identical.iter().any(|(n, same)| n == strategy && *same)
    }
}

impl Comparison {
    /// `case` over a device of `size` bytes (rounded down to whole 2 MiB pages, at least one),
    /// 15 rounds, the x86-64 config, no progress bar.
    #[must_use]
    pub fn new(case: Case, size: u64) -> Comparison {
        Comparison {
            case,
            size: (size / SIZE_UNIT).max(1) * SIZE_UNIT,
            rounds: 15,
            config: KernelConfig::X86_64,
            progress: ProgressMode { enabled: false },
            limits: None,
        }
    }

    /// Rounds per strategy (at least 1).
    #[must_use]
    pub fn rounds(mut self, rounds: usize) -> Self {
        self.rounds = rounds.max(1);
        self
    }

    /// The kernel config modelled.
    #[must_use]
    pub fn config(mut self, config: KernelConfig) -> Self {
        self.config = config;
        self
    }

    /// Draw a progress bar on stderr (when it is a terminal).
    #[must_use]
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = ProgressMode { enabled: on };
        self
    }

    /// Use these limits instead of measuring them (256 MiB, 3 rounds) first.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Times slow, template, streaming and `candidates`, interleaved, each round paired with a
    /// limit run on its own memmap.
    ///
    /// # Errors
    ///
    /// When a memmap cannot be mapped or faulted in, or an initializer returns an error.
    pub fn run(&self, candidates: Vec<Candidate<'_>>) -> Result<Outcome, RunError> {
        let name = self.case.name();
        let phase = Phase::new(&format!("compare on {name}"), self.progress);
        let limits = match &self.limits {
            Some(l) => l.clone(),
            None => limits::measure(256 << 20, 3, &[], &phase)
                .map_err(RunError::of(name, "measure the limits"))?,
        };
        let mut all: Vec<Candidate<'_>> =
            [Strategy::Slow, Strategy::Template, Strategy::Streaming].map(Candidate::library).into();
        all.extend(candidates);
        let nr = self.size >> self.config.page_shift;
        let range = ZoneDeviceRange::new(self.config.zone_device(), 0, DEVICE_START_PFN, nr);
        let pgmap = self.case.pgmap(&self.config);
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        let grid = Grid::new(&[1], &names, FillKind::StructPage, self.rounds);
        let (memmaps, _) = paired::memmaps(name, all.len(), self.config, DEVICE_START_PFN, nr)?;
        let written = RefCell::new(vec![0u64; all.len()]);
        let failed: RefCell<Option<InitError>> = RefCell::new(None);
        let inits: Vec<RefCell<Box<InitFn<'_>>>> = all.into_iter().map(|c| RefCell::new(c.init)).collect();
        let m = paired::measure(&grid, memmaps, &limits, &phase, |i, owned| {
            let mut memmap = owned.memmap();
            let t = Instant::now();
            let r = (inits[i].borrow_mut())(&mut memmap, &range, &pgmap);
            let e = t.elapsed();
            match r {
                Ok(pages) => written.borrow_mut()[i] = pages,
                Err(err) => *failed.borrow_mut() = Some(err),
            }
            e
        });
        phase.finish();
        if let Some(e) = failed.into_inner() {
            return Err(RunError {
                scenario: name,
                what: "an initializer failed".into(),
                source: std::io::Error::other(e.to_string()),
            });
        }
        let identical: Vec<(String, bool)> = grid
            .runs
            .iter()
            .zip(&m.storage)
            .map(|((_, n), s)| (n.clone(), s.same_as(&m.storage[0])))
            .collect();
        let pages = written.borrow()[0];
        let spec = ScenarioSpec {
            name: name.to_string(),
            description: format!(
                "{} device, {pages} struct pages written per round by the slow path, {} rounds, 1 thread; candidates \
                 against the library's strategies",
                Bytes(self.size),
                self.rounds
            ),
            struct_pages: pages,
            bytes: pages * 64,
            threads: 1,
            limit: LimitKind::FillStructPage,
            figure: Figure::Bandwidth,
        };
        let mut report = m.report(spec, &limits, 0..grid.runs.len(), m.storage[0].bytes() as u64);
        let same: serde_json::Map<String, serde_json::Value> =
            identical.iter().map(|(n, s)| (n.clone(), (*s).into())).collect();
        report.extra.insert("identical_to_slow".into(), same.into());
        Ok(Outcome { report, limits, identical })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap_core::memmap_init_zone_device_parallel;
    use stream_par::Threads;

    #[test]
    fn candidates_run_beside_the_library_and_are_checked_against_slow() {
        let two = Candidate::new("streaming-2t", |memmap, range, pgmap| {
            let opts = InitOptions::new(Strategy::Streaming);
            memmap_init_zone_device_parallel(memmap, range, pgmap, &opts, Threads::Fixed(2), |_, _| NoHooks)
                .map(|p| p.report.pages_initialized)
        });
        // A wrong initializer: the template path for a different memory type.
        let wrong = Candidate::new("wrong-type", |memmap, range, _| {
            let opts = InitOptions::new(Strategy::Template);
            let other = DevPagemap::new(memmap_core::MemoryType::Generic);
            memmap_init_zone_device(memmap, range, &other, &opts, &mut NoHooks).map(|r| r.pages_initialized)
        });
        let limits = limits::measure(8 << 20, 2, &[], &Phase::hidden()).unwrap();
        let c = Comparison::new(Case::Fsdax, 8 << 20).rounds(2).limits(limits).run(vec![two, wrong]).unwrap();
        let names: Vec<&str> = c.report.results.iter().map(|r| r.strategy.as_str()).collect();
        assert_eq!(names, ["slow", "template", "streaming", "streaming-2t", "wrong-type"]);
        assert!(c.identical("streaming") && c.identical("streaming-2t"));
        assert!(!c.identical("wrong-type"));
        assert!(c.report.paired && c.report.results.iter().all(|r| r.paired_limit_gbps.is_some()));
        assert_eq!(c.report.struct_pages, 2048);
        assert_eq!(c.report.extra["identical_to_slow"]["wrong-type"], false);
    }
}
