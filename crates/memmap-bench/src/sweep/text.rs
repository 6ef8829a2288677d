//! The sweep's text: a table per initializer (per size, each strategy's cold and warm median
//! in ns per struct page, and what auto chose), a verdict line per size, a summary.

use std::fmt::Write as _;

use super::plan::Init;
use super::result::{SizeResult, SweepReport, TARGET};
use crate::report::text::{align_numbers, indented, table, wrap};
use crate::report::verdict::num;
use crate::size::Bytes;

/// `cold / warm` of a strategy, ns per struct page.
fn cell(r: &SizeResult, k: usize) -> String {
    r.results
        .get(k)
        .map_or_else(|| "-".into(), |p| format!("{} / {}", num(p.cold_ns_per_page), num(p.warm_ns_per_page)))
}

/// The verdict line of one size.
fn verdict_line(r: &SizeResult) -> String {
    format!(
        "  {}: cold: {}; warm: {}; {}",
        Bytes(r.memmap_bytes),
        r.cold.text(),
        r.warm.text(),
        r.self_check.text()
    )
}

/// One initializer's table and verdict lines.
fn section(report: &SweepReport, init: Init, verbose: bool) -> String {
    let rows: Vec<&SizeResult> = report.sizes.iter().filter(|r| r.init == init.name()).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s =
        format!("{}: ns per struct page, cold / warm (median of the rounds after the first)\n", init.name());
    let mut header = vec!["memmap".to_string()];
    header.extend(rows[0].results.iter().map(|p| p.strategy.clone()));
    header.push("auto chose".into());
    let mut t = table(header);
    for r in &rows {
        let mut line = vec![Bytes(r.memmap_bytes).to_string()];
        line.extend((0..r.results.len()).map(|k| cell(r, k)));
        line.push(r.auto_used.clone());
        t.add_row(line);
    }
    align_numbers(&mut t);
    s.push_str(&indented(&t));
    for r in &rows {
        s.push_str(&wrap(&verdict_line(r), 4));
        if verbose {
            for p in &r.results {
                let ms = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ");
                let line = format!(
                    "    {}: cold ms {}; warm ms {} (auto: {})",
                    p.strategy,
                    ms(&p.cold_rounds_ms),
                    ms(&p.warm_rounds_ms),
                    r.auto_reason
                );
                s.push_str(&wrap(&line, 6));
            }
        }
    }
    s
}

/// The whole text.
#[must_use]
pub fn render(report: &SweepReport, verbose: bool) -> String {
    let mut s = String::new();
    let llc = report.llc_bytes.map_or_else(|| "unknown".into(), |b| Bytes(b).to_string());
    let head = format!(
        "sweep ({}, {}, config {}): one thread; cold: after writing {} with normal stores (last-level cache {llc}){}; \
         warm: the same strategy again right after; auto streams from {} of struct pages up",
        report.provenance.cpu_model.name,
        report.machine.backend_name,
        report.config,
        Bytes(report.flush_bytes),
        if report.cold_counts_write_back {
            " and flushing the memmap from the caches, counting the write-back the run leaves"
        } else {
            ", not counting the write-back the run leaves (no cache flush on this backend)"
        },
        Bytes(report.auto_threshold_bytes),
    );
    s.push_str(&wrap(&head, 2));
    s.push('\n');
    for init in Init::ALL {
        s.push_str(&section(report, init, verbose));
        s.push('\n');
    }
    for k in &report.skipped {
        s.push_str(&wrap(&format!("not run: {} of memmap: {}", Bytes(k.memmap_bytes), k.reason), 2));
    }
    let misses: Vec<String> = report
        .sizes
        .iter()
        .flat_map(|r| {
            [("cold", &r.cold), ("warm", &r.warm)].into_iter().filter(|(_, v)| !v.acceptable()).map(
                move |(state, v)| {
                    format!(
                        "{} {} {state} ({:+.1}%)",
                        r.init,
                        Bytes(r.memmap_bytes),
                        v.auto_over_best * 100.0
                    )
                },
            )
        })
        .collect();
    let summary = if misses.is_empty() {
        format!(
            "summary: auto within {:.0}% of the best strategy at every size, cold and warm (warm up to the \
             last-level cache's size: as the caller's hint asks)",
            TARGET * 100.0
        )
    } else {
        format!("summary: auto outside {:.0}% of the best at: {}", TARGET * 100.0, misses.join(", "))
    };
    s.push_str(&wrap(&summary, 2));
    let hinted: Vec<f64> = report
        .sizes
        .iter()
        .filter(|r| r.warm.follows_hint && !r.warm.within_target)
        .map(|r| r.warm.auto_over_best)
        .collect();
    if let (Some(lo), Some(hi)) =
        (hinted.iter().copied().reduce(f64::min), hinted.iter().copied().reduce(f64::max))
    {
        let line = format!(
            "warm up to the last-level cache's size ({}): auto streams the write-once memmaps it is asked for, {:+.0}% to \
             {:+.0}% against the best warm strategy at {} size/initializer pairs (a caller that reads the memmap soon \
             says Reuse::ReadSoon and gets the template)",
            report.llc_bytes.map_or_else(|| "unknown".into(), |b| Bytes(b).to_string()),
            lo * 100.0,
            hi * 100.0,
            hinted.len()
        );
        s.push_str(&wrap(&line, 2));
    }
    let failed: Vec<String> = report
        .sizes
        .iter()
        .filter(|r| !r.self_check.consistent)
        .map(|r| format!("{} {}", r.init, Bytes(r.memmap_bytes)))
        .collect();
    if !failed.is_empty() {
        let line = format!(
            "self-check failed (auto and the strategy it used timed apart: noise) at: {}",
            failed.join(", ")
        );
        s.push_str(&wrap(&line, 2));
    }
    let _ = writeln!(s, "run time: {:.0} s", report.wall_s);
    s
}
