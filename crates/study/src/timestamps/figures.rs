//! The timestamp study's CCDFs as SVG text: every method against the reference (the paper's
//! Figure 2), and every reflector setting as one method sees it (its Figure 3).

use latlab_stats::{ccdf, CcdfPoint};

use super::analysis::{Method, MethodView};
use super::StampPoint;

/// A series that steps from 1 to 0 at `ns`: where every round trip would be if the path
/// took exactly the reference.
fn reference_series(ns: u64) -> Vec<CcdfPoint> {
    vec![CcdfPoint {
        latency_ns: ns,
        fraction_above: 0.0,
        count_at_or_below: 1,
    }]
}

/// Each method's round trips on `point`, with the reference and the round trips of the
/// `outside` points (sockperf) on the same path.
pub(super) fn methods_svg(point: &StampPoint, outside: &[&StampPoint]) -> Result<String, String> {
    let mut series = vec![(
        format!(
            "reference: delay + release error ({:.1} µs)",
            point.reference_ns() as f64 / 1000.0
        ),
        reference_series(point.reference_ns()),
    )];
    for &method in Method::on(point) {
        let view = MethodView::of(point, method);
        series.push((view.label.clone(), ccdf(&view.histogram())));
    }
    for p in outside {
        let view = MethodView::of(p, Method::UserSpace);
        series.push((view.label.clone(), ccdf(&view.histogram())));
    }
    latlab_lab::plot::ccdf_svg(
        &format!("Each method on the same probes ({})", point.setting),
        latlab_lab::plot::ROUND_TRIP_AXIS,
        &series,
    )
}

/// `method`'s round trips on every point of `points` (the baseline first), under `title`.
pub(super) fn settings_svg(
    title: &str,
    method: Method,
    points: &[&StampPoint],
) -> Result<String, String> {
    let mut series = Vec::new();
    for p in points {
        let view = MethodView::of(p, method);
        series.push((p.setting.clone(), ccdf(&view.histogram())));
    }
    latlab_lab::plot::ccdf_svg(
        &format!("{title} as {} sees them", method.name()),
        latlab_lab::plot::ROUND_TRIP_AXIS,
        &series,
    )
}
