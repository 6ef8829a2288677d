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
//!  "limits": {"fill_zero_gbps": f, "fill_nonzero_gbps": f, ...},
//!  "scenarios": [{"name": s, "struct_pages": n, "bytes": n,
//!                 "results": [{"strategy": s, "first_ms": f, "rebind_avg_ms": f,
//!                              "median_ms": f, "gbps": f, "x_limit": f, ...}], ...}],
//!  "command": s, "quick": b}
//! ```

use std::fmt::Write as _;
use std::path::Path;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

use crate::limits::Limits;
use crate::machine::Machine;
use crate::measure::{Samples, gbps};

/// Version of the `--json` report's format: raised when a field changes meaning or goes away
/// (adding fields keeps it).
pub const REPORT_FORMAT: u32 = 1;

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
    /// The limit's value.
    #[must_use]
    pub fn of(self, l: &Limits) -> f64 {
        match self {
            LimitKind::FillNonzero => l.fill_nonzero_gbps,
            LimitKind::FillZero => l.fill_zero_gbps,
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
    /// `gbps` over the scenario's limit measured in this run.
    #[schemars(range(min = 0))]
    pub x_limit: f64,
    /// Median (of the rounds after the first) of the baseline strategy over this one's.
    pub speedup: f64,
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
    /// Its value in this run, GB/s.
    pub limit_gbps: f64,
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
        let limit_gbps = limit.of(limits);
        // Ratios of medians: a sample of a millisecond-long boot can be three times its median
        // when the shared machine interrupts it, which an average would carry into the ratio.
        let base = samples[0].median_ms();
        let results = samples
            .iter()
            .map(|s| {
                let median_ms = s.median_ms();
                let g = gbps(bytes, median_ms / 1e3);
                StrategyResult {
                    strategy: s.name.clone(),
                    first_ms: s.first().as_secs_f64() * 1e3,
                    rebind_avg_ms: s.rebind_avg_ms(),
                    median_ms,
                    gbps: g,
                    x_limit: g / limit_gbps,
                    speedup: base / median_ms,
                    rounds_ms: s.rounds.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
                }
            })
            .collect();
        ScenarioReport {
            name,
            description,
            struct_pages,
            bytes,
            rounds: samples[0].rounds.len(),
            threads,
            limit,
            limit_gbps,
            baseline: samples[0].name.clone(),
            results,
            notes: Vec::new(),
            extra: serde_json::Map::new(),
        }
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
        let _ = writeln!(s, "{}: {}", self.name, self.description);
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
                "  {:<w$} {:>10.1} {:>14.2} {:>10.2} {:>8.2}x {:>8.2} {:>9.2}",
                r.strategy, r.first_ms, r.rebind_avg_ms, r.median_ms, r.speedup, r.gbps, r.x_limit
            );
        }
        let _ =
            writeln!(s, "  limit: {} {:.2} GB/s (measured in this run)", self.limit.label(), self.limit_gbps);
        for n in &self.notes {
            let _ = writeln!(s, "{n}");
        }
        s
    }
}

fn short(name: &str) -> &str {
    if name.len() > 6 { &name[..6] } else { name }
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
        format!(
            "machine: {} ({} CPUs{}), stream-hal backend: {}, large clears: {}\nlimits:  fill zero {:.2} GB/s, fill non-zero {:.2} GB/s, copy {:.2} GB/s, one line per 32 KiB {:.1} ns ({} buffer, {} rounds)\n",
            m.cpu,
            m.cpus,
            m.mem_total_bytes.map_or(String::new(), |b| format!(", {}", crate::size::Bytes(b))),
            m.backend,
            m.streaming_clear,
            self.limits.fill_zero_gbps,
            self.limits.fill_nonzero_gbps,
            self.limits.copy_gbps,
            self.limits.scattered_line_ns,
            crate::size::Bytes(self.limits.buffer_bytes),
            self.limits.rounds,
        )
    }

    /// The one summary table: every strategy of every scenario.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "summary (median of the rounds after the first; speedup = ratio of medians; x limit = GB/s / limit of this run)"
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
            "  {:<24} {:<w$} {:>10} {:>11} {:>9} {:>8} {:>8}",
            "scenario", "strategy", "first ms", "median ms", "speedup", "GB/s", "x limit"
        );
        for sc in &self.scenarios {
            for r in &sc.results {
                let _ = writeln!(
                    s,
                    "  {:<24} {:<w$} {:>10.1} {:>11.2} {:>8.2}x {:>8.2} {:>8.2}",
                    sc.name, r.strategy, r.first_ms, r.median_ms, r.speedup, r.gbps, r.x_limit
                );
            }
        }
        s
    }

    /// Writes an SVG bar chart of GB/s per strategy per scenario, with each scenario's limit
    /// drawn across its group.
    ///
    /// # Errors
    ///
    /// Drawing or file errors, as text.
    pub fn plot(&self, path: &Path) -> Result<(), String> {
        plot::draw(self, path).map_err(|e| format!("{}: {e}", path.display()))
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

    pub(super) fn draw(report: &Report, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
        let groups: Vec<_> =
            report.scenarios.iter().filter(|s| !s.results.is_empty() && plotted(&s.name)).collect();
        let width = 200 + 230 * groups.len().max(1) as u32;
        let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
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
                sc.name.clone(),
                (g as f64 + 0.25, -ymax * 0.035),
                ("sans-serif", 13).into_font(),
            )))?;
        }
        root.present()?;
        Ok(())
    }
}
