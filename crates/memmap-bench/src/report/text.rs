//! What a person reads: the header, a table and a verdict per scenario, the summary. No line is
//! wider than [`WIDTH`] columns: tables are laid out by `comfy-table` within it, prose is
//! wrapped. `--verbose` adds every limit method, every round and each scenario's notes.

use std::fmt::Write as _;

use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::document::Report;
use super::scenario::{Figure, ScenarioReport, verdict};
use super::verdict::{num, ratio, times};
use crate::limits::{FillKind, Limits};
use crate::size::Bytes;

/// The widest line printed.
pub const WIDTH: usize = 120;

/// No borders, a line under the header (comfy-table's preset format: the 6th character draws
/// the header line).
const STYLE: &str = "     -             ";

/// Indentation of tables and detail lines.
const INDENT: &str = "  ";

/// `text` wrapped at [`WIDTH`] columns, continuation lines indented by `indent` spaces.
#[must_use]
pub fn wrap(text: &str, indent: usize) -> String {
    let body = text.trim_start();
    let mut out = String::new();
    let mut line = text[..text.len() - body.len()].to_string();
    for word in body.split(' ').filter(|w| !w.is_empty()) {
        if !line.trim().is_empty() {
            if line.chars().count() + 1 + word.chars().count() > WIDTH {
                out.push_str(line.trim_end());
                out.push('\n');
                line = " ".repeat(indent);
            } else {
                line.push(' ');
            }
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// A table with the program's style, laid out within [`WIDTH`] less the indentation.
pub(crate) fn table(header: Vec<String>) -> Table {
    let mut t = Table::new();
    t.load_preset(STYLE)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width((WIDTH - INDENT.len()) as u16)
        .set_header(header);
    t
}

/// The table's text, each line indented.
pub(crate) fn indented(t: &Table) -> String {
    let mut s = String::new();
    for line in t.to_string().lines() {
        let _ = writeln!(s, "{INDENT}{}", line.trim_end());
    }
    s
}

/// Right-aligns every column but the first.
pub(crate) fn align_numbers(t: &mut Table) {
    for i in 1..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

fn threads_label(n: usize) -> String {
    if n == 1 { "1 thread".into() } else { format!("{n} threads") }
}

impl ScenarioReport {
    /// The scenario's block: title, table, limit, verdict (and with `verbose` the rounds and
    /// notes).
    #[must_use]
    pub fn table(&self, verbose: bool) -> String {
        let mut s =
            wrap(&format!("{} [{}]: {}", self.name, threads_label(self.threads), self.description), 4);
        let bandwidth = self.figure == Figure::Bandwidth;
        let mut header: Vec<String> =
            ["strategy", "first ms", "median ms", "q1-q3 ms", &format!("vs {}", self.baseline)]
                .map(String::from)
                .into();
        if bandwidth {
            header.extend(["GB/s".into(), "x limit".into()]);
        }
        header.extend(self.columns.iter().map(|c| c.header.clone()));
        let mut t = table(header);
        for (i, r) in self.results.iter().enumerate() {
            let mut row = vec![
                r.strategy.clone(),
                num(r.first_ms),
                num(r.median_ms),
                format!("{}-{}", num(r.quartiles_ms[0]), num(r.quartiles_ms[1])),
                times(r.speedup),
            ];
            if bandwidth {
                row.push(num(r.gbps));
                row.push(format!("{}{}", ratio(r.x_limit), if r.measurement_error { " !" } else { "" }));
            }
            row.extend(self.columns.iter().map(|c| c.values.get(i).map_or_else(|| "-".into(), |&v| num(v))));
            t.add_row(row);
        }
        align_numbers(&mut t);
        s.push_str(&indented(&t));
        if bandwidth {
            s.push_str(&wrap(&format!("{INDENT}{}", self.limit_line()), 4));
        }
        if self.measurement_errors > 0 {
            s.push_str(&wrap(
                &format!(
                    "{INDENT}! {} result(s) above {}x of the limit: the limit is the best rate of any method, so the limit or the timing is wrong",
                    self.measurement_errors,
                    super::scenario::MEASUREMENT_ERROR_RATIO
                ),
                4,
            ));
        }
        s.push_str(&wrap(&format!("{INDENT}verdict: {}", verdict(self)), 4));
        if verbose {
            s.push_str(&self.details());
        }
        s
    }

    /// The limit the ratios are against, in a sentence.
    fn limit_line(&self) -> String {
        if self.paired {
            format!(
                "limit: {} on {}, {} run on each strategy's own storage right before each of its rounds: median {} GB/s (limits phase {} GB/s); x limit is the median of the per-round ratios",
                self.limit.label(),
                threads_label(self.limit_threads),
                self.limit_method,
                num(self.limit_gbps),
                num(self.limits_phase_gbps),
            )
        } else {
            format!(
                "limit: {} on {}, {} GB/s ({}, limits phase)",
                self.limit.label(),
                threads_label(self.limit_threads),
                num(self.limit_gbps),
                self.limit_method
            )
        }
    }

    /// `--verbose`: each strategy's rounds and paired limit, then the scenario's notes.
    fn details(&self) -> String {
        let mut s = String::new();
        for r in &self.results {
            let paired = r
                .paired_limit_gbps
                .map_or(String::new(), |g| format!(" (limit next to it: {} GB/s)", num(g)));
            let rounds: Vec<String> = r.rounds_ms.iter().map(|&v| num(v)).collect();
            s.push_str(&wrap(
                &format!("{INDENT}rounds of {}, ms{paired}: {}", r.strategy, rounds.join(" ")),
                6,
            ));
        }
        for n in &self.notes {
            s.push_str(&wrap(&format!("{INDENT}{}", n.trim_start()), 6));
        }
        s
    }
}

impl Report {
    /// The lines before the scenarios: build and machine, memory budget, threads, limits.
    #[must_use]
    pub fn header(&self, verbose: bool) -> String {
        let m = &self.machine;
        let p = &self.provenance;
        let mut s = wrap(
            &format!(
                "memmap-bench {}{}: {} ({} CPUs{}), kernel {}, THP {}",
                p.version,
                p.git_commit.as_deref().map_or(String::new(), |c| format!(" ({})", &c[..c.len().min(12)])),
                p.cpu_model.name,
                m.cpus,
                m.mem_total_bytes.map_or(String::new(), |b| format!(", {}", Bytes(b))),
                p.kernel.as_deref().unwrap_or("unknown"),
                p.thp.as_deref().unwrap_or("unknown"),
            ),
            4,
        );
        s.push_str(&wrap(
            &format!("stream-hal backend: {}; large clears: {}", m.backend, m.streaming_clear),
            4,
        ));
        s.push_str(&wrap(&self.memory.line(), 4));
        s.push_str(&wrap(&self.threads_line(), 4));
        s.push_str(&limits_table(&self.limits, verbose));
        s
    }

    /// The all-core count and why it was chosen.
    fn threads_line(&self) -> String {
        let why = &self.all_core_threads_reason;
        if self.all_core_threads > 1 {
            format!(
                "all-core rows: {} threads ({why}); every scenario also runs on 1 thread, as the kernel does",
                self.all_core_threads
            )
        } else {
            format!("all-core rows: none, one thread only ({why}); --threads N adds them")
        }
    }

    /// The closing summary: one line per scenario and thread count, then what was left out.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = String::from(
            "summary (median of the rounds after the first; x limit against this run's limit):\n",
        );
        let mut t =
            table(["scenario", "threads", "fastest", "speedup", "GB/s", "x limit"].map(String::from).into());
        for sc in &self.scenarios {
            let b = sc.best();
            let speedup = if b.strategy == sc.baseline {
                "-".into()
            } else {
                format!("{} {}", times(b.speedup), sc.baseline)
            };
            let (g, x) = match sc.figure {
                Figure::Bandwidth => (
                    num(b.gbps),
                    format!("{}{}", ratio(b.x_limit), if b.measurement_error { " !" } else { "" }),
                ),
                Figure::Time => ("-".into(), "-".into()),
            };
            t.add_row(vec![sc.name.clone(), sc.threads.to_string(), b.strategy.clone(), speedup, g, x]);
        }
        align_numbers(&mut t);
        if let Some(c) = t.column_mut(2) {
            c.set_cell_alignment(CellAlignment::Left);
        }
        s.push_str(&indented(&t));
        let errors: usize = self.scenarios.iter().map(|sc| sc.measurement_errors).sum();
        if errors > 0 {
            s.push_str(&wrap(
                &format!("{INDENT}! {errors} result(s) above {}x of their limit (the limit or the timing is wrong)", super::scenario::MEASUREMENT_ERROR_RATIO),
                4,
            ));
        }
        for k in &self.skipped {
            s.push_str(&wrap(&format!("{INDENT}skipped {}: {}", k.name, k.reason), 4));
        }
        let times_only: Vec<&str> = self.not_plotted();
        if !times_only.is_empty() {
            s.push_str(&wrap(
                &format!("{INDENT}times, not bandwidths (no GB/s, not plotted): {}", times_only.join(", ")),
                4,
            ));
        }
        s
    }

    /// Names of the scenarios whose figure is not a bandwidth, once each.
    #[must_use]
    pub fn not_plotted(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for sc in self.scenarios.iter().filter(|sc| sc.figure != Figure::Bandwidth) {
            if !v.contains(&sc.name.as_str()) {
                v.push(&sc.name);
            }
        }
        v
    }
}

/// The limits: the best method of each kind per thread count; with `verbose` every method.
fn limits_table(l: &Limits, verbose: bool) -> String {
    let mut s = wrap(
        &format!(
            "limits ({} buffer, median of {} rounds; a kind's limit is its best method; GB/s):",
            Bytes(l.buffer_bytes),
            l.rounds.saturating_sub(1).max(1)
        ),
        4,
    );
    let mut t =
        table(["threads", "struct page fill", "non-zero fill", "zero fill", "copy"].map(String::from).into());
    for p in &l.per_threads {
        t.add_row(vec![
            p.threads.to_string(),
            format!("{} ({})", num(p.fill_struct_page_gbps), p.fill_struct_page_method),
            format!("{} ({})", num(p.fill_nonzero_gbps), p.fill_nonzero_method),
            format!("{} ({})", num(p.fill_zero_gbps), p.fill_zero_method),
            format!("{} ({})", num(p.copy_gbps), p.copy_method),
        ]);
    }
    align_numbers(&mut t);
    s.push_str(&indented(&t));
    if verbose {
        for p in &l.per_threads {
            let methods: Vec<String> = p
                .methods
                .iter()
                .map(|m| {
                    let kind = match m.kind {
                        FillKind::Zero => "zero",
                        FillKind::Nonzero => "non-zero",
                        FillKind::Copy => "copy",
                        FillKind::StructPage => "struct-page",
                    };
                    format!("{} {kind} {}", m.method, num(m.gbps))
                })
                .collect();
            s.push_str(&wrap(&format!("{INDENT}{}: {}", threads_label(p.threads), methods.join(", ")), 6));
        }
        s.push_str(&wrap(
            &format!(
                "{INDENT}one 64-byte line per 32 KiB (the on-demand boot's access pattern): {} ns",
                num(l.scattered_line_ns)
            ),
            6,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::scenario::tests::{limits, samples, spec};
    use super::*;

    #[test]
    fn prose_is_wrapped_within_the_width() {
        let long = "word ".repeat(100);
        let w = wrap(&long, 4);
        assert!(w.lines().all(|l| l.chars().count() <= WIDTH), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("    word")), "{w}");
        assert_eq!(wrap("short line", 4), "short line\n");
        let w = wrap(&format!("  {long}"), 6);
        assert!(
            w.starts_with("  word word") && w.lines().nth(1).is_some_and(|l| l.starts_with("      word")),
            "{w}"
        );
    }

    #[test]
    fn scenario_tables_fit_and_say_the_verdict() {
        let mut sc = ScenarioReport::from_samples(
            spec(1),
            &limits(),
            &[samples("slow", 580), samples("template", 200), samples("streaming", 101)],
        );
        sc.description = "a very long description ".repeat(12);
        for verbose in [false, true] {
            let text = sc.table(verbose);
            assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
            assert!(
                text.contains("verdict: streaming: 5.74x slow, 0.99x of this machine's non-zero fill limit"),
                "{text}"
            );
            assert!(text.contains("x limit") && !text.contains("rebind"), "{text}");
            assert_eq!(text.contains("rounds of slow"), verbose, "{text}");
        }
        let time = super::super::scenario::ScenarioSpec { figure: Figure::Time, ..spec(1) };
        let sc =
            ScenarioReport::from_samples(time, &limits(), &[samples("eager", 55), samples("on-demand", 1)]);
        let text = sc.table(false);
        assert!(!text.contains("GB/s") && !text.contains("x limit"), "{text}");
        assert!(text.contains("verdict: on-demand: 55.0x eager (1.00 ms against 55.0 ms)"), "{text}");
    }
}
