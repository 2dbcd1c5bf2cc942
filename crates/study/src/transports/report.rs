//! `report.md` of the transport study, its tables, and [`write()`], which draws them and the
//! figures from the points folder only.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::figures::{ccdf_svg, cost_svg, lines_svg, Line};
use super::{Clock, LossKind, TransportPoint};
use crate::{points, StudyError};
use latlab_lab::results::write_atomic;

/// The cell the target is stated for: RTT 100 ms, interarrival 100 ms, 2.5 % loss.
const TARGET: (u64, u64, f64) = (100_000_000, 100_000_000, 0.025);

/// Every point of a results folder, and the files that did not read.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The grid's points (in namespaces, or in virtual time).
    pub(super) points: Vec<TransportPoint>,
    /// A virtual study's cross-checks in namespaces.
    pub(super) checks: Vec<TransportPoint>,
    pub(super) skipped: Vec<String>,
}

impl Loaded {
    pub(super) fn load(out: &Path) -> Result<Loaded, StudyError> {
        let mut l = Loaded::default();
        for f in points::load(out)?.files {
            match f
                .text
                .and_then(|t| serde_json::from_str::<TransportPoint>(&t).map_err(|e| e.to_string()))
            {
                Ok(p) if p.check => l.checks.push(p),
                Ok(p) => l.points.push(p),
                Err(e) => l.skipped.push(format!("{}: {e}", f.path.display())),
            }
        }
        Ok(l)
    }

    /// The transports, in the order they first appear (points are read sorted by key, so
    /// the order is stable).
    fn transports(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for p in &self.points {
            if !seen.contains(&p.transport) {
                seen.push(p.transport.clone());
            }
        }
        seen
    }

    /// The (RTT, interval) pairs of `kind`, ascending.
    fn paths(&self, kind: LossKind) -> BTreeSet<(u64, u64)> {
        self.points
            .iter()
            .filter(|p| p.loss_kind == kind)
            .map(|p| (p.rtt_ns, p.interval_ns))
            .collect()
    }

    fn cell(&self, kind: LossKind, (rtt, ia): (u64, u64), loss: f64) -> Vec<&TransportPoint> {
        self.points
            .iter()
            .filter(|p| p.loss_kind == kind && p.rtt_ns == rtt && p.interval_ns == ia)
            .filter(|p| (p.loss - loss).abs() < 1e-9)
            .collect()
    }

    fn losses(&self, kind: LossKind, path: (u64, u64)) -> Vec<f64> {
        let mut l: Vec<f64> = self
            .points
            .iter()
            .filter(|p| p.loss_kind == kind && (p.rtt_ns, p.interval_ns) == path)
            .map(|p| p.loss)
            .collect();
        l.sort_by(f64::total_cmp);
        l.dedup();
        l
    }
}

/// A percentile of a point in ms, if the samples bound it.
pub(super) fn pct_ms(p: &TransportPoint, key: &str) -> Option<f64> {
    p.latency_ns
        .percentile(key)
        .and_then(|e| e.estimate.value_ns())
        .map(|v| v as f64 / 1e6)
}

fn ms_or_few(v: Option<f64>) -> String {
    v.map_or("too few samples".into(), |v| format!("{v:.1}"))
}

/// Reads every point under `out`, writes the figures and `report.md`; returns its path.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let l = Loaded::load(out)?;
    let figure = |file: String| move |reason| StudyError::Figure { file, reason };
    let mut md = String::from("# Thin-stream transports through an emulated path\n\n");
    let _ = writeln!(md, "Topology: {topology}.\n");
    md.push_str("After Harcsik et al., \"Latency Evaluation of Networking Mechanisms for Game Traffic\" (NetGames '07). Every transport runs its streams at the same time through one emulator that holds half the round trip each way and drops frames at the cell's rate each way (random: each frame on its own; bursty: Gilbert-Elliott with the same mean, bursts of 3 frames on average). Latency is the application's: from a message's intended send time to its delivery at the receiving application. Percentiles come from the streams' merged histograms; \"too few samples\" where the messages cannot bound one. Wire: all bytes both ways (IP headers included) against plain UDP's for the same messages.\n\n");
    if l.points.iter().any(|p| p.clock == Clock::Virtual) {
        md.push_str("Measured in **virtual time**: the sans-IO transports (latlab's, KCP, QUIC through quinn-proto, plain UDP) ran over latlab-link's network, the emulator's own link model with the same settings and seeds, the clock jumping from one event to the next; the kernel's TCP and ENet have no virtual-time form and are not in these tables. The machine's own delays are not in these numbers: the cross-checks below say how far that matters.\n\n");
    }
    let transports = l.transports();
    for kind in [LossKind::Random, LossKind::Bursty] {
        let paths = l.paths(kind);
        if paths.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {} loss\n", capitalised(kind.name()));
        for &path in &paths {
            md.push_str(&path_table(&l, kind, path, &transports));
            let name = format!(
                "fig2-{}-rtt{}ms-ia{}ms.svg",
                kind.name(),
                path.0 / 1_000_000,
                path.1 / 1_000_000
            );
            let title = format!(
                "p99.9 latency vs loss, RTT {} ms, every {} ms ({} loss)",
                path.0 / 1_000_000,
                path.1 / 1_000_000,
                kind.name()
            );
            let lines = lines_of(&l, kind, path, &transports, |p| pct_ms(p, "p99_9"));
            let svg = lines_svg(&title, "p99.9 application latency (ms)", &lines, true)
                .map_err(figure(name.clone()))?;
            write_atomic(&out.join(&name), svg.as_bytes())?;
            let _ = writeln!(md, "\n![{title}]({name})\n");
            // Figure 3: every transport's CCDF on the path's highest loss.
            if let Some(&loss) = l.losses(kind, path).last() {
                let cell = l.cell(kind, path, loss);
                let name = format!(
                    "fig3-ccdf-{}-rtt{}ms-ia{}ms-loss{}.svg",
                    kind.name(),
                    path.0 / 1_000_000,
                    path.1 / 1_000_000,
                    loss * 100.0
                );
                let title = format!(
                    "CCDF, RTT {} ms, every {} ms, {}% {} loss",
                    path.0 / 1_000_000,
                    path.1 / 1_000_000,
                    loss * 100.0,
                    kind.name()
                );
                let svg = ccdf_svg(&title, &cell).map_err(figure(name.clone()))?;
                write_atomic(&out.join(&name), svg.as_bytes())?;
                let _ = writeln!(md, "![{title}]({name})\n");
            }
            // Figure 5: what each transport pays for its tail, cell by cell.
            for loss in l.losses(kind, path) {
                let (rtt, ia) = (path.0 / 1_000_000, path.1 / 1_000_000);
                let name = format!(
                    "fig5-cost-{}-rtt{rtt}ms-ia{ia}ms-loss{}.svg",
                    kind.name(),
                    loss * 100.0
                );
                let title = format!(
                    "Bytes per message vs tail, RTT {rtt} ms, every {ia} ms, {}% {} loss",
                    loss * 100.0,
                    kind.name()
                );
                let svg =
                    cost_svg(&title, &l.cell(kind, path, loss)).map_err(figure(name.clone()))?;
                write_atomic(&out.join(&name), svg.as_bytes())?;
                let _ = writeln!(md, "![{title}]({name})\n");
            }
        }
        // Figure 4: wire bytes against plain UDP's, averaged over the paths.
        let name = format!("fig4-overhead-{}.svg", kind.name());
        let title = format!("Wire bytes / plain UDP's bytes ({} loss)", kind.name());
        let lines: Vec<Line> = transports
            .iter()
            .map(|t| {
                let mut by_loss: Vec<(f64, f64)> = Vec::new();
                let mut losses: Vec<f64> = l
                    .points
                    .iter()
                    .filter(|p| p.loss_kind == kind && &p.transport == t)
                    .map(|p| p.loss)
                    .collect();
                losses.sort_by(f64::total_cmp);
                losses.dedup();
                for loss in losses {
                    let ratios: Vec<f64> = l
                        .points
                        .iter()
                        .filter(|p| p.loss_kind == kind && &p.transport == t)
                        .filter(|p| (p.loss - loss).abs() < 1e-9 && p.sent > 0)
                        .map(|p| p.wire.bytes_ratio)
                        .collect();
                    if !ratios.is_empty() {
                        by_loss.push((
                            loss * 100.0,
                            ratios.iter().sum::<f64>() / ratios.len() as f64,
                        ));
                    }
                }
                (t.clone(), by_loss)
            })
            .collect();
        let svg = lines_svg(&title, "bytes on the wire / plain UDP's", &lines, false)
            .map_err(figure(name.clone()))?;
        write_atomic(&out.join(&name), svg.as_bytes())?;
        let _ = writeln!(md, "![{title}]({name})\n");
    }
    md.push_str(&agreement(&l));
    md.push_str(&conclusions(&l));
    if !l.skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in &l.skipped {
            let _ = writeln!(md, "- {s}");
        }
    }
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().collect::<String>() + c.as_str()
    })
}

/// One line per transport: `stat` against loss in percent on `path`.
fn lines_of(
    l: &Loaded,
    kind: LossKind,
    path: (u64, u64),
    transports: &[String],
    stat: impl Fn(&TransportPoint) -> Option<f64>,
) -> Vec<Line> {
    transports
        .iter()
        .map(|t| {
            let pts = l
                .losses(kind, path)
                .into_iter()
                .filter_map(|loss| {
                    let cell = l.cell(kind, path, loss);
                    let p = cell.iter().find(|p| &p.transport == t)?;
                    Some((loss * 100.0, stat(p)?))
                })
                .collect();
            (t.clone(), pts)
        })
        .collect()
}

/// Every transport on every loss of one path.
fn path_table(l: &Loaded, kind: LossKind, path: (u64, u64), transports: &[String]) -> String {
    let mut md = format!(
        "### RTT {} ms, a message every {} ms\n\n| loss | transport | messages | lost | avg [ms] | p50 [ms] | p99 [ms] | p99.9 [ms] | max [ms] | wire bytes / UDP's | packets / message | retransmissions | spurious |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        path.0 / 1_000_000,
        path.1 / 1_000_000
    );
    for loss in l.losses(kind, path) {
        let cell = l.cell(kind, path, loss);
        for t in transports {
            let Some(p) = cell.iter().find(|p| &p.transport == t) else {
                continue;
            };
            let both = |f: Option<u64>, r: Option<u64>| match (f, r) {
                (Some(f), Some(r)) => (f + r).to_string(),
                _ => "-".into(),
            };
            let (fw, rv) = (&p.wire.forward, &p.wire.reverse);
            let retrans = both(fw.retransmissions, rv.retransmissions);
            let spurious = both(fw.spurious_retransmissions, rv.spurious_retransmissions);
            let _ = writeln!(
                md,
                "| {}% | {} | {} | {}{} | {:.1} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {retrans} | {spurious} |",
                loss * 100.0,
                p.transport,
                p.sent,
                p.lost,
                if p.failed_streams > 0 {
                    format!(" ({} streams failed)", p.failed_streams)
                } else {
                    String::new()
                },
                p.latency_ns.mean_ns / 1e6,
                ms_or_few(pct_ms(p, "p50")),
                ms_or_few(pct_ms(p, "p99")),
                ms_or_few(pct_ms(p, "p99_9")),
                p.latency_ns.max_ns as f64 / 1e6,
                p.wire.bytes_ratio,
                p.wire.packets_per_message,
            );
        }
    }
    md.push('\n');
    md
}

/// Whether a transport is latlab's own.
fn is_latlab(t: &str) -> bool {
    t.starts_with("latlab")
}

/// Conclusions drawn from the numbers: which transport has the lowest tail where, and the
/// issue's target at RTT 100 ms, a message every 100 ms, 2.5 % loss.
pub(super) fn conclusions(l: &Loaded) -> String {
    let mut md = String::from("## Conclusions\n\n");
    md.push_str(&contention(l));
    for kind in [LossKind::Random, LossKind::Bursty] {
        let mut wins: Vec<(String, u32)> = Vec::new();
        let mut cells = 0;
        for path in l.paths(kind) {
            for loss in l.losses(kind, path) {
                let reliable: Vec<&TransportPoint> = l
                    .cell(kind, path, loss)
                    .into_iter()
                    .filter(|p| p.reliable && p.failed_streams == 0 && p.sent > 0)
                    .collect();
                if let Some(best) = reliable.iter().min_by_key(|p| p.latency_ns.max_ns) {
                    cells += 1;
                    match wins.iter_mut().find(|w| w.0 == best.transport) {
                        Some(w) => w.1 += 1,
                        None => wins.push((best.transport.clone(), 1)),
                    }
                }
            }
        }
        if cells == 0 {
            continue;
        }
        wins.sort_by_key(|w| std::cmp::Reverse(w.1));
        let list: Vec<String> = wins.iter().map(|(t, n)| format!("{t} in {n}")).collect();
        let _ = writeln!(
            md,
            "- {} loss: the reliable transport with the lowest maximum latency, cell by cell ({cells} cells): {}.",
            capitalised(kind.name()),
            list.join(", ")
        );
        md.push_str(&target(l, kind));
    }
    md
}

/// Plain UDP recovers nothing, so its messages take the path's one-way delay and no more: its
/// p99 beyond that is the machine's own delay (every stream's threads and the emulator sharing
/// the cores). Says so when it exceeds 2 ms and 5 % of the one-way delay in any cell.
fn contention(l: &Loaded) -> String {
    // Virtual time has no machine of its own; its cross-checks in namespaces do.
    let worst = l
        .points
        .iter()
        .chain(&l.checks)
        .filter(|p| p.transport == "udp" && p.clock == Clock::Namespaces)
        .filter_map(|p| {
            let one_way = p.rtt_ns as f64 / 2e6;
            Some((pct_ms(p, "p99")? - one_way, one_way, p))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((excess, one_way, p)) if excess > 2.0_f64.max(0.05 * one_way) => format!(
            "- **The machine could not keep up**: plain UDP's p99 was {excess:.1} ms above the path's one-way delay at RTT {} ms, every {} ms, {}% {} loss ({} streams per transport). Every transport's tail there holds that much of the machine's own delay: measure again with fewer `--streams`.\n",
            p.rtt_ns / 1_000_000,
            p.interval_ns / 1_000_000,
            p.loss * 100.0,
            p.loss_kind.name(),
            p.streams
        ),
        Some((excess, _, _)) => format!(
            "- The machine kept up: plain UDP's p99 stayed within {excess:.1} ms of the path's one-way delay in every cell.\n"
        ),
        None => String::new(),
    }
}

/// The target at RTT 100 ms, every 100 ms, 2.5 % loss: each latlab policy's maximum and p99.9 at
/// most half the lowest of any peer (each taken on its own), its bytes at most 1.5× ENet's.
/// Shows the policy with the lowest maximum among those that held, else among all.
fn target(l: &Loaded, kind: LossKind) -> String {
    let (rtt, ia, loss) = TARGET;
    let cell: Vec<&TransportPoint> = l
        .cell(kind, (rtt, ia), loss)
        .into_iter()
        .filter(|p| p.reliable && p.failed_streams == 0 && p.sent > 0)
        .collect();
    let (ours, peers): (Vec<&TransportPoint>, Vec<&TransportPoint>) =
        cell.iter().partition(|p| is_latlab(&p.transport));
    let Some(peer_max) = peers.iter().min_by_key(|p| p.latency_ns.max_ns).copied() else {
        return String::new();
    };
    let peer_p999 = peers
        .iter()
        .filter_map(|p| Some((pct_ms(p, "p99_9")?, *p)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let enet = peers.iter().find(|p| p.transport == "enet").copied();
    let judged: Vec<Judged> = ours
        .iter()
        .map(|mine| Judged::new(mine, peer_max, peer_p999, enet))
        .collect();
    let held = judged.iter().filter(|j| j.held).count();
    let by_max = |j: &&Judged| j.mine.latency_ns.max_ns;
    let Some(shown) = judged
        .iter()
        .filter(|j| j.held)
        .min_by_key(by_max)
        .or_else(|| judged.iter().min_by_key(by_max))
    else {
        return String::new();
    };
    let mine = shown.mine;
    format!(
        "  At RTT 100 ms, every 100 ms, 2.5% loss: latlab's best ({}) has a maximum of {:.1} ms against {:.1} ms, the lowest of any peer ({}), {:.2}×; p99.9 {}; wire bytes {}. Target (maximum and p99.9 at most half the lowest of any peer, at most 1.5× ENet's bytes): {}{}.\n",
        mine.transport,
        mine.latency_ns.max_ns as f64 / 1e6,
        peer_max.latency_ns.max_ns as f64 / 1e6,
        peer_max.transport,
        shown.max_ratio,
        match (pct_ms(mine, "p99_9"), peer_p999) {
            (Some(m), Some((p, peer))) => format!(
                "{m:.1} ms against {p:.1} ms, the lowest of any peer ({}), {:.2}×",
                peer.transport,
                m / p
            ),
            _ => "too few samples".into(),
        },
        shown.bytes.map_or(
            format!(
                "{:.2}× plain UDP's (no ENet point to compare: ENet runs in namespaces only)",
                mine.wire.bytes_ratio
            ),
            |b| format!("{b:.2}× ENet's")
        ),
        if shown.held {
            "held"
        } else if shown.bytes.is_none() {
            "not decided without ENet"
        } else {
            "not held"
        },
        if ours.len() > 1 {
            format!(" ({held} of the cell's {} latlab policies held)", ours.len())
        } else {
            String::new()
        }
    )
}

/// One of latlab's policies against the cell's peers (see [`target`]).
struct Judged<'a> {
    mine: &'a TransportPoint,
    max_ratio: f64,
    bytes: Option<f64>,
    held: bool,
}

impl<'a> Judged<'a> {
    fn new(
        mine: &'a TransportPoint,
        peer_max: &TransportPoint,
        peer_p999: Option<(f64, &TransportPoint)>,
        enet: Option<&TransportPoint>,
    ) -> Judged<'a> {
        let max_ratio = mine.latency_ns.max_ns as f64 / peer_max.latency_ns.max_ns.max(1) as f64;
        let p999_held = pct_ms(mine, "p99_9")
            .zip(peer_p999)
            .is_some_and(|(m, (p, _))| m <= 0.5 * p);
        let bytes = enet.map(|e| mine.wire.bytes_ratio / e.wire.bytes_ratio.max(f64::MIN_POSITIVE));
        Judged {
            mine,
            max_ratio,
            bytes,
            held: max_ratio <= 0.5 && p999_held && bytes.is_some_and(|b| b <= 1.5),
        }
    }
}

/// A percentile's 95 % confidence interval in ns, `None` when too few samples.
fn ci(p: &TransportPoint, key: &str) -> Option<(u64, u64)> {
    match p.latency_ns.percentile(key)?.estimate {
        latlab_stats::Estimate::Value {
            ci_low_ns,
            ci_high_ns,
            ..
        } => Some((ci_low_ns, ci_high_ns)),
        latlab_stats::Estimate::TooFewSamples { .. } => None,
    }
}

/// Whether the virtual point's interval at `key` overlaps the namespace point's, the latter
/// widened downwards by `allowance` ns (the machine's own delay); `None` when either is too
/// few samples.
fn overlap(v: &TransportPoint, n: &TransportPoint, key: &str, allowance: u64) -> Option<bool> {
    let ((v_low, v_high), (n_low, n_high)) = (ci(v, key)?, ci(n, key)?);
    Some(v_low <= n_high && n_low.saturating_sub(allowance) <= v_high)
}

/// A percentile with its confidence interval, in ms.
fn with_ci(p: &TransportPoint, key: &str) -> String {
    match p.latency_ns.percentile(key).map(|e| &e.estimate) {
        Some(latlab_stats::Estimate::Value {
            value_ns,
            ci_low_ns,
            ci_high_ns,
        }) => format!(
            "{:.2} [{:.2}, {:.2}]",
            *value_ns as f64 / 1e6,
            *ci_low_ns as f64 / 1e6,
            *ci_high_ns as f64 / 1e6
        ),
        _ => "too few samples".into(),
    }
}

/// The same cell and transport among `points`, measured on `clock`.
fn twin<'a>(
    points: &'a [TransportPoint],
    of: &TransportPoint,
    transport: &str,
    clock: Clock,
) -> Option<&'a TransportPoint> {
    points.iter().find(|p| {
        p.clock == clock
            && p.transport == transport
            && (p.rtt_ns, p.interval_ns, p.loss_kind) == (of.rtt_ns, of.interval_ns, of.loss_kind)
            && (p.loss - of.loss).abs() < 1e-9
    })
}

/// The cross-checks of a virtual study: each cell measured both ways, the p50 and p99 of each
/// with their 95 % confidence intervals, and whether they agree: the intervals overlap
/// ("yes"), or overlap once the machine's own delay at that percentile is allowed for ("yes,
/// within the machine's delay": plain UDP's latency over the path's delay in the same
/// namespace run, which virtual time does not have).
pub(super) fn agreement(l: &Loaded) -> String {
    if l.checks.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "## Virtual time against namespaces\n\nThe same cells measured both ways: in virtual time (the tables above) and with real sockets through the emulator in namespaces (shorter runs). p50 and p99 in ms with their 95 % confidence intervals. They agree when the intervals overlap; virtual time has none of the machine's own delay (the veth pairs, the emulator's release error, the scheduling of every stream's thread on two cores), so where plain UDP was cross-checked too, its latency beyond the path's delay at the same percentile in the same run is allowed for, and said.\n\n| cell | transport | p50 virtual | p50 namespaces | p99 virtual | p99 namespaces | machine's own p50 / p99 [ms] | agree |\n|---|---|---|---|---|---|---|---|\n",
    );
    let (mut strict, mut allowing, mut compared) = (0, 0, 0);
    for c in &l.checks {
        let Some(v) = twin(&l.points, c, &c.transport, Clock::Virtual) else {
            continue;
        };
        // Plain UDP's excess over the path in this namespace run: the machine's own delay.
        let udp = twin(&l.checks, c, "udp", Clock::Namespaces);
        let own = |key: &str| {
            udp.and_then(|u| u.latency_ns.percentile(key))
                .and_then(|e| e.estimate.value_ns())
                .map_or(0, |ns| ns.saturating_sub(c.rtt_ns / 2))
        };
        let verdict = match (overlap(v, c, "p50", 0), overlap(v, c, "p99", 0)) {
            (Some(true), Some(true)) => {
                compared += 1;
                strict += 1;
                "yes".to_string()
            }
            (Some(_), Some(_)) => {
                compared += 1;
                let within = overlap(v, c, "p50", own("p50")) == Some(true)
                    && overlap(v, c, "p99", own("p99")) == Some(true);
                if within && udp.is_some() {
                    allowing += 1;
                    "yes, within the machine's delay".to_string()
                } else {
                    "no".to_string()
                }
            }
            _ => "too few samples".to_string(),
        };
        let ms = |q| own(q) as f64 / 1e6;
        let machine = match udp {
            Some(_) => format!("{:.2} / {:.2}", ms("p50"), ms("p99")),
            None => "-".into(),
        };
        let _ = writeln!(
            md,
            "| RTT {} ms, every {} ms, {}% {} | {} | {} | {} | {} | {} | {machine} | {verdict} |",
            c.rtt_ns / 1_000_000,
            c.interval_ns / 1_000_000,
            c.loss * 100.0,
            c.loss_kind.name(),
            c.transport,
            with_ci(v, "p50"),
            with_ci(c, "p50"),
            with_ci(v, "p99"),
            with_ci(c, "p99"),
        );
    }
    let _ = writeln!(
        md,
        "\nOf {compared} cross-checked points, {strict} agree within their confidence intervals at p50 and p99, and {allowing} more once the machine's own delay is allowed for.\n"
    );
    md
}
