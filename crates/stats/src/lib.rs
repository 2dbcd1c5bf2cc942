//! Latency statistics for latlab: recording, summarizing and storing latency
//! distributions down to the 99.9999th percentile.
//!
//! - [`LatencyHistogram`] records nanosecond latencies into an HdrHistogram
//!   (3 significant digits by default, 1 ns to 1 h). Recording never fails and never
//!   drops a sample: values above one hour are clamped and counted as
//!   [saturated](LatencyHistogram::saturated).
//! - [`Summary`] reports count, min, mean, standard deviation, max and the
//!   [`STANDARD_PERCENTILES`], each with a distribution-free 95 % confidence interval
//!   from order statistics ([`rank_interval`]). A percentile that the sample is too
//!   small to bound is [`Estimate::TooFewSamples`], never a number: 10 000 samples
//!   say nothing about p99.9999, which needs [`min_samples`] (3.8 million) of them.
//! - [`ccdf`] gives the tail curve, with a lossless CSV form ([`write_ccdf_csv`],
//!   [`read_ccdf_csv`]).
//! - [`compare`] gives NEW's percentile against BASE's, with a 95 % bootstrap interval.
//! - [`gate`] decides latency gates (`p99 <= 2 ms`, `loss <= 0.1 %`) from those intervals:
//!   pass, fail, or inconclusive with the samples that would likely decide it.
//! - [`stalls`] keeps the host's stall floor, the gaps in a loop's own progress, beside the
//!   latencies it may explain.
//! - [`hlog`] writes and reads HdrHistogram interval logs that HdrHistogram's own
//!   tools (`HistogramLogProcessor`, plotters) understand.
//!
//! All bucket arithmetic is the `hdrhistogram` crate's; values reported from the
//! histogram are exact to within its resolution (10^-sigfig relative).
//!
//! ```
//! use latlab_stats::{Estimate, LatencyHistogram, Summary};
//!
//! let mut h = LatencyHistogram::new();
//! for i in 1..=10_000u64 {
//!     h.record(i * 1_000); // 1 µs ..= 10 ms
//! }
//! let summary = Summary::from_histogram(&h);
//!
//! let p50 = &summary.percentile("p50").expect("a standard percentile").estimate;
//! let Estimate::Value { value_ns, ci_low_ns, ci_high_ns } = *p50 else { unreachable!() };
//! assert!(value_ns.abs_diff(5_000_000) <= 5_000); // within 0.1 %
//! assert!(ci_low_ns <= value_ns && value_ns <= ci_high_ns);
//!
//! let tail = &summary.percentile("p99_9999").expect("a standard percentile").estimate;
//! assert!(matches!(tail, Estimate::TooFewSamples { samples: 10_000, .. }));
//! ```

#![forbid(unsafe_code)]

mod ccdf;
pub mod compare;
mod error;
pub mod gate;
mod histogram;
pub mod hlog;
mod quantile;
pub mod stalls;
mod summary;

pub use ccdf::{ccdf, read_ccdf_csv, write_ccdf_csv, CcdfPoint, CCDF_CSV_HEADER};
pub use error::Error;
pub use histogram::{
    LatencyHistogram, DEFAULT_SIGFIG, HIGHEST_TRACKABLE_NS, LOWEST_DISCERNIBLE_NS,
};
pub use quantile::{
    min_samples, point_rank, rank_interval, Quantile, MAX_KEY_FRACTION_DIGITS,
    STANDARD_PERCENTILES, Z_95,
};
pub use summary::{Estimate, PercentileEstimate, Summary};

/// Re-exported so that users of [`LatencyHistogram::as_hdr`] need not depend on it.
pub use hdrhistogram;
