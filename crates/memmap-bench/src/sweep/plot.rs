//! `sweep --plot`: a log-log SVG, one panel per initializer, x the memmap bytes, y ns per
//! struct page; a line per strategy, solid for cold runs and dashed for warm ones.

use plotters::prelude::*;

use super::plan::Init;
use super::result::{SizeResult, SweepReport};
use crate::size::Bytes;

/// Line colours by strategy position: slow, template, streaming, auto.
const COLORS: [RGBColor; 4] = [
    RGBColor(0xd6, 0x60, 0x4d),
    RGBColor(0xe0, 0x9a, 0x1a),
    RGBColor(0x21, 0x66, 0xac),
    RGBColor(0x1a, 0x1a, 0x1a),
];

const WIDTH: u32 = 1100;
const PANEL: u32 = 460;
const TITLE: u32 = 40;

/// The (memmap bytes, ns per struct page) points of strategy `k`, cold or warm.
fn series(rows: &[&SizeResult], k: usize, cold: bool) -> Vec<(f64, f64)> {
    rows.iter()
        .filter_map(|r| {
            let p = r.results.get(k)?;
            let y = if cold { p.cold_ns_per_page } else { p.warm_ns_per_page };
            (y.is_finite() && y > 0.0).then_some((r.memmap_bytes as f64, y))
        })
        .collect()
}

/// The y range of `rows`, widened to whole powers of ten around the data.
fn y_range(rows: &[&SizeResult]) -> (f64, f64) {
    let ys =
        rows.iter().flat_map(|r| r.results.iter().flat_map(|p| [p.cold_ns_per_page, p.warm_ns_per_page]));
    let (lo, hi) =
        ys.filter(|v| v.is_finite() && *v > 0.0).fold((f64::MAX, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if hi <= 0.0 { (0.1, 10.0) } else { (lo / 1.5, hi * 1.5) }
}

/// One initializer's panel.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    report: &SweepReport,
    init: Init,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let rows: Vec<&SizeResult> = report.sizes.iter().filter(|r| r.init == init.name()).collect();
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else { return Ok(()) };
    let (x0, x1) = (first.memmap_bytes as f64 / 1.3, last.memmap_bytes as f64 * 1.3);
    let (y0, y1) = y_range(&rows);
    let caption =
        format!("{}: ns per struct page against memmap size (solid: cold, dashed: warm)", init.name());
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("memmap bytes (struct pages x 64)")
        .y_desc("ns per struct page")
        .x_label_formatter(&|v| Bytes(*v as u64).to_string())
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()?;
    for (k, p) in first.results.iter().enumerate() {
        let color = COLORS[k.min(COLORS.len() - 1)];
        chart
            .draw_series(LineSeries::new(series(&rows, k, true), color.stroke_width(2)))?
            .label(format!("{} cold", p.strategy))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(DashedLineSeries::new(series(&rows, k, false), 6, 4, color.stroke_width(1)))?
            .label(format!("{} warm", p.strategy))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 8, y), (x + 12, y), (x + 20, y)], color.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 11))
        .draw()?;
    Ok(())
}

/// Draws `report` as an SVG into `svg`.
///
/// # Errors
///
/// plotters' drawing errors.
pub fn draw(report: &SweepReport, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let height = TITLE + PANEL * Init::ALL.len() as u32;
    let root = SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, body) = root.split_vertically(TITLE);
    let title = format!(
        "memmap-bench sweep: cost against size, one thread ({}, {}); cold: after writing {}",
        report.provenance.cpu_model.name,
        report.machine.backend_name,
        Bytes(report.flush_bytes)
    );
    top.draw(&Text::new(title, (10, 12), ("sans-serif", 15).into_font()))?;
    for (area, init) in body.split_evenly((Init::ALL.len(), 1)).iter().zip(Init::ALL) {
        panel(area, report, init)?;
    }
    root.present()?;
    Ok(())
}
