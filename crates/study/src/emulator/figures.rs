//! The emulator study's plots, as SVG text: per-packet latency through a 100 µs delay, the
//! delay accuracy, and the forwarding rate against frame size.

use std::collections::BTreeMap;

use latlab_lab::units::format_rate;

use super::{EmuPoint, RatePoint};

pub(super) fn trace_svg(points: &[&EmuPoint]) -> Result<String, String> {
    use plotters::prelude::*;
    // A 2 ms window from the middle of each trace.
    let windows: Vec<(String, Vec<(f64, f64)>)> = points
        .iter()
        .filter_map(|p| {
            let t = p.trace.as_ref()?;
            let mid = t.iter().map(|x| x.0).max()? / 2;
            let pts: Vec<(f64, f64)> = t
                .iter()
                .filter(|x| x.0 >= mid && x.0 < mid + 2_000_000)
                .map(|x| ((x.0 - mid) as f64 / 1e6, x.1 as f64 / 1000.0))
                .collect();
            Some((latlab_lab::units::format_rate(p.rate_pps), pts))
        })
        .collect();
    let y_hi = windows
        .iter()
        .flat_map(|w| w.1.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let title = "Per-packet round trip through a 100 µs emulated delay";
    let labels: Vec<&str> = windows.iter().map(|w| w.0.as_str()).collect();
    let unit: Vec<Vec<(f64, f64)>> = windows
        .iter()
        .map(|w| w.1.iter().map(|&(x, y)| (x / 2.0, y / y_hi)).collect())
        .collect();
    let corner = latlab_lab::plot::legend_corner(&labels, &unit, (900, 600), 20);
    latlab_lab::plot::svg_page(title, (900, 600), |root| {
        let mut chart =
            latlab_lab::plot::chart(root, title, 20).build_cartesian_2d(0.0..2.0, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("send time in the window (ms)")
            .y_desc("round trip (µs)")
            .draw()?;
        for (i, (label, pts)) in windows.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 2, color.filled())))?
                .label(label.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(corner)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}

pub(super) fn accuracy_svg(series: &BTreeMap<u64, Vec<(f64, f64, f64)>>) -> Result<String, String> {
    use plotters::prelude::*;
    let all: Vec<(f64, f64, f64)> = series.values().flatten().copied().collect();
    let x_lo = all.iter().map(|p| p.0).fold(f64::MAX, f64::min).min(10.0) / 2.0;
    let x_hi = all.iter().map(|p| p.0).fold(1.0, f64::max) * 2.0;
    let y_abs = all.iter().map(|p| p.1.abs() + p.2).fold(1.0, f64::max) * 1.2;
    let title = "Emulated delay accuracy: mean error vs configured delay";
    let labels: Vec<String> = series.keys().map(|&r| format_rate(r as f64)).collect();
    let across = |x: f64| (x / x_lo).log10() / (x_hi / x_lo).log10();
    // The lines and both ends of every bar.
    let unit: Vec<Vec<(f64, f64)>> = series
        .values()
        .flat_map(|pts| {
            let line = pts
                .iter()
                .map(|&(x, y, _)| (across(x), (y + y_abs) / (2.0 * y_abs)))
                .collect();
            let bars = pts.iter().map(move |&(x, y, sd)| {
                vec![
                    (across(x), (y - sd + y_abs) / (2.0 * y_abs)),
                    (across(x), (y + sd + y_abs) / (2.0 * y_abs)),
                ]
            });
            std::iter::once(line).chain(bars)
        })
        .collect();
    let corner = latlab_lab::plot::legend_corner(&labels, &unit, (900, 600), 20);
    latlab_lab::plot::svg_page(title, (900, 600), |root| {
        let mut chart = latlab_lab::plot::chart(root, title, 20)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), -y_abs..y_abs)?;
        chart
            .configure_mesh()
            .x_desc("configured delay D (µs)")
            .y_desc("mean error (µs), bars: ± std dev")
            .draw()?;
        for (i, (rate, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart.draw_series(pts.iter().map(|&(x, y, sd)| {
                PathElement::new(vec![(x, y - sd), (x, y + sd)], color.stroke_width(1))
            }))?;
            chart
                .draw_series(
                    LineSeries::new(pts.iter().map(|&(x, y, _)| (x, y)), color.stroke_width(2))
                        .point_size(4),
                )?
                .label(format_rate(*rate as f64))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(corner)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}

pub(super) fn rate_svg(points: &[RatePoint]) -> Result<String, String> {
    use plotters::prelude::*;
    let y_hi = points
        .iter()
        .map(|p| p.forwarded_pps().max(p.offered_pps()))
        .fold(1.0, f64::max)
        / 1000.0
        * 1.15;
    let title = "Forwarding rate vs frame size (one way, no delay)";
    latlab_lab::plot::svg_page(title, (900, 600), |root| {
        let mut chart =
            latlab_lab::plot::chart(root, title, 20).build_cartesian_2d(0.0..1600.0, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("frame size (bytes)")
            .y_desc("forwarded (kpps)")
            .draw()?;
        for (i, path) in ["kernel", "emu", "emu-xdp"].iter().enumerate() {
            // Red, green and blue: each path readable on white.
            let color = [
                RGBColor(200, 30, 60),
                RGBColor(40, 150, 60),
                RGBColor(30, 80, 200),
            ][i]
                .to_rgba();
            let series: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.path == *path)
                .map(|p| (p.frame_size as f64, p.forwarded_pps() / 1000.0))
                .collect();
            if series.is_empty() {
                continue;
            }
            let label = match *path {
                "kernel" => "kernel IP forwarding",
                "emu" => "latlab emu (AF_PACKET)",
                _ => "latlab emu (AF_XDP)",
            };
            chart
                .draw_series(LineSeries::new(series, color.stroke_width(2)).point_size(4))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}
