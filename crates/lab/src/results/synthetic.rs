//! A run summary no run measured: the start of a results folder built by a test or a tool.

use super::*;

impl RunSummary {
    /// A summary of `sent` probes at `achieved_pps` whose answers took the round trips of
    /// `latency` (the rest lost), and nothing else: the start of a results folder that no run
    /// measured (the tests of what reads them, and tools that build them).
    pub fn synthetic(
        label: &str,
        latency: &LatencyHistogram,
        sent: u64,
        achieved_pps: f64,
    ) -> RunSummary {
        let empty = empty_summary();
        let received = latency.len().min(sent);
        RunSummary {
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
            setup: RunSetup {
                label: label.to_string(),
                target: String::new(),
                topology: "remote".into(),
                pattern: "constant".into(),
                payload_bytes: latlab_wire::probe::HEADER_LEN,
                flows: 1,
                duration_s: if achieved_pps > 0.0 {
                    sent as f64 / achieved_pps
                } else {
                    0.0
                },
                warmup_s: 0.0,
                poll: "busy".into(),
                threads: "one-loop".into(),
                dir: None,
                traffic: None,
                link: None,
            },
            sent,
            received,
            lost: sent - received,
            unsent: 0,
            send_failed: BTreeMap::new(),
            raised: 0,
            loss_ratio: if sent == 0 {
                0.0
            } else {
                (sent - received) as f64 / sent as f64
            },
            reordered: 0,
            duplicated: 0,
            malformed: MalformedCounts::default(),
            warmup: WarmupCounts::default(),
            offered_pps: achieved_pps,
            achieved_pps,
            timestamp_source: "user-space".into(),
            start_time_unix_ns: 0,
            stopped_early: false,
            latency_ns: Summary::from_histogram(latency),
            send_lag_ns: empty.clone(),
            latency_from_actual_send_ns: Summary::from_histogram(latency),
            responder_dwell_ns: empty,
            clock: None,
            forward_ns: None,
            return_ns: None,
            one_way_impossible: 0,
            host: None,
            run_id: None,
            merged_from: Vec::new(),
            assertions: Vec::new(),
            placement: None,
            lost_by_cause: None,
            host_stalls: None,
            protocol: None,
        }
    }
}
