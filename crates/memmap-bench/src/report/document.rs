//! The whole report of a timing run: the `--json` document ([`Report`], format
//! [`REPORT_FORMAT`]) and what it says about the run besides the scenarios: the memory plan,
//! the all-core count and why, what was left out.

use schemars::JsonSchema;
use serde::Serialize;

use super::scenario::ScenarioReport;
use crate::limits::Limits;
use crate::machine::Machine;
use crate::report::provenance::Provenance;
use crate::size::Bytes;
use crate::threads::ThreadSource;

/// Version of the `--json` report's format: raised when a field changes meaning or goes away
/// (adding fields keeps it).
pub const REPORT_FORMAT: u32 = 4;

/// A scenario run at a smaller size than its default to fit the memory budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Scaled {
    /// The scenario.
    pub name: String,
    /// Its default size (`100 GiB`, `64 x 1 GiB pages`).
    pub from: String,
    /// The size it ran at.
    pub to: String,
}

/// A scenario left out of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Skipped {
    /// The scenario.
    pub name: String,
    /// Why it did not run (the memory it needs against the budget, say), printed as is.
    pub reason: String,
}

/// How the run fitted the machine's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct MemoryPlan {
    /// The most any scenario (or the limits phase) makes resident at once, bytes; `null` when
    /// the machine's memory is unknown.
    pub budget_bytes: Option<u64>,
    /// `flag` (`--memory-budget`), `available` (two thirds of `MemAvailable`) or `unknown`.
    pub budget_source: String,
    /// What a run could make resident when it started, bytes: `MemAvailable`, or the memory
    /// cgroup's room where that is less.
    pub available_bytes: Option<u64>,
    /// The limit of the memory cgroup whose room `available_bytes` is, bytes (absent when
    /// `MemAvailable` was the smaller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_limit_bytes: Option<u64>,
    /// The scenarios (and the limits phase) run below their default size.
    pub scaled: Vec<Scaled>,
}

impl MemoryPlan {
    /// One sentence: the budget, where it came from, what it scaled.
    #[must_use]
    pub fn line(&self) -> String {
        let budget = match (self.budget_bytes, self.budget_source.as_str()) {
            (Some(b), "flag") => format!("memory budget {} (--memory-budget)", Bytes(b)),
            (Some(b), _) => {
                let available = Bytes(self.available_bytes.unwrap_or(0));
                let of = match self.cgroup_limit_bytes {
                    Some(l) => format!("{available} left under the memory cgroup's {} limit", Bytes(l)),
                    None => format!("MemAvailable {available}"),
                };
                format!("memory budget {} (2/3 of {of}; --memory-budget sets it)", Bytes(b))
            }
            (None, _) => "memory budget: unknown (no /proc/meminfo)".to_string(),
        };
        if self.scaled.is_empty() {
            format!("{budget}: every scenario at its full size")
        } else {
            let list: Vec<String> =
                self.scaled.iter().map(|s| format!("{} {} -> {}", s.name, s.from, s.to)).collect();
            format!("{budget}: scaled to fit {}; the rest at full size", list.join(", "))
        }
    }
}

/// The whole report: the `--json` document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(title = "memmap-bench --json report")]
pub struct Report {
    /// Version of this report format ([`REPORT_FORMAT`]): raised when a field changes meaning
    /// or goes away; adding fields keeps it.
    #[schemars(range(min = 1))]
    pub format: u32,
    /// The build and machine state this report was made with.
    pub provenance: Provenance,
    /// Machine description.
    pub machine: Machine,
    /// How the run fitted the machine's memory.
    pub memory: MemoryPlan,
    /// Workers of the all-core rows (`--threads`; 1: no all-core rows).
    #[schemars(range(min = 1))]
    pub all_core_threads: usize,
    /// Where that count came from: `flag` (`--threads N`) or `auto` (`--threads auto`:
    /// stream-par's `Threads::Auto`).
    pub all_core_threads_source: ThreadSource,
    /// Why that count, in a phrase.
    pub all_core_threads_reason: String,
    /// Limits measured in this run.
    pub limits: Limits,
    /// Scenarios, in run order.
    pub scenarios: Vec<ScenarioReport>,
    /// Scenarios left out, and why.
    pub skipped: Vec<Skipped>,
    /// Seconds from the start of the limits phase to the end of the last scenario.
    pub wall_s: f64,
    /// The command line.
    pub command: String,
    /// `--quick`.
    pub quick: bool,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::scenario::tests::{limits, samples, spec};
    use super::super::text;
    use super::*;

    /// A report of `scenarios` on this machine.
    pub(crate) fn report(scenarios: Vec<ScenarioReport>) -> Report {
        Report {
            format: REPORT_FORMAT,
            provenance: Provenance::now(),
            machine: Machine::detect(),
            memory: MemoryPlan {
                budget_bytes: Some(4 << 30),
                budget_source: "flag".into(),
                available_bytes: Some(20 << 30),
                cgroup_limit_bytes: None,
                scaled: vec![Scaled {
                    name: "zone-device-fsdax".into(),
                    from: "100 GiB".into(),
                    to: "40 GiB".into(),
                }],
            },
            all_core_threads: 2,
            all_core_threads_source: ThreadSource::Flag,
            all_core_threads_reason: "--threads 2".into(),
            limits: limits(),
            scenarios,
            skipped: vec![Skipped { name: "x".into(), reason: "does not fit".into() }],
            wall_s: 1.0,
            command: String::new(),
            quick: true,
        }
    }

    #[test]
    fn the_summary_has_a_line_per_run_and_says_what_was_left_out() {
        let one = ScenarioReport::from_samples(
            spec(1),
            &limits(),
            &[samples("slow", 1000 / 2), samples("s", 1000 / 19)],
        );
        let two = ScenarioReport::from_samples(
            spec(2),
            &limits(),
            &[samples("slow", 100), samples("s", 1000 / 19)],
        );
        let r = report(vec![one, two]);
        let text = r.summary();
        assert!(text.contains("! 1 result(s) above 1.05x"), "{text}");
        assert!(text.contains("skipped x: does not fit"), "{text}");
        assert_eq!(text.matches("zone-device-fsdax").count(), 2, "{text}");
        let head = r.header(true);
        assert!(head.contains("scaled to fit zone-device-fsdax 100 GiB -> 40 GiB"), "{head}");
        assert!(head.lines().chain(text.lines()).all(|l| l.chars().count() <= text::WIDTH), "{head}{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["memory"]["scaled"][0]["to"], "40 GiB");
        assert!(json["provenance"]["generated_at"].is_string());
    }
}
