//! Figures 2–4 of the game-server study, as SVG text: average latency against offered load,
//! the latency histogram with 0.5 µs bins, and buffer size against lossless load and overload
//! latency.

use std::collections::BTreeMap;

use latlab_stats::point_rank;
use plotters::prelude::*;

use super::analysis::{buf_kib, buffer_rows, first_drop, kpps, us, BufferRow, Study};
use latlab_lab::plot::{chart, svg_page, DrawResult, Page, PALETTE};

/// Bin width of Figure 3, ns.
const BIN_NS: u64 = 500;

// ---------------------------------------------------------------------------------------------
// Figures

/// One Figure 2 series: (load kpps, mean µs, std µs, first drop).
type Fig2Series = (String, Vec<(f64, f64, f64, bool)>);

pub(super) fn fig2(study: &Study<'_>, io_mode: &str) -> Option<Result<String, String>> {
    let rcvbuf = study.fig_buffer(io_mode)?;
    let mut series: Vec<Fig2Series> = Vec::new();
    for clients in study.clients(io_mode) {
        let s = study.series(io_mode, rcvbuf, clients);
        let drop = first_drop(s);
        let pts = s
            .iter()
            .filter_map(|l| {
                let m = l.mean_us().filter(|m| *m > 0.0)?;
                let load = l.point.load_pps;
                Some((
                    load / 1000.0,
                    m,
                    l.std_us().unwrap_or(0.0),
                    drop == Some(load),
                ))
            })
            .collect();
        series.push((format!("{clients} clients"), pts));
    }
    let title = format!(
        "Average latency vs offered load ({io_mode}, {} buffer)",
        buf_kib(rcvbuf)
    );
    Some(svg_page(&title, (900, 600), |root| {
        draw_fig2(root, &title, &series)
    }))
}

fn draw_fig2(root: &Page<'_>, title: &str, series: &[Fig2Series]) -> DrawResult {
    let all = series.iter().flat_map(|s| s.1.iter());
    let (mut x_hi, mut y_lo, mut y_hi) = (0.0f64, f64::MAX, 0.0f64);
    for &(x, m, sd, _) in all {
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(if m - sd > 0.0 { m - sd } else { m });
        y_hi = y_hi.max(m + sd);
    }
    if y_hi <= 0.0 {
        (y_lo, y_hi) = (1.0, 10.0);
    }
    let y_lo = (y_lo / 1.5).max(0.01);
    let y_hi = (y_hi * 2.0).max(y_lo * 10.0);
    let x_hi = if x_hi > 0.0 { x_hi * 1.08 } else { 1.0 };
    let mut chart =
        chart(root, title, 22).build_cartesian_2d(0.0..x_hi, (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered load (kpps)")
        .y_desc("average latency, last client (µs)")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        // ± one standard deviation as error bars.
        chart.draw_series(pts.iter().filter(|p| p.2 > 0.0).map(|&(x, m, sd, _)| {
            PathElement::new(
                vec![(x, (m - sd).max(y_lo)), (x, (m + sd).min(y_hi))],
                color.mix(0.6).stroke_width(1),
            )
        }))?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            pts.iter()
                .map(|&(x, m, _, _)| Circle::new((x, m), 3, color.filled())),
        )?;
        // The first load with more than 5% loss: a big ring and a label.
        chart.draw_series(pts.iter().filter(|p| p.3).map(|&(x, m, _, _)| {
            EmptyElement::at((x, m))
                + Circle::new((0, 0), 8, BLACK.stroke_width(2))
                + Text::new(
                    "first drop",
                    (-30, -24),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

pub(super) fn fig3(study: &Study<'_>) -> Result<String, String> {
    let io_mode = "socket";
    let clients = *study
        .clients(io_mode)
        .first()
        .ok_or("no socket sweep points")?;
    let rcvbuf = study.fig_buffer(io_mode).ok_or("no socket sweep points")?;
    let series = study.series(io_mode, rcvbuf, clients);
    let l = series
        .iter()
        .min_by(|a, b| {
            (a.point.load_pps - 30_000.0)
                .abs()
                .total_cmp(&(b.point.load_pps - 30_000.0).abs())
        })
        .ok_or("no socket sweep points")?;
    let h = l
        .hist
        .as_ref()
        .ok_or_else(|| format!("point {} has no readable .hlog", l.key))?;
    if h.is_empty() {
        return Err(format!("point {} has no samples", l.key));
    }
    // The body of the distribution, as the paper draws it: up to the 99th percentile or four
    // times the median, whichever is lower; what lies beyond is counted in the subtitle.
    let p99 = h
        .value_at_rank(point_rank(h.len(), 0.99))
        .unwrap_or_else(|| h.max());
    let p50 = h
        .value_at_rank(point_rank(h.len(), 0.5))
        .unwrap_or_else(|| h.max());
    let top = p99.min(p50.saturating_mul(4)).max(p50);
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    let mut beyond = 0u64;
    for v in h.as_hdr().iter_recorded() {
        let value = v.value_iterated_to();
        if value <= top {
            *bins.entry(value / BIN_NS).or_default() += v.count_at_value();
        } else {
            beyond += v.count_at_value();
        }
    }
    let title = format!(
        "Latency histogram, {io_mode}, {clients} clients, {} buffer, {} offered",
        buf_kib(rcvbuf),
        kpps(l.point.load_pps)
    );
    let sub = format!(
        "{} samples, 0.5 µs bins, up to {}; {} samples ({:.2}%) above it not drawn",
        h.len(),
        us(top as f64 / 1000.0),
        beyond,
        100.0 * beyond as f64 / h.len() as f64
    );
    svg_page(&title, (900, 600), |root| {
        draw_fig3(root, &title, &sub, &bins)
    })
}

fn draw_fig3(root: &Page<'_>, title: &str, sub: &str, bins: &BTreeMap<u64, u64>) -> DrawResult {
    let first = bins.keys().next().copied().unwrap_or(0);
    let last = bins.keys().last().copied().unwrap_or(1);
    let x_lo = first as f64 * 0.5;
    let x_hi = (last + 1) as f64 * 0.5;
    let y_hi = bins.values().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    let root = root.titled(title, ("sans-serif", 20))?;
    let mut chart = chart(&root, sub, 14).build_cartesian_2d(x_lo..x_hi, 0.0..y_hi)?;
    chart
        .configure_mesh()
        .x_desc("latency, last client (µs)")
        .y_desc("probes per 0.5 µs bin")
        .draw()?;
    let color = PALETTE[0];
    chart.draw_series(bins.iter().map(|(&b, &c)| {
        let x0 = b as f64 * 0.5;
        Rectangle::new([(x0, 0.0), (x0 + 0.5, c as f64)], color.filled())
    }))?;
    Ok(())
}

pub(super) fn fig4(study: &Study<'_>) -> Result<String, String> {
    let (clients, rows) = buffer_rows(study, "socket").ok_or("no socket sweep points")?;
    let title =
        format!("Buffer size vs throughput and overload latency (socket, {clients} clients)");
    svg_page(&title, (1200, 550), |root| draw_fig4(root, &title, &rows))
}

fn draw_fig4(root: &Page<'_>, title: &str, rows: &[BufferRow]) -> DrawResult {
    let x_hi = rows
        .iter()
        .map(|r| r.0 as f64 / 1024.0)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let root = root.titled(title, ("sans-serif", 20))?;
    let panels = root.split_evenly((1, 2));
    let lossless: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.0 as f64 / 1024.0, r.1? / 1000.0)))
        .collect();
    let overload: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.0 as f64 / 1024.0, r.2?)))
        .collect();
    let specs = [
        (
            "(a) max lossless load",
            "max load with no loss (kpps)",
            lossless,
            PALETTE[0],
        ),
        (
            "(b) average latency under overload",
            "average latency, loss > 5% (µs)",
            overload,
            PALETTE[1],
        ),
    ];
    for (area, (caption, y_desc, pts, color)) in panels.iter().zip(specs) {
        let y_hi = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.2;
        let mut chart = chart(area, caption, 16).build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("receive buffer (KiB)")
            .y_desc(y_desc)
            .draw()?;
        chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    Ok(())
}
