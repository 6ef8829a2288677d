//! A timing command as a [`Suite`]: the catalog entries it selects, built from the sizes given,
//! fitted to the memory budget ([`crate::budget`]), every parameter checked before any work.

use super::args::{GlobalArgs, TimingArgs};
use super::error::CliError;
use super::timing::Selection;
use crate::budget::{self, Budget, BudgetSource, Fitted};
use crate::limits;
use crate::memory::{MemInfo, MemoryError};
use crate::progress::ProgressMode;
use crate::report::{MemoryPlan, Scaled, Skipped};
use crate::scenarios::scenario::{CatalogEntry, Common, Scenario, Setup};
use crate::size::Bytes;
use crate::threads::ThreadPolicy;
use memmap_dump::OutputFile;

/// A timing run: which scenarios, with what.
pub struct Suite {
    /// The scenarios, in run order (empty for `limits`), each fitted to the budget.
    pub scenarios: Vec<Box<dyn Scenario>>,
    /// Shared settings.
    pub common: Common,
    /// `--threads`, checked against the budget; resolved once when the run starts.
    pub threads: ThreadPolicy,
    /// Bytes of each of the limit probe's two buffers.
    pub limit_buffer: u64,
    /// Rounds of the limit probe.
    pub limit_rounds: usize,
    /// `--json`.
    pub json: bool,
    /// `--verbose`.
    pub verbose: bool,
    /// `--plot FILE`, checked.
    pub plot: Option<memmap_dump::OutputFile>,
    /// `limits`: measure the limits only.
    pub limits_only: bool,
    /// The budget and what was scaled to fit it.
    pub memory: MemoryPlan,
    /// The scenarios left out, and why.
    pub skipped: Vec<Skipped>,
}

impl std::fmt::Debug for Suite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.scenarios.iter().map(|s| s.name()).collect();
        f.debug_struct("Suite")
            .field("scenarios", &names)
            .field("common", &self.common)
            .field("threads", &self.threads)
            .field("memory", &self.memory)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

/// The limit probe's buffer: 1 GiB (256 MiB with `--quick`), halved until its two buffers fit
/// the budget, down to 32 MiB (what two thirds of a 256 MiB container holds beside the bench).
const LIMIT_BUFFER: (u64, u64, u64) = (1 << 30, 256 << 20, 32 << 20);

/// The flag that sets the size of `e`'s scenario: the subcommand's own, or `all`'s.
fn size_flag(command: &str, e: &CatalogEntry) -> String {
    let size = &e.command.size;
    format!("--{}", if command == e.command.name { size.own } else { size.all })
}

/// The refusal of a size given on the command line (`flag`) that does not fit, with advice.
fn refused(name: &str, flag: &str, e: &MemoryError, budget: &Budget) -> CliError {
    CliError::Usage(match e {
        MemoryError::Overflow(o) => format!("{name}: {o}: use a smaller {flag}"),
        MemoryError::Budget { need, own, .. } => match budget.advice(need.saturating_add(*own)) {
            Ok(_) => format!(
                "{e}; use a smaller {flag} or a --memory-budget of {} or more",
                Bytes(budget.suggest(need.saturating_add(*own)))
            ),
            Err(max) => format!("{e}; use a smaller {flag} ({max})"),
        },
        e => format!("{e} ({flag})"),
    })
}

/// Builds and checks the suite of the rows `sel` picks for `command` (`all`, `limits`, or the
/// subcommand whose rows they are), with the sizes it gives.
///
/// # Errors
///
/// A parameter a scenario refuses, a size given that does not fit, the limit probe not
/// fitting, or nothing left to run: every scenario selected skipped (exit status 2 like every
/// refusal, naming the budget that would run one).
pub(super) fn suite(
    command: &str,
    t: &TimingArgs,
    g: &GlobalArgs,
    sel: &Selection,
    info: &MemInfo,
) -> Result<Suite, CliError> {
    let usage = CliError::Usage;
    let budget = Budget::new(t.memory_budget, info).map_err(usage)?;
    let mut scaled = Vec::new();
    let limit_buffer = limit_buffer(g.quick, &budget, info, &mut scaled)?;
    let threads = t.threads;
    let mut scenarios = Vec::new();
    let mut skipped = Vec::new();
    let layout = match &t.node_layout {
        Some(path) => {
            let bytes = memmap_dump::read_user_bytes(path, memmap_dump::node::MAX_LAYOUT_BYTES)
                .map_err(|e| usage(format!("--node-layout: {e}")))?;
            let file = memmap_dump::LayoutFile::parse(&bytes, path)
                .map_err(|e| usage(format!("--node-layout: {e}")))?;
            let l = crate::guest_layout::GuestLayout::of(&file, path)
                .map_err(|e| usage(format!("--node-layout: {e}")))?;
            Some(std::sync::Arc::new(l))
        }
        None => None,
    };
    for e in &sel.rows {
        let setup = Setup {
            size: sel.size_of(e.command.name),
            layout: layout.clone(),
            ..Setup::defaults(g.quick, t.config)
        };
        let s = (e.build)(&setup);
        let name = s.name();
        if let Some(reason) = s.unsupported() {
            skipped.push(crate::budget::Skipped { name, reason, budget_needed: None });
            continue;
        }
        s.check().map_err(|m| usage(format!("{name}: {m}")))?;
        match fit(s, &budget, info) {
            Ok((s, Fitted::Unchanged)) => scenarios.push(s),
            Ok((s, Fitted::Scaled { from, to })) => {
                scaled.push(Scaled { name: s.name().to_string(), from, to });
                scenarios.push(s);
            }
            Err(FitError::Skipped(k)) => skipped.push(k),
            Err(FitError::Refused(err)) => return Err(refused(name, &size_flag(command, e), &err, &budget)),
        }
    }
    if scenarios.is_empty() && !skipped.is_empty() {
        return Err(usage(nothing_fits(command, &skipped)));
    }
    let memory = memory_plan(&budget, info, scaled);
    let plot = match &t.plot {
        Some(p) => Some(OutputFile::prepare(p, t.force).map_err(|e| usage(format!("--plot: {e}")))?),
        None => None,
    };
    Ok(Suite {
        scenarios,
        common: Common {
            rounds: t.rounds.map(|r| r as usize),
            progress: ProgressMode { enabled: !g.no_progress },
            quick: g.quick,
        },
        threads,
        limit_buffer,
        limit_rounds: if g.quick { 3 } else { 5 },
        json: g.json,
        verbose: g.verbose,
        plot,
        limits_only: false,
        memory,
        skipped: skipped
            .into_iter()
            .map(|k| Skipped { name: k.name.to_string(), reason: k.reason })
            .collect(),
    })
}

/// The report's memory plan: `budget` on `info`, what was `scaled` to fit it.
fn memory_plan(budget: &Budget, info: &MemInfo, scaled: Vec<Scaled>) -> MemoryPlan {
    MemoryPlan {
        budget_bytes: (budget.source != BudgetSource::Unknown).then_some(budget.bytes),
        budget_source: match &budget.source {
            BudgetSource::Flag => "flag",
            BudgetSource::Available(_) => "available",
            BudgetSource::Unknown => "unknown",
        }
        .to_string(),
        available_bytes: info.room(),
        cgroup_limit_bytes: info.binding_cgroup().map(|c| c.limit),
        scaled,
    }
}

/// The refusal of a command whose every scenario was skipped, each with its advice.
fn nothing_fits(command: &str, skipped: &[budget::Skipped]) -> String {
    let why: Vec<String> = skipped.iter().map(|k| format!("{}: {}", k.name, k.reason)).collect();
    format!("{command}: nothing would run, every scenario it selects was left out: {}", why.join("; "))
}

/// The limit probe's buffer size within `budget` (see [`LIMIT_BUFFER`]), recorded in `scaled`
/// when below the default, with a note when the limits may then be cache rates.
fn limit_buffer(
    quick: bool,
    budget: &Budget,
    info: &MemInfo,
    scaled: &mut Vec<Scaled>,
) -> Result<u64, CliError> {
    let (normal, quick_size, min) = LIMIT_BUFFER;
    let default = if quick { quick_size } else { normal };
    let mut buffer = default;
    while buffer > min && budget.check("the limit probe", &limits::memory_needed(buffer), info).is_err() {
        buffer /= 2;
    }
    let who = format!("the limit probe at its smallest (2 x {})", Bytes(buffer));
    if let Err(e) = budget.check(&who, &limits::memory_needed(buffer), info) {
        return Err(CliError::Usage(match e {
            MemoryError::Budget { need, own, .. } => {
                format!("{e}; {}", budget.advice(need.saturating_add(own)).unwrap_or_else(|m| m))
            }
            e => e.to_string(),
        }));
    }
    if buffer < default {
        let llc = crate::sweep::plan::llc_bytes().filter(|&l| buffer <= 2 * l);
        let note = llc.map_or_else(String::new, |l| {
            format!(" (not above twice the {} last-level cache: the limits may be cache rates)", Bytes(l))
        });
        scaled.push(Scaled {
            name: "limits".into(),
            from: format!("2 x {}", Bytes(default)),
            to: format!("2 x {}{note}", Bytes(buffer)),
        });
    }
    Ok(buffer)
}

/// Fits `s` into `budget` on `info`: unchanged, or its knob at the largest value that fits.
/// [`budget::Skipped`] when a scenario without a knob, or at its knob's smallest value, does not
/// fit. A user-given size that does not fit is an error of the command line
/// ([`FitError::Refused`]).
fn fit(
    s: Box<dyn Scenario>,
    budget: &Budget,
    info: &MemInfo,
) -> Result<(Box<dyn Scenario>, Fitted), FitError> {
    // The need of `s` as `who` against the budget and the machine.
    let need_of = |s: &dyn Scenario, who: &str| -> Result<(), MemoryError> {
        let need = s.memory_needed()?;
        budget.check(who, &need, info)
    };
    let fits = |s: &dyn Scenario| need_of(s, s.name());
    let error = match fits(s.as_ref()) {
        Ok(()) => return Ok((s, Fitted::Unchanged)),
        Err(e) => e,
    };
    let knob = match s.knob() {
        Some(k) if !k.fixed && k.step > 0 => k,
        Some(_) => return Err(FitError::Refused(error)),
        None => {
            let e = need_of(s.as_ref(), "it").err().unwrap_or(error);
            return Err(FitError::Skipped(budget::Skipped::new(s.name(), "", &e, budget)));
        }
    };
    // The largest k * step in [min, value] that fits: needs grow with the knob.
    let (mut lo, mut hi) = (knob.min / knob.step, knob.value / knob.step);
    let at = |k: u64| s.resized(k * knob.step);
    let smallest = knob.show(lo * knob.step);
    match at(lo).map(|small| need_of(small.as_ref(), "it")) {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            let what = format!("does not fit even at its smallest size ({smallest}): ");
            return Err(FitError::Skipped(budget::Skipped::new(s.name(), &what, &e, budget)));
        }
        None => {
            let what = format!("cannot be made as small as {smallest}: ");
            return Err(FitError::Skipped(budget::Skipped::new(s.name(), &what, &error, budget)));
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if at(mid).is_some_and(|m| fits(m.as_ref()).is_ok()) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let scaled = at(lo).ok_or_else(|| FitError::Refused(error.clone()))?;
    let fitted = Fitted::Scaled { from: knob.show(knob.value), to: knob.show(lo * knob.step) };
    Ok((scaled, fitted))
}

/// Why [`fit`] did not return a scenario to run.
#[derive(Debug)]
enum FitError {
    /// It cannot run within the budget: leave it out and say why.
    Skipped(budget::Skipped),
    /// A size the user gave does not fit: refuse the command.
    Refused(MemoryError),
}
