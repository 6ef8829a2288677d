//! Rounds paired with limit runs on a strategy's own storage, the pattern of the memmap
//! scenarios ([`measure`]): every run on storage of its own faulted in beforehand ([`memmaps`]),
//! each round right after a limit run over that storage, the storages compared afterwards.

use std::cell::RefCell;
use std::ops::Range;
use std::time::Duration;

use memmap_core::{KernelConfig, OwnedMemmap, Page64};

use super::scenario::RunError;
use crate::limits::{FillKind, Limits, best_on, run_fastest};
use crate::measure::{Runner, Samples, interleaved_paired};
use crate::progress::Phase;
use crate::report::scenario::{ScenarioReport, ScenarioSpec};
use crate::size::Bytes;

/// Faults `o`'s storage in and returns the time it took in ms (the fault cost "first" no
/// longer includes).
///
/// # Errors
///
/// The `madvise` error.
pub fn prefault<P: memmap_core::StructPage>(o: &mut OwnedMemmap<P>) -> std::io::Result<f64> {
    let t = std::time::Instant::now();
    o.populate()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// `count` memmaps of `nr` struct pages from `start_pfn`, each mapped, then faulted in (the
/// same starting state for every strategy's first round), and the fault times in ms.
///
/// # Errors
///
/// A mapping or `madvise` error, as `scenario`'s.
pub fn memmaps(
    scenario: &'static str,
    count: usize,
    config: KernelConfig,
    start_pfn: u64,
    nr: u64,
) -> Result<(Vec<OwnedMemmap<Page64>>, Vec<f64>), RunError> {
    let mut memmaps: Vec<OwnedMemmap<Page64>> = (0..count)
        .map(|_| OwnedMemmap::new(config, start_pfn, nr))
        .collect::<Result<_, _>>()
        .map_err(RunError::of(scenario, format!("map a memmap of {}", Bytes(nr.saturating_mul(64)))))?;
    let mut fault_ms = Vec::with_capacity(count);
    for m in &mut memmaps {
        fault_ms.push(prefault(m).map_err(RunError::of(scenario, "fault the memmap in"))?);
    }
    Ok((memmaps, fault_ms))
}

/// A run's storage that its paired limit runs fill.
pub trait Storage {
    /// Its regions (whole, page-aligned pages).
    fn regions(&mut self) -> Vec<&mut [u8]>;

    /// Whether it holds the same bytes as `other`.
    fn same_as(&self, other: &Self) -> bool;
}

impl Storage for OwnedMemmap<Page64> {
    fn regions(&mut self) -> Vec<&mut [u8]> {
        vec![self.as_bytes_mut()]
    }

    fn same_as(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// One memmap per node.
impl Storage for Vec<OwnedMemmap<Page64>> {
    fn regions(&mut self) -> Vec<&mut [u8]> {
        self.iter_mut().map(OwnedMemmap::as_bytes_mut).collect()
    }

    fn same_as(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.as_bytes() == b.as_bytes())
    }
}

/// What [`measure`] runs.
#[derive(Debug, Clone)]
pub struct Grid {
    /// Per run: its thread count and strategy name, grouped by thread count.
    pub runs: Vec<(usize, String)>,
    /// The limit the rounds are paired with.
    pub kind: FillKind,
    /// Rounds per run.
    pub rounds: usize,
    /// Units of progress of one run of a strategy and of one limit run.
    pub weights: (u64, u64),
    /// Whether each round follows a limit run on its storage (not where the strategies write a
    /// small part of it, as hugetlb with HVO does).
    pub paired: bool,
}

impl Grid {
    /// Every strategy of `names` at each of `counts`, count by count.
    #[must_use]
    pub fn new(counts: &[usize], names: &[&str], kind: FillKind, rounds: usize) -> Grid {
        let runs = counts.iter().flat_map(|&t| names.iter().map(move |&n| (t, n.to_string()))).collect();
        Grid { runs, kind, rounds, weights: (1, 1), paired: true }
    }

    /// The same, a run standing for `run` units of progress and a limit run for `limit`.
    #[must_use]
    pub fn weights(self, run: u64, limit: u64) -> Grid {
        Grid { weights: (run, limit), ..self }
    }

    /// The same, paired with limit runs or not.
    #[must_use]
    pub fn paired(self, paired: bool) -> Grid {
        Grid { paired, ..self }
    }
}

/// What [`measure`] measured.
#[derive(Debug)]
pub struct Measured<S> {
    /// Per run, its rounds.
    pub samples: Vec<Samples>,
    /// Per run, the limit runs next to its rounds (empty when not paired).
    pub limit_samples: Vec<Samples>,
    /// Per run, its thread count's limit methods (empty when not paired).
    pub methods: Vec<Vec<String>>,
    /// Per run, its storage after the rounds.
    pub storage: Vec<S>,
}

impl<S: Storage> Measured<S> {
    /// Whether every run's storage holds the first run's bytes.
    #[must_use]
    pub fn identical(&self) -> bool {
        self.storage.split_first().is_none_or(|(first, rest)| rest.iter().all(|s| s.same_as(first)))
    }

    /// The report of one thread count's `runs` as `spec`, judged against their paired limit runs.
    #[must_use]
    pub fn report(
        &self,
        spec: ScenarioSpec,
        limits: &Limits,
        runs: Range<usize>,
        probe_bytes: u64,
    ) -> ScenarioReport {
        let mut sc = ScenarioReport::from_samples(spec, limits, &self.samples[runs.clone()]);
        if let Some(methods) = self.methods.get(runs.start).filter(|_| !self.limit_samples.is_empty()) {
            sc.set_paired_limit(&methods.join(" or "), probe_bytes, &self.limit_samples[runs]);
        }
        sc
    }
}

/// Runs `grid`: run `i` times `body(i, &mut storage[i])`, the limit methods of each thread
/// count chosen on the first storage of that count (the first region), and, when paired, each
/// round of run `i` right after a limit run of its thread count over every region of its own
/// storage.
///
/// # Panics
///
/// If `storage` is not one per run of `grid`.
pub fn measure<S: Storage>(
    grid: &Grid,
    mut storage: Vec<S>,
    limits: &Limits,
    phase: &Phase,
    body: impl Fn(usize, &mut S) -> Duration,
) -> Measured<S> {
    assert_eq!(storage.len(), grid.runs.len(), "one storage per run");
    let mut methods: Vec<Vec<String>> = Vec::new();
    if grid.paired {
        let mut by_count: Vec<(usize, Vec<String>)> = Vec::new();
        for (k, &(threads, _)) in grid.runs.iter().enumerate() {
            if !by_count.iter().any(|(t, _)| *t == threads) {
                let first = storage[k].regions().into_iter().next();
                let m = first.map_or_else(Vec::new, |b| best_on(limits, grid.kind, threads, b));
                by_count.push((threads, m));
            }
        }
        let of =
            |t: usize| by_count.iter().find(|(c, _)| *c == t).map(|(_, m)| m.clone()).unwrap_or_default();
        methods = grid.runs.iter().map(|&(t, _)| of(t)).collect();
    }
    let cells: Vec<RefCell<S>> = storage.drain(..).map(RefCell::new).collect();
    let (samples, limit_samples) = {
        let body = &body;
        let mut runners: Vec<Runner<'_>> = grid
            .runs
            .iter()
            .zip(&cells)
            .enumerate()
            .map(|(i, ((_, name), cell))| {
                Runner::new(name.as_str(), move |_| body(i, &mut cell.borrow_mut())).weight(grid.weights.0)
            })
            .collect();
        let mut companions: Vec<Runner<'_>> = grid
            .runs
            .iter()
            .zip(&cells)
            .zip(&methods)
            .map(|((&(threads, _), cell), m)| {
                Runner::new("limit", move |round| {
                    let mut s = cell.borrow_mut();
                    s.regions().into_iter().map(|b| run_fastest(m, grid.kind, threads, round, b)).sum()
                })
                .weight(grid.weights.1)
            })
            .collect();
        let pair: Vec<Option<usize>> =
            (0..grid.runs.len()).map(|i| (grid.paired && i < companions.len()).then_some(i)).collect();
        interleaved_paired(grid.rounds, &mut runners, &mut companions, &pair, phase)
    };
    let limit_samples = if grid.paired { limit_samples } else { Vec::new() };
    Measured {
        samples,
        limit_samples,
        methods,
        storage: cells.into_iter().map(RefCell::into_inner).collect(),
    }
}
