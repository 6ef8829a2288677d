//! The report: per-scenario tables, the summary table, the `--json` document and the `--plot`
//! SVG.
//!
//! The `--json` document is [`Report`] serialized (shape below; every scenario may add fields
//! of its own). Its JSON Schema, `crates/memmap-bench/schema/report.schema.json`, is derived
//! from these types by [`json_schema()`] (scenario and strategy names come from the scenario
//! registry, [`crate::scenarios::CATALOG`]); a test fails when the checked-in file differs, and
//! CI validates the quick suite's report against it.
//!
//! ```text
//! {"format": 1,
//!  "machine": {"cpu": s, "backend": s, "backend_name": s, ...},
//!  "limits": {"fill_zero_gbps": f, "fill_nonzero_gbps": f, ..., "all_cores": n,
//!             "per_threads": [{"threads": n, "fill_zero_gbps": f, "fill_zero_method": s, ...,
//!                              "methods": [{"method": s, "kind": s, "gbps": f}, ...]}, ...]},
//!  "scenarios": [{"name": s, "threads": n, "struct_pages": n, "bytes": n,
//!                 "limit": s, "limit_gbps": f, "limit_method": s, "measurement_errors": n,
//!                 "results": [{"strategy": s, "first_ms": f, "rebind_avg_ms": f,
//!                              "median_ms": f, "gbps": f, "x_limit": f,
//!                              "measurement_error": b, ...}], ...}],
//!  "command": s, "quick": b}
//! ```
//!
//! A scenario reports one entry per thread count: the kernel-faithful one-thread run
//! (`threads` 1) and the all-core run, each against the limit measured at its own thread
//! count ([`Limits::at`]). A result above [`MEASUREMENT_ERROR_RATIO`] of its limit cannot be
//! (the limit is the best any method reached on this machine in this run): it is flagged as a
//! measurement error in the table, the summary and the JSON.

use std::fmt::Write as _;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

use crate::limits::{Limits, ThreadLimits};
use crate::machine::Machine;
use crate::measure::{Samples, gbps};

/// Version of the `--json` report's format: raised when a field changes meaning or goes away
/// (adding fields keeps it).
pub const REPORT_FORMAT: u32 = 2;

/// A result above this fraction of its limit is a measurement error (1.05: five percent of
/// noise between the limit probe and the scenario is tolerated).
pub const MEASUREMENT_ERROR_RATIO: f64 = 1.05;

/// Which limit a scenario is judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Non-zero fill (struct pages are non-zero records).
    FillNonzero,
    /// Zero fill (clearing pages).
    FillZero,
}

impl LimitKind {
    /// The limit's value at a thread count's limits.
    #[must_use]
    pub fn of(self, l: &ThreadLimits) -> f64 {
        match self {
            LimitKind::FillNonzero => l.fill_nonzero_gbps,
            LimitKind::FillZero => l.fill_zero_gbps,
        }
    }

    /// The method that set it.
    #[must_use]
    pub fn method(self, l: &ThreadLimits) -> &str {
        match self {
            LimitKind::FillNonzero => &l.fill_nonzero_method,
            LimitKind::FillZero => &l.fill_zero_method,
        }
    }

    /// Short label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            LimitKind::FillNonzero => "non-zero fill",
            LimitKind::FillZero => "zero fill",
        }
    }
}

/// One strategy's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StrategyResult {
    /// Strategy name.
    #[schemars(schema_with = "strategy_name_schema")]
    pub strategy: String,
    /// Round 0: fresh memory ("first binding"), ms.
    #[schemars(range(min = 0))]
    pub first_ms: f64,
    /// Mean of rounds 1.. ("rebinds"), ms.
    #[schemars(range(min = 0))]
    pub rebind_avg_ms: f64,
    /// Median of rounds 1.., ms.
    #[schemars(range(min = 0))]
    pub median_ms: f64,
    /// Bytes written per second at the median, GB/s.
    #[schemars(range(min = 0))]
    pub gbps: f64,
    /// This result against the limit of its kind and thread count measured in this run. When
    /// the scenario pairs its strategies with the limit method ([`ScenarioReport::paired`]):
    /// the median, over the rounds after the first, of each round's GB/s over the GB/s of the
    /// limit run right next to it (`paired_limit_gbps`); otherwise `gbps / limit_gbps`.
    #[schemars(range(min = 0))]
    pub x_limit: f64,
    /// Median (of the rounds after the first) of the baseline strategy over this one's.
    pub speedup: f64,
    /// `x_limit` above [`MEASUREMENT_ERROR_RATIO`]: faster than the machine's limit, so the
    /// limit or this measurement is wrong. Only bandwidth scenarios are judged (those the
    /// registry plots); boot-time and HVO figures are not bandwidths.
    pub measurement_error: bool,
    /// The median GB/s of the limit runs paired with this strategy's rounds (rounds after the
    /// first), when the scenario pairs them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_limit_gbps: Option<f64>,
    /// Every round, ms.
    pub rounds_ms: Vec<f64>,
}

/// What a scenario measured, for [`ScenarioReport::from_samples`].
#[derive(Debug, Clone)]
pub struct ScenarioSpec {
    /// Scenario name.
    pub name: String,
    /// What it models.
    pub description: String,
    /// Struct pages initialized per round.
    pub struct_pages: u64,
    /// Bytes written per round.
    pub bytes: u64,
    /// Threads used.
    pub threads: usize,
    /// The limit to compare with.
    pub limit: LimitKind,
}

/// One scenario's figures (what a scenario's `run` returns): one entry of the report's
/// `scenarios`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScenarioReport {
    /// Scenario name (`zone-device-fsdax`, ...).
    #[schemars(schema_with = "scenario_name_schema")]
    pub name: String,
    /// What it models.
    pub description: String,
    /// Struct pages initialized per round (0 for clearing scenarios).
    pub struct_pages: u64,
    /// Bytes written per round (struct pages, or memory cleared).
    pub bytes: u64,
    /// Rounds per strategy.
    pub rounds: usize,
    /// Threads used.
    pub threads: usize,
    /// The limit the results are compared with.
    pub limit: LimitKind,
    /// Its value in this run at this scenario's thread count, GB/s. Paired
    /// ([`ScenarioReport::paired`]): the median of every limit run paired with this scenario's
    /// rounds (after the first); otherwise the limits phase's (`limits_phase_gbps`).
    pub limit_gbps: f64,
    /// The limit's method (`stream_fill`, `vmovntdq_ymm`, `clzero`, `memset`, ...): paired, the
    /// best method of the kind at this thread count on the scenario's own storage, chosen
    /// there just before the rounds (every method's fastest of three runs), with the runner-up
    /// (`clzero or clear_pages`: each limit run runs both and counts the faster); otherwise
    /// the best in the limits phase.
    pub limit_method: String,
    /// The thread count whose limit is used ([`Limits::at`]: `threads`, or the largest count
    /// measured below it).
    pub limit_threads: usize,
    /// Results flagged as measurement errors.
    pub measurement_errors: usize,
    /// The limit of the kind at this thread count in the limits phase (1 GiB buffer, before
    /// the scenarios), GB/s.
    pub limits_phase_gbps: f64,
    /// Whether every strategy's round ran right after a run of the limit method over that
    /// strategy's own storage ([`ScenarioReport::set_paired_limit`]) and `x_limit` is the
    /// median of the per-round ratios. A shared machine's bandwidth moves between modes within
    /// a second (two threads on a 2-vCPU guest alternate between about one and two times one
    /// thread's rate), so only a limit run next to the strategy's is from the same mode; and
    /// what memory allows depends on how it is backed (transparent huge pages or not, which
    /// differs between mappings of one process once memory is fragmented), so only the same
    /// storage is a limit for it.
    pub paired: bool,
    /// The strategy speedups are relative to.
    pub baseline: String,
    /// Per-strategy results, baseline first.
    #[schemars(length(min = 1))]
    pub results: Vec<StrategyResult>,
    /// Extra lines printed under the table.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Scenario-specific figures.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ScenarioReport {
    /// Builds a scenario from interleaved samples (the first sample is the baseline).
    #[must_use]
    pub fn from_samples(spec: ScenarioSpec, limits: &Limits, samples: &[Samples]) -> ScenarioReport {
        let ScenarioSpec { name, description, struct_pages, bytes, threads, limit } = spec;
        let at = limits.at(threads);
        let limit_gbps = limit.of(at);
        // Ratios of medians: a sample of a millisecond-long boot can be three times its median
        // when the shared machine interrupts it, which an average would carry into the ratio.
        let base = samples[0].median_ms();
        let results = samples
            .iter()
            .map(|s| {
                let median_ms = s.median_ms();
                let g = gbps(bytes, median_ms / 1e3);
                let x_limit = g / limit_gbps;
                StrategyResult {
                    strategy: s.name.clone(),
                    first_ms: s.first().as_secs_f64() * 1e3,
                    rebind_avg_ms: s.rebind_avg_ms(),
                    median_ms,
                    gbps: g,
                    x_limit,
                    speedup: base / median_ms,
                    measurement_error: is_measurement_error(x_limit),
                    paired_limit_gbps: None,
                    rounds_ms: s.rounds.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
                }
            })
            .collect();
        let results: Vec<StrategyResult> = results;
        ScenarioReport {
            name,
            description,
            struct_pages,
            bytes,
            rounds: samples[0].rounds.len(),
            threads,
            limit,
            limit_gbps,
            limit_method: limit.method(at).to_string(),
            limit_threads: at.threads,
            measurement_errors: results.iter().filter(|r| r.measurement_error).count(),
            limits_phase_gbps: limit_gbps,
            paired: false,
            baseline: samples[0].name.clone(),
            results,
            notes: Vec::new(),
            extra: serde_json::Map::new(),
        }
    }

    /// Recomputes the measurement-error flags from the final `x_limit`s (a scenario may
    /// rewrite its figures after [`ScenarioReport::from_samples`]); scenarios whose figure is
    /// not a bandwidth (not plotted by the registry) are never flagged.
    pub fn refresh_measurement_errors(&mut self) {
        let bandwidth = crate::scenarios::catalog_entry(&self.name).is_none_or(|e| e.plotted);
        for r in &mut self.results {
            r.measurement_error = bandwidth && is_measurement_error(r.x_limit);
        }
        self.measurement_errors = self.results.iter().filter(|r| r.measurement_error).count();
    }

    /// Judges every result against the limit runs paired with its rounds (see
    /// [`ScenarioReport::paired`]): `pairs[i]` are the times of the limit method `method` over
    /// `probe_bytes` next to `results[i]`'s rounds (as [`crate::measure::interleaved_paired`]
    /// returns them). `x_limit` becomes the median of the per-round ratios (rounds after the
    /// first), `paired_limit_gbps` the median limit run, and the scenario's `limit_gbps` the
    /// median of all its limit runs.
    ///
    /// # Panics
    ///
    /// If `pairs` is not one entry per result, or a pair's rounds are not the result's.
    pub fn set_paired_limit(&mut self, method: &str, probe_bytes: u64, pairs: &[Samples]) {
        assert_eq!(pairs.len(), self.results.len(), "one paired limit per result");
        let mut pooled = Vec::new();
        for (r, p) in self.results.iter_mut().zip(pairs) {
            assert_eq!(p.rounds.len(), r.rounds_ms.len(), "a limit run per round");
            let skip = usize::from(r.rounds_ms.len() > 1);
            let limit: Vec<f64> = p.rebinds().iter().map(|d| gbps(probe_bytes, d.as_secs_f64())).collect();
            let ratios: Vec<f64> = r.rounds_ms[skip..]
                .iter()
                .zip(&limit)
                .map(|(&ms, &l)| gbps(self.bytes, ms / 1e3) / l)
                .collect();
            r.x_limit = crate::measure::median_f64(&ratios);
            r.paired_limit_gbps = Some(crate::measure::median_f64(&limit));
            pooled.extend(limit);
        }
        self.limit_gbps = crate::measure::median_f64(&pooled);
        self.limit_method = method.to_string();
        self.paired = true;
        self.refresh_measurement_errors();
    }

    /// The result of `strategy`.
    #[must_use]
    pub fn result(&self, strategy: &str) -> Option<&StrategyResult> {
        self.results.iter().find(|r| r.strategy == strategy)
    }

    /// The human-readable table.
    #[must_use]
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{} [{}]: {}", self.name, threads_label(self.threads), self.description);
        let w = self.results.iter().map(|r| r.strategy.len()).max().unwrap_or(0).max(11);
        let _ = writeln!(
            s,
            "  {:<w$} {:>10} {:>14} {:>10} {:>9} {:>8} {:>9}",
            "strategy",
            "first ms",
            "rebind avg ms",
            "median ms",
            format!("vs {}", short(&self.baseline)),
            "GB/s",
            "x limit"
        );
        for r in &self.results {
            let _ = writeln!(
                s,
                "  {:<w$} {:>10.1} {:>14.2} {:>10.2} {:>8.2}x {:>8.2} {:>9.2}{}{}",
                r.strategy,
                r.first_ms,
                r.rebind_avg_ms,
                r.median_ms,
                r.speedup,
                r.gbps,
                r.x_limit,
                r.paired_limit_gbps.map_or(String::new(), |g| format!("  (limit next to it {g:.2})")),
                if r.measurement_error { "  MEASUREMENT ERROR" } else { "" }
            );
        }
        if self.paired {
            let _ = writeln!(
                s,
                "  limit: {} on {} thread(s): {} (the best method on this scenario's storage) over each strategy's storage right before each of its rounds, median {:.2} GB/s (limits phase {:.2}); x limit = median of each round's ratio to the run next to it",
                self.limit.label(),
                self.limit_threads,
                self.limit_method,
                self.limit_gbps,
                self.limits_phase_gbps,
            );
        } else {
            let _ = writeln!(
                s,
                "  limit: {} {:.2} GB/s on {} thread(s), set by {} (measured in this run)",
                self.limit.label(),
                self.limit_gbps,
                self.limit_threads,
                self.limit_method
            );
        }
        if self.measurement_errors > 0 {
            let _ = writeln!(
                s,
                "  measurement error: {} result(s) above {MEASUREMENT_ERROR_RATIO}x of the limit; a limit is the best rate of any method, so the limit or the timing is wrong",
                self.measurement_errors
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "{n}");
        }
        s
    }
}

/// Whether a result at `x_limit` of its limit is a measurement error.
#[must_use]
pub fn is_measurement_error(x_limit: f64) -> bool {
    x_limit > MEASUREMENT_ERROR_RATIO
}

/// `1 thread` or `N threads`.
fn threads_label(n: usize) -> String {
    if n == 1 { "1 thread".into() } else { format!("{n} threads") }
}

fn short(name: &str) -> &str {
    if name.len() > 6 { &name[..6] } else { name }
}

/// One step of the `--threads auto` search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AutoStep {
    /// Threads.
    #[schemars(range(min = 1))]
    pub threads: usize,
    /// Streaming non-zero fill bandwidth measured with them, GB/s.
    pub gbps: f64,
}

/// What `--threads auto` measured and chose (rule: step up 1, 2, 4, ... up to the CPUs while a
/// step gains at least 10 %).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AutoThreads {
    /// The steps measured.
    pub steps: Vec<AutoStep>,
    /// The count chosen.
    #[schemars(range(min = 1))]
    pub threads: usize,
}

/// The whole report: the `--json` document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(title = "memmap-bench --json report")]
pub struct Report {
    /// Version of this report format (`REPORT_FORMAT`, 1 today): raised when a field changes
    /// meaning or goes away; adding fields keeps it.
    #[schemars(range(min = 1))]
    pub format: u32,
    /// Machine description.
    pub machine: Machine,
    /// Workers of the all-core rows (`--threads`; 1: no all-core rows).
    #[schemars(range(min = 1))]
    pub all_core_threads: usize,
    /// The `--threads auto` measurement (`memmap_core::auto_threads`), when it ran.
    pub auto_threads: Option<AutoThreads>,
    /// Limits measured in this run.
    pub limits: Limits,
    /// Scenarios, in run order.
    pub scenarios: Vec<ScenarioReport>,
    /// The command line.
    pub command: String,
    /// `--quick`.
    pub quick: bool,
}

impl Report {
    /// The machine and limits lines.
    #[must_use]
    pub fn header(&self) -> String {
        let m = &self.machine;
        let mut per = String::new();
        for t in &self.limits.per_threads {
            let _ = writeln!(
                per,
                "  {:>2} thread(s): fill zero {:.2} GB/s ({}), fill non-zero {:.2} GB/s ({}), copy {:.2} GB/s ({}); all: {}",
                t.threads,
                t.fill_zero_gbps,
                t.fill_zero_method,
                t.fill_nonzero_gbps,
                t.fill_nonzero_method,
                t.copy_gbps,
                t.copy_method,
                t.methods
                    .iter()
                    .map(|x| format!("{} {:?} {:.1}", x.method, x.kind, x.gbps).to_lowercase())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let auto = self.auto_threads.as_ref().map_or(String::new(), |a| {
            format!(
                " (--threads auto: {})",
                a.steps
                    .iter()
                    .map(|s| format!("{} thread(s) {:.1} GB/s", s.threads, s.gbps))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        format!(
            "machine: {} ({} CPUs{}), stream-hal backend: {}, large clears: {}\nall-core rows: {}{auto}\nlimits ({} buffer, {} rounds, one line per 32 KiB {:.1} ns; the limit of a kind is its best method):\n{per}",
            m.cpu,
            m.cpus,
            m.mem_total_bytes.map_or(String::new(), |b| format!(", {}", crate::size::Bytes(b))),
            m.backend,
            m.streaming_clear,
            if self.all_core_threads > 1 {
                format!("{} threads", self.all_core_threads)
            } else {
                "none (one thread is where bandwidth stops growing; --threads N forces them)".to_string()
            },
            crate::size::Bytes(self.limits.buffer_bytes),
            self.limits.rounds,
            self.limits.scattered_line_ns,
        )
    }

    /// The one summary table: every strategy of every scenario, the one-thread and the
    /// all-core run side by side (each against the limit of its own thread count).
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "summary (median of the rounds after the first; speedup = ratio of medians; x limit = against the limit of the same thread count in this run: per round against the limit run next to it where the scenario pairs them (zone-device, hugetlb without HVO, clear, alloc-init-on-alloc), else GB/s / limit)"
        );
        let w = self
            .scenarios
            .iter()
            .flat_map(|sc| &sc.results)
            .map(|r| r.strategy.len())
            .max()
            .unwrap_or(0)
            .max(11);
        let _ = writeln!(
            s,
            "  {:<24} {:<w$} {:>10} {:>11} {:>8} {:>8} | {:>7} {:>11} {:>8} {:>8}",
            "scenario",
            "strategy",
            "first ms",
            "median ms",
            "GB/s",
            "x limit",
            "threads",
            "median ms",
            "GB/s",
            "x limit"
        );
        let mut done = vec![false; self.scenarios.len()];
        for (i, sc) in self.scenarios.iter().enumerate() {
            if done[i] {
                continue;
            }
            done[i] = true;
            // The all-core run of the same scenario, if any.
            let other =
                self.scenarios.iter().enumerate().skip(i + 1).find(|(j, o)| !done[*j] && o.name == sc.name);
            if let Some((j, _)) = other {
                done[j] = true;
            }
            let other = other.map(|(_, o)| o);
            for r in &sc.results {
                let flag = |r: &StrategyResult| if r.measurement_error { "!" } else { " " };
                let right = other.and_then(|o| o.result(&r.strategy).map(|x| (o.threads, x))).map_or_else(
                    || format!("{:>7} {:>11} {:>8} {:>8}", "-", "-", "-", "-"),
                    |(t, x)| {
                        format!("{t:>7} {:>11.2} {:>8.2} {:>7.2}{}", x.median_ms, x.gbps, x.x_limit, flag(x))
                    },
                );
                let _ = writeln!(
                    s,
                    "  {:<24} {:<w$} {:>10.1} {:>11.2} {:>8.2} {:>7.2}{} | {right}",
                    sc.name,
                    r.strategy,
                    r.first_ms,
                    r.median_ms,
                    r.gbps,
                    r.x_limit,
                    flag(r)
                );
            }
        }
        let errors: usize = self.scenarios.iter().map(|sc| sc.measurement_errors).sum();
        if errors > 0 {
            let _ = writeln!(
                s,
                "  ! measurement error: {errors} result(s) above {MEASUREMENT_ERROR_RATIO}x of their limit (the limit or the timing is wrong)"
            );
        }
        s
    }

    /// Writes an SVG bar chart of GB/s per strategy per scenario, with each scenario's limit
    /// drawn across its group, to `out` (checked before the run).
    ///
    /// # Errors
    ///
    /// Drawing or file errors, as text.
    pub fn plot(&self, out: &memmap_dump::NewFile) -> Result<(), String> {
        let mut svg = String::new();
        plot::draw(self, &mut svg).map_err(|e| format!("{}: {e}", out.path().display()))?;
        out.commit(svg.as_bytes()).map_err(|e| e.to_string())
    }
}

/// The names the registry's scenarios report under (an `enum` in the schema).
fn scenario_name_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = crate::scenarios::CATALOG.iter().map(|e| e.name).collect();
    json_schema!({ "type": "string", "enum": names })
}

/// Every strategy name of the registry's scenarios (an `enum` in the schema).
fn strategy_name_schema(_: &mut SchemaGenerator) -> Schema {
    let mut names: Vec<&str> = Vec::new();
    for s in crate::scenarios::CATALOG.iter().flat_map(|e| e.strategies) {
        if !names.contains(s) {
            names.push(s);
        }
    }
    json_schema!({ "type": "string", "enum": names })
}

/// The report's JSON Schema (draft 2020-12), derived from [`Report`]: the content of
/// `crates/memmap-bench/schema/report.schema.json`.
#[must_use]
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Report>();
    schema.insert(
        "$id".into(),
        "https://github.com/memmap-stream/memmap-stream/crates/memmap-bench/schema/report.schema.json".into(),
    );
    schema.to_value()
}

/// The checked-in schema text for [`json_schema()`]: pretty JSON with a final newline.
#[must_use]
pub fn json_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{FillKind, MethodRate};
    use crate::measure::Samples;
    use std::time::Duration;

    fn limits() -> Limits {
        let t = |threads: usize, nonzero: f64| ThreadLimits {
            threads,
            fill_zero_gbps: 30.0,
            fill_zero_method: "clzero".into(),
            fill_nonzero_gbps: nonzero,
            fill_nonzero_method: "stream_fill".into(),
            copy_gbps: 10.0,
            copy_method: "memcpy".into(),
            methods: vec![MethodRate {
                method: "stream_fill".into(),
                kind: FillKind::Nonzero,
                gbps: nonzero,
            }],
        };
        Limits {
            fill_zero_gbps: 30.0,
            fill_nonzero_gbps: 10.0,
            memset_zero_gbps: 10.0,
            clear_pages_gbps: 30.0,
            copy_gbps: 10.0,
            scattered_line_ns: 100.0,
            buffer_bytes: 1 << 30,
            rounds: 3,
            all_cores: 2,
            per_threads: vec![t(1, 10.0), t(2, 20.0)],
        }
    }

    fn samples(name: &str, ms: u64) -> Samples {
        Samples { name: name.into(), rounds: vec![Duration::from_millis(ms); 3] }
    }

    fn spec(threads: usize) -> ScenarioSpec {
        ScenarioSpec {
            name: "zone-device-fsdax".into(),
            description: "test".into(),
            struct_pages: 0,
            // 1 GB per round: GB/s = 1000 / ms.
            bytes: 1_000_000_000,
            threads,
            limit: LimitKind::FillNonzero,
        }
    }

    #[test]
    fn a_result_above_its_limit_is_a_measurement_error() {
        // One thread, limit 10 GB/s: 95 ms is 10.53 GB/s (1.053x), 100 ms is 1.0x.
        let sc =
            ScenarioReport::from_samples(spec(1), &limits(), &[samples("slow", 100), samples("fast", 95)]);
        assert_eq!(sc.limit_gbps, 10.0);
        assert_eq!(sc.limit_method, "stream_fill");
        assert!(!sc.results[0].measurement_error);
        assert!((sc.results[1].x_limit - 1.0 / 0.95).abs() < 1e-9);
        assert!(sc.results[1].measurement_error);
        assert_eq!(sc.measurement_errors, 1);
        assert!(sc.table().contains("MEASUREMENT ERROR"), "{}", sc.table());
        let json = serde_json::to_value(&sc).unwrap();
        assert_eq!(json["results"][1]["measurement_error"], true);
        assert_eq!(json["measurement_errors"], 1);
        // At exactly 1.05x it is not (yet) an error; just above it is.
        assert!(!is_measurement_error(MEASUREMENT_ERROR_RATIO));
        assert!(is_measurement_error(MEASUREMENT_ERROR_RATIO + 1e-9));
    }

    fn rounds(name: &str, ms: &[u64]) -> Samples {
        Samples { name: name.into(), rounds: ms.iter().map(|&m| Duration::from_millis(m)).collect() }
    }

    #[test]
    fn paired_limits_follow_the_machine_between_modes() {
        // The machine alternates between 20 and 40 GB/s; the strategy (1 GB a round) reaches
        // 0.96 of the limit run next to it in either mode.
        let strategy = rounds("fast", &[60, 26, 52, 26, 52]);
        let limit = rounds("limit", &[50, 25, 50, 25, 50]);
        // Against the limits phase's 10 GB/s its median 25.6 GB/s would be an error.
        let mut sc = ScenarioReport::from_samples(spec(1), &limits(), std::slice::from_ref(&strategy));
        assert!(sc.results[0].measurement_error);
        sc.set_paired_limit("stream_fill", 1_000_000_000, &[limit]);
        assert!(sc.paired);
        assert!((sc.results[0].x_limit - 25.0 / 26.0).abs() < 1e-9, "{}", sc.results[0].x_limit);
        assert!(!sc.results[0].measurement_error);
        assert_eq!(sc.measurement_errors, 0);
        assert!((sc.limit_gbps - 30.0).abs() < 1e-9, "median of 40, 20, 40, 20");
        assert_eq!(sc.limits_phase_gbps, 10.0);
        assert!(sc.table().contains("right before each of its rounds"), "{}", sc.table());
        // Faster than the limit run next to it in most rounds: an error, whatever the mode.
        let strategy = rounds("fast", &[60, 22, 52, 22, 44]);
        let mut sc = ScenarioReport::from_samples(spec(1), &limits(), &[strategy]);
        sc.set_paired_limit("memset", 1_000_000_000, &[rounds("limit", &[50, 25, 50, 25, 50])]);
        assert_eq!(sc.limit_method, "memset");
        assert!(sc.results[0].x_limit > 1.1 && sc.results[0].measurement_error);
        assert_eq!(sc.results[0].paired_limit_gbps, Some(30.0));
        let json = serde_json::to_value(&sc).unwrap();
        assert_eq!(json["paired"], true);
        assert_eq!(json["results"][0]["measurement_error"], true);
    }

    #[test]
    fn each_thread_count_has_its_own_limit() {
        // The same 19 GB/s is 1.9x of the one-thread limit (an error) but 0.95x on two threads.
        let one = ScenarioReport::from_samples(spec(1), &limits(), &[samples("s", 1000 / 19)]);
        let two = ScenarioReport::from_samples(spec(2), &limits(), &[samples("s", 1000 / 19)]);
        assert!(one.results[0].measurement_error);
        assert!(!two.results[0].measurement_error);
        assert_eq!((two.limit_gbps, two.limit_threads), (20.0, 2));
        // A count that was not measured uses the largest one below it.
        let four = ScenarioReport::from_samples(spec(4), &limits(), &[samples("s", 100)]);
        assert_eq!(four.limit_threads, 2);
        let report = Report {
            format: REPORT_FORMAT,
            machine: crate::machine::Machine::detect(),
            all_core_threads: 2,
            auto_threads: None,
            limits: limits(),
            scenarios: vec![one, two],
            command: String::new(),
            quick: true,
        };
        let text = report.summary();
        assert!(text.contains("measurement error: 1 result"), "{text}");
    }
}

mod plot {
    use plotters::prelude::*;

    use super::Report;

    /// Bars by position in the scenario: the baseline, intermediate strategies, the last
    /// (fastest) strategy.
    const COLORS: [RGBColor; 3] =
        [RGBColor(0xd6, 0x60, 0x4d), RGBColor(0xf4, 0xa5, 0x82), RGBColor(0x21, 0x66, 0xac)];

    /// Scenarios whose figure is not a write bandwidth (the registry says which) are left out of
    /// the chart.
    fn plotted(name: &str) -> bool {
        crate::scenarios::catalog_entry(name).is_none_or(|e| e.plotted)
    }

    pub(super) fn draw(report: &Report, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
        let groups: Vec<_> =
            report.scenarios.iter().filter(|s| !s.results.is_empty() && plotted(&s.name)).collect();
        let width = 200 + 230 * groups.len().max(1) as u32;
        let root = SVGBackend::with_string(svg, (width, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let ymax = groups
            .iter()
            .flat_map(|s| s.results.iter().map(|r| r.gbps).chain([s.limit_gbps]))
            .fold(1.0f64, f64::max)
            * 1.2;
        let n = groups.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "memmap-bench: GB/s written per strategy, against the limit measured in the same run ({}, {})",
                    report.machine.cpu, report.machine.backend
                ),
                ("sans-serif", 14),
            )
            .margin(14)
            .x_label_area_size(30)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..n, 0f64..ymax)?;
        chart.configure_mesh().disable_x_mesh().x_labels(0).y_desc("GB/s").draw()?;
        for (g, sc) in groups.iter().enumerate() {
            let k = sc.results.len().max(1) as f64;
            let bar_w = 0.84 / k;
            for (j, r) in sc.results.iter().enumerate() {
                let color = if j == 0 {
                    COLORS[0]
                } else if j + 1 == sc.results.len() {
                    COLORS[2]
                } else {
                    COLORS[1]
                };
                let x0 = g as f64 + 0.08 + j as f64 * bar_w;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x0 + bar_w * 0.88, r.gbps)],
                    color.filled(),
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!("{:.1}", r.gbps),
                    (x0, r.gbps + ymax * 0.045),
                    ("sans-serif", 12).into_font(),
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    r.strategy.clone(),
                    (x0, r.gbps + ymax * 0.02),
                    ("sans-serif", 10).into_font(),
                )))?;
            }
            chart.draw_series(LineSeries::new(
                [(g as f64 + 0.04, sc.limit_gbps), (g as f64 + 0.96, sc.limit_gbps)],
                BLACK.stroke_width(2),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("limit: {} {:.1}", sc.limit.label(), sc.limit_gbps),
                (g as f64 + 0.06, sc.limit_gbps + ymax * 0.08),
                ("sans-serif", 11).into_font(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{} ({}T)", sc.name, sc.threads),
                (g as f64 + 0.2, -ymax * 0.035),
                ("sans-serif", 13).into_font(),
            )))?;
        }
        root.present()?;
        Ok(())
    }
}
