//! Running a timing command ([`Suite`]: the thread count, the limits, each scenario, the
//! report) and `sweep` ([`run_sweep`]).

use std::process::ExitCode;
use std::time::Instant;

use super::error::fail;
use super::suite::Suite;
use crate::limits::{self, Limits};
use crate::machine::Machine;
use crate::progress::Phase;
use crate::report::{Provenance, REPORT_FORMAT, Report};
use crate::scenarios::scenario::Context;
use crate::sweep::plan::Sweep;
use crate::threads::AllCore;

/// Where the human-readable text goes: stdout, or stderr when stdout carries the JSON.
struct Out {
    json: bool,
}

impl Out {
    fn say(&self, text: &str) {
        if self.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }
}

/// The limits phase, at the run's all-core count besides 1 and every CPU.
fn measure_limits(s: &Suite, threads: AllCore) -> std::io::Result<Limits> {
    let phase = Phase::new("limits", s.common.progress);
    phase.step(format!("limits: map and fault in 2 x {}", crate::size::Bytes(s.limit_buffer)));
    let l = limits::measure(s.limit_buffer, s.limit_rounds, &[threads.count()], &phase);
    phase.finish();
    l
}

/// Runs the suite and prints (or writes) the report.
pub(super) fn run_suite(s: &Suite) -> ExitCode {
    let out = Out { json: s.json };
    let start = Instant::now();
    if let Some(file) = &s.plot {
        if let Err(e) = file.probe() {
            return fail(&format!("--plot: {e}"), 2);
        }
    }
    // The one place the all-core count is decided: every scenario gets this value.
    let threads = s.threads.resolve(s.memory.budget_bytes);
    let limits = match measure_limits(s, threads) {
        Ok(l) => l,
        Err(e) => return fail(&format!("map the limit probe's buffers: {e}"), 1),
    };
    let mut report = Report {
        format: REPORT_FORMAT,
        provenance: Provenance::now(),
        machine: Machine::detect(),
        memory: s.memory.clone(),
        all_core_threads: threads.count(),
        all_core_threads_source: threads.source(),
        all_core_threads_reason: threads.reason(),
        limits,
        scenarios: Vec::new(),
        skipped: s.skipped.clone(),
        wall_s: 0.0,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        quick: s.common.quick,
    };
    out.say(&report.header(s.verbose));
    out.say("\n");
    if !s.limits_only {
        let limits = report.limits.clone();
        let ctx = Context { common: &s.common, threads, limits: &limits };
        for sc in &s.scenarios {
            match sc.run(&ctx) {
                Ok(rows) => {
                    for mut r in rows {
                        r.refresh();
                        out.say(&r.table(s.verbose));
                        out.say("\n");
                        report.scenarios.push(r);
                    }
                }
                Err(e) => return fail(&e, 1),
            }
        }
        report.wall_s = start.elapsed().as_secs_f64();
        out.say(&report.summary());
        out.say(&format!("run time: {:.0} s\n", report.wall_s));
    } else {
        report.wall_s = start.elapsed().as_secs_f64();
    }
    finish(s, &report, &out)
}

/// The plot and the JSON.
fn finish(s: &Suite, report: &Report, out: &Out) -> ExitCode {
    if let Some(file) = &s.plot {
        if let Err(e) = report.plot(file) {
            return fail(&format!("--plot: {e}"), 1);
        }
        out.say(&format!("plot written to {}\n", file.path().display()));
    }
    if s.json {
        match serde_json::to_string_pretty(report) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(&e, 1),
        }
    }
    ExitCode::SUCCESS
}

/// `sweep`: measures, prints the tables (to stderr under `--json`), writes the plot and JSON.
#[must_use]
pub fn run_sweep(s: &Sweep) -> ExitCode {
    if let Some(file) = &s.plot {
        if let Err(e) = file.probe() {
            return fail(&format!("--plot: {e}"), 2);
        }
    }
    let report = match crate::sweep::measure_all(s) {
        Ok(r) => r,
        Err(e) => return fail(&e, 1),
    };
    let out = Out { json: s.json };
    out.say(&crate::sweep::text::render(&report, s.verbose));
    if let Some(file) = &s.plot {
        let mut svg = String::new();
        if let Err(e) = crate::sweep::plot::draw(&report, &mut svg) {
            return fail(&format!("--plot: {}: {e}", file.path().display()), 1);
        }
        if let Err(e) = file.commit(svg.as_bytes()) {
            return fail(&format!("--plot: {e}"), 1);
        }
        out.say(&format!("plot written to {}\n", file.path().display()));
    }
    if s.json {
        match serde_json::to_string_pretty(&report) {
            Ok(t) => println!("{t}"),
            Err(e) => return fail(&e, 1),
        }
    }
    ExitCode::SUCCESS
}
