//! The tables of the emulator study's `report.md`: added latency at delay 0, accuracy, loss
//! models and forwarding rate, as Markdown.

use super::analysis::{emulator_cores, mean_error, p, release, release_error, us, Analysis};
use super::{RatePoint, FRAME_SIZES};
use latlab_lab::units::format_us;

/// Added latency at delay 0: the emulator against the kernel's IP forwarding, per rate.
pub(super) fn added_latency(a: &Analysis) -> String {
    let mut md = String::new();
    md.push_str("## Added latency at delay 0: latlab emu vs the kernel's IP forwarding\n\n");
    md.push_str("| rate | kernel p50 [µs] | kernel mean [µs] | emu p50 [µs] | emu mean [µs] | added p50 [µs] | added mean [µs] | emu release error p50 / p99 [µs] |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for &rate in &a.rates {
        if let (Some(k), Some(e)) = (a.find("kernel", 0, rate), a.find("emu", 0, rate)) {
            let (kp, ep) = (p(&k.run.latency_ns, "p50"), p(&e.run.latency_ns, "p50"));
            let rel = release(e);
            md.push_str(&format!(
                "| {rate:.0} | {} | {:.1} | {} | {:.1} | {} | {:.1} | {} / {} |\n",
                us(kp),
                k.run.latency_ns.mean_ns / 1000.0,
                us(ep),
                e.run.latency_ns.mean_ns / 1000.0,
                us(ep.zip(kp).map(|(a, b)| a - b)),
                (e.run.latency_ns.mean_ns - k.run.latency_ns.mean_ns) / 1000.0,
                us(rel.0),
                us(rel.1),
            ));
        }
    }
    md
}

/// Accuracy: (latency with D) − (latency with no delay) − D, per delay and rate, with a note
/// for each rate at which the emulator was overloaded even with no delay.
pub(super) fn accuracy(a: &Analysis) -> String {
    let mut md = String::new();
    md.push_str("\n## Accuracy: (latency with D) − (latency with no delay) − D\n\n");
    md.push_str("| D | rate | mean error [µs] | std dev with D [µs] | p50 error [µs] | p99 error [µs] | p99.9 error [µs] | release error p50 / p99 / max [µs] | lost |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for &rate in &a.rates {
        let Some(base) = a.find("emu", 0, rate) else {
            continue;
        };
        for d in a.delays(rate) {
            let Some(pt) = a.find("emu", d, rate) else {
                continue;
            };
            let err = |key: &str| {
                p(&pt.run.latency_ns, key)
                    .zip(p(&base.run.latency_ns, key))
                    .map(|(a, b)| a - b - d as f64)
            };
            let rel = release(pt);
            md.push_str(&format!(
                "| {} | {rate:.0} | {:.1} | {:.1} | {} | {} | {} | {} / {} / {} | {} |\n",
                format_us(d as f64),
                mean_error(pt, base, d) / 1000.0,
                pt.run.latency_ns.stddev_ns / 1000.0,
                us(err("p50")),
                us(err("p99")),
                us(err("p99_9")),
                us(rel.0),
                us(rel.1),
                us(rel.2),
                pt.run.lost,
            ));
        }
    }
    for &rate in &a.rates {
        if let Some((Some(p50), _, _)) = a.find("emu", 0, rate).map(release) {
            if p50 > 100_000.0 {
                md.push_str(&format!(
                    "\nAt {rate:.0} pps the emulator could not keep up even with no delay (release error p50 {:.1} µs): the accuracy rows at that rate measure its overload, not the delay.\n",
                    p50 / 1000.0
                ));
            }
        }
    }
    md
}

/// The release-error target: p50 at most this, ns.
const TARGET_P50_NS: f64 = 5_000.0;
/// The release-error target: p99 at most this, ns.
const TARGET_P99_NS: f64 = 50_000.0;

/// Per rate, the worst release error of every emu point (delay 0 and each D, both
/// directions) against the target, with the emulator's CPU; then the rates where it holds.
pub(super) fn release_target(a: &Analysis) -> String {
    let mut md = String::new();
    md.push_str(&format!(
        "\n## Release error against the target (p50 ≤ {:.0} µs, p99 ≤ {:.0} µs)\n\nThe worst of every emulator point at the rate (delay 0 and each D, both directions). The emulator's CPU is its thread's CPU time over the run's. Host steal is the CPU time the hypervisor took from this machine during those points (`/proc/stat`): a thread whose vCPU is stolen stalls for milliseconds whatever the lab's plan.\n\n| rate | worst p50 [µs] | worst p99 [µs] | emulator CPU [cores] | host steal [ms] | holds |\n|---:|---:|---:|---:|---:|---|\n",
        TARGET_P50_NS / 1000.0,
        TARGET_P99_NS / 1000.0
    ));
    let (mut held, mut missed) = (Vec::new(), Vec::new());
    for &rate in &a.rates {
        let pts: Vec<_> = a
            .points
            .iter()
            .filter(|p| p.path == "emu" && p.rate_pps == rate)
            .collect();
        let worst = |i: usize| {
            pts.iter()
                .filter_map(|p| p.emulator.as_ref())
                .flat_map(|e| [&e.a_to_b, &e.b_to_a].map(release_error))
                .filter_map(|r| [r.0, r.1][i])
                .reduce(f64::max)
        };
        let (Some(p50), Some(p99)) = (worst(0), worst(1)) else {
            continue;
        };
        let cores: Vec<f64> = pts.iter().filter_map(|p| emulator_cores(p)).collect();
        let cpu = match (
            cores.iter().copied().reduce(f64::min),
            cores.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2}"),
            _ => "-".into(),
        };
        let steal = pts
            .iter()
            .filter_map(|p| p.host_steal_ns)
            .reduce(|a, b| a + b)
            .map_or("-".into(), |ns| format!("{:.0}", ns as f64 / 1e6));
        let holds = p50 <= TARGET_P50_NS && p99 <= TARGET_P99_NS;
        md.push_str(&format!(
            "| {rate:.0} | {:.1} | {:.1} | {cpu} | {steal} | {} |\n",
            p50 / 1000.0,
            p99 / 1000.0,
            if holds { "yes" } else { "no" }
        ));
        if holds {
            held.push(rate);
        } else {
            missed.push(rate);
        }
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(&top) = held.last() {
        md.push_str(&format!("\nThe target holds at {} pps", list(&held)));
        match missed.iter().find(|&&r| r > top) {
            None if missed.is_empty() => md.push_str(", every rate measured.\n"),
            None => md.push_str(&format!("; not at {} pps.\n", list(&missed))),
            Some(&above) => md.push_str(&format!(
                "; not at {} pps. It no longer holds above {top:.0} pps (it fails at {above:.0} pps).\n",
                list(&missed)
            )),
        }
    } else if !missed.is_empty() {
        md.push_str(&format!(
            "\nThe target holds at none of the rates measured ({} pps).\n",
            list(&missed)
        ));
    }
    md
}

/// Loss models: the loss and burst lengths produced against the configured ones; each measured
/// loss with its 95% (Wilson) interval and the probes it was measured on.
pub(super) fn loss_models(a: &Analysis) -> String {
    let mut md = String::new();
    md.push_str("\n## Loss models: produced vs configured\n\nMeasured loss: lost probes of those sent, with its 95% confidence interval (Wilson score).\n\n| model | configured loss | measured loss [95% interval] | probes sent | configured mean burst | measured mean burst | max burst | bursts |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for pt in a.points.iter().filter(|p| p.path.starts_with("loss-")) {
        let n = pt.loss_bursts.len();
        let mean = if n == 0 {
            0.0
        } else {
            pt.loss_bursts.iter().sum::<u64>() as f64 / n as f64
        };
        md.push_str(&format!(
            "| {} | {:.3}% | {} | {} | {:.2} | {:.2} | {} | {n} |\n",
            pt.path.trim_start_matches("loss-"),
            100.0 * pt.configured_loss.unwrap_or(0.0),
            loss_with_interval(pt.run.lost, pt.run.sent),
            pt.run.sent,
            pt.expected_mean_burst.unwrap_or(0.0),
            mean,
            pt.loss_bursts.iter().max().copied().unwrap_or(0),
        ));
    }
    md
}

/// `lost` of `sent` as a percentage with its 95% Wilson interval (`1.020% [0.830 – 1.250]`),
/// or `-` when nothing was sent.
fn loss_with_interval(lost: u64, sent: u64) -> String {
    match latlab_stats::gate::wilson_interval(lost, sent, latlab_stats::Z_95) {
        Some((low, high)) => format!(
            "{:.3}% [{:.3} – {:.3}]",
            100.0 * lost.min(sent) as f64 / sent as f64,
            100.0 * low,
            100.0 * high
        ),
        None => "-".to_string(),
    }
}

/// The forwarding rate at the RFC 2544 frame sizes through the three paths.
pub(super) fn forwarding_rate(a: &Analysis) -> String {
    let mut md = String::new();
    md.push_str("## Forwarding rate, one way, at the RFC 2544 frame sizes\n\nThe blaster sends as fast as its AF_PACKET ring takes frames; a UDP socket in the server counts what arrives. emu is the bridge over AF_PACKET rings, emu-xdp the same bridge over AF_XDP sockets; drops are the frames the kernel dropped before the bridge could read them (RX ring full).\n\n| frame [B] | kernel offered [kpps] | kernel forwarded [kpps] | emu offered [kpps] | emu forwarded [kpps] | emu / kernel | emu drops | emu-xdp offered [kpps] | emu-xdp forwarded [kpps] | emu-xdp / emu | emu-xdp drops |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for size in FRAME_SIZES {
        let find = |path: &str| {
            a.rate_points
                .iter()
                .find(|p| p.path == path && p.frame_size == size)
        };
        let (k, e, x) = (find("kernel"), find("emu"), find("emu-xdp"));
        if k.is_none() && e.is_none() && x.is_none() {
            continue;
        }
        let kpps = |p: Option<&RatePoint>, f: fn(&RatePoint) -> f64| {
            p.map_or("-".into(), |p| format!("{:.1}", f(p) / 1000.0))
        };
        let ratio = |a: Option<&RatePoint>, b: Option<&RatePoint>| {
            a.zip(b).map_or("-".into(), |(a, b)| {
                format!("{:.2}", a.forwarded_pps() / b.forwarded_pps().max(1.0))
            })
        };
        let drops = |p: Option<&RatePoint>| {
            p.and_then(|e| e.emulator.as_ref())
                .map(|j| j.a_to_b.dropped_by_emulator.kernel_rx_ring)
                .map_or("-".into(), |d| d.to_string())
        };
        md.push_str(&format!(
            "| {size} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            kpps(k, RatePoint::offered_pps),
            kpps(k, RatePoint::forwarded_pps),
            kpps(e, RatePoint::offered_pps),
            kpps(e, RatePoint::forwarded_pps),
            ratio(e, k),
            drops(e),
            kpps(x, RatePoint::offered_pps),
            kpps(x, RatePoint::forwarded_pps),
            ratio(x, e),
            drops(x),
        ));
    }
    md
}
