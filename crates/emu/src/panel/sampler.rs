//! The panel's charts' data: once a second, the engine's latest [`Snapshot`] (the one
//! `/metrics` and the live line read, so at most one copy of the counters more a second on the
//! engine's side), turned here, on the panel's thread, into one point per direction: what
//! crossed (frames/s, bit/s), what was dropped by cause, the queue, and the second's sojourn
//! and release-error percentiles (the cumulative histograms' difference over the second).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_engine::emulator::{DirectionSnapshot, EmulatorControl, Snapshot};
use latlab_stats::LatencyHistogram;
use serde_json::{json, Value};

/// Points kept: five minutes at one a second.
pub const POINTS: usize = 300;

/// How often a point is taken.
pub const EVERY: Duration = Duration::from_secs(1);

/// The points so far, and the snapshot the next one is measured from.
#[derive(Debug)]
pub struct Sampler {
    prev: Option<Arc<Snapshot>>,
    points: VecDeque<(u64, Value)>,
    seq: u64,
    next: Instant,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

/// A direction's drops by cause, cumulative:
/// `[loss, outage, queue, aqm, emulator, kernel, malformed]`.
fn drops(d: &DirectionSnapshot) -> [u64; 7] {
    let r = &d.report;
    [
        r.link.dropped_loss,
        r.link.dropped_outage,
        r.link.dropped_queue_frames + r.link.dropped_queue_bytes + r.queue_slots_full,
        r.link.aqm_drop + r.link.aqm_overflow,
        r.tx_ring_full + r.tx_too_long + r.tx_too_short,
        r.kernel_drops,
        r.link.dropped_runt + r.link.dropped_oversized,
    ]
}

/// The causes of a direction's drops, in the order the sampler counts them, as the page names them.
pub const CAUSES: [&str; 7] = [
    "loss",
    "outage",
    "queue",
    "aqm",
    "emulator",
    "kernel",
    "malformed",
];

/// p50 and p99 of what `now` holds beyond `before` (the same histogram later), ns.
fn window(now: &LatencyHistogram, before: Option<&LatencyHistogram>) -> Value {
    let mut h = now.as_hdr().clone();
    if let Some(before) = before {
        // Cannot fail: `before` is the same histogram earlier, so each count is at most now's.
        let _ = h.subtract(before.as_hdr());
    }
    if h.is_empty() {
        return json!({ "count": 0, "p50_ns": null, "p99_ns": null });
    }
    json!({
        "count": h.len(),
        "p50_ns": h.value_at_quantile(0.5),
        "p99_ns": h.value_at_quantile(0.99),
    })
}

fn direction(now: &DirectionSnapshot, before: &DirectionSnapshot, seconds: f64) -> Value {
    let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
    let (r, p) = (&now.report, &before.report);
    let (d_now, d_before) = (drops(now), drops(before));
    let by_cause: serde_json::Map<String, Value> = CAUSES
        .iter()
        .zip(d_now.iter().zip(d_before))
        .map(|(name, (n, b))| (name.to_string(), json!(n.saturating_sub(b))))
        .collect();
    json!({
        "frames_per_s": per_s(r.sent, p.sent),
        "arrived_per_s": per_s(r.arrived, p.arrived),
        "bits_per_s": per_s(r.bytes.sent, p.bytes.sent) * 8.0,
        "drops": by_cause,
        "queue_frames": now.queued_frames,
        "queue_bytes": now.queued_bytes,
        "sojourn": match &r.sojourn {
            Some(h) => window(h, p.sojourn.as_ref()),
            None => Value::Null,
        },
        "release": window(&r.release_error, Some(&p.release_error)),
    })
}

/// A direction's counts since the start: what arrived, what was sent, and drops by cause.
pub fn totals(d: &DirectionSnapshot) -> Value {
    let by_cause: serde_json::Map<String, Value> = CAUSES
        .iter()
        .zip(drops(d))
        .map(|(name, n)| (name.to_string(), json!(n)))
        .collect();
    json!({
        "arrived": d.report.arrived,
        "sent": d.report.sent,
        "drops": by_cause,
        "queue_frames": d.queued_frames,
    })
}

impl Sampler {
    /// No point yet; the first is taken at once.
    pub fn new() -> Sampler {
        Sampler {
            prev: None,
            points: VecDeque::new(),
            seq: 0,
            next: Instant::now(),
        }
    }

    /// Takes a point if one is due at `now` (the engine has up to 300 ms to publish).
    pub fn tick(&mut self, now: Instant, control: &EmulatorControl) {
        if now < self.next {
            return;
        }
        self.next = now + EVERY;
        let Some(snap) = control.snapshot(Duration::from_millis(300)) else {
            return;
        };
        if let Some(prev) = &self.prev {
            if snap.at_ns > prev.at_ns {
                let seconds = (snap.at_ns - prev.at_ns) as f64 / 1e9;
                self.seq += 1;
                let point = json!({
                    "seq": self.seq,
                    "t_s": snap.at_ns as f64 / 1e9,
                    "a_to_b": direction(&snap.a_to_b, &prev.a_to_b, seconds),
                    "b_to_a": direction(&snap.b_to_a, &prev.b_to_a, seconds),
                });
                self.points.push_back((self.seq, point));
                if self.points.len() > POINTS {
                    self.points.pop_front();
                }
            }
        }
        self.prev = Some(snap);
    }

    /// The points after `since` (a point's `seq`; 0: all kept).
    pub fn since(&self, since: u64) -> Vec<Value> {
        self.points
            .iter()
            .filter(|(seq, _)| *seq > since)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// The latest snapshot, for the totals.
    pub fn latest(&self) -> Option<&Snapshot> {
        self.prev.as_deref()
    }
}
