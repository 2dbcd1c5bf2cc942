//! Reading the timestamp study's points back, and what is computed from them: each method's
//! round trip on every probe, its excess over the reference, and the percentile up to which
//! it stays within a limit.

use std::path::Path;

use latlab_stats::{
    min_samples, point_rank, LatencyHistogram, Quantile, STANDARD_PERCENTILES, Z_95,
};

use super::{ProbeStamps, StampPoint};
use crate::{points, StudyError};

/// A way of measuring a probe's round trip from its stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// User clock after the receive call returned − user clock before the send call.
    UserSpace,
    /// The kernel's software receive stamp − user clock before the send call.
    KernelRx,
    /// The kernel's software receive stamp − its software transmit stamp.
    KernelTxRx,
    /// The XDP program's receive stamp − user clock before the send call (the prober over
    /// AF_XDP).
    XdpRx,
}

impl Method {
    /// Every method of a socket prober, the one closest to the wire last.
    pub const ALL: [Method; 3] = [Method::UserSpace, Method::KernelRx, Method::KernelTxRx];

    /// The methods a point's probes carry the stamps of: the user-space clock and the XDP
    /// program's stamp for the prober over AF_XDP, [`Method::ALL`] otherwise.
    pub fn on(point: &StampPoint) -> &'static [Method] {
        if point.prober_poll == "xdp" {
            &[Method::UserSpace, Method::XdpRx]
        } else {
            &Method::ALL
        }
    }

    /// The method's name in tables and legends.
    pub fn name(self) -> &'static str {
        match self {
            Method::UserSpace => "user-space",
            Method::KernelRx => "kernel-rx",
            Method::KernelTxRx => "kernel-tx-rx",
            Method::XdpRx => "xdp-rx",
        }
    }

    /// The round trip this method gives `probe`, ns; `None` when a stamp it needs is
    /// missing or the stamps run backwards.
    pub fn rtt_ns(self, probe: &ProbeStamps) -> Option<u64> {
        let (from, to) = match self {
            Method::UserSpace => (Some(probe.user_tx), Some(probe.user_rx)),
            Method::KernelRx => (Some(probe.user_tx), probe.kernel_rx),
            Method::KernelTxRx => (probe.kernel_tx, probe.kernel_rx),
            Method::XdpRx => (Some(probe.user_tx), probe.xdp_rx),
        };
        to?.checked_sub(from?)
    }

    /// The method's name with how the prober waited, for the user-space clock (`user-space
    /// (busy)`).
    pub fn label(self, point: &StampPoint) -> String {
        match self {
            Method::UserSpace if point.prober_poll == "sockperf" => "sockperf".to_string(),
            Method::UserSpace => format!("user-space ({})", point.prober_poll),
            other => other.name().to_string(),
        }
    }
}

/// Up to which percentile a method stays within a limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Within {
    /// Fewer samples than even the median needs.
    TooFewSamples {
        /// The samples there are.
        samples: u64,
        /// The samples the median needs.
        needed: u64,
    },
    /// Not even at the median.
    BelowMedian,
    /// Up to this percentile, the highest the samples can bound, and not at the next one.
    UpTo(Quantile),
    /// At every percentile the samples can bound, the highest being this one: more samples
    /// could show more.
    AtLeast(Quantile),
}

impl std::fmt::Display for Within {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Within::TooFewSamples { samples, needed } => {
                write!(f, "too few samples ({samples} of {needed})")
            }
            Within::BelowMedian => write!(f, "below p50"),
            Within::UpTo(q) => write!(f, "{}", q.label),
            Within::AtLeast(q) => write!(f, "≥ {}", q.label),
        }
    }
}

/// Up to which of the standard percentiles (p50 … p99.9999) the `ratios` (each sample's
/// deviation over its limit) stay at or below 1, at the percentiles the number of samples
/// can bound with a 95 % interval (latlab-stats' rule for "too few samples").
pub fn stays_within(ratios: &[f64]) -> Within {
    let n = ratios.len() as u64;
    let needed = min_samples(Quantile::P50.q, Z_95);
    if n < needed {
        return Within::TooFewSamples { samples: n, needed };
    }
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut last = None;
    for q in STANDARD_PERCENTILES {
        if n < min_samples(q.q, Z_95) {
            return last.map_or(Within::BelowMedian, Within::AtLeast);
        }
        let value = sorted[(point_rank(n, q.q) - 1) as usize];
        if value > 1.0 {
            return last.map_or(Within::BelowMedian, Within::UpTo);
        }
        last = Some(q);
    }
    last.map_or(Within::BelowMedian, Within::AtLeast)
}

/// `|measured − reference| / limit` for each pair, the limit being `abs_ns` or `relative` of
/// the reference, whichever the caller asks for.
pub fn ratios(pairs: &[(u64, u64)], limit: Limit) -> Vec<f64> {
    pairs
        .iter()
        .map(|&(measured, reference)| {
            let deviation = measured.abs_diff(reference) as f64;
            let limit = match limit {
                Limit::Ns(ns) => ns as f64,
                Limit::Fraction(f) => f * reference as f64,
            };
            deviation / limit.max(f64::MIN_POSITIVE)
        })
        .collect()
}

/// A limit on a deviation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// This many nanoseconds.
    Ns(u64),
    /// This fraction of the reference.
    Fraction(f64),
}

/// One method on one point: its round trips and the reference each is held against.
#[derive(Clone, Debug)]
pub struct MethodView {
    /// The method.
    pub method: Method,
    /// Its label on this point.
    pub label: String,
    /// (its round trip, the reference round trip) per probe that has the stamps it needs.
    pub vs_reference: Vec<(u64, u64)>,
    /// (its round trip, the kernel transmit-to-receive round trip of the same probe), for
    /// the probes that have both.
    pub vs_kernel: Vec<(u64, u64)>,
}

impl MethodView {
    /// The method's view of `point`.
    pub fn of(point: &StampPoint, method: Method) -> MethodView {
        let reference = point.reference_ns();
        let mut view = MethodView {
            method,
            label: method.label(point),
            vs_reference: Vec::new(),
            vs_kernel: Vec::new(),
        };
        for p in &point.probes {
            let Some(rtt) = method.rtt_ns(p) else {
                continue;
            };
            view.vs_reference.push((rtt, reference));
            if let Some(k) = Method::KernelTxRx.rtt_ns(p) {
                view.vs_kernel.push((rtt, k));
            }
        }
        view
    }

    /// Its round trips as a histogram.
    pub fn histogram(&self) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &(rtt, _) in &self.vs_reference {
            h.record(rtt);
        }
        h
    }

    /// Its excess over the reference (round trip − reference, 0 when below) as a histogram.
    pub fn excess(&self) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &(rtt, reference) in &self.vs_reference {
            h.record(rtt.saturating_sub(reference));
        }
        h
    }

    /// Its excess over the kernel transmit-to-receive stamps of the same probes as a
    /// histogram.
    pub fn over_kernel(&self) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &(rtt, kernel) in &self.vs_kernel {
            h.record(rtt.saturating_sub(kernel));
        }
        h
    }
}

/// Every point of a results folder.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    /// The points, by key.
    pub(super) points: Vec<StampPoint>,
    /// `path: reason` for files that did not read.
    pub(super) skipped: Vec<String>,
}

impl Analysis {
    /// Reads `<out>/points`, in the study's order.
    pub(super) fn load(out: &Path) -> Result<Analysis, StudyError> {
        let mut a = Analysis::default();
        let mut keyed = Vec::new();
        for f in points::load(out)?.files {
            match f
                .text
                .and_then(|t| serde_json::from_str::<StampPoint>(&t).map_err(|e| e.to_string()))
            {
                Ok(p) => keyed.push((f.key, p)),
                Err(e) => a.skipped.push(format!("{}: {e}", f.path.display())),
            }
        }
        let order: Vec<&str> = super::plan().iter().map(|p| p.key).collect();
        keyed.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(usize::MAX));
        a.points = keyed.into_iter().map(|(_, p)| p).collect();
        Ok(a)
    }

    /// The point of `setting`.
    pub(super) fn find(&self, setting: &str) -> Option<&StampPoint> {
        self.points.iter().find(|p| p.setting == setting)
    }
}

/// A percentile of `h` in µs with one decimal, or "too few samples".
pub(super) fn pct_us(h: &LatencyHistogram, q: Quantile) -> String {
    match latlab_stats::Estimate::of(h, q.q, Z_95).value_ns() {
        Some(v) => format!("{:.1}", v as f64 / 1000.0),
        None => "too few samples".into(),
    }
}
