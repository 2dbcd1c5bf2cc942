//! Reading the bufferbloat study's points back, in the grid's order, with the lookups the
//! tables, figures and conclusions are drawn with.

use std::cmp::Ordering;
use std::path::Path;

use super::{BloatPoint, LeftOut, Queue};
use crate::{points, StudyError};

/// Every point of a results folder.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    /// The points: by queue (tail drop first, shallower before deeper, then the
    /// disciplines), congestion control (unloaded first), flows.
    pub(super) points: Vec<BloatPoint>,
    /// The queues left out, with the reason.
    pub(super) left_out: Vec<LeftOut>,
    /// `path: reason` for files that did not read.
    pub(super) skipped: Vec<String>,
}

impl Analysis {
    /// Reads `<out>/points`.
    pub(super) fn load(out: &Path) -> Result<Analysis, StudyError> {
        let mut a = Analysis::default();
        for f in points::load(out)?.files {
            let read = if f.key.ends_with("-left-out") {
                f.text.and_then(|t| {
                    serde_json::from_str(&t)
                        .map(|l| a.left_out.push(l))
                        .map_err(|e| e.to_string())
                })
            } else {
                f.text.and_then(|t| {
                    serde_json::from_str(&t)
                        .map(|p| a.points.push(p))
                        .map_err(|e| e.to_string())
                })
            };
            if let Err(e) = read {
                a.skipped.push(format!("{}: {e}", f.path.display()));
            }
        }
        a.sort();
        Ok(a)
    }

    /// The analysis of `points` (tests build it from constructed points).
    #[cfg(test)]
    pub(super) fn of(points: Vec<BloatPoint>) -> Analysis {
        let mut a = Analysis {
            points,
            left_out: Vec::new(),
            skipped: Vec::new(),
        };
        a.sort();
        a
    }

    /// Why the queues of `discipline` were left out, if they were.
    pub(super) fn left_out_reason(&self, discipline: &str) -> Option<&str> {
        self.left_out
            .iter()
            .find(|l| discipline_of(&l.queue) == discipline)
            .map(|l| l.reason.as_str())
    }

    fn sort(&mut self) {
        self.left_out
            .sort_by(|a, b| queue_order(&a.queue, &b.queue));
        self.points.sort_by(|a, b| {
            queue_order(&a.queue, &b.queue)
                .then_with(|| a.cc.cmp(&b.cc))
                .then_with(|| a.flows().cmp(&b.flows()))
        });
    }

    /// The queues measured, in order.
    pub(super) fn queues(&self) -> Vec<&str> {
        let mut queues: Vec<&str> = self.points.iter().map(|p| p.queue.as_str()).collect();
        queues.dedup();
        queues
    }

    /// The unloaded point of `queue`.
    pub(super) fn unloaded(&self, queue: &str) -> Option<&BloatPoint> {
        self.points
            .iter()
            .find(|p| p.queue == queue && p.flows() == 0)
    }

    /// The unloaded point of `queue`, or else the first unloaded point of any queue (with no
    /// flows every queue is the same empty link).
    pub(super) fn unloaded_or_any(&self, queue: &str) -> Option<&BloatPoint> {
        self.unloaded(queue)
            .or_else(|| self.points.iter().find(|p| p.flows() == 0))
    }

    /// The points with `flows` flows of `cc` through a queue of discipline `discipline`.
    pub(super) fn loaded<'a>(
        &'a self,
        discipline: &'a str,
        cc: &'a str,
        flows: usize,
    ) -> impl Iterator<Item = &'a BloatPoint> + 'a {
        self.points.iter().filter(move |p| {
            discipline_of(&p.queue) == discipline
                && p.cc.as_deref() == Some(cc)
                && p.flows() == flows
        })
    }
}

/// The discipline of a queue's text (`tail` of `tail:limit=1000`).
pub(super) fn discipline_of(queue: &str) -> &str {
    queue.split(':').next().unwrap_or(queue)
}

/// The value of `key` among a queue's keys (`1000` for `limit` of `tail:limit=1000`).
pub(super) fn key_of<'a>(queue: &'a str, key: &str) -> Option<&'a str> {
    queue
        .split(':')
        .skip(1)
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Tail drop first (by frame limit, shallow first), then CoDel, FQ-CoDel, PIE, DualPI2, then
/// any other discipline by name.
fn queue_order(a: &str, b: &str) -> Ordering {
    let rank = |q: &str| match discipline_of(q) {
        "tail" => 0,
        "codel" => 1,
        "fq_codel" => 2,
        "pie" => 3,
        "dualpi2" => 4,
        _ => 5,
    };
    let limit = |q: &str| key_of(q, "limit").and_then(|l| l.parse::<u64>().ok());
    rank(a)
        .cmp(&rank(b))
        .then_with(|| discipline_of(a).cmp(discipline_of(b)))
        .then_with(|| limit(a).cmp(&limit(b)))
        .then_with(|| a.cmp(b))
}

/// A percentile of a summary in ms (`p99`, `p99_9`), when it is a number.
pub(super) fn percentile_ms(s: &latlab_stats::Summary, key: &str) -> Option<f64> {
    let ns = s.percentile(key)?.estimate.value_ns()?;
    Some(ns as f64 / 1e6)
}

/// How long the queue of `queue` takes to drain when full of 1514-byte frames at
/// `rate_bps`, ms: its frame limit (1000 by default, the emulator's) times a frame's time.
pub(super) fn full_queue_ms(queue: &str, rate_bps: u64) -> Option<f64> {
    if rate_bps == 0 {
        return None;
    }
    let frames: f64 = match key_of(queue, "limit") {
        Some(l) => l.parse().ok()?,
        None if Queue::parse(queue).is_ok_and(|q| q.keys.is_empty()) => 1000.0,
        None => return None,
    };
    Some(frames * 1514.0 * 8.0 / rate_bps as f64 * 1e3)
}
