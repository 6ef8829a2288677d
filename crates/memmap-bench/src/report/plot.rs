//! The `--plot` SVG: a horizontal bar per strategy of every bandwidth scenario and thread count
//! (the median GB/s, a whisker from the first to the third quartile, a tick at the limit), the
//! scenarios whose figure is a time and those left out listed under the chart.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::document::Report;
use super::scenario::{Figure, ScenarioReport, StrategyResult};
use super::verdict::{num, ratio};
use crate::measure::gbps;

/// Bars by position in the scenario: the baseline, intermediate strategies, the last
/// (usually the fastest) strategy.
const COLORS: [RGBColor; 3] =
    [RGBColor(0xd6, 0x60, 0x4d), RGBColor(0xf4, 0xa5, 0x82), RGBColor(0x21, 0x66, 0xac)];

/// Pixel layout.
const WIDTH: i32 = 1100;
const ROW: i32 = 20;
const HEADING: i32 = 24;
const GAP: i32 = 10;
const TOP: i32 = 56;
const AXIS: i32 = 36;
const NOTE: i32 = 18;
/// Room right of the longest bar for its text.
const TRAILER: i32 = 190;
/// Approximate width of a character of the 12-pixel font.
const CHAR: i32 = 7;

/// The GB/s of a result's first and third quartile rounds (the whisker).
fn whisker(sc: &ScenarioReport, r: &StrategyResult) -> (f64, f64) {
    let [q1, q3] = r.quartiles_ms;
    (gbps(sc.bytes, q3 / 1e3), gbps(sc.bytes, q1 / 1e3))
}

/// The lines under the chart: what it does not show.
fn notes(report: &Report) -> Vec<String> {
    let mut v = vec![
        "bar: median GB/s of the rounds after the first; whisker: first to third quartile; black tick: the limit \
         (paired: the median of the limit runs next to each round); text: GB/s and the ratio to the limit"
            .to_string(),
    ];
    let times = report.not_plotted();
    if !times.is_empty() {
        v.push(format!("not plotted (a time, not a bandwidth; see the text report): {}", times.join(", ")));
    }
    for s in &report.skipped {
        v.push(format!("not run: {}: {}", s.name, s.reason));
    }
    v
}

/// Draws `report` as an SVG into `svg`.
///
/// # Errors
///
/// plotters' drawing errors.
pub fn draw(report: &Report, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let groups: Vec<&ScenarioReport> =
        report.scenarios.iter().filter(|s| s.figure == Figure::Bandwidth && !s.results.is_empty()).collect();
    let notes = notes(report);
    let rows: i32 = groups.iter().map(|g| HEADING + ROW * g.results.len() as i32 + GAP).sum();
    let height = TOP + rows.max(ROW) + AXIS + NOTE * notes.len() as i32 + 10;
    let label_w = groups.iter().flat_map(|g| g.results.iter().map(|r| r.strategy.len())).max().unwrap_or(8)
        as i32
        * CHAR
        + 40;
    let (x0, x1) = (label_w, WIDTH - TRAILER);
    let xmax = groups
        .iter()
        .flat_map(|g| g.results.iter().map(|r| whisker(g, r).1.max(r.gbps)).chain([g.limit_gbps]))
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        * 1.02;
    let x = |v: f64| x0 + ((v.max(0.0) / xmax) * f64::from(x1 - x0)) as i32;
    let root = SVGBackend::with_string(svg, (WIDTH as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let font = |size: u32| TextStyle::from(("sans-serif", size).into_font());
    let left_mid = Pos::new(HPos::Left, VPos::Center);
    let title = format!(
        "memmap-bench: GB/s written per strategy against this machine's limit measured in the same run ({}, {})",
        report.provenance.cpu_model.name, report.machine.backend_name
    );
    root.draw(&Text::new(title, (10, 12), font(15)))?;
    let mut y = TOP;
    for g in &groups {
        let heading = format!(
            "{} on {}: limit {} GB/s ({}, {})",
            g.name,
            if g.threads == 1 { "1 thread".to_string() } else { format!("{} threads", g.threads) },
            num(g.limit_gbps),
            g.limit.label(),
            g.limit_method
        );
        root.draw(&Text::new(heading, (10, y + HEADING / 2), font(13).pos(left_mid)))?;
        y += HEADING;
        let top = y;
        for (j, r) in g.results.iter().enumerate() {
            let color = match j {
                0 => COLORS[0],
                _ if j + 1 == g.results.len() => COLORS[2],
                _ => COLORS[1],
            };
            let mid = y + ROW / 2;
            root.draw(&Text::new(r.strategy.clone(), (24, mid), font(12).pos(left_mid)))?;
            root.draw(&Rectangle::new([(x0, y + 3), (x(r.gbps), y + ROW - 3)], color.filled()))?;
            let (lo, hi) = whisker(g, r);
            if lo.is_finite() && hi.is_finite() {
                root.draw(&PathElement::new(vec![(x(lo), mid), (x(hi), mid)], BLACK.stroke_width(1)))?;
                for end in [lo, hi] {
                    root.draw(&PathElement::new(
                        vec![(x(end), mid - 4), (x(end), mid + 4)],
                        BLACK.stroke_width(1),
                    ))?;
                }
            }
            let flag = if r.measurement_error { " (above the limit!)" } else { "" };
            let label = format!("{} GB/s, {}x limit{flag}", num(r.gbps), ratio(r.x_limit));
            let after = x(r.gbps).max(x(hi)).max(x(g.limit_gbps)) + 8;
            root.draw(&Text::new(label, (after, mid), font(12).pos(left_mid)))?;
            y += ROW;
        }
        root.draw(&PathElement::new(
            vec![(x(g.limit_gbps), top), (x(g.limit_gbps), y)],
            BLACK.stroke_width(2),
        ))?;
        y += GAP;
    }
    // The axis: ticks at round GB/s.
    root.draw(&PathElement::new(vec![(x0, y), (x1, y)], BLACK.stroke_width(1)))?;
    let step =
        [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0].into_iter().find(|s| xmax / s <= 10.0).unwrap_or(200.0);
    let mut t = 0.0;
    while t <= xmax {
        root.draw(&PathElement::new(vec![(x(t), y), (x(t), y + 5)], BLACK.stroke_width(1)))?;
        root.draw(&Text::new(
            format!("{t:.0}"),
            (x(t), y + 14),
            font(11).pos(Pos::new(HPos::Center, VPos::Center)),
        ))?;
        t += step;
    }
    root.draw(&Text::new("GB/s".to_string(), (x1 + 10, y + 14), font(11).pos(left_mid)))?;
    y += AXIS;
    for n in &notes {
        root.draw(&Text::new(n.clone(), (10, y), font(11).pos(left_mid)))?;
        y += NOTE;
    }
    root.present()?;
    Ok(())
}

impl Report {
    /// Writes the SVG bar chart ([`draw`]) to `out` (checked before the run).
    ///
    /// # Errors
    ///
    /// Drawing or file errors, as text.
    pub fn plot(&self, out: &memmap_dump::OutputFile) -> Result<(), String> {
        let mut svg = String::new();
        draw(self, &mut svg).map_err(|e| format!("{}: {e}", out.path().display()))?;
        out.commit(svg.as_bytes()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::super::scenario::tests::{limits, samples, spec};
    use super::super::scenario::{Figure, ScenarioReport, ScenarioSpec};
    use super::*;

    #[test]
    fn every_scenario_is_drawn_or_listed() {
        let bw = ScenarioReport::from_samples(
            spec(1),
            &limits(),
            &[samples("slow", 500), samples("streaming", 101)],
        );
        let mut time = ScenarioReport::from_samples(
            ScenarioSpec { figure: Figure::Time, ..spec(1) },
            &limits(),
            &[samples("eager", 5)],
        );
        time.name = "deferred".into();
        let report = super::super::document::tests::report(vec![bw, time]);
        let mut svg = String::new();
        draw(&report, &mut svg).unwrap();
        assert!(svg.contains("zone-device-fsdax on 1 thread: limit 10.0 GB/s"), "{svg}");
        assert!(svg.contains("9.90 GB/s, 0.99x limit"), "{svg}");
        assert!(svg.contains("not plotted (a time, not a bandwidth; see the text report): deferred"));
        assert!(svg.contains("not run: x: does not fit"));
    }
}
