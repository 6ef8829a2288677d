//! `sweep`: cost against size. Two initializers, at memmap sizes (struct page bytes) from
//! `--min-size` to `--max-size` in steps of `--step` (x2 or x4):
//!
//! * `zone-device-fsdax`: `memmap_init_zone_device` of an fsdax device, one thread, the
//!   zone-device scenario's code path (`scenarios::zone_device::init_threads`);
//! * `node-boot-eager`: the eager boot of a one-zone node ([`memmap_core::Node::boot`],
//!   [`memmap_core::BootOrder::Fused`]), as the deferred scenario boots it.
//!
//! Every strategy (slow, template, streaming) and auto run on one memmap per size and
//! initializer (mapped and faulted in before the rounds), interleaved round by round
//! ([`crate::measure::interleaved`]). Each run of a strategy is a pair: **cold** (a buffer of
//! twice the last-level cache written with normal stores just before, so at most a cache's
//! worth of anything is cached and none of it is the memmap) and **warm** (the same strategy
//! again right after, on a memmap it has just written). The figures are medians of the rounds
//! after the first, in ns per struct page. Per size, the verdict compares auto with the best of
//! the three strategies, cold and warm, against [`TARGET`].
//!
//! A size whose memmap, node state and cache-flush buffer do not fit the memory budget is
//! skipped with the reason; sizes are checked before anything runs.

mod run;
pub mod text;

use memmap_core::{KernelConfig, Strategy};
use schemars::JsonSchema;
use serde::Serialize;

use crate::machine::Machine;
use crate::progress::ProgressMode;
use crate::report::Provenance;

pub use run::{measure_all, run};

/// Auto should be within this fraction of the best strategy at every size.
pub const TARGET: f64 = 0.10;

/// The strategies, in table order; auto is measured after them.
pub const STRATEGIES: [Strategy; 4] =
    [Strategy::Slow, Strategy::Template, Strategy::Streaming, Strategy::Auto];

/// The smallest memmap a sweep can start at (1024 struct pages: one `MAX_PAGE_ORDER` block,
/// a 4 MiB device), and the unit of `--min-size`.
pub const MIN_SIZE: u64 = 64 << 10;

/// The `sweep --json` format version.
pub const SWEEP_FORMAT: u32 = 1;

/// The two initializers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// `memmap_init_zone_device`, fsdax, one thread.
    ZoneDevice,
    /// The eager node boot, fused order.
    NodeBoot,
}

impl Init {
    /// Both.
    pub const ALL: [Init; 2] = [Init::ZoneDevice, Init::NodeBoot];

    /// The name in the table and the JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Init::ZoneDevice => "zone-device-fsdax",
            Init::NodeBoot => "node-boot-eager",
        }
    }
}

/// A validated `sweep` command line: the sizes that fit, the ones that do not, the options.
#[derive(Debug)]
pub struct Sweep {
    /// Memmap sizes (bytes) to run, ascending.
    pub sizes: Vec<u64>,
    /// Sizes left out, and why.
    pub skipped: Vec<Skip>,
    /// `--rounds` (`None`: by size, [`rounds_for`]).
    pub rounds: Option<usize>,
    /// `--quick`: three rounds at every size.
    pub quick: bool,
    /// Kernel config.
    pub config: KernelConfig,
    /// Bytes of the buffer written before each cold run.
    pub flush_bytes: u64,
    /// `--json`.
    pub json: bool,
    /// `--verbose`: every round.
    pub verbose: bool,
    /// Progress bars.
    pub progress: ProgressMode,
    /// `--plot FILE`, checked.
    pub plot: Option<crate::output::OutputFile>,
}

/// A size that was not run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Skip {
    /// Memmap bytes.
    pub memmap_bytes: u64,
    /// Why the size was not run (it does not fit the memory budget, say), printed as is.
    pub reason: String,
}

/// Rounds at a size: 15 up to 64 MiB of memmap, 7 up to 1 GiB, 5 above (3 under `--quick`).
#[must_use]
pub fn rounds_for(memmap_bytes: u64, quick: bool) -> usize {
    match memmap_bytes {
        _ if quick => 3,
        b if b <= 64 << 20 => 15,
        b if b <= 1 << 30 => 7,
        _ => 5,
    }
}

/// The sizes of a sweep: `min`, `min * step`, ... up to `max`.
#[must_use]
pub fn sizes(min: u64, max: u64, step: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min;
    while s <= max {
        v.push(s);
        match s.checked_mul(step.max(2)) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// The last-level cache of CPU 0 in bytes (sysfs; `None` where unknown).
#[must_use]
pub fn llc_bytes() -> Option<u64> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let size = std::fs::read_to_string(e.path().join("size")).ok();
        let bytes = size.and_then(|s| crate::size::parse_size(s.trim()).ok());
        best = best.max(bytes);
    }
    best
}

/// The cold runs' flush buffer: twice the last-level cache (64 MiB where unknown), at least
/// 16 MiB.
#[must_use]
pub fn flush_bytes(llc: Option<u64>) -> u64 {
    llc.map_or(64 << 20, |l| (2 * l).max(16 << 20)).next_multiple_of(4096)
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
    /// [`Init::name`].
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

#[cfg(test)]
mod tests {
    use super::*;

    fn point(name: &str, cold: f64, warm: f64) -> Point {
        Point {
            strategy: name.into(),
            cold_ns_per_page: cold,
            warm_ns_per_page: warm,
            cold_gbps: 64.0 / cold,
            warm_gbps: 64.0 / warm,
            cold_rounds_ms: vec![],
            warm_rounds_ms: vec![],
        }
    }

    #[test]
    fn sizes_step_and_verdicts_compare_auto_with_the_best() {
        assert_eq!(sizes(64 << 10, 1 << 20, 4), [64 << 10, 256 << 10, 1 << 20]);
        assert_eq!(sizes(64 << 10, 200 << 10, 2), [64 << 10, 128 << 10]);
        assert_eq!(sizes(1 << 63, u64::MAX, 2), [1 << 63]);
        let p = [
            point("slow", 10.0, 8.0),
            point("template", 4.0, 2.0),
            point("streaming", 3.0, 3.0),
            point("auto", 3.1, 3.0),
        ];
        let cold = Verdict::of(&p, |x| x.cold_ns_per_page);
        assert_eq!(cold.best, "streaming");
        assert!(cold.within_target);
        assert_eq!(cold.text(), "auto within 3.3% of the best (streaming)");
        let warm = Verdict::of(&p, |x| x.warm_ns_per_page);
        assert_eq!((warm.best.as_str(), warm.within_target), ("template", false));
        assert_eq!(warm.text(), "auto 50.0% slower than the best (template): outside 10%");
        assert_eq!(rounds_for(1 << 20, false), 15);
        assert_eq!(rounds_for(8 << 30, false), 5);
        assert_eq!(flush_bytes(Some(32 << 20)), 64 << 20);
        assert_eq!(flush_bytes(None), 64 << 20);
    }

    #[test]
    fn a_tiny_sweep_runs_both_initializers_and_draws_them() {
        let s = Sweep {
            sizes: vec![64 << 10, 128 << 10],
            skipped: vec![Skip { memmap_bytes: 1 << 40, reason: "does not fit".into() }],
            rounds: Some(2),
            quick: true,
            config: KernelConfig::X86_64,
            flush_bytes: 1 << 20,
            json: false,
            verbose: true,
            progress: ProgressMode { enabled: false },
            plot: None,
        };
        let r = measure_all(&s).unwrap();
        assert_eq!(r.sizes.len(), 4, "two sizes, two initializers");
        for sz in &r.sizes {
            let names: Vec<&str> = sz.results.iter().map(|p| p.strategy.as_str()).collect();
            assert_eq!(names, ["slow", "template", "streaming", "auto"]);
            assert!(sz.results.iter().all(|p| p.cold_ns_per_page > 0.0 && p.warm_rounds_ms.len() == 2));
            assert_ne!(sz.auto_used, "auto");
            assert!(!sz.cold.best.is_empty() && sz.cold.auto_over_best.is_finite());
        }
        let text = text::render(&r, true);
        assert!(text.lines().all(|l| l.chars().count() <= crate::report::text::WIDTH), "{text}");
        assert!(text.contains("64 KiB: cold: auto") && text.contains("not run: 1 TiB of memmap"), "{text}");
        let mut svg = String::new();
        crate::report::plot_sweep::draw(&r, &mut svg).unwrap();
        assert!(svg.contains("node-boot-eager") && svg.contains("streaming warm"), "{svg:.300}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["sizes"][0]["results"][3]["strategy"], "auto");
    }
}
