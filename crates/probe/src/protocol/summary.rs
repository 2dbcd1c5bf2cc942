//! A protocol run's counts as results keep them ([`ProtocolSummary`]: `summary.json`'s
//! `protocol`) and as the report prints them.

use std::collections::BTreeMap;

use latlab_stats::Summary;
use serde::{Deserialize, Serialize};

use super::ProtocolReport;

/// A protocol run's own counts, as `summary.json` keeps them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProtocolSummary {
    /// `dns`, `memcached`…
    pub name: String,
    /// Measured requests answered.
    pub answered: u64,
    /// Measured requests sent and never answered.
    pub unanswered: u64,
    /// Answers that came after their slot held a newer request.
    pub late: u64,
    /// Second and later answers to one request.
    pub duplicate: u64,
    /// Replies naming no request of this run.
    pub wrong_id: u64,
    /// Replies from another address than the target.
    pub wrong_source: u64,
    /// Datagrams that are no reply of the protocol, by cause.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub malformed: BTreeMap<String, u64>,
    /// Replies to a request they do not answer, by cause.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mismatch: BTreeMap<String, u64>,
    /// Replies by outcome (warm-up included), every outcome of the protocol named.
    pub outcomes: BTreeMap<String, u64>,
    /// Requests written over an unanswered one of the same ID.
    #[serde(default)]
    pub ids_reused: u64,
    /// Requests not sent because their flow waited (one in flight per flow).
    #[serde(default)]
    pub busy: u64,
    /// `open-loop`, or `open-loop across flows only` (one request in flight per flow).
    pub schedule: String,
    /// The server's own time per reply, where the protocol says it (NTP's T3 − T2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time_ns: Option<Summary>,
    /// The path's round trip with the server's time taken out (RFC 5905's delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_ns: Option<Summary>,
    /// What the server's own limits do to the run (quake3's per-address rate limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

impl ProtocolSummary {
    /// The summary of `report`.
    pub fn new(report: &ProtocolReport) -> ProtocolSummary {
        let owned =
            |m: &BTreeMap<&'static str, u64>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let timed = |h: &latlab_stats::LatencyHistogram| {
            (!h.is_empty()).then(|| Summary::from_histogram(h))
        };
        ProtocolSummary {
            name: report.protocol.to_string(),
            answered: report.answered,
            unanswered: report.unanswered,
            late: report.late,
            duplicate: report.duplicate,
            wrong_id: report.wrong_id,
            wrong_source: report.wrong_source,
            malformed: owned(&report.malformed),
            mismatch: owned(&report.mismatch),
            outcomes: report
                .outcomes
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            ids_reused: report.ids_reused,
            busy: report.busy,
            schedule: if report.one_in_flight {
                "open-loop across flows only".into()
            } else {
                "open-loop".into()
            },
            server_time_ns: timed(&report.server_time),
            path_ns: timed(&report.path),
            limit: None,
        }
    }

    /// Several runs' counts as one (`latlab merge`): summed when every run spoke the same
    /// protocol, `None` when one spoke none or another. The server-time and path summaries
    /// are dropped (they are not histograms that add); the limit note is the first run's.
    pub fn merged<'a>(
        runs: impl IntoIterator<Item = Option<&'a ProtocolSummary>>,
    ) -> Option<ProtocolSummary> {
        let mut merged: Option<ProtocolSummary> = None;
        for run in runs {
            let run = run?;
            let Some(m) = merged.as_mut() else {
                let mut first = run.clone();
                first.server_time_ns = None;
                first.path_ns = None;
                merged = Some(first);
                continue;
            };
            if m.name != run.name || m.schedule != run.schedule {
                return None;
            }
            m.answered += run.answered;
            m.unanswered += run.unanswered;
            m.late += run.late;
            m.duplicate += run.duplicate;
            m.wrong_id += run.wrong_id;
            m.wrong_source += run.wrong_source;
            m.ids_reused += run.ids_reused;
            m.busy += run.busy;
            for (into, from) in [
                (&mut m.malformed, &run.malformed),
                (&mut m.mismatch, &run.mismatch),
                (&mut m.outcomes, &run.outcomes),
            ] {
                for (k, v) in from {
                    *into.entry(k.clone()).or_default() += v;
                }
            }
        }
        merged
    }

    /// The lines the report prints: what came back, by outcome and by cause.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{}: {} answered, {} unanswered, {} late, {} duplicate, {} wrong id, {} from \
             another address",
            self.name,
            self.answered,
            self.unanswered,
            self.late,
            self.duplicate,
            self.wrong_id,
            self.wrong_source
        );
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!("\n  outcomes: {}", list(&self.outcomes)));
        if !self.malformed.is_empty() {
            out.push_str(&format!("\n  malformed: {}", list(&self.malformed)));
        }
        if !self.mismatch.is_empty() {
            out.push_str(&format!(
                "\n  not answering their request: {}",
                list(&self.mismatch)
            ));
        }
        if self.ids_reused > 0 {
            out.push_str(&format!(
                "\n  {} requests took an ID still outstanding (more in flight than IDs: add \
                 --flows)",
                self.ids_reused
            ));
        }
        if self.schedule != "open-loop" {
            out.push_str(&format!(
                "\n  schedule: {} (no token: one request in flight per flow; {} due while \
                 their flow waited were not sent)",
                self.schedule, self.busy
            ));
        }
        if let (Some(server), Some(path)) = (&self.server_time_ns, &self.path_ns) {
            let us = |s: &Summary, key: &str| {
                s.percentile(key)
                    .and_then(|p| p.estimate.value_ns())
                    .map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3))
            };
            out.push_str(&format!(
                "\n  server's own time p50 {} µs, p99 {} µs; path without it p50 {} µs, p99 {} µs",
                us(server, "p50"),
                us(server, "p99"),
                us(path, "p50"),
                us(path, "p99")
            ));
        }
        if let Some(limit) = &self.limit {
            out.push_str(&format!("\n  {limit}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, answered: u64) -> ProtocolSummary {
        ProtocolSummary {
            name: name.into(),
            answered,
            unanswered: 1,
            late: 0,
            duplicate: 2,
            wrong_id: 0,
            wrong_source: 0,
            malformed: [("not dns".to_string(), 3)].into(),
            mismatch: BTreeMap::new(),
            outcomes: [("NOERROR".to_string(), answered)].into(),
            ids_reused: 0,
            busy: 0,
            schedule: "open-loop".into(),
            server_time_ns: None,
            path_ns: None,
            limit: None,
        }
    }

    #[test]
    fn runs_of_one_protocol_merge_by_sums_and_of_two_not_at_all() {
        let (a, b) = (run("dns", 10), run("dns", 5));
        let m = ProtocolSummary::merged([Some(&a), Some(&b)]).unwrap();
        assert_eq!((m.answered, m.unanswered, m.duplicate), (15, 2, 4));
        assert_eq!(m.malformed["not dns"], 6);
        assert_eq!(m.outcomes["NOERROR"], 15);
        let other = run("stun", 1);
        assert_eq!(ProtocolSummary::merged([Some(&a), Some(&other)]), None);
        assert_eq!(ProtocolSummary::merged([Some(&a), None]), None);
        // The report's line names every count.
        assert!(m
            .text()
            .starts_with("dns: 15 answered, 2 unanswered, 0 late, 4 duplicate"));
    }
}
