//! latlab-bench: how a forwarder is measured, sans-IO. No socket, thread or clock: the caller
//! runs each trial (a traffic source, the device under test, a counting sink) and hands the
//! counts in; this crate decides what to try next and what the numbers mean.
//!
//! - [`throughput`]: RFC 2544 26.1, the no-drop rate (NDR) and the partial drop rate (PDR,
//!   ≤ 0.5% lost) by binary search over trials, to a resolution or a trial limit.
//! - [`mlr`]: MLRsearch (RFC 9971, FD.io CSIT's method): every search goal (NDR, PDR, …) from
//!   one set of trials, each load judged on a sum of trial durations with an exceed ratio, so
//!   that a trial lost to a stall does not decide it; relevant bounds, conditional throughput.
//! - [`sweep`]: RFC 2544 26.3 frame loss rate (100% of the maximum rate down in 10% steps until
//!   two trials lose nothing) and 26.4 back-to-back (the longest burst without loss, by binary
//!   search on its length, repeated and averaged).
//! - [`latency`]: RFC 8219's typical latency, worst-case latency and PDV from every frame, with
//!   confidence intervals, and their medians over trials.
//! - [`cycles`]: where a forwarder's TSC cycles go per packet (receive, processing, transmit,
//!   buffer management), the timer's cost subtracted, checked against the whole run.
//! - [`kernel_steps`]: the same steps for kernel forwarders, from a sampling profile: kernel
//!   functions grouped into RX, TX, memory, skb and processing as the paper's Table II, and
//!   samples turned into cycles per packet.
//!
//! Guarantees: a search ends (each trial at least halves the interval left, and a trial limit
//! bounds it); PDR ≥ NDR; a trial with nothing back ends a search with
//! [`SearchError::DutSilent`], which keeps every point measured before it.
//!
//! This is its own crate, not part of `latlab-probe`: the probe crate is the latency prober's
//! schedules and meter, per packet; these are methods over whole trials of any traffic source
//! (the blaster, an external generator) and any device, and the forwarder's cycle accounting.
//!
//! ```
//! use latlab_bench::throughput::{Throughput, ThroughputConfig, PDR_LOSS};
//! use latlab_bench::TrialCounts;
//! let config = ThroughputConfig {
//!     min_rate_pps: 1_000,
//!     max_rate_pps: 1_000_000,
//!     resolution_pps: 1_000,
//!     pdr_loss: PDR_LOSS,
//!     max_trials: 30,
//! };
//! let mut search = Throughput::new(config)?;
//! // A device that forwards at most 250 000 frames per second, trials of one second.
//! while let Some(rate) = search.poll_trial() {
//!     search.handle_trial(rate, TrialCounts { sent: rate, received: rate.min(250_000) })?;
//! }
//! let ndr = search.outcome().unwrap().ndr.rate_pps.unwrap();
//! assert!((249_000..=250_000).contains(&ndr));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod bisect;
pub mod cycles;
pub mod kernel_steps;
pub mod latency;
pub mod mlr;
pub mod sweep;
pub mod throughput;
mod trial;

pub use trial::{ConfigError, SearchError, TrialCounts, TrialPoint};
