//! What one `stream send` run measured: the `--json` file and the table on the terminal.

use latlab_stats::{CcdfPoint, Estimate, Summary, STANDARD_PERCENTILES};
use serde::{Deserialize, Serialize};

use super::wire::WireCounts;
use latlab_lab::gate::{AssertionVerdict, Measured};
use latlab_lab::units::format_us;

/// Everything one run measured, as `--json` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// The latlab version that wrote it.
    pub latlab_version: String,
    /// The transport and its options (`tcp:cc=cubic,thin`).
    pub transport: String,
    /// Whether the transport delivers every message.
    pub reliable: bool,
    /// The receiver.
    pub target: String,
    /// Bytes per message (with a model: the mean).
    pub size: usize,
    /// Gap between messages, ns (with a model: the mean).
    pub interval_ns: u64,
    /// The traffic model the messages followed (`--model`); absent for one size at one
    /// interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// Messages of the model smaller than the message header, sent at the header's size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub raised: u64,
    /// How long the sender sent, ns.
    pub duration_ns: u64,
    /// When the first message was due, ns since the Unix epoch.
    pub start_time_unix_ns: u64,
    /// Cut short by a stopping signal.
    pub stopped_early: bool,
    /// What the run set on sockets and in its namespace (`TCP_CONGESTION cubic`,
    /// `TCP_RTO_MIN_US 10000`; on a kernel without that option,
    /// `net.ipv4.tcp_rto_min_us=10000 in the sender's network namespace …`).
    pub settings: Vec<String>,
    /// Messages handed to the transport.
    pub sent: u64,
    /// Distinct messages delivered to the receiving application.
    pub delivered: u64,
    /// `sent - delivered`.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Messages delivered after one sent later.
    pub reordered: u64,
    /// Deliveries that were not messages of this run.
    pub malformed: u64,
    /// Datagrams or bytes the transport dropped as not its own (sender + receiver).
    pub foreign: u64,
    /// `Some` when a reliable transport lost messages: the run failed.
    pub failure: Option<String>,
    /// One-way application latency: delivery at the receiving application − the intended send
    /// time at the sending one (`CLOCK_REALTIME`, shared by the namespaces of a host).
    pub latency_ns: Summary,
    /// The CCDF of that latency.
    pub ccdf: Vec<CcdfPoint>,
    /// What the transport put on the wire.
    pub wire: WireReport,
    /// The `--assert` gates decided on the run; absent when none were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<AssertionVerdict>,
}

/// What the transport put on the wire in each direction, against the messages alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WireReport {
    /// Sender → receiver (data, retransmissions, handshakes).
    pub forward: WireCounts,
    /// Receiver → sender (acknowledgements, handshakes).
    pub reverse: WireCounts,
    /// Bytes plain UDP would have put on the wire for the messages sent: one datagram per
    /// message, `sent × (size + IP and UDP headers)`.
    pub udp_baseline_bytes: u64,
    /// (forward + reverse bytes) / `udp_baseline_bytes`.
    pub bytes_ratio: f64,
    /// The messages' own bytes: `sent × size` (the UDP payload of plain UDP).
    pub payload_bytes: u64,
    /// (forward + reverse bytes) / `payload_bytes`: wire bytes per byte of message.
    pub payload_ratio: f64,
    /// (forward + reverse packets) / messages sent.
    pub packets_per_message: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl WireReport {
    /// The report of `forward` and `reverse` for `sent` messages of `size` bytes, each of
    /// which would cost `overhead` header bytes as a UDP datagram.
    pub fn new(
        forward: WireCounts,
        reverse: WireCounts,
        sent: u64,
        size: usize,
        overhead: u64,
    ) -> WireReport {
        WireReport::of_payload(forward, reverse, sent, sent * size as u64, overhead)
    }

    /// As [`WireReport::new`], for `sent` messages of `payload_bytes` together (messages of
    /// differing sizes).
    pub fn of_payload(
        forward: WireCounts,
        reverse: WireCounts,
        sent: u64,
        payload_bytes: u64,
        overhead: u64,
    ) -> WireReport {
        let udp_baseline_bytes = payload_bytes + sent * overhead;
        let ratio = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64
            }
        };
        WireReport {
            forward,
            reverse,
            udp_baseline_bytes,
            bytes_ratio: ratio(forward.bytes + reverse.bytes, udp_baseline_bytes),
            payload_bytes,
            payload_ratio: ratio(forward.bytes + reverse.bytes, payload_bytes),
            packets_per_message: ratio(forward.packets + reverse.packets, sent),
        }
    }
}

impl StreamSummary {
    /// What a gate is decided on: the one-way application latency, messages sent and lost,
    /// and the rate they were sent at.
    pub fn measured(&self) -> Measured<'_> {
        Measured {
            latency: &self.latency_ns,
            forward: None,
            back: None,
            sent: self.sent,
            lost: self.lost,
            achieved_pps: if self.duration_ns > 0 {
                self.sent as f64 / (self.duration_ns as f64 / 1e9)
            } else {
                0.0
            },
            sent_name: "messages",
            host_stalls: None,
        }
    }

    /// The table printed at the end of a run.
    pub fn text(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row("transport", self.transport.clone());
        row(
            "messages",
            format!(
                "{} B every {}",
                self.size,
                format_us(self.interval_ns as f64)
            ),
        );
        if let Some(model) = &self.traffic {
            row(
                "traffic",
                format!(
                    "model {model} (size and gap above are its means; {} raised to the header)",
                    self.raised
                ),
            );
        }
        row("sent", self.sent.to_string());
        row("delivered", self.delivered.to_string());
        let lost_pct = if self.sent == 0 {
            0.0
        } else {
            100.0 * self.lost as f64 / self.sent as f64
        };
        row("lost", format!("{} ({lost_pct:.3}%)", self.lost));
        row("duplicated", self.duplicated.to_string());
        row("reordered", self.reordered.to_string());
        row("malformed", (self.malformed + self.foreign).to_string());
        let l = &self.latency_ns;
        row("average", format_us(l.mean_ns));
        for q in STANDARD_PERCENTILES {
            if !matches!(q.key, "p50" | "p99" | "p99_9") {
                continue;
            }
            let text = match l.percentile(q.key).map(|p| &p.estimate) {
                Some(Estimate::Value {
                    value_ns,
                    ci_low_ns,
                    ci_high_ns,
                }) => format!(
                    "{} [{} – {}]",
                    format_us(*value_ns as f64),
                    format_us(*ci_low_ns as f64),
                    format_us(*ci_high_ns as f64)
                ),
                Some(Estimate::TooFewSamples { needed, .. }) => {
                    format!("too few samples (needs {needed})")
                }
                None => "-".into(),
            };
            row(q.label, text);
        }
        row("max", format_us(l.max_ns as f64));
        let w = &self.wire;
        let dir = |c: &WireCounts| {
            format!(
                "{} packets, {} bytes{}{}",
                c.packets,
                c.bytes,
                c.retransmissions
                    .map_or(String::new(), |r| format!(", {r} retransmissions")),
                c.spurious_retransmissions
                    .map_or(String::new(), |r| format!(" ({r} spurious)"))
            )
        };
        row("wire, forward", dir(&w.forward));
        row("wire, reverse", dir(&w.reverse));
        row(
            "wire vs plain UDP",
            format!(
                "{:.2}× the bytes ({:.2}× the messages' own), {:.2} packets per message",
                w.bytes_ratio, w.payload_ratio, w.packets_per_message
            ),
        );
        for s in &self.settings {
            row("set", s.clone());
        }
        let width = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (k, v) in rows {
            out.push_str(&format!("{k:width$}  {v}\n"));
        }
        out.push_str(
            "latency: one way, from the intended send time at the sender to delivery at the \
             receiving application; percentiles with their 95% confidence interval\n",
        );
        if let Some(f) = &self.failure {
            out.push_str(&format!("FAILED: {f}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_report_compares_both_directions_with_plain_udp() {
        let fwd = WireCounts {
            packets: 110,
            bytes: 110 * 128,
            retransmissions: Some(10),
            spurious_retransmissions: None,
        };
        let rev = WireCounts {
            packets: 100,
            bytes: 100 * 52,
            retransmissions: Some(0),
            spurious_retransmissions: None,
        };
        let r = WireReport::new(fwd, rev, 100, 100, 28);
        assert_eq!(r.udp_baseline_bytes, 12_800);
        assert!((r.bytes_ratio - (14_080.0 + 5_200.0) / 12_800.0).abs() < 1e-12);
        assert!((r.packets_per_message - 2.1).abs() < 1e-12);
        assert_eq!(r.payload_bytes, 10_000);
        assert!((r.payload_ratio - 1.928).abs() < 1e-12);
        let empty = WireReport::new(WireCounts::default(), WireCounts::default(), 0, 100, 28);
        assert_eq!(empty.bytes_ratio, 0.0);
    }
}
