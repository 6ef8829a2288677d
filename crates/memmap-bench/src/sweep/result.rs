//! What a sweep measured: per size and initializer a [`SizeResult`] (each strategy's cold and
//! warm [`Point`], auto's [`Verdict`]), and the `sweep --json` document ([`SweepReport`]).

use schemars::JsonSchema;
use serde::Serialize;

use super::plan::Skip;
use crate::machine::Machine;
use crate::report::provenance::Provenance;

/// Auto should be within this fraction of the best strategy at every size.
pub const TARGET: f64 = 0.10;

/// The `sweep --json` format version.
pub const SWEEP_FORMAT: u32 = 1;

/// One strategy at one size.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Point {
    /// Strategy (`auto` for the automatic choice).
    pub strategy: String,
    /// Median of the cold rounds after the first, ns per struct page.
    pub cold_ns_per_page: f64,
    /// Median of the warm rounds after the first, ns per struct page.
    pub warm_ns_per_page: f64,
    /// The cold median as GB/s of struct pages.
    pub cold_gbps: f64,
    /// The warm median as GB/s of struct pages.
    pub warm_gbps: f64,
    /// Every cold round, ms (round 0: the first run after the memmap was faulted in).
    pub cold_rounds_ms: Vec<f64>,
    /// Every warm round, ms.
    pub warm_rounds_ms: Vec<f64>,
}

/// Auto against the best strategy at one size and cache state.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Verdict {
    /// The fastest of slow, template and streaming by median.
    pub best: String,
    /// Auto's median over the best's, minus one (negative: auto measured faster).
    pub auto_over_best: f64,
    /// `auto_over_best <= TARGET`.
    pub within_target: bool,
}

impl Verdict {
    /// The verdict of `points` (slow, template, streaming, auto) by `f` (ns per struct page).
    #[must_use]
    pub fn of(points: &[Point], f: impl Fn(&Point) -> f64) -> Verdict {
        let (fixed, auto) = points.split_at(points.len().saturating_sub(1));
        let best = fixed.iter().min_by(|a, b| f(a).total_cmp(&f(b)));
        let (best, auto) = match (best, auto.first()) {
            (Some(b), Some(a)) => (b, a),
            _ => return Verdict { best: String::new(), auto_over_best: f64::NAN, within_target: false },
        };
        let over = f(auto) / f(best) - 1.0;
        Verdict { best: best.strategy.clone(), auto_over_best: over, within_target: over <= TARGET }
    }

    /// `auto within 3.2% of the best (streaming)`.
    #[must_use]
    pub fn text(&self) -> String {
        let pct = self.auto_over_best * 100.0;
        if self.within_target {
            format!("auto within {:.1}% of the best ({})", pct.max(0.0), self.best)
        } else {
            format!("auto {pct:.1}% slower than the best ({}): outside {:.0}%", self.best, TARGET * 100.0)
        }
    }
}

/// One initializer at one size.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SizeResult {
    /// [`crate::sweep::Init::name`].
    pub init: String,
    /// Memmap bytes written per run.
    pub memmap_bytes: u64,
    /// Struct pages written per run.
    pub struct_pages: u64,
    /// Rounds per strategy (each a cold and a warm run).
    pub rounds: usize,
    /// Slow, template, streaming, auto.
    pub results: Vec<Point>,
    /// The strategy auto resolved to.
    pub auto_used: String,
    /// Why auto resolved to it (`StrategyReason`'s name: below or above the threshold, ...).
    pub auto_reason: String,
    /// Auto against the best, cold.
    pub cold: Verdict,
    /// Auto against the best, warm.
    pub warm: Verdict,
}

/// The `sweep --json` document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SweepReport {
    /// [`SWEEP_FORMAT`].
    pub format: u32,
    /// The command line.
    pub command: String,
    /// Build, kernel, CPU.
    pub provenance: Provenance,
    /// The machine.
    pub machine: Machine,
    /// Kernel config modelled.
    pub config: String,
    /// Last-level cache of CPU 0, bytes (if known).
    pub llc_bytes: Option<u64>,
    /// The buffer written before each cold run, bytes.
    pub flush_bytes: u64,
    /// [`TARGET`].
    pub target: f64,
    /// Auto's streaming threshold (bytes of struct pages per job).
    pub auto_threshold_bytes: u64,
    /// Per size (ascending), per initializer.
    pub sizes: Vec<SizeResult>,
    /// Sizes not run.
    pub skipped: Vec<Skip>,
    /// Wall time, s.
    pub wall_s: f64,
}
