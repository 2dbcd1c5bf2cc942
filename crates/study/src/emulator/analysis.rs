//! Reading the emulator study's points back: the latency points, the forwarding-rate points,
//! the files that did not read, and the lookups the tables and plots are drawn with.

use std::collections::BTreeMap;
use std::path::Path;

use latlab_emu::report::EmuDirectionJson;
use latlab_stats::Summary;

use super::{EmuPoint, RatePoint};
use crate::{points, StudyError};

/// Every point of a results folder.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    /// The latency, accuracy and loss points, by file name.
    pub(super) points: Vec<EmuPoint>,
    /// The forwarding-rate points, by path and frame size.
    pub(super) rate_points: Vec<RatePoint>,
    /// `path: reason` for files that did not read.
    pub(super) skipped: Vec<String>,
    /// The rates of the latency points, ascending.
    pub(super) rates: Vec<f64>,
}

impl Analysis {
    /// Reads `<out>/points`.
    pub(super) fn load(out: &Path) -> Result<Analysis, StudyError> {
        let mut a = Analysis::default();
        for f in points::load(out)?.files {
            let is_rate = f.file.starts_with("rate-");
            let parsed = if is_rate {
                f.text
                    .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                    .map(|p| a.rate_points.push(p))
            } else {
                f.text
                    .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                    .map(|p| a.points.push(p))
            };
            if let Err(e) = parsed {
                a.skipped.push(format!("{}: {e}", f.path.display()));
            }
        }
        a.rate_points
            .sort_by_key(|p| (p.path.clone(), p.frame_size));
        a.rates = a.points.iter().map(|p| p.rate_pps).collect();
        a.rates.sort_by(f64::total_cmp);
        a.rates.dedup();
        Ok(a)
    }

    /// The latency point of `path` at `delay` and `rate`.
    pub(super) fn find(&self, path: &str, delay: u64, rate: f64) -> Option<&EmuPoint> {
        self.points
            .iter()
            .find(|p| p.path == path && p.delay_ns == delay && p.rate_pps == rate)
    }

    /// The delays D > 0 measured through the emulator at `rate`, ascending.
    pub(super) fn delays(&self, rate: f64) -> Vec<u64> {
        let mut delays: Vec<u64> = self
            .points
            .iter()
            .filter(|p| p.path == "emu" && p.rate_pps == rate && p.delay_ns > 0)
            .map(|p| p.delay_ns)
            .collect();
        delays.sort();
        delays
    }

    /// The accuracy at every rate with a delay-0 point: per rate (pps), (D µs, mean error µs,
    /// std dev with D µs) per delay.
    pub(super) fn accuracy_series(&self) -> BTreeMap<u64, Vec<(f64, f64, f64)>> {
        let mut series: BTreeMap<u64, Vec<(f64, f64, f64)>> = BTreeMap::new();
        for &rate in &self.rates {
            let Some(base) = self.find("emu", 0, rate) else {
                continue;
            };
            for d in self.delays(rate) {
                let Some(pt) = self.find("emu", d, rate) else {
                    continue;
                };
                series.entry(rate as u64).or_default().push((
                    d as f64 / 1000.0,
                    mean_error(pt, base, d) / 1000.0,
                    pt.run.latency_ns.stddev_ns / 1000.0,
                ));
            }
        }
        series
    }

    /// The points that kept a per-packet trace.
    pub(super) fn traced(&self) -> Vec<&EmuPoint> {
        self.points
            .iter()
            .filter(|p| p.trace.as_ref().is_some_and(|t| !t.is_empty()))
            .collect()
    }
}

/// Mean latency with D, less the mean with no delay, less D, ns.
pub(super) fn mean_error(pt: &EmuPoint, base: &EmuPoint, d: u64) -> f64 {
    pt.run.latency_ns.mean_ns - base.run.latency_ns.mean_ns - d as f64
}

/// (p50, p99, max) of an emu point's A→B release error, ns.
pub(super) fn release(pt: &EmuPoint) -> (Option<f64>, Option<f64>, Option<f64>) {
    pt.emulator
        .as_ref()
        .map_or((None, None, None), |e| release_error(&e.a_to_b))
}

/// (p50, p99, max) of one direction's release error in an emulator report, ns.
pub(super) fn release_error(d: &EmuDirectionJson) -> (Option<f64>, Option<f64>, Option<f64>) {
    let e = &d.release_error_ns;
    (p(e, "p50"), p(e, "p99"), Some(e.max_ns as f64))
}

/// The cores the emulator used during an emu point (CPU time over elapsed time), if its
/// report says.
pub(super) fn emulator_cores(pt: &EmuPoint) -> Option<f64> {
    pt.emulator.as_ref()?.cpu.map(|c| c.cores)
}

/// A percentile of a summary, ns.
pub(super) fn p(summary: &Summary, key: &str) -> Option<f64> {
    summary
        .percentile(key)
        .and_then(|p| p.estimate.value_ns())
        .map(|v| v as f64)
}

/// ns as µs with one decimal, `-` when absent.
pub(super) fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}", v / 1000.0))
}
