//! Plots drawn from results data with `plotters`, as SVG text.

use latlab_stats::CcdfPoint;
use plotters::coord::Shift;
use plotters::prelude::*;

/// What a drawing returns: plotters' errors, boxed.
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The drawing area of an SVG page.
pub type Page<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A white SVG page of `size` pixels drawn on by `draw`; returns the SVG text, or the error
/// with `what` was being drawn.
pub fn svg_page(
    what: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Page<'_>) -> DrawResult,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let drawn: DrawResult = (|| {
            root.fill(&WHITE)?;
            draw(&root)?;
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| format!("drawing {what}: {e}"))?;
    }
    Ok(svg)
}

/// latlab's chart layout on `area`: `caption` in `font_px` type, 15 px margins, room for the
/// axis labels.
pub fn chart<'a, 'b>(
    area: &'a Page<'b>,
    caption: &str,
    font_px: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", font_px))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    builder
}

/// Colours of successive series.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
];

/// One line of a chart: its label and its (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

/// `lines` on linear axes from 0, each in its own colour with its points marked, and a
/// legend; `title` is the caption.
pub fn lines_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<String, String> {
    svg_page(title, (900, 560), |root| {
        draw_lines(root, title, x_desc, y_desc, lines)
    })
}

fn draw_lines(
    root: &Page<'_>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> DrawResult {
    let pts = || lines.iter().flat_map(|l| l.1.iter());
    let x_hi = pts().map(|p| p.0).fold(1.0, f64::max);
    let y_hi = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let mut c = chart(root, title, 20).build_cartesian_2d(0.0..x_hi * 1.05, 0.0..y_hi * 1.15)?;
    c.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw()?;
    for (i, (label, points)) in lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        c.draw_series(LineSeries::new(
            points.iter().copied(),
            colour.stroke_width(2),
        ))?
        .label(label.clone())
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        c.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Draws latency CCDFs (one series per label) on log–log axes: latency in µs across, the
/// fraction of probes slower than that up, down to 10⁻⁶ and below, so the tail percentiles
/// (p99 = 10⁻², …, p99.9999 = 10⁻⁶) read straight off the y axis.
pub fn ccdf_svg(title: &str, series: &[(String, Vec<CcdfPoint>)]) -> Result<String, String> {
    ccdf_svg_coloured(title, series, &PALETTE)
}

/// [`ccdf_svg`] with the series drawn in `colours`, in turn (for more series than
/// [`PALETTE`] tells apart).
pub fn ccdf_svg_coloured(
    title: &str,
    series: &[(String, Vec<CcdfPoint>)],
    colours: &[RGBColor],
) -> Result<String, String> {
    svg_page(&format!("{title:?}"), (900, 600), |root| {
        draw(root, title, series, colours)
    })
}

fn draw(
    root: &Page<'_>,
    title: &str,
    series: &[(String, Vec<CcdfPoint>)],
    colours: &[RGBColor],
) -> DrawResult {
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_lo, mut x_hi, mut y_lo) = (f64::MAX, 0.0f64, 1.0f64);
    for p in all {
        let us = p.latency_ns as f64 / 1000.0;
        x_lo = x_lo.min(us);
        x_hi = x_hi.max(us);
        if p.fraction_above > 0.0 {
            y_lo = y_lo.min(p.fraction_above);
        }
    }
    if x_hi <= 0.0 {
        (x_lo, x_hi) = (1.0, 10.0);
    }
    let x_lo = (x_lo.max(0.001) / 1.5).max(0.001);
    let x_hi = (x_hi * 1.5).max(x_lo * 10.0);
    let y_lo = (y_lo / 10.0).min(1e-3);
    let mut chart = chart(root, title, 22)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("round-trip latency (µs)")
        .y_desc("fraction of probes slower (CCDF)")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .x_label_formatter(&|x| format!("{x}"))
        .draw()?;
    for (i, (label, points)) in series.iter().enumerate() {
        let color = colours[i % colours.len().max(1)];
        let mut steps = Vec::with_capacity(points.len() * 2 + 1);
        let mut prev = 1.0f64;
        for p in points {
            let x = (p.latency_ns as f64 / 1000.0).max(x_lo);
            steps.push((x, prev.max(y_lo)));
            prev = p.fraction_above;
            steps.push((x, prev.max(y_lo)));
        }
        chart
            .draw_series(LineSeries::new(steps, color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ccdf_plot_is_an_svg_with_its_title_and_legend() {
        let mut h = latlab_stats::LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(10_000 + v);
        }
        let svg = ccdf_svg("demo CCDF", &[("1000 pps".into(), latlab_stats::ccdf(&h))]).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("demo CCDF"));
        assert!(svg.contains("1000 pps"));
        assert!(svg.contains("<polyline") || svg.contains("<path"));
    }

    #[test]
    fn an_empty_run_still_draws() {
        let svg = ccdf_svg("nothing came back", &[("lost".into(), vec![])]).unwrap();
        assert!(svg.contains("nothing came back"));
    }
}
