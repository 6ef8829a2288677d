//! Running a [`Suite`]: the thread count, the limits, each scenario, the report.

use std::process::ExitCode;
use std::time::Instant;

use memmap_core::Threads;

use super::fail;
use super::suite::Suite;
use crate::limits::{self, Limits};
use crate::machine::Machine;
use crate::progress::{Phase, ProgressMode};
use crate::report::{AutoStep, AutoThreads, Provenance, REPORT_FORMAT, Report};
use crate::scenarios::Context;

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

/// The all-core count: `--threads N`, or `auto` measured now, once (memmap-core caches it),
/// with a spinner while the probe runs.
#[must_use]
pub fn resolve_threads(threads: Threads, progress: ProgressMode) -> usize {
    let resolved = if threads == Threads::Auto {
        let phase = Phase::new("--threads auto: thread count probe", progress);
        let r = threads.resolve();
        phase.finish();
        r
    } else {
        threads
    };
    match resolved {
        Threads::Fixed(n) => n.max(1),
        _ => 1,
    }
}

/// The limits phase.
fn measure_limits(s: &Suite, threads: usize) -> std::io::Result<Limits> {
    let phase = Phase::new("limits", s.common.progress);
    phase.step(format!("limits: map and fault in 2 x {}", crate::size::Bytes(s.limit_buffer)));
    let l = limits::measure(s.limit_buffer, s.limit_rounds, &[threads], &phase);
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
    let threads = resolve_threads(s.common.threads, s.common.progress);
    let limits = match measure_limits(s, threads) {
        Ok(l) => l,
        Err(e) => return fail(&format!("map the limit probe's buffers: {e}"), 1),
    };
    let mut report = Report {
        format: REPORT_FORMAT,
        provenance: Provenance::now(),
        machine: Machine::detect(),
        memory: s.memory.clone(),
        all_core_threads: threads,
        auto_threads: memmap_core::parallel::auto_threads_steps().map(|steps| AutoThreads {
            steps: steps.iter().map(|&(threads, gbps)| AutoStep { threads, gbps }).collect(),
            threads,
        }),
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
