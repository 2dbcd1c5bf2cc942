//! `report.md` of the timestamp study, and [`write()`], which writes it and the CCDFs from
//! the points folder.

use std::path::{Path, PathBuf};

use latlab_stats::Quantile;

use super::analysis::{pct_us, ratios, stays_within, Analysis, Limit, Method, MethodView};
use super::figures::{methods_svg, settings_svg};
use super::StampPoint;
use crate::StudyError;
use latlab_lab::results::write_atomic;

/// The setting every reflector setting is compared with.
const BASELINE: &str = "prober blocks";

/// Reads every `points/*.json` under `out`, writes `report.md`, `methods-<key>.svg` per
/// methods point and `settings-<method>.svg` per method into `out`; returns the path of
/// `report.md`. It reads nothing but the point files, so it draws the same artefacts again
/// from any results folder of the study.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let a = Analysis::load(out)?;
    let figure = |file: String| move |reason| StudyError::Figure { file, reason };
    let mut md = String::new();
    md.push_str("# Timestamp study: how far each method can be trusted\n\n");
    md.push_str(&format!("Topology: {topology}.\n\n"));
    md.push_str("One probe in flight at a time; every probe keeps every stamp it got. The reference is the delay the emulator holds on the client→server direction plus its median release error (both directions, from the kernel's stamps). `user-space`: clock after the receive call returns − clock before the send; `kernel-rx`: kernel software receive stamp − clock before the send; `kernel-tx-rx`: kernel software receive − transmit stamp; `xdp-rx`: the XDP program's receive stamp − clock before the send, on a pass of its own with the prober sending and receiving over AF_XDP (the program takes the answers before the kernel's stack sees them). Excess over the reference is the method's own error plus the path's time through the veths and the bridge; the columns against `kernel-tx-rx` compare methods on the same probes. The points run one after another, so a change of the machine's load between points is part of their differences.\n\n");
    md.push_str(&points_table(&a));
    md.push_str(&methods_table(&a));
    for (key, p) in methods_points(&a) {
        let file = format!("methods-{key}.svg");
        let svg = methods_svg(p, &outside_points(&a)).map_err(figure(file.clone()))?;
        write_atomic(&out.join(&file), svg.as_bytes())?;
        md.push_str(&format!("\n![{}]({file})\n", p.setting));
    }
    let groups = [
        (Group::Reflector, settings_points(&a, Group::Reflector)),
        (Group::Forwarder, settings_points(&a, Group::Forwarder)),
    ];
    for (group, settings) in &groups {
        if settings.len() < 2 {
            continue;
        }
        md.push_str(&settings_table(*group, settings));
        for method in Method::ALL {
            let file = format!("{}-{}.svg", group.file_prefix(), method.name());
            let svg =
                settings_svg(group.title(), method, settings).map_err(figure(file.clone()))?;
            write_atomic(&out.join(&file), svg.as_bytes())?;
            md.push_str(&format!("\n![{}]({file})\n", method.name()));
        }
    }
    md.push_str(&conclusions(&a, &groups));
    if !a.skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in &a.skipped {
            md.push_str(&format!("- {s}\n"));
        }
    }
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}

/// The `methods` points with a short key for their figure's file name.
fn methods_points(a: &Analysis) -> Vec<(&'static str, &StampPoint)> {
    a.points
        .iter()
        .filter(|p| p.group == "methods")
        .map(|p| {
            (
                match p.prober_poll.as_str() {
                    "busy" => "busy",
                    "xdp" => "xdp",
                    _ => "block",
                },
                p,
            )
        })
        .collect()
}

/// The outside view's points that were measured.
fn outside_points(a: &Analysis) -> Vec<&StampPoint> {
    a.points
        .iter()
        .filter(|p| p.group == "outside" && !p.probes.is_empty())
        .collect()
}

/// The two groups of OS settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    /// The reflector's, against the blocking prober's point.
    Reflector,
    /// The emulator's at delay 0, against its first point.
    Forwarder,
}

impl Group {
    fn file_prefix(self) -> &'static str {
        match self {
            Group::Reflector => "settings",
            Group::Forwarder => "forwarder",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Group::Reflector => "Reflector settings",
            Group::Forwarder => "Forwarder settings (the emulator at delay 0)",
        }
    }

    fn baseline(self) -> &'static str {
        match self {
            Group::Reflector => "prober and reflector blocking, reflector pinned",
            Group::Forwarder => "the emulator blocking, pinned, timer slack 1 ns",
        }
    }
}

/// A group's points, its baseline first.
fn settings_points(a: &Analysis, group: Group) -> Vec<&StampPoint> {
    match group {
        Group::Reflector => a
            .find(BASELINE)
            .into_iter()
            .chain(a.points.iter().filter(|p| p.group == "reflector"))
            .collect(),
        Group::Forwarder => a.points.iter().filter(|p| p.group == "forwarder").collect(),
    }
}

/// Every point: where it ran, how many probes came back, the reference.
fn points_table(a: &Analysis) -> String {
    let mut md = String::from("## Points\n\n| setting | cores | sent | answered | with kernel TX stamp | delay [µs] | release error [µs] | reference [µs] |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for p in &a.points {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            p.setting,
            p.cores,
            p.sent,
            p.probes.len(),
            p.probes.iter().filter(|s| s.kernel_tx.is_some()).count(),
            p.delay_ns as f64 / 1000.0,
            p.release_error_ns as f64 / 1000.0,
            p.reference_ns() as f64 / 1000.0,
        ));
    }
    for p in &a.points {
        if let Some(why) = &p.left_out {
            md.push_str(&format!("\n{} left out: {why}.\n", p.setting));
        }
    }
    let lost = a
        .points
        .iter()
        .map(|p| (p.setting.clone(), p.lost_by_cause.as_ref()));
    md + &crate::report::lost_section(lost, |l| l.text())
}

/// Each method on the methods points: its excess over the reference and how far it stays
/// within 1 µs and 10 % of the reference and of the kernel's stamps.
fn methods_table(a: &Analysis) -> String {
    let mut md = String::from("\n## Methods against the reference\n\nExcess = the method's round trip − the reference. \"Within\" columns: the percentile up to which the method stays within 1 µs / 10 % of the reference, and of `kernel-tx-rx` on the same probe.\n\n| setting | method | samples | excess p50 [µs] | excess p99 [µs] | excess p99.9 [µs] | excess max [µs] | within 1 µs of ref | within 10 % of ref | within 1 µs of kernel-tx-rx | within 10 % of kernel-tx-rx |\n|---|---|---:|---:|---:|---:|---:|---|---|---|---|\n");
    let outside = a
        .points
        .iter()
        .filter(|p| p.group == "outside" && !p.probes.is_empty());
    let rows = methods_points(a)
        .into_iter()
        .flat_map(|(_, p)| Method::on(p).iter().map(move |&m| (p, m)))
        .chain(outside.map(|p| (p, Method::UserSpace)));
    for (p, method) in rows {
        let v = MethodView::of(p, method);
        let excess = v.excess();
        let within = |pairs: &[(u64, u64)], limit| stays_within(&ratios(pairs, limit)).to_string();
        // kernel-tx-rx against itself says nothing.
        let kernel = |limit| {
            if method == Method::KernelTxRx {
                "(itself)".to_string()
            } else if v.vs_kernel.is_empty() {
                "-".to_string()
            } else {
                within(&v.vs_kernel, limit)
            }
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |\n",
            p.setting,
            v.label,
            v.vs_reference.len(),
            pct_us(&excess, Quantile::P50),
            pct_us(&excess, Quantile::P99),
            pct_us(&excess, Quantile::P99_9),
            excess.max() as f64 / 1000.0,
            within(&v.vs_reference, Limit::Ns(1_000)),
            within(&v.vs_reference, Limit::Fraction(0.1)),
            kernel(Limit::Ns(1_000)),
            kernel(Limit::Fraction(0.1)),
        ));
    }
    md
}

/// Each reflector setting as each method sees it.
fn settings_table(group: Group, settings: &[&StampPoint]) -> String {
    let mut md = format!(
        "\n## {} as each method sees them\n\nRound trips; Δp99 against the baseline ({}).\n\n",
        group.title(),
        group.baseline()
    );
    md.push_str("| setting | method | samples | p50 [µs] | p99 [µs] | p99.9 [µs] | Δp99 [µs] |\n|---|---|---:|---:|---:|---:|---:|\n");
    for p in settings {
        for method in Method::ALL {
            let v = MethodView::of(p, method);
            let h = v.histogram();
            let delta = p99_ns(p, method)
                .zip(p99_ns(settings[0], method))
                .map_or("-".into(), |(x, b)| format!("{:+.1}", (x - b) / 1000.0));
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {delta} |\n",
                p.setting,
                method.name(),
                h.len(),
                pct_us(&h, Quantile::P50),
                pct_us(&h, Quantile::P99),
                pct_us(&h, Quantile::P99_9),
            ));
        }
    }
    md
}

/// p99 of `method`'s round trips on `p`, ns, when the samples bound it.
fn p99_ns(p: &StampPoint, method: Method) -> Option<f64> {
    latlab_stats::Estimate::of(
        &MethodView::of(p, method).histogram(),
        Quantile::P99.q,
        latlab_stats::Z_95,
    )
    .value_ns()
    .map(|v| v as f64)
}

/// Conclusions drawn from the numbers.
fn conclusions(a: &Analysis, groups: &[(Group, Vec<&StampPoint>)]) -> String {
    let mut md = String::from("\n## Conclusions\n\n");
    for (_, p) in methods_points(a) {
        let mut by_p99: Vec<(String, f64)> = Method::on(p)
            .iter()
            .filter_map(|&m| {
                let v = MethodView::of(p, m);
                latlab_stats::Estimate::of(&v.excess(), Quantile::P99.q, latlab_stats::Z_95)
                    .value_ns()
                    .map(|e| (v.label, e as f64))
            })
            .collect();
        by_p99.sort_by(|x, y| x.1.total_cmp(&y.1));
        if let (Some(best), Some(worst)) = (by_p99.first(), by_p99.last()) {
            md.push_str(&format!(
                "- With the {}: {} comes closest to the reference at p99 (excess {:.1} µs), {} strays furthest ({:.1} µs).\n",
                if p.prober_poll == "xdp" {
                    p.setting.clone()
                } else {
                    p.setting.replace("prober", "prober that")
                },
                best.0,
                best.1 / 1000.0,
                worst.0,
                worst.1 / 1000.0
            ));
        } else {
            md.push_str(&format!(
                "- With the {}: too few samples for p99.\n",
                p.setting
            ));
        }
        let user = MethodView::of(p, Method::UserSpace).over_kernel();
        if let Some(m) = latlab_stats::Estimate::of(&user, 0.5, latlab_stats::Z_95).value_ns() {
            md.push_str(&format!(
                "  The user-space clock adds {:.1} µs at the median over the kernel's stamps of the same probes ({} at p99).\n",
                m as f64 / 1000.0,
                pct_us(&user, Quantile::P99) + " µs"
            ));
        }
    }
    md.push_str(&xdp_conclusions(a));
    let kernel_p50 = a.find(BASELINE).and_then(|b| {
        latlab_stats::Estimate::of(
            &MethodView::of(b, Method::KernelTxRx).histogram(),
            0.5,
            latlab_stats::Z_95,
        )
        .value_ns()
    });
    for p in outside_points(a) {
        let h = MethodView::of(p, Method::UserSpace).histogram();
        let p50 = latlab_stats::Estimate::of(&h, 0.5, latlab_stats::Z_95).value_ns();
        if let (Some(s), Some(k)) = (p50, kernel_p50) {
            md.push_str(&format!(
                "- From outside, sockperf's median round trip is {:.1} µs, {:+.1} µs against the kernel's stamps of latlab's blocking prober ({:.1} µs): its user-space clock and its own reflector are in it.\n",
                s as f64 / 1000.0,
                (s as f64 - k as f64) / 1000.0,
                k as f64 / 1000.0
            ));
        }
    }
    for (_, settings) in groups {
        md.push_str(&setting_conclusions(settings));
    }
    md
}

/// What the prober over AF_XDP saw: how long after the XDP program's stamp the user-space
/// clock read each answer, and the program's stamp against the kernel's receive stamp of the
/// busy-polling socket prober (a pass of its own, with its own send path).
fn xdp_conclusions(a: &Analysis) -> String {
    let Some(xdp) = a.points.iter().find(|p| p.prober_poll == "xdp") else {
        return String::new();
    };
    let p50 = |h: &latlab_stats::LatencyHistogram| {
        latlab_stats::Estimate::of(h, 0.5, latlab_stats::Z_95).value_ns()
    };
    let mut read_after = latlab_stats::LatencyHistogram::new();
    for s in &xdp.probes {
        if let Some(x) = s.xdp_rx {
            read_after.record(s.user_rx.saturating_sub(x));
        }
    }
    let Some(after) = p50(&read_after) else {
        return format!("- {}: too few samples.\n", xdp.setting);
    };
    let mut md = format!(
        "- Over AF_XDP the user-space clock reads an answer {:.1} µs after the XDP program stamped it at the median ({} µs at p99).\n",
        after as f64 / 1000.0,
        pct_us(&read_after, Quantile::P99)
    );
    let busy = a
        .points
        .iter()
        .find(|p| p.group == "methods" && p.prober_poll == "busy");
    let excess = |p: &StampPoint, m| p50(&MethodView::of(p, m).excess());
    if let (Some(x), Some(k)) = (
        excess(xdp, Method::XdpRx),
        busy.and_then(|b| excess(b, Method::KernelRx)),
    ) {
        md.push_str(&format!(
            "  The XDP program's stamp exceeds the reference by {:.1} µs at the median, the kernel's receive stamp of the busy-polling socket prober by {:.1} µs (separate passes, and their send paths differ: AF_XDP against the socket's).\n",
            x as f64 / 1000.0,
            k as f64 / 1000.0
        ));
    }
    md
}

/// What each setting of a group did to p99, as each method saw it.
fn setting_conclusions(settings: &[&StampPoint]) -> String {
    let mut md = String::new();
    let Some(base) = settings.first() else {
        return md;
    };
    for p in &settings[1..] {
        let seen: Vec<(Method, f64)> = Method::ALL
            .iter()
            .filter_map(|&m| Some((m, p99_ns(p, m)? - p99_ns(base, m)?)))
            .collect();
        let Some(&(_, kernel)) = seen.iter().find(|s| s.0 == Method::KernelTxRx) else {
            md.push_str(&format!("- {}: too few samples for p99.\n", p.setting));
            continue;
        };
        let verb = if kernel.abs() < 1000.0 {
            "leaves p99 within 1 µs of the baseline".to_string()
        } else if kernel > 0.0 {
            format!("raises p99 by {:.1} µs", kernel / 1000.0)
        } else {
            format!("lowers p99 by {:.1} µs", -kernel / 1000.0)
        };
        let others: Vec<String> = seen
            .iter()
            .filter(|s| s.0 != Method::KernelTxRx)
            .map(|(m, d)| format!("{} sees {:+.1} µs", m.name(), d / 1000.0))
            .collect();
        md.push_str(&format!(
            "- {} {verb} as the kernel's stamps see it; {}.\n",
            p.setting,
            others.join(", ")
        ));
    }
    md
}
