//! The bufferbloat study's figures, as SVG text: the game's p99 against the number of bulk
//! flows per queue, and the bulk flows' goodput against the game's p99.

use latlab_lab::plot::{Line, PALETTE};

use super::analysis::{percentile_ms, Analysis};

/// One line of `p99-by-queue.svg`: its queue's index (its colour), its congestion control
/// (its marker) and its points.
pub(super) struct P99Line {
    /// The queue's index among the queues measured.
    pub(super) queue: usize,
    /// `queue cc`, or the queue alone for a queue measured only unloaded.
    pub(super) label: String,
    /// The congestion control's index among those of the queue (0: solid with circles).
    pub(super) cc: usize,
    /// (bulk flows, game p99 in ms), from the queue's unloaded point.
    pub(super) points: Vec<(f64, f64)>,
}

/// `p99-by-queue.svg`'s lines: per queue and congestion control, the game's p99 (ms) by
/// number of bulk flows, starting from the queue's unloaded point.
pub(super) fn p99_lines(a: &Analysis) -> Vec<P99Line> {
    let mut lines = Vec::new();
    for (qi, queue) in a.queues().into_iter().enumerate() {
        let base = a
            .unloaded(queue)
            .and_then(|p| percentile_ms(p.latency(), "p99"))
            .map(|y| (0.0, y));
        let mut ccs: Vec<&str> = a
            .points
            .iter()
            .filter(|p| p.queue == queue)
            .filter_map(|p| p.cc.as_deref())
            .collect();
        ccs.dedup();
        if ccs.is_empty() {
            lines.push(P99Line {
                queue: qi,
                label: queue.to_string(),
                cc: 0,
                points: base.into_iter().collect(),
            });
        }
        for (ci, cc) in ccs.into_iter().enumerate() {
            let mut points: Vec<(f64, f64)> = base.into_iter().collect();
            points.extend(
                a.points
                    .iter()
                    .filter(|p| p.queue == queue && p.cc.as_deref() == Some(cc))
                    .filter_map(|p| Some((p.flows() as f64, percentile_ms(p.latency(), "p99")?))),
            );
            lines.push(P99Line {
                queue: qi,
                label: format!("{queue} {cc}"),
                cc: ci,
                points,
            });
        }
    }
    lines
}

/// The game's p99 (on a log axis) against the number of bulk flows: a colour per queue, the
/// first congestion control solid with circles, the others thin with triangles.
pub(super) fn p99_svg(a: &Analysis) -> Result<String, String> {
    use plotters::prelude::*;
    let lines = p99_lines(a);
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let x_hi = all().map(|p| p.0).fold(1.0, f64::max) + 0.3;
    // Log up the side: a bloated tail-drop queue is hundreds of ms, a discipline's a few.
    let y_hi = all().map(|p| p.1).fold(1.0, f64::max) * 1.5;
    let y_lo = all().map(|p| p.1).fold(y_hi, f64::min).max(0.01) / 1.5;
    let title = "Game p99 by queue discipline and depth";
    let labels: Vec<&str> = lines.iter().map(|l| l.label.as_str()).collect();
    let unit: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .map(|l| {
            l.points
                .iter()
                .map(|&(x, y)| {
                    (
                        (x + 0.2) / (x_hi + 0.2),
                        (y / y_lo).log10() / (y_hi / y_lo).log10(),
                    )
                })
                .collect()
        })
        .collect();
    let corner = latlab_lab::plot::legend_corner(&labels, &unit, (900, 560), 20);
    let empty = all().next().is_none();
    latlab_lab::plot::svg_page(title, (900, 560), |root| {
        let mut c = latlab_lab::plot::chart(root, title, 20)
            .build_cartesian_2d(-0.2..x_hi, (y_lo..y_hi).log_scale())?;
        c.configure_mesh()
            .x_desc("bulk TCP flows")
            .y_desc("game round trip p99 (ms)")
            .draw()?;
        for line in &lines {
            let colour = PALETTE[line.queue % PALETTE.len()];
            let width = if line.cc == 0 { 2 } else { 1 };
            c.draw_series(LineSeries::new(
                line.points.iter().copied(),
                colour.stroke_width(width),
            ))?
            .label(line.label.clone())
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(width))
            });
            if line.cc == 0 {
                c.draw_series(
                    line.points
                        .iter()
                        .map(|&p| Circle::new(p, 4, colour.filled())),
                )?;
            } else {
                c.draw_series(
                    line.points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 5, colour.filled())),
                )?;
            }
        }
        c.configure_series_labels()
            .position(corner)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        if empty {
            say_no_p99(root)?;
        }
        Ok(())
    })
}

/// Writes on an empty p99 plot why it is empty: no point measured enough samples.
fn say_no_p99(root: &latlab_lab::plot::Page<'_>) -> latlab_lab::plot::DrawResult {
    latlab_lab::plot::say_why_empty(
        root,
        latlab_lab::plot::plotting_px((900, 560), 20),
        &format!(
            "no point has a p99: each has fewer than the {} samples it needs",
            latlab_stats::min_samples(0.99, latlab_stats::Z_95)
        ),
    )
}

/// `goodput-vs-p99.svg`'s series: per queue, (total goodput in Mbit/s, game p99 in ms) of
/// each point.
pub(super) fn goodput_series(a: &Analysis) -> Vec<Line> {
    a.queues()
        .into_iter()
        .map(|queue| {
            let pts = a
                .points
                .iter()
                .filter(|p| p.queue == queue)
                .filter_map(|p| Some((p.goodput_bps() / 1e6, percentile_ms(p.latency(), "p99")?)))
                .collect();
            (queue.to_string(), pts)
        })
        .collect()
}

/// The bulk flows' goodput together against the game's p99, one colour per queue.
pub(super) fn goodput_svg(a: &Analysis) -> Result<String, String> {
    use plotters::prelude::*;
    let series = goodput_series(a);
    let all = || series.iter().flat_map(|s| s.1.iter());
    let x_hi = all().map(|p| p.0).fold(1.0, f64::max) * 1.1;
    let y_hi = all().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let title = "Bulk goodput against the game's p99";
    let labels: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
    let unit: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.1.iter().map(|&(x, y)| (x / x_hi, y / y_hi)).collect())
        .collect();
    let corner = latlab_lab::plot::legend_corner(&labels, &unit, (900, 560), 20);
    let empty = all().next().is_none();
    latlab_lab::plot::svg_page(title, (900, 560), |root| {
        let mut c =
            latlab_lab::plot::chart(root, title, 20).build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        c.configure_mesh()
            .x_desc("bulk goodput, all flows (Mbit/s)")
            .y_desc("game round trip p99 (ms)")
            .draw()?;
        for (i, (label, pts)) in series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 5, colour.filled())))?
                .label(label.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 5, colour.filled()));
        }
        c.configure_series_labels()
            .position(corner)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        if empty {
            say_no_p99(root)?;
        }
        Ok(())
    })
}
