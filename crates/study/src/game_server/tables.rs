//! Table I (`table1.md`, `table1.csv`) and the flood table (`flood.md`) of the game-server
//! study.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use latlab_stats::Quantile;

use super::analysis::{buf_label, kpps, pct_ns, pct_text, pct_us, Study};
use super::{Point, DEFAULT_RCVBUF, QUANTILES};

// ---------------------------------------------------------------------------------------------
// Table I

pub(super) fn table1_md(study: &Study<'_>) -> String {
    let mut s = String::new();
    let clients: BTreeSet<u32> = study.table.iter().map(|l| l.point.clients).collect();
    let clients: Vec<String> = clients.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        s,
        "Table I. Latency until the last client has its copy, {} clients\n",
        if clients.is_empty() {
            "–".to_string()
        } else {
            clients.join("/")
        }
    );
    if study.table.is_empty() {
        s.push_str("No table points were measured.\n");
        return s;
    }
    s.push_str("| I/O | Buffer [KiB] | Load* [%] (offered) | Samples | Average [µs] | Std. Dev. [µs] | 50th Perc. [µs] | 95th Perc. [µs] | 99th Perc. [µs] | 99.9th Perc. [µs] | Loss [%] |\n");
    s.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for l in &study.table {
        let p = &l.point;
        let load = match p.load_fraction {
            Some(f) => format!("{} ({})", pct_text(f), kpps(p.load_pps)),
            None => kpps(p.load_pps),
        };
        let avg = l
            .mean_us()
            .map_or_else(|| "no samples".into(), |v| format!("{v:.1}"));
        let std = l
            .std_us()
            .map_or_else(|| "no samples".into(), |v| format!("{v:.1}"));
        let pcts: Vec<String> = QUANTILES.iter().map(|q| pct_us(l.pct(q))).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            p.io,
            buf_label(p.rcvbuf),
            load,
            l.count(),
            avg,
            std,
            pcts.join(" | "),
            p.loss_ratio * 100.0
        );
    }
    s.push_str("\n*) Normalized to the load at which more than 5% of the copies were first lost (the first-drop load), i.e. a load ≥ 100% is an overload scenario. \"too few samples\": the sample cannot bound that percentile with 95% confidence.\n");
    s
}

pub(super) fn table1_csv(study: &Study<'_>) -> String {
    let mut s = String::from(
        "io,clients,rcvbuf_bytes,rcvbuf_kib,load_fraction,load_pps,samples,mean_ns,stddev_ns,p50_ns,p95_ns,p99_ns,p99_9_ns,loss_ratio\n",
    );
    for l in &study.table {
        let p = &l.point;
        let (mean, std) = if l.count() > 0 {
            (
                format!("{:.1}", p.latency_last_ns.mean_ns),
                format!("{:.1}", p.latency_last_ns.stddev_ns),
            )
        } else {
            (String::new(), String::new())
        };
        let pcts: Vec<String> = QUANTILES.iter().map(|q| pct_ns(l.pct(q))).collect();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            p.io,
            p.clients,
            p.rcvbuf,
            p.rcvbuf / 1024,
            p.load_fraction.map_or_else(String::new, |f| f.to_string()),
            p.load_pps,
            l.count(),
            mean,
            std,
            pcts.join(","),
            p.loss_ratio
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The flood

pub(super) fn flood_label(p: &Point) -> String {
    let mut s = if p.rcvbuf == DEFAULT_RCVBUF {
        format!("default buffer ({} KiB)", p.rcvbuf / 1024)
    } else {
        format!("{} KiB buffer", p.rcvbuf / 1024)
    };
    if let Some(r) = p.rate_limit_pps {
        let _ = write!(s, " + per-client rate limit {r:.0} pps");
    }
    s
}

pub(super) fn flood_md(study: &Study<'_>) -> String {
    let mut s = String::from("Flood: one client floods the server while the measuring client plays; latency of the normal clients (until the last has its copy).\n\n");
    if study.flood.is_empty() {
        s.push_str("No flood points were measured.\n");
        return s;
    }
    s.push_str("| Scenario | I/O | Clients | Flood | Flood sent | From flooder | Dropped in XDP | Load | Samples | Average [µs] | 50th [µs] | 99th [µs] | 99.9th [µs] | Max [µs] | Loss [%] | rate_limited | received |\n");
    s.push_str(
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for l in &study.flood {
        let p = &l.point;
        let counter = |k: &str| {
            p.server
                .get(k)
                .map_or_else(|| "n/a".into(), |v| v.to_string())
        };
        // Only an xdp server with the rate limit has a program that drops.
        let in_xdp = if p.io == "xdp" && p.rate_limit_pps.is_some() {
            counter("xdp_rate_limited")
        } else {
            "–".into()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} |",
            flood_label(p),
            p.io,
            p.clients,
            p.flood_pps.map_or_else(|| "n/a".into(), kpps),
            p.flood_sent.map_or_else(|| "n/a".into(), |n| n.to_string()),
            counter("from_flooder"),
            in_xdp,
            kpps(p.load_pps),
            l.count(),
            l.mean_us()
                .map_or_else(|| "no samples".into(), |v| format!("{v:.1}")),
            pct_us(l.pct(&Quantile::P50)),
            pct_us(l.pct(&Quantile::P99)),
            pct_us(l.pct(&Quantile::P99_9)),
            if l.count() > 0 {
                format!("{:.1}", p.latency_last_ns.max_ns as f64 / 1000.0)
            } else {
                "no samples".into()
            },
            p.loss_ratio * 100.0,
            counter("rate_limited"),
            counter("received"),
        );
    }
    s.push_str("\nFlood: packets per second offered; Flood sent: packets the flooder sent; From flooder: what the server's loop received from the flooder (its join handshake included); Dropped in XDP: the flooder's packets the XDP program's per-source limit dropped before user space (xdp with the rate limit only); Loss: the normal clients' copies lost.\n");
    let limited: Vec<String> = study
        .flood
        .iter()
        .filter(|l| l.point.rate_limit_pps.is_some() && l.point.rcvbuf == DEFAULT_RCVBUF)
        .map(|l| format!("{} {:.2}%", l.point.io, l.point.loss_ratio * 100.0))
        .collect();
    if !limited.is_empty() {
        let _ = writeln!(
            s,
            "\nNormal clients' loss during the flood with the rate limit on (default buffer): {}. Target over xdp: under {:.0}%{}.",
            limited.join(", "),
            FLOOD_LOSS_TARGET * 100.0,
            match study.flood.iter().find(|l| {
                l.point.io == "xdp"
                    && l.point.rate_limit_pps.is_some()
                    && l.point.rcvbuf == DEFAULT_RCVBUF
            }) {
                Some(l) if l.point.loss_ratio < FLOOD_LOSS_TARGET => " (met)",
                Some(_) => " (missed)",
                None => " (no xdp point)",
            }
        );
    }
    s
}

/// The normal clients' copy loss the xdp server must stay under during a flood at three times
/// its capacity with the rate limit on (issue 10).
const FLOOD_LOSS_TARGET: f64 = 0.01;
