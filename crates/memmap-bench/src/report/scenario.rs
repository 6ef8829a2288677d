//! One scenario's figures: what a scenario's `run` hands the report ([`ScenarioReport`]), built
//! from its interleaved samples and, where it pairs them, its limit runs.

use schemars::JsonSchema;
use serde::Serialize;

use super::verdict::{ms, times};
use crate::limits::{Limits, ThreadLimits};
use crate::measure::{Samples, gbps, median_f64, quantile};

/// A result above this fraction of its limit is a measurement error (1.05: five percent of
/// noise between the limit probe and the scenario is tolerated).
pub const MEASUREMENT_ERROR_RATIO: f64 = 1.05;

/// Which limit a scenario is judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Struct page fill: the best rate of writing struct-page-shaped records.
    FillStructPage,
    /// Non-zero fill.
    FillNonzero,
    /// Zero fill (clearing pages).
    FillZero,
}

impl LimitKind {
    /// The limit's value at a thread count's limits.
    #[must_use]
    pub fn of(self, l: &ThreadLimits) -> f64 {
        match self {
            LimitKind::FillStructPage => l.fill_struct_page_gbps,
            LimitKind::FillNonzero => l.fill_nonzero_gbps,
            LimitKind::FillZero => l.fill_zero_gbps,
        }
    }

    /// The method that set it.
    #[must_use]
    pub fn method(self, l: &ThreadLimits) -> &str {
        match self {
            LimitKind::FillStructPage => &l.fill_struct_page_method,
            LimitKind::FillNonzero => &l.fill_nonzero_method,
            LimitKind::FillZero => &l.fill_zero_method,
        }
    }

    /// Short label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            LimitKind::FillStructPage => "struct page fill",
            LimitKind::FillNonzero => "non-zero fill",
            LimitKind::FillZero => "zero fill",
        }
    }
}

/// What a scenario's main figure is: decides which columns, verdicts and bars mean something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// The bytes written per second: GB/s and the ratio to the limit are shown, judged
    /// (measurement errors) and plotted.
    Bandwidth,
    /// A time that is not a write bandwidth (a boot that writes a few struct pages per folio
    /// with HVO, an on-demand boot): only times and speedups are shown; not plotted.
    Time,
}

/// One strategy's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StrategyResult {
    /// Strategy name.
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
    /// First and third quartile of rounds 1.., ms (the plot's error bars, as GB/s).
    pub quartiles_ms: [f64; 2],
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
    /// limit or this measurement is wrong. Only bandwidth figures ([`Figure::Bandwidth`]) are
    /// judged.
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
    /// What the figure is.
    pub figure: Figure,
}

/// An extra column of a scenario's table: one value per result, in ms (deferred's time to
/// full availability, say). Shown in the table; the JSON carries it in the scenario's own
/// fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Header (`full ms`).
    pub header: String,
    /// One value per result.
    pub values: Vec<f64>,
}

/// One scenario's figures (what a scenario's `run` returns): one entry of the report's
/// `scenarios`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScenarioReport {
    /// Scenario name (`zone-device-fsdax`, ...).
    pub name: String,
    /// What it models.
    pub description: String,
    /// What the figure is: a bandwidth (GB/s and x limit mean something) or a time.
    pub figure: Figure,
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
    /// The limit's method (`stream_fill`, `clzero`, ...): paired, the best methods of the kind
    /// on the scenario's own storage (`clzero or clear_pages`: each limit run counts the
    /// fastest); otherwise the best in the limits phase.
    pub limit_method: String,
    /// The thread count whose limit is used ([`Limits::at`]: `threads`, or the largest count
    /// measured below it).
    pub limit_threads: usize,
    /// Results flagged as measurement errors.
    pub measurement_errors: usize,
    /// The limit of the kind at this thread count in the limits phase (before the scenarios),
    /// GB/s.
    pub limits_phase_gbps: f64,
    /// Whether every strategy's round ran right after a run of the limit method over that
    /// strategy's own storage ([`ScenarioReport::set_paired_limit`]) and `x_limit` is the
    /// median of the per-round ratios: a shared machine's bandwidth changes within a second,
    /// and what memory allows depends on how it is backed.
    pub paired: bool,
    /// The strategy speedups are relative to.
    pub baseline: String,
    /// Per-strategy results, baseline first.
    #[schemars(length(min = 1))]
    pub results: Vec<StrategyResult>,
    /// The result in one sentence: the fastest strategy against the baseline and, for a
    /// bandwidth, against the limit.
    pub verdict: String,
    /// Extra lines printed under the table with `--verbose`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Extra table columns (their values are in `extra` too).
    #[serde(skip)]
    pub columns: Vec<Column>,
    /// Scenario-specific figures.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ScenarioReport {
    /// Builds a scenario from interleaved samples (the first sample is the baseline).
    ///
    /// # Panics
    ///
    /// If `samples` is empty.
    #[must_use]
    pub fn from_samples(spec: ScenarioSpec, limits: &Limits, samples: &[Samples]) -> ScenarioReport {
        let ScenarioSpec { name, description, struct_pages, bytes, threads, limit, figure } = spec;
        let at = limits.at(threads);
        let limit_gbps = limit.of(at);
        // Ratios of medians: a sample of a millisecond-long boot can be three times its median
        // when the shared machine interrupts it, which an average would carry into the ratio.
        let base = samples[0].median_ms();
        let results: Vec<StrategyResult> = samples
            .iter()
            .map(|s| {
                let median_ms = s.median_ms();
                let g = gbps(bytes, median_ms / 1e3);
                let x_limit = g / limit_gbps;
                let rebinds: Vec<f64> = s.rebinds().iter().map(|d| d.as_secs_f64() * 1e3).collect();
                StrategyResult {
                    strategy: s.name.clone(),
                    first_ms: s.first().as_secs_f64() * 1e3,
                    rebind_avg_ms: s.rebind_avg_ms(),
                    median_ms,
                    quartiles_ms: [quantile(&rebinds, 0.25), quantile(&rebinds, 0.75)],
                    gbps: g,
                    x_limit,
                    speedup: base / median_ms,
                    measurement_error: false,
                    paired_limit_gbps: None,
                    rounds_ms: s.rounds.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
                }
            })
            .collect();
        let mut sc = ScenarioReport {
            name,
            description,
            figure,
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
            verdict: String::new(),
            notes: Vec::new(),
            columns: Vec::new(),
            extra: serde_json::Map::new(),
        };
        sc.refresh();
        sc
    }

    /// Recomputes the measurement-error flags and the verdict from the final figures (a
    /// scenario may rewrite them after [`ScenarioReport::from_samples`]); figures that are not a
    /// bandwidth are never flagged.
    pub fn refresh(&mut self) {
        let bandwidth = self.figure == Figure::Bandwidth;
        for r in &mut self.results {
            r.measurement_error = bandwidth && is_measurement_error(r.x_limit);
        }
        self.measurement_errors = self.results.iter().filter(|r| r.measurement_error).count();
        self.verdict = verdict(self);
    }

    /// Judges every result against the limit runs paired with its rounds: `pairs[i]` are the
    /// times of the limit method `method` over `probe_bytes` next to `results[i]`'s rounds.
    /// `x_limit` becomes the median of the per-round ratios, `paired_limit_gbps` the median
    /// limit run, and `limit_gbps` the median of all the scenario's limit runs.
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
            r.x_limit = median_f64(&ratios);
            r.paired_limit_gbps = Some(median_f64(&limit));
            pooled.extend(limit);
        }
        self.limit_gbps = median_f64(&pooled);
        self.limit_method = method.to_string();
        self.paired = true;
        self.refresh();
    }

    /// The result of `strategy`.
    #[must_use]
    pub fn result(&self, strategy: &str) -> Option<&StrategyResult> {
        self.results.iter().find(|r| r.strategy == strategy)
    }

    /// The fastest result by median (the baseline if it is the only one).
    ///
    /// # Panics
    ///
    /// If the scenario has no result (a report always has one).
    #[must_use]
    pub fn best(&self) -> &StrategyResult {
        self.results
            .iter()
            .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
            .expect("a scenario reports at least one result")
    }
}

/// The one sentence that states a scenario's result: its fastest strategy against the
/// baseline and, for a bandwidth, against the machine's limit:
/// `streaming: 5.8x slow, 0.99x of this machine's non-zero fill limit`, or for a time figure
/// `on-demand: 60.1x eager (0.91 ms against 55.2 ms)`.
#[must_use]
pub fn verdict(sc: &ScenarioReport) -> String {
    let best = sc.best();
    let base = sc.result(&sc.baseline).unwrap_or(best);
    let against = if best.strategy == base.strategy {
        String::new()
    } else {
        format!("{} {}", times(best.speedup), base.strategy)
    };
    match sc.figure {
        Figure::Bandwidth => {
            let limit = format!("{:.2}x of this machine's {} limit", best.x_limit, sc.limit.label());
            let error = if best.measurement_error { " (above the limit: a measurement error)" } else { "" };
            if against.is_empty() {
                format!("{}: {limit}{error}", best.strategy)
            } else {
                format!("{}: {against}, {limit}{error}", best.strategy)
            }
        }
        Figure::Time if against.is_empty() => format!("{}: {}", best.strategy, ms(best.median_ms)),
        Figure::Time => {
            format!("{}: {against} ({} against {})", best.strategy, ms(best.median_ms), ms(base.median_ms))
        }
    }
}

/// Whether a result at `x_limit` of its limit is a measurement error.
#[must_use]
pub fn is_measurement_error(x_limit: f64) -> bool {
    x_limit > MEASUREMENT_ERROR_RATIO
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::limits::{FillKind, MethodRate};
    use std::time::Duration;

    pub(crate) fn limits() -> Limits {
        let t = |threads: usize, nonzero: f64| ThreadLimits {
            threads,
            fill_zero_gbps: 30.0,
            fill_zero_method: "clzero".into(),
            fill_nonzero_gbps: nonzero,
            fill_nonzero_method: "stream_fill".into(),
            copy_gbps: 10.0,
            copy_method: "memcpy".into(),
            fill_struct_page_gbps: nonzero,
            fill_struct_page_method: "stream_fill".into(),
            methods: vec![MethodRate {
                method: "stream_fill".into(),
                kind: FillKind::StructPage,
                gbps: nonzero,
            }],
        };
        Limits {
            fill_zero_gbps: 30.0,
            fill_nonzero_gbps: 10.0,
            fill_struct_page_gbps: 10.0,
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

    pub(crate) fn samples(name: &str, ms: u64) -> Samples {
        Samples { name: name.into(), rounds: vec![Duration::from_millis(ms); 3] }
    }

    pub(crate) fn spec(threads: usize) -> ScenarioSpec {
        ScenarioSpec {
            name: "zone-device-fsdax".into(),
            description: "test".into(),
            struct_pages: 0,
            // 1 GB per round: GB/s = 1000 / ms.
            bytes: 1_000_000_000,
            threads,
            limit: LimitKind::FillNonzero,
            figure: Figure::Bandwidth,
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
        assert_eq!(sc.best().strategy, "fast");
        let json = serde_json::to_value(&sc).unwrap();
        assert_eq!(json["results"][1]["measurement_error"], true);
        assert_eq!(json["measurement_errors"], 1);
        assert_eq!(json["figure"], "bandwidth");
        assert_eq!(
            json["verdict"],
            "fast: 1.05x slow, 1.05x of this machine's non-zero fill limit (above the limit: a measurement error)"
        );
        // At exactly 1.05x it is not (yet) an error; just above it is.
        assert!(!is_measurement_error(MEASUREMENT_ERROR_RATIO));
        assert!(is_measurement_error(MEASUREMENT_ERROR_RATIO + 1e-9));
        // A time figure is never judged against the limit.
        let time = ScenarioSpec { figure: Figure::Time, ..spec(1) };
        let sc = ScenarioReport::from_samples(time, &limits(), &[samples("slow", 100), samples("fast", 10)]);
        assert_eq!(sc.measurement_errors, 0);
    }

    fn rounds(name: &str, ms: &[u64]) -> Samples {
        Samples { name: name.into(), rounds: ms.iter().map(|&m| Duration::from_millis(m)).collect() }
    }

    #[test]
    fn quartiles_come_from_the_rounds_after_the_first() {
        let sc = ScenarioReport::from_samples(spec(1), &limits(), &[rounds("s", &[500, 10, 20, 30, 40, 50])]);
        assert_eq!(sc.results[0].quartiles_ms, [20.0, 40.0]);
        assert_eq!(sc.results[0].median_ms, 30.0);
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
    }
}
