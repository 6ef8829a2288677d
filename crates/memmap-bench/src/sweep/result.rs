//! What a sweep measured: per size and initializer a [`SizeResult`] (each strategy's cold and
//! warm [`Point`], auto's [`Verdict`]), and the `sweep --json` document ([`SweepReport`]).

use schemars::JsonSchema;
use serde::Serialize;

use super::plan::Skip;
use crate::machine::Machine;
use crate::report::provenance::Provenance;

/// Auto should be within this fraction of the best strategy at every size.
pub const TARGET: f64 = 0.10;

/// The `sweep --json` format version (2: each size's self-check; 3: `cold_counts_write_back`, `Verdict::follows_hint`).
pub const SWEEP_FORMAT: u32 = 3;

/// Auto and the strategy it used must time within this fraction of each other, cold and warm.
pub const CONSISTENCY: f64 = 0.05;

/// How many times a size is measured again, with twice the rounds each time, while its
/// [`SelfCheck`] fails.
pub const RETRIES: usize = 1;

/// The median over the rounds after the first of `a[i] / b[i] - 1`, if both have such rounds.
fn paired(a: &[f64], b: &[f64]) -> Option<f64> {
    let r: Vec<f64> = a.iter().zip(b).skip(1).filter(|(_, y)| **y > 0.0).map(|(x, y)| x / y - 1.0).collect();
    (!r.is_empty()).then(|| crate::measure::median_f64(&r))
}

/// The sweep's check of itself at one size: auto runs the code of the strategy it used, so the
/// two must time alike; where they do not, the rounds did not start from the same state or
/// were too few for the noise.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SelfCheck {
    /// The strategy auto used.
    pub used: String,
    /// Auto's cold time over the used strategy's in the same round, minus one: the median over
    /// the rounds after the first (each round runs both back to back, so a slow phase of the
    /// machine affects both; medians of each where rounds are not recorded).
    pub cold: f64,
    /// The same, warm.
    pub warm: f64,
    /// Both within [`CONSISTENCY`].
    pub consistent: bool,
    /// Measurements of this size it took (1 + the retries).
    pub tries: usize,
}

impl SelfCheck {
    /// Auto (the last of `points`) against the point of `used`.
    #[must_use]
    pub fn of(points: &[Point], used: &str) -> SelfCheck {
        let auto = points.last();
        let other = points[..points.len().saturating_sub(1)].iter().find(|p| p.strategy == used);
        let (cold, warm) = match (auto, other) {
            (Some(a), Some(o)) => (
                paired(&a.cold_rounds_ms, &o.cold_rounds_ms)
                    .unwrap_or(a.cold_ns_per_page / o.cold_ns_per_page - 1.0),
                paired(&a.warm_rounds_ms, &o.warm_rounds_ms)
                    .unwrap_or(a.warm_ns_per_page / o.warm_ns_per_page - 1.0),
            ),
            _ => (f64::NAN, f64::NAN),
        };
        let consistent = cold.abs() <= CONSISTENCY && warm.abs() <= CONSISTENCY;
        SelfCheck { used: used.into(), cold, warm, consistent, tries: 1 }
    }

    /// `self-check: auto timed within 1.2% / 0.8% of template, the strategy it used`.
    #[must_use]
    pub fn text(&self) -> String {
        let (c, w) = (self.cold * 100.0, self.warm * 100.0);
        let tries = if self.tries > 1 { format!(" ({} measurements)", self.tries) } else { String::new() };
        if self.consistent {
            format!(
                "self-check: auto within {:.1}% / {:.1}% of {}, the strategy it used{tries}",
                c.abs(),
                w.abs(),
                self.used
            )
        } else {
            format!(
                "self-check FAILED: auto {c:+.1}% cold, {w:+.1}% warm against {}, the strategy it used (noise \
                 beyond {:.0}%{tries})",
                self.used,
                CONSISTENCY * 100.0
            )
        }
    }
}

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
    /// Warm, with a memmap no larger than the last-level cache: auto follows the caller's reuse hint
    /// (the sweep's is the default, write-once, which streams) rather than the fastest warm
    /// strategy, so a miss here is the price asked for, not counted against the target.
    pub follows_hint: bool,
}

impl Verdict {
    /// The verdict of `points` (slow, template, streaming, auto) by `f` (ns per struct page).
    #[must_use]
    pub fn of(points: &[Point], f: impl Fn(&Point) -> f64) -> Verdict {
        let (fixed, auto) = points.split_at(points.len().saturating_sub(1));
        let best = fixed.iter().min_by(|a, b| f(a).total_cmp(&f(b)));
        let (best, auto) = match (best, auto.first()) {
            (Some(b), Some(a)) => (b, a),
            _ => {
                return Verdict {
                    best: String::new(),
                    auto_over_best: f64::NAN,
                    within_target: false,
                    follows_hint: false,
                };
            }
        };
        let over = f(auto) / f(best) - 1.0;
        Verdict {
            best: best.strategy.clone(),
            auto_over_best: over,
            within_target: over <= TARGET,
            follows_hint: false,
        }
    }

    /// This verdict of a warm run on a memmap the last-level cache holds (see
    /// [`Verdict::follows_hint`]).
    #[must_use]
    pub fn following_the_hint(mut self) -> Verdict {
        self.follows_hint = true;
        self
    }

    /// Counted against [`TARGET`]: within it, or excused by [`Verdict::follows_hint`].
    #[must_use]
    pub fn acceptable(&self) -> bool {
        self.within_target || self.follows_hint
    }

    /// `auto within 3.2% of the best (streaming)`.
    #[must_use]
    pub fn text(&self) -> String {
        let pct = self.auto_over_best * 100.0;
        if self.within_target {
            format!("auto within {:.1}% of the best ({})", pct.max(0.0), self.best)
        } else if self.follows_hint {
            format!("auto {pct:.1}% slower than the best ({}): the write-once hint, as asked", self.best)
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
    /// Auto against the strategy it used.
    pub self_check: SelfCheck,
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
    /// Whether the cold figures include the write-back the run leaves behind (the memmap is
    /// flushed from the caches before each cold run and after it, inside the timed figure,
    /// less the flush of an uncached memmap): where the backend has a cache flush.
    pub cold_counts_write_back: bool,
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
