//! A timing command as a [`Suite`]: the catalog entries it selects, built from the sizes given,
//! fitted to the memory budget ([`crate::budget`]), every parameter checked before any work.

use memmap_dump::NewFile;

use super::CliError;
use super::args::{AllArgs, GlobalArgs};
use crate::budget::{Budget, BudgetSource, FitError, Fitted, fit};
use crate::limits;
use crate::memory::{MemInfo, MemoryError};
use crate::progress::ProgressMode;
use crate::report::{MemoryPlan, Scaled, Skipped};
use crate::scenarios::{CATALOG, CatalogEntry, Common, Scenario, Setup};
use crate::size::Bytes;

/// A timing run: which scenarios, with what.
pub struct Suite {
    /// The scenarios, in run order (empty for `limits`), each fitted to the budget.
    pub scenarios: Vec<Box<dyn Scenario>>,
    /// Shared settings.
    pub common: Common,
    /// Bytes of each of the limit probe's two buffers.
    pub limit_buffer: u64,
    /// Rounds of the limit probe.
    pub limit_rounds: usize,
    /// `--json`.
    pub json: bool,
    /// `--verbose`.
    pub verbose: bool,
    /// `--plot FILE`, checked.
    pub plot: Option<NewFile>,
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
            .field("memory", &self.memory)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

/// The limit probe's buffer: 1 GiB (256 MiB with `--quick`), halved until its two buffers fit
/// the budget, down to 64 MiB.
const LIMIT_BUFFER: (u64, u64, u64) = (1 << 30, 256 << 20, 64 << 20);

/// Builds and checks the suite of the catalog's entries that `select` picks.
pub(super) fn suite(
    a: &AllArgs,
    g: &GlobalArgs,
    select: impl Fn(&CatalogEntry) -> bool,
    info: &MemInfo,
) -> Result<Suite, CliError> {
    let t = &a.timing;
    let usage = CliError::Usage;
    let setup = Setup {
        zone_device_size: a.zone_device_size,
        hugetlb_count: a.hugetlb_count,
        clear_size: a.clear_size,
        deferred_size: a.deferred_size,
        guest_memory_size: a.guest_memory_size,
        hotplug_size: a.hotplug_size,
        ..Setup::defaults(g.quick, t.config)
    };
    let budget = Budget::new(t.memory_budget, info).map_err(usage)?;
    let mut scaled = Vec::new();
    let limit_buffer = limit_buffer(g.quick, &budget, info, &mut scaled)?;
    let mut scenarios = Vec::new();
    let mut skipped = Vec::new();
    for e in CATALOG.iter().filter(|e| select(e)) {
        let s = (e.build)(&setup);
        let name = s.name();
        s.check().map_err(|m| usage(format!("{name}: {m}")))?;
        match fit(s, &budget, info) {
            Ok((s, Fitted::Unchanged)) => scenarios.push(s),
            Ok((s, Fitted::Scaled { from, to })) => {
                scaled.push(Scaled { name: s.name().to_string(), from, to });
                scenarios.push(s);
            }
            Err(FitError::Skipped(k)) => skipped.push(Skipped { name: k.name.to_string(), reason: k.reason }),
            Err(FitError::Refused(e @ MemoryError::Overflow(_))) => {
                return Err(usage(format!("{name}: {e}")));
            }
            Err(FitError::Refused(e)) => return Err(usage(e.to_string())),
        }
    }
    let memory = MemoryPlan {
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
    };
    let plot = match &t.plot {
        Some(p) => Some(NewFile::prepare(p, t.force).map_err(|e| usage(format!("--plot: {e}")))?),
        None => None,
    };
    Ok(Suite {
        scenarios,
        common: Common {
            rounds: t.rounds.map(|r| r as usize),
            threads: t.threads,
            progress: ProgressMode { enabled: !g.no_progress },
            quick: g.quick,
        },
        limit_buffer,
        limit_rounds: if g.quick { 3 } else { 5 },
        json: g.json,
        verbose: g.verbose,
        plot,
        limits_only: false,
        memory,
        skipped,
    })
}

/// The limit probe's buffer size within `budget` (see [`LIMIT_BUFFER`]), recorded in `scaled`
/// when it is below the default.
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
    budget
        .check("the limit probe", &limits::memory_needed(buffer), info)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if buffer < default {
        scaled.push(Scaled {
            name: "limits".into(),
            from: format!("2 x {}", Bytes(default)),
            to: format!("2 x {}", Bytes(buffer)),
        });
    }
    Ok(buffer)
}
