//! The five conclusions of the game-server study's `report.md`, each computed from this run's
//! numbers, each saying what the data does not show when it cannot show it.

use std::collections::BTreeSet;

use latlab_stats::Quantile;

use super::analysis::{
    buf_kib, buffer_rows, first_drop, io_rank, kpps, max_load, us, Loaded, Pct, Study,
};
use super::DEFAULT_RCVBUF;

pub(super) fn conclusions(study: &Study<'_>) -> Vec<String> {
    vec![
        conclusion_buffers(study),
        conclusion_low_load(study),
        conclusion_batched(study),
        conclusion_clients(study),
        conclusion_flood(study),
    ]
}

pub(super) fn opt_kpps(v: Option<f64>) -> String {
    v.map_or_else(|| "no lossless load".into(), kpps)
}

pub(super) fn conclusion_buffers(study: &Study<'_>) -> String {
    let io_mode = "socket";
    let Some((clients, rows)) = buffer_rows(study, io_mode) else {
        return "Buffers vs throughput: no socket sweep points, so nothing to conclude.".into();
    };
    if rows.len() < 2 {
        return format!("Buffers vs throughput: only one buffer size was measured ({}, socket, {clients} clients), so nothing to compare.", buf_kib(rows[0].0));
    }
    let list: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}: max lossless {}, overload latency {}",
                buf_kib(r.0),
                opt_kpps(r.1),
                r.2.map_or_else(|| "none (never overloaded)".into(), us)
            )
        })
        .collect();
    let data = format!("(socket, {clients} clients; {})", list.join("; "));
    let lossless = |i: usize| rows[i].1.unwrap_or(0.0);
    let last = rows.len() - 1;
    let knee = (0..last)
        .find(|&k| lossless(k) > 0.0 && (k + 1..=last).all(|j| lossless(j) <= lossless(k) * 1.05));
    let Some(k) = knee else {
        return format!("Buffers vs throughput: the max lossless load still grows up to the largest buffer, so the data does not show a size above which a larger buffer stops helping {data}.");
    };
    let (bk, bl) = (rows[k].0 / 1024, rows[last].0 / 1024);
    match (rows[k].2, rows[last].2) {
        (Some(ok), Some(ol)) if ol > ok * 1.05 => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB, within 5%) while the average latency under overload still grows ({} → {}, ×{:.1}): a buffer larger than {bk} KiB buys latency, not throughput {data}.",
            kpps(lossless(k)),
            kpps(lossless(last)),
            us(ok),
            us(ol),
            ol / ok
        ),
        (Some(ok), Some(ol)) => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB), but the overload latency does not grow with the buffer ({} → {}), so the data does not show the paper's trade-off {data}.",
            kpps(lossless(k)),
            kpps(lossless(last)),
            us(ok),
            us(ol)
        ),
        _ => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB), but overload latency is missing for {bk} or {bl} KiB (no sweep point with loss > 5%), so whether latency still grows is not shown {data}.",
            kpps(lossless(k)),
            kpps(lossless(last))
        ),
    }
}

pub(super) fn conclusion_low_load(study: &Study<'_>) -> String {
    let mut parts = Vec::new();
    let low: Vec<&&Loaded> = study
        .table
        .iter()
        .filter(|l| {
            l.point
                .load_fraction
                .is_some_and(|f| (f - 0.2).abs() < 1e-6)
        })
        .collect();
    if low.is_empty() {
        return "Latency at 20% load: no table points at 20% of the first-drop load, so buffers cannot be compared at low load.".into();
    }
    let mut ios: Vec<&str> = low.iter().map(|l| l.point.io.as_str()).collect();
    ios.sort_by_key(|i| (io_rank(i), *i));
    ios.dedup();
    for io_mode in ios {
        let pts: Vec<(usize, f64, Pct)> = low
            .iter()
            .filter(|l| l.point.io == io_mode)
            .filter_map(|l| Some((l.point.rcvbuf, l.mean_us()?, l.pct(&Quantile::P99))))
            .collect();
        let list: Vec<String> = pts
            .iter()
            .map(|(b, m, p99)| {
                format!(
                    "{} {} (p99 {})",
                    buf_kib(*b),
                    us(*m),
                    match p99 {
                        Pct::Value(v) => us(*v as f64 / 1000.0),
                        Pct::TooFew => "too few samples".into(),
                        Pct::Missing => "n/a".into(),
                    }
                )
            })
            .collect();
        if pts.len() < 2 {
            parts.push(format!(
                "{io_mode}: only one buffer has a 20% point with samples ({}), nothing to compare",
                list.join(", ")
            ));
            continue;
        }
        let lo = pts.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let hi = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        // Guest preemption puts millisecond outliers into every run; differences below 25% at
        // tens of microseconds are within this machine's run-to-run noise.
        let verdict = if hi <= lo * 1.25 {
            format!(
                "within {:.1}% of each other, so the buffer size does not matter at low load",
                (hi / lo - 1.0) * 100.0
            )
        } else {
            format!(
                "apart by a factor {:.2}, so the buffer size matters even at low load",
                hi / lo
            )
        };
        parts.push(format!(
            "{io_mode}: average latency {verdict} ({})",
            list.join(", ")
        ));
    }
    format!(
        "Latency at 20% of the first-drop load: {}.",
        parts.join("; ")
    )
}

pub(super) fn conclusion_batched(study: &Study<'_>) -> String {
    let (sb, bb) = (study.buffers("socket"), study.buffers("batched"));
    if sb.is_empty() || bb.is_empty() {
        return format!(
            "Batched vs socket: no comparison, there are no sweep points with I/O mode {}.",
            if sb.is_empty() { "socket" } else { "batched" }
        );
    }
    let common: Vec<usize> = sb.iter().copied().filter(|b| bb.contains(b)).collect();
    let Some(&rcvbuf) = common
        .iter()
        .find(|&&b| b == DEFAULT_RCVBUF)
        .or(common.last())
    else {
        return "Batched vs socket: the two modes share no buffer size, so their first-drop loads are not compared.".into();
    };
    let clients: BTreeSet<u32> = study
        .clients("socket")
        .into_iter()
        .filter(|c| study.clients("batched").contains(c))
        .collect();
    let mut parts = Vec::new();
    for c in clients {
        let (s, b) = (
            study.series("socket", rcvbuf, c),
            study.series("batched", rcvbuf, c),
        );
        let part = match (first_drop(s), first_drop(b)) {
            (Some(fs), Some(fb)) => format!("{c} clients: {} batched vs {} socket, ratio {:.2}", kpps(fb), kpps(fs), fb / fs),
            (Some(fs), None) => format!(
                "{c} clients: batched did not drop up to {} while socket dropped at {}, ratio > {:.2}",
                kpps(max_load(b)),
                kpps(fs),
                max_load(b) / fs
            ),
            (None, Some(fb)) => format!(
                "{c} clients: batched dropped at {} while socket did not drop up to {}, ratio < {:.2}",
                kpps(fb),
                kpps(max_load(s)),
                fb / max_load(s)
            ),
            (None, None) => format!("{c} clients: neither dropped (socket up to {}, batched up to {})", kpps(max_load(s)), kpps(max_load(b))),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        return "Batched vs socket: the two modes share no client count.".into();
    }
    format!(
        "Batched vs socket first-drop load ({} buffer): {}.",
        buf_kib(rcvbuf),
        parts.join("; ")
    )
}

pub(super) fn conclusion_clients(study: &Study<'_>) -> String {
    let io_mode = "socket";
    let Some(rcvbuf) = study.fig_buffer(io_mode) else {
        return "First drop vs clients: no socket sweep points.".into();
    };
    let rows: Vec<(u32, Option<f64>, f64)> = study
        .clients(io_mode)
        .into_iter()
        .map(|c| {
            let s = study.series(io_mode, rcvbuf, c);
            (c, first_drop(s), max_load(s))
        })
        .collect();
    let list: Vec<String> = rows
        .iter()
        .map(|(c, d, m)| {
            format!(
                "{c} clients: {}",
                d.map_or_else(|| format!("none up to {}", kpps(*m)), kpps)
            )
        })
        .collect();
    let data = format!("(socket, {} buffer; {})", buf_kib(rcvbuf), list.join(", "));
    let drops: Vec<(u32, f64)> = rows.iter().filter_map(|r| Some((r.0, r.1?))).collect();
    if drops.len() < 2 {
        return format!("First drop vs clients: fewer than two client counts dropped within the loads measured, so the trend is not shown {data}.");
    }
    let (c0, d0) = drops[0];
    let (cn, dn) = drops[drops.len() - 1];
    let monotone = drops.windows(2).all(|w| w[1].1 <= w[0].1);
    let shape = if dn < d0 {
        format!(
            "falls from {} at {c0} clients to {} at {cn} clients (÷{:.2}){}",
            kpps(d0),
            kpps(dn),
            d0 / dn,
            if monotone {
                ", never rising with more clients"
            } else {
                ", though not monotonically"
            }
        )
    } else {
        format!(
            "does not fall with the client count ({} at {c0} clients, {} at {cn} clients)",
            kpps(d0),
            kpps(dn)
        )
    };
    format!("First drop vs clients: the first-drop load {shape} {data}.")
}

pub(super) fn conclusion_flood(study: &Study<'_>) -> String {
    let base = study
        .flood
        .iter()
        .find(|l| l.point.rate_limit_pps.is_none() && l.point.rcvbuf == DEFAULT_RCVBUF);
    let limited = study
        .flood
        .iter()
        .find(|l| l.point.rate_limit_pps.is_some() && l.point.rcvbuf == DEFAULT_RCVBUF);
    let (Some(base), Some(limited)) = (base, limited) else {
        return format!(
            "Rate limit in the flood: missing the flood point {}, so its effect is not shown.",
            if base.is_none() {
                "with the default buffer and no rate limit"
            } else {
                "with the default buffer and the rate limit"
            }
        );
    };
    let rl = limited
        .point
        .server
        .get("rate_limited")
        .copied()
        .unwrap_or(0);
    let (metric, b, l) = match (base.pct(&Quantile::P99), limited.pct(&Quantile::P99)) {
        (Pct::Value(b), Pct::Value(l)) => ("p99", b as f64 / 1000.0, l as f64 / 1000.0),
        _ => match (base.mean_us(), limited.mean_us()) {
            (Some(b), Some(l)) => ("average (p99 has too few samples)", b, l),
            _ => return "Rate limit in the flood: a flood point has no latency samples from the normal clients, so the effect is not shown.".into(),
        },
    };
    let verdict = if l < b * 0.9 {
        format!(
            "the rate limit helped the normal clients ({:.0}% lower)",
            (1.0 - l / b) * 100.0
        )
    } else if l > b * 1.1 {
        format!(
            "the rate limit made it worse ({:.0}% higher)",
            (l / b - 1.0) * 100.0
        )
    } else {
        "the rate limit made no clear difference (within 10%)".into()
    };
    format!(
        "Rate limit in the flood: the normal clients' {metric} latency was {} with the rate limit vs {} without (default buffer, flood {}): {verdict}; the server counted {rl} rate-limited packets.",
        us(l),
        us(b),
        limited.point.flood_pps.map_or_else(|| "n/a".into(), kpps)
    )
}
