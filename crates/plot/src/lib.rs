//! Plots drawn from results data with `plotters`, as SVG text. Tick labels are placed so they
//! never overlap and always fall in the data's range, the legend goes to the corner the data
//! leaves free, a series identical to an earlier one is drawn dashed and said so in the legend,
//! and a plot with nothing to draw says why on the page ([`layout`] computes where).

#![forbid(unsafe_code)]

pub mod layout;

use latlab_stats::CcdfPoint;
use plotters::coord::Shift;
use plotters::prelude::*;

/// The margin around every chart, pixels.
const MARGIN_PX: u32 = 15;
/// The height of the x axis's label area, pixels.
const X_LABEL_PX: u32 = 45;
/// The width of the y axis's label area, pixels.
const Y_LABEL_PX: u32 = 70;

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
        .margin(MARGIN_PX)
        .x_label_area_size(X_LABEL_PX)
        .y_label_area_size(Y_LABEL_PX);
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

/// The plotting area of a [`chart`] on a page of `size` with a caption of `font_px`, pixels:
/// what [`layout`] places ticks and legends in.
pub fn plotting_px(size: (u32, u32), font_px: u32) -> (f64, f64) {
    let w = size.0.saturating_sub(2 * MARGIN_PX + Y_LABEL_PX);
    // The caption takes its font size and as much again below it.
    let h = size
        .1
        .saturating_sub(2 * MARGIN_PX + X_LABEL_PX + 2 * font_px);
    (f64::from(w.max(1)), f64::from(h.max(1)))
}

/// For each series, the index of an earlier one with the same points, if any: drawn under it,
/// the later would not be seen.
pub fn same_as_earlier<T: PartialEq>(series: &[&[T]]) -> Vec<Option<usize>> {
    (0..series.len())
        .map(|i| (0..i).find(|&j| !series[i].is_empty() && series[j] == series[i]))
        .collect()
}

/// A series' legend label: `label`, with why it cannot be seen, if it cannot (no samples, or
/// the same points as `earlier`, drawn dashed over it).
fn legend_label(label: &str, empty: bool, earlier: Option<&str>) -> String {
    match (empty, earlier) {
        (true, _) => format!("{label} (no samples)"),
        (false, Some(other)) => format!("{label} (same points as {other}: dashed over it)"),
        (false, None) => label.to_string(),
    }
}

/// The corner for a legend of `labels` on a [`chart`] of a page of `size` with a caption of
/// `font_px`, whose `lines` (points or polylines, as positions across and up the plotting area,
/// 0..=1 each) it covers least.
pub fn legend_corner<S: AsRef<str>>(
    labels: &[S],
    lines: &[Vec<(f64, f64)>],
    size: (u32, u32),
    font_px: u32,
) -> SeriesLabelPosition {
    let (w, h) = layout::legend_size(labels, plotting_px(size, font_px));
    let placed: Vec<(f64, f64)> = lines.iter().flat_map(|l| layout::sampled(l)).collect();
    layout::emptiest_corner(&placed, w, h)
}

/// Writes `why` across the middle of the plotting area (of `area` pixels) of a page that has
/// nothing drawn on it, so an empty plot says why it is empty.
pub fn say_why_empty(root: &Page<'_>, area: (f64, f64), why: &str) -> DrawResult {
    let (w, h) = root.dim_in_pixel();
    let x = (w as i32 - (why.chars().count() as f64 * 8.0) as i32) / 2;
    let y = (f64::from(h) - area.1 / 2.0) as i32;
    root.draw(&Text::new(
        why.to_string(),
        (x.max(5), y),
        ("sans-serif", 16)
            .into_font()
            .color(&RGBColor(120, 120, 120)),
    ))?;
    Ok(())
}

/// One line of a chart: its label and its (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

/// The size of a [`lines_svg`] page.
const LINES_SIZE: (u32, u32) = (900, 560);

/// `lines` on linear axes from 0, each in its own colour with its points marked, and a
/// legend in the corner the lines leave free; `title` is the caption. A line with the points of
/// an earlier one is drawn dashed, with crosses, and its legend says so; a page with no point
/// at all says so.
pub fn lines_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<String, String> {
    svg_page(title, LINES_SIZE, |root| {
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
    let x_hi = pts().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let y_hi = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.15;
    let area = plotting_px(LINES_SIZE, 20);
    let mut c = chart(root, title, 20).build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
    // At most 10 labels an axis: plotters' steps are at least a tenth of the range, so labels
    // with the decimals of a tenth never read the same.
    c.configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(10)
        .y_labels(10)
        .x_label_formatter(&|x| layout::linear_label(*x, x_hi / 10.0))
        .y_label_formatter(&|y| layout::linear_label(*y, y_hi / 10.0))
        .draw()?;
    let point_sets: Vec<&[(f64, f64)]> = lines.iter().map(|l| l.1.as_slice()).collect();
    let earlier = same_as_earlier(&point_sets);
    let mut labels = Vec::new();
    let mut placed = Vec::new();
    for (i, (label, points)) in lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let label = legend_label(
            label,
            points.is_empty(),
            earlier[i].map(|j| lines[j].0.as_str()),
        );
        let unit: Vec<(f64, f64)> = points.iter().map(|p| (p.0 / x_hi, p.1 / y_hi)).collect();
        placed.extend(layout::sampled(&unit));
        let style = colour.stroke_width(2);
        let legend = move |(x, y): (i32, i32)| PathElement::new([(x, y), (x + 18, y)], style);
        if earlier[i].is_some() {
            c.draw_series(DashedLineSeries::new(points.iter().copied(), 8, 6, style))?
                .label(label.clone())
                .legend(legend);
            c.draw_series(
                points
                    .iter()
                    .map(|&p| Cross::new(p, 5, colour.stroke_width(2))),
            )?;
        } else {
            c.draw_series(LineSeries::new(points.iter().copied(), style))?
                .label(label.clone())
                .legend(legend);
            c.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
        labels.push(label);
    }
    let (box_w, box_h) = layout::legend_size(&labels, area);
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(layout::emptiest_corner(&placed, box_w, box_h))
        .draw()?;
    if pts().next().is_none() {
        say_why_empty(root, area, "nothing to draw: no line has a point")?;
    }
    Ok(())
}

/// The x axis of a CCDF of round trips.
pub const ROUND_TRIP_AXIS: &str = "round-trip latency (µs)";
/// The x axis of a CCDF of round trips drawn with the one-way delays of the same probes.
pub const ONE_WAY_TOO_AXIS: &str = "latency (µs): round trip and one way, as each line says";

/// Draws latency CCDFs (one series per label) on log–log axes: latency in µs across (named
/// `x_desc`, by what the series are: [`ROUND_TRIP_AXIS`], one way, application latency), the
/// fraction of probes slower than that up, down to 10⁻⁶ and below, so the tail percentiles
/// (p99 = 10⁻², …, p99.9999 = 10⁻⁶) read straight off the y axis.
pub fn ccdf_svg(
    title: &str,
    x_desc: &str,
    series: &[(String, Vec<CcdfPoint>)],
) -> Result<String, String> {
    ccdf_svg_coloured(title, x_desc, series, &PALETTE)
}

/// The size of a CCDF page.
const CCDF_SIZE: (u32, u32) = (900, 600);

/// [`ccdf_svg`] with the series drawn in `colours`, in turn (for more series than
/// [`PALETTE`] tells apart).
pub fn ccdf_svg_coloured(
    title: &str,
    x_desc: &str,
    series: &[(String, Vec<CcdfPoint>)],
    colours: &[RGBColor],
) -> Result<String, String> {
    svg_page(&format!("{title:?}"), CCDF_SIZE, |root| {
        draw(root, title, x_desc, (series, &[]), colours)
    })
}

/// [`ccdf_svg`] with `marks` beside the curves: each a dashed vertical line at a latency (ns)
/// with its label in the legend, such as the run's longest host stall, so the part of a tail
/// the host could have made shows on the plot.
pub fn ccdf_svg_marked(
    title: &str,
    x_desc: &str,
    series: &[(String, Vec<CcdfPoint>)],
    marks: &[(String, u64)],
) -> Result<String, String> {
    svg_page(&format!("{title:?}"), CCDF_SIZE, |root| {
        draw(root, title, x_desc, (series, marks), &PALETTE)
    })
}

/// A CCDF curve: its label and its points.
type Series = (String, Vec<CcdfPoint>);
/// A [`ccdf_svg_marked`] mark: its label and where it stands, ns.
type Mark = (String, u64);

/// The colour of a [`ccdf_svg_marked`] mark.
const MARK: RGBColor = RGBColor(120, 120, 120);

fn draw(
    root: &Page<'_>,
    title: &str,
    x_desc: &str,
    (series, marks): (&[Series], &[Mark]),
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
    // A mark is on the axis whether or not a curve reaches it (a run with no sample has none).
    for &(_, ns) in marks {
        x_lo = x_lo.min(ns as f64 / 1000.0);
        x_hi = x_hi.max(ns as f64 / 1000.0);
    }
    if x_hi <= 0.0 {
        (x_lo, x_hi) = (1.0, 10.0);
    }
    let x_lo = (x_lo.max(0.001) / 1.5).max(0.001);
    let x_hi = (x_hi * 1.5).max(x_lo * 10.0);
    let y_lo = (y_lo / 10.0).min(1e-3);
    let area = plotting_px(CCDF_SIZE, 22);
    let x_axis = (x_lo..x_hi)
        .log_scale()
        .with_key_points(layout::log_ticks(x_lo, x_hi, area.0))
        .with_light_points(layout::log_grid(x_lo, x_hi));
    let mut chart = chart(root, title, 22).build_cartesian_2d(x_axis, (y_lo..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("fraction of probes slower (CCDF)")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .x_label_formatter(&|x| layout::tick_label(*x))
        .draw()?;
    let point_sets: Vec<&[CcdfPoint]> = series.iter().map(|s| s.1.as_slice()).collect();
    let earlier = same_as_earlier(&point_sets);
    let unit = |(x, y): (f64, f64)| {
        (
            (x / x_lo).log10() / (x_hi / x_lo).log10(),
            (y / y_lo).log10() / (1.0 / y_lo).log10(),
        )
    };
    let mut labels = Vec::new();
    let mut placed = Vec::new();
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
        // A CCDF is at 1 left of its first step: that run along the top is data too.
        let mut seen = vec![unit((x_lo, 1.0))];
        seen.extend(steps.iter().map(|&p| unit(p)));
        if !steps.is_empty() {
            placed.extend(layout::sampled(&seen));
        }
        let label = legend_label(
            label,
            points.is_empty(),
            earlier[i].map(|j| series[j].0.as_str()),
        );
        let style = color.stroke_width(2);
        let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 20, y)], style);
        if earlier[i].is_some() {
            chart
                .draw_series(DashedLineSeries::new(steps, 8, 6, style))?
                .label(label.clone())
                .legend(legend);
        } else {
            chart
                .draw_series(LineSeries::new(steps, style))?
                .label(label.clone())
                .legend(legend);
        }
        labels.push(label);
    }
    for (label, ns) in marks {
        let x = (*ns as f64 / 1000.0).max(x_lo);
        let style = MARK.stroke_width(2);
        let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 20, y)], style);
        chart
            .draw_series(DashedLineSeries::new([(x, y_lo), (x, 1.0)], 6, 4, style))?
            .label(label.clone())
            .legend(legend);
        placed.extend(layout::sampled(&[unit((x, y_lo)), unit((x, 1.0))]));
        labels.push(label.clone());
    }
    let (box_w, box_h) = layout::legend_size(&labels, area);
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(layout::emptiest_corner(&placed, box_w, box_h))
        .draw()?;
    if series.iter().all(|s| s.1.is_empty()) {
        say_why_empty(
            root,
            area,
            "nothing to draw: no series has a latency sample",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_drawn_and_named_beside_the_curves() {
        let mut h = latlab_stats::LatencyHistogram::new();
        for v in 1..=1_000u64 {
            h.record(10_000 + v);
        }
        let series = vec![("run".to_string(), latlab_stats::ccdf(&h))];
        let plain = ccdf_svg("t", ROUND_TRIP_AXIS, &series).unwrap();
        let mark = ("longest host stall 3.2 ms".to_string(), 3_200_000);
        let marked = ccdf_svg_marked("t", ROUND_TRIP_AXIS, &series, &[mark]).unwrap();
        assert!(marked.contains("longest host stall 3.2 ms"), "{marked}");
        assert!(!plain.contains("host stall"));
        // The axis reaches the mark, 3.2 ms, far right of the curve's 11 µs.
        assert!(marked.contains("\n1000\n"), "{marked}");
        assert!(!plain.contains("\n1000\n"), "{plain}");
        // A run with no sample has its mark alone on the axis.
        let empty = vec![("run".to_string(), Vec::new())];
        let mark = ("longest host stall 50.0 ms".to_string(), 50_000_000);
        let alone = ccdf_svg_marked("t", ROUND_TRIP_AXIS, &empty, &[mark]).unwrap();
        assert!(alone.contains("longest host stall 50.0 ms"), "{alone}");
        assert!(alone.contains("nothing to draw"), "{alone}");
    }

    #[test]
    fn a_ccdf_plot_is_an_svg_with_its_title_and_legend() {
        let mut h = latlab_stats::LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(10_000 + v);
        }
        let svg = ccdf_svg(
            "demo CCDF",
            ROUND_TRIP_AXIS,
            &[("1000 pps".into(), latlab_stats::ccdf(&h))],
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("demo CCDF"));
        assert!(svg.contains("1000 pps"));
        assert!(svg.contains("<polyline") || svg.contains("<path"));
    }

    #[test]
    fn an_empty_run_still_draws() {
        let svg = ccdf_svg(
            "nothing came back",
            ROUND_TRIP_AXIS,
            &[("lost".into(), vec![])],
        )
        .unwrap();
        assert!(svg.contains("nothing came back"));
        assert!(svg.contains("lost (no samples)"), "{svg}");
        assert!(svg.contains("nothing to draw: no series has a latency sample"));
    }

    /// The text of every `<text>` element of `svg`.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                Some(
                    t.split_once('>')?
                        .1
                        .split_once("</text>")?
                        .0
                        .trim()
                        .to_string(),
                )
            })
            .collect()
    }

    fn ccdf_of(range: std::ops::RangeInclusive<u64>) -> Vec<CcdfPoint> {
        let mut h = latlab_stats::LatencyHistogram::new();
        for v in range.step_by(1000) {
            h.record(v);
        }
        latlab_stats::ccdf(&h)
    }

    #[test]
    fn a_ccdf_axis_is_named_by_what_is_drawn_and_labelled_apart() {
        // 1 to 10 ms: 8000, 9000 and 10000 µs once ran together.
        let points = ccdf_of(1_000_000..=10_000_000);
        let svg = ccdf_svg("one way", "one-way delay (µs)", &[("out".into(), points)]).unwrap();
        let texts = texts(&svg);
        assert!(texts.iter().any(|t| t == "one-way delay (µs)"), "{texts:?}");
        assert!(!svg.contains("round-trip"));
        assert!(texts.iter().any(|t| t == "1000"), "{texts:?}");
        assert!(!texts.iter().any(|t| t == "9000"), "{texts:?}");
    }

    #[test]
    fn a_ccdf_within_one_decade_has_tick_labels_in_its_range() {
        // 20 to 28 µs: plotters' own ticks fell outside the data and none was labelled.
        let points = ccdf_of(20_000..=28_000);
        let svg = ccdf_svg("narrow", ROUND_TRIP_AXIS, &[("a".into(), points)]).unwrap();
        let texts = texts(&svg);
        assert!(texts.iter().any(|t| t == "20"), "{texts:?}");
    }

    #[test]
    fn identical_series_say_so_and_are_drawn_dashed() {
        let points = ccdf_of(20_000..=80_000);
        let series = [
            ("BASE: a".to_string(), points.clone()),
            ("NEW: a".to_string(), points),
        ];
        let svg = ccdf_svg("same", ROUND_TRIP_AXIS, &series).unwrap();
        assert!(
            svg.contains("NEW: a (same points as BASE: a: dashed over it)"),
            "{svg}"
        );
        assert!(!svg.contains("BASE: a (same"));
        let lines = [
            ("64 B".to_string(), vec![(1.0, 2.0), (2.0, 3.0)]),
            ("128 B".to_string(), vec![(1.0, 2.0), (2.0, 3.0)]),
        ];
        let svg = lines_svg("same", "x", "y", &lines).unwrap();
        assert!(svg.contains("128 B (same points as 64 B: dashed over it)"));
    }

    #[test]
    fn small_values_get_distinct_tick_labels() {
        let lines = [("loss".to_string(), vec![(64.0, 0.0), (1518.0, 0.00012)])];
        let svg = lines_svg("loss", "frame size", "loss (%)", &lines).unwrap();
        let zeros = texts(&svg).iter().filter(|t| t.as_str() == "0.0").count();
        assert_eq!(zeros, 0, "{:?}", texts(&svg));
        assert!(
            texts(&svg).iter().any(|t| t == "0.00010"),
            "{:?}",
            texts(&svg)
        );
    }

    #[test]
    fn a_chart_without_points_says_so() {
        let svg = lines_svg("empty", "x", "y", &[("none".to_string(), vec![])]).unwrap();
        assert!(svg.contains("nothing to draw: no line has a point"));
    }
}
