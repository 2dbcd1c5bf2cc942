//! The transport study's figures as SVG text: a statistic against loss, one line per
//! transport (the paper's Figures 2 and 4), and the CCDF of every transport on one cell (its
//! Figure 3).

use plotters::prelude::*;

use super::TransportPoint;
use latlab_lab::plot::{chart, svg_page, DrawResult, Page};

/// Ten colours told apart (matplotlib's tab10): one per default transport.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line: its label and its (x, y) points, x ascending.
pub(super) type Line = (String, Vec<(f64, f64)>);

/// Lines of `y` against loss in percent (log axes when `log_y`), one per transport.
pub(super) fn lines_svg(
    title: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> Result<String, String> {
    svg_page(title, (960, 620), |root| {
        draw_lines(root, title, y_desc, lines, log_y)
    })
}

fn draw_lines(
    root: &Page<'_>,
    title: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> DrawResult {
    let pts = || lines.iter().flat_map(|l| l.1.iter());
    let x_lo = pts().map(|p| p.0).fold(f64::MAX, f64::min).min(1.0);
    let x_hi = pts().map(|p| p.0).fold(0.0, f64::max).max(x_lo * 2.0);
    let y_lo = pts()
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::MAX, f64::min);
    let y_hi = pts().map(|p| p.1).fold(0.0, f64::max);
    let (y_lo, y_hi) = if y_hi > 0.0 && y_lo < f64::MAX {
        (y_lo, y_hi)
    } else {
        (1.0, 10.0)
    };
    let x_range = (x_lo / 1.3..x_hi * 1.3).log_scale();
    let mut builder = chart(root, title, 22);
    if log_y {
        let mut c = builder.build_cartesian_2d(x_range, (y_lo / 1.5..y_hi * 1.5).log_scale())?;
        c.configure_mesh()
            .x_desc("loss each way (%)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x}"))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()?;
        draw_series(&mut c, lines)?;
        legend(&mut c)
    } else {
        let mut c = builder.build_cartesian_2d(x_range, 0.0..y_hi * 1.15)?;
        c.configure_mesh()
            .x_desc("loss each way (%)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x}"))
            .draw()?;
        draw_series(&mut c, lines)?;
        legend(&mut c)
    }
}

/// A line's colour and whether it is drawn dashed (the colours wrap after ten).
fn style(i: usize) -> (RGBColor, bool) {
    (COLOURS[i % COLOURS.len()], i >= COLOURS.len())
}

fn draw_series<'a, DB, X, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    lines: &[Line],
) -> DrawResult
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    DB::ErrorType: 'static,
{
    for (i, (label, pts)) in lines.iter().enumerate() {
        let (color, dashed) = style(i);
        let stroke = color.stroke_width(2);
        let series: Vec<(f64, f64)> = pts.iter().filter(|p| p.1 > 0.0).copied().collect();
        if dashed {
            c.draw_series(DashedLineSeries::new(series.clone(), 8, 4, stroke))?
        } else {
            c.draw_series(LineSeries::new(series.clone(), stroke))?
        }
        .label(label.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        c.draw_series(series.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

fn legend<'a, DB, X, Y>(c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> DrawResult
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    DB::ErrorType: 'static,
{
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

/// Every transport's CCDF on one cell.
pub(super) fn ccdf_svg(title: &str, points: &[&TransportPoint]) -> Result<String, String> {
    let series: Vec<_> = points
        .iter()
        .filter(|p| !p.ccdf.is_empty())
        .map(|p| (p.transport.clone(), p.ccdf.clone()))
        .collect();
    latlab_lab::plot::ccdf_svg_coloured(
        title,
        "one-way application latency (µs)",
        &series,
        &COLOURS,
    )
}

/// Cost against tail on one cell: each transport at its wire bytes per message (both ways,
/// headers included), its p99.9 (filled circle) and its maximum (cross) on a log scale, so
/// which transport buys which tail at which cost reads off one figure.
pub(super) fn cost_svg(title: &str, points: &[&TransportPoint]) -> Result<String, String> {
    let marks: Vec<(String, f64, Option<f64>, f64)> = points
        .iter()
        .filter(|p| p.sent > 0)
        .map(|p| {
            let bytes = (p.wire.forward.bytes + p.wire.reverse.bytes) as f64 / p.sent as f64;
            let p999 = super::report::pct_ms(p, "p99_9");
            (
                p.transport.clone(),
                bytes,
                p999,
                p.latency_ns.max_ns as f64 / 1e6,
            )
        })
        .collect();
    svg_page(title, (960, 620), |root| {
        let xs = || marks.iter().map(|m| m.1);
        let ys = || marks.iter().flat_map(|m| [m.2.unwrap_or(m.3), m.3]);
        let x_lo = xs().fold(f64::MAX, f64::min).min(100.0);
        let x_hi = xs().fold(0.0, f64::max).max(x_lo * 1.5);
        let y_lo = ys().filter(|y| *y > 0.0).fold(f64::MAX, f64::min).min(10.0);
        let y_hi = ys().fold(0.0, f64::max).max(y_lo * 10.0);
        let mut c = chart(root, title, 22)
            .build_cartesian_2d(x_lo * 0.9..x_hi * 1.1, (y_lo / 1.5..y_hi * 1.5).log_scale())?;
        c.configure_mesh()
            .x_desc("wire bytes per message, both ways")
            .y_desc("p99.9 (dot) and maximum (cross) latency (ms)")
            .y_label_formatter(&|y| format!("{y}"))
            .draw()?;
        for (i, (label, x, p999, max)) in marks.iter().enumerate() {
            let (color, _) = style(i);
            let (x, max) = (*x, *max);
            c.draw_series(p999.map(|y| Circle::new((x, y), 5, color.filled())))?
                .label(label.as_str())
                .legend(move |(lx, ly)| Circle::new((lx + 10, ly), 5, color.filled()));
            c.draw_series(std::iter::once(Cross::new(
                (x, max),
                6,
                color.stroke_width(2),
            )))?;
        }
        legend(&mut c)
    })
}
