//! Where a plot's tick labels and legend go: computed from the data and the page's size before
//! anything is drawn, so labels never run into each other and the legend lands where the data is
//! not.

use plotters::prelude::SeriesLabelPosition;

/// Width of one character of a tick label (plotters' 12 px sans-serif), pixels, rounded up.
const CHAR_PX: f64 = 7.5;
/// Room left between two tick labels, pixels.
const GAP_PX: f64 = 14.0;

/// A tick's label: the number without float noise, as many decimals as its size needs
/// (`0.2`, `5`, `10000`).
pub fn tick_label(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{}", if value.is_finite() { 0.0 } else { value });
    }
    let decimals = (-value.abs().log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// The pixels a label of `text` needs along an x axis, with room either side.
fn label_px(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_PX + GAP_PX
}

/// Ticks for a log axis from `lo` to `hi` (both above 0) drawn `length_px` long: the finest of
/// 1·10ᵏ, then 1-2-5, then 1…9 per decade whose labels do not overlap, with at least two in
/// the range when any set has two; when even one per decade overlaps, every n-th decade.
pub fn log_ticks(lo: f64, hi: f64, length_px: f64) -> Vec<f64> {
    // No axis to tick (and no end to the decades' walk): none.
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let span = (hi / lo).log10();
    let at = |v: f64| (v / lo).log10() / span * length_px;
    let candidates = |mantissas: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        let mut decade = lo.log10().floor() as i32;
        while 10f64.powi(decade) <= hi {
            for &m in mantissas {
                let v = clean(m * 10f64.powi(decade));
                if v >= lo && v <= hi {
                    out.push(v);
                }
            }
            decade += 1;
        }
        out
    };
    let fits = |ticks: &[f64]| {
        ticks.windows(2).all(|w| {
            let room = (label_px(&tick_label(w[0])) + label_px(&tick_label(w[1]))) / 2.0;
            at(w[1]) - at(w[0]) >= room
        })
    };
    let sets: [&[f64]; 3] = [
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        &[1.0, 2.0, 5.0],
        &[1.0],
    ];
    let mut fallback: Option<Vec<f64>> = None;
    for set in sets {
        let ticks = candidates(set);
        if fits(&ticks) {
            if ticks.len() >= 2 || fallback.is_none() {
                return ticks;
            }
            return fallback.unwrap_or(ticks);
        }
        if ticks.len() >= 2 {
            fallback = Some(thin(ticks, &fits));
            if set.len() == 1 {
                break;
            }
        }
    }
    fallback.unwrap_or_else(|| candidates(&[1.0]))
}

/// Every n-th of `ticks`, the smallest n at which `fits`.
fn thin(ticks: Vec<f64>, fits: &dyn Fn(&[f64]) -> bool) -> Vec<f64> {
    for n in 2..ticks.len().max(2) {
        let kept: Vec<f64> = ticks.iter().copied().step_by(n).collect();
        if fits(&kept) {
            return kept;
        }
    }
    ticks.into_iter().take(1).collect()
}

/// The grid lines of a log axis: 1…9 per decade.
pub fn log_grid(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return out;
    }
    let mut decade = lo.log10().floor() as i32;
    while 10f64.powi(decade) <= hi {
        for m in 1..=9 {
            let v = clean(f64::from(m) * 10f64.powi(decade));
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade += 1;
    }
    out
}

/// A linear tick's label with the decimals a step of at least `step` needs (`0.25` for a step
/// of 0.05, `0.00002` for 0.00001), so no two ticks read the same; 0 is `0`.
pub fn linear_label(value: f64, step: f64) -> String {
    if value.abs() < step * 1e-6 {
        return "0".to_string();
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// `v` rounded to 12 significant digits: `3 * 0.1` is 0.3, not 0.30000000000000004.
fn clean(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(11 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// The corner of the plotting area whose legend-sized box covers the fewest of `points`
/// (positions across and up the plotting area, 0..=1 each; lines sampled along their length):
/// upper right, upper left, lower right, lower left, the first of them on a tie.
pub fn emptiest_corner(points: &[(f64, f64)], box_w: f64, box_h: f64) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, 1.0 - box_w, 1.0 - box_h),
        (SeriesLabelPosition::UpperLeft, 0.0, 1.0 - box_h),
        (SeriesLabelPosition::LowerRight, 1.0 - box_w, 0.0),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.0),
    ];
    let covered = |x0: f64, y0: f64| {
        points
            .iter()
            .filter(|&&(x, y)| x >= x0 && x <= x0 + box_w && y >= y0 && y <= y0 + box_h)
            .count()
    };
    let mut best = (usize::MAX, SeriesLabelPosition::UpperRight);
    for (position, x0, y0) in corners {
        let n = covered(x0, y0);
        if n < best.0 {
            best = (n, position);
        }
    }
    best.1
}

/// `line` (positions across and up, 0..=1) with points added along each segment, about one
/// every hundredth of the area, so a segment crossing a box is seen inside it.
pub fn sampled(line: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(line.len() * 2);
    for w in line.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        let steps = (((x1 - x0).abs().max((y1 - y0).abs())) * 100.0)
            .ceil()
            .max(1.0) as usize;
        for i in 0..steps {
            let t = i as f64 / steps as f64;
            out.push((x0 + (x1 - x0) * t, y0 + (y1 - y0) * t));
        }
    }
    out.extend(line.last().copied());
    out
}

/// The size of a legend of `labels`, as fractions of a plotting area of `area_px` pixels: one
/// 20 px row per label, a 20 px sample line, the longest label's text, and margins.
pub fn legend_size<S: AsRef<str>>(labels: &[S], area_px: (f64, f64)) -> (f64, f64) {
    let longest = labels
        .iter()
        .map(|l| l.as_ref().chars().count())
        .max()
        .unwrap_or(0);
    let w = 20.0 + 30.0 + longest as f64 * CHAR_PX + 20.0;
    let h = labels.len() as f64 * 20.0 + 20.0;
    ((w / area_px.0).min(1.0), (h / area_px.1).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether no two labels of `ticks` on a log axis `length_px` long overlap.
    fn apart(ticks: &[f64], lo: f64, hi: f64, length_px: f64) -> bool {
        let at = |v: f64| (v / lo).log10() / (hi / lo).log10() * length_px;
        ticks.windows(2).all(|w| {
            at(w[1]) - at(w[0]) >= (label_px(&tick_label(w[0])) + label_px(&tick_label(w[1]))) / 2.0
        })
    }

    #[test]
    fn an_axis_with_no_finite_range_has_no_ticks_and_ends() {
        for (lo, hi) in [
            (1e308, f64::INFINITY),
            (0.0, 10.0),
            (10.0, 1.0),
            (f64::NAN, 1.0),
        ] {
            assert!(log_ticks(lo, hi, 800.0).is_empty(), "{lo}..{hi}");
            assert!(log_grid(lo, hi).is_empty(), "{lo}..{hi}");
        }
    }

    #[test]
    fn log_ticks_near_the_top_of_a_decade_do_not_run_into_each_other() {
        // The gen CCDF of a run between 1 and 10 ms: 8000, 9000 and 10000 were drawn 30 px
        // apart and read `8000900010000`.
        let ticks = log_ticks(1000.0, 15000.0, 800.0);
        assert!(apart(&ticks, 1000.0, 15000.0, 800.0), "{ticks:?}");
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert!(!ticks.contains(&9000.0), "{ticks:?}");
        assert_eq!(ticks.first(), Some(&1000.0));
    }

    #[test]
    fn a_range_inside_one_decade_still_gets_labels_in_it() {
        // compare's plot of two runs between 13 and 42 µs had no tick label in the data.
        let ticks = log_ticks(13.3, 133.0, 800.0);
        assert!(ticks.len() >= 3, "{ticks:?}");
        assert!(ticks.iter().all(|&t| (13.3..=133.0).contains(&t)));
        assert!(ticks.contains(&20.0) && ticks.contains(&100.0), "{ticks:?}");
        assert!(apart(&ticks, 13.3, 133.0, 800.0));
    }

    #[test]
    fn many_decades_keep_one_label_a_decade_or_fewer() {
        let ticks = log_ticks(0.001, 1e7, 300.0);
        assert!(apart(&ticks, 0.001, 1e7, 300.0), "{ticks:?}");
        assert!(ticks.len() >= 2);
        assert!(ticks.iter().all(|t| tick_label(*t).len() < 12), "{ticks:?}");
    }

    #[test]
    fn tick_labels_have_no_float_noise() {
        assert_eq!(tick_label(clean(3.0 * 0.1)), "0.3");
        assert_eq!(tick_label(10000.0), "10000");
        assert_eq!(tick_label(0.002), "0.002");
        assert_eq!(tick_label(50.0), "50");
    }

    #[test]
    fn small_linear_ranges_label_every_tick_differently() {
        // loss.svg's y axis up to 0.000138 read `0.0` six times; its ticks are 0.00002 apart.
        let labels: Vec<String> = (0..7)
            .map(|i| linear_label(f64::from(i) * 0.00002, 0.000138 / 10.0))
            .collect();
        assert_eq!(labels[0], "0");
        assert_eq!(labels[1], "0.00002");
        assert_eq!(labels[6], "0.00012");
        assert_eq!(linear_label(60.0, 11.5), "60");
        assert_eq!(linear_label(0.25, 0.05), "0.25");
    }

    #[test]
    fn the_legend_goes_to_the_corner_without_data() {
        // A CCDF: flat at the top from the left, falling on the right.
        let line = sampled(&[(0.0, 1.0), (0.8, 1.0), (0.85, 0.1), (1.0, 0.0)]);
        let corner = emptiest_corner(&line, 0.3, 0.2);
        assert!(
            matches!(corner, SeriesLabelPosition::LowerLeft),
            "{corner:?}"
        );
        // Points rising to the upper right: the upper left is free.
        let rising = sampled(&[(0.0, 0.0), (1.0, 1.0)]);
        let corner = emptiest_corner(&rising, 0.3, 0.2);
        assert!(
            matches!(corner, SeriesLabelPosition::UpperLeft),
            "{corner:?}"
        );
    }

    #[test]
    fn a_legend_is_sized_by_its_rows_and_longest_label() {
        let (w, h) = legend_size(&["a", "a much longer label"], (800.0, 400.0));
        assert!(w > legend_size(&["a"], (800.0, 400.0)).0);
        assert_eq!(h, 60.0 / 400.0);
    }
}
