//! latlab-probe: when to send probes, and what their responses say (sans-IO).
//!
//! This crate never touches a socket, a thread or the clock: every call takes `now` in
//! nanoseconds, and randomness comes from a seed in the configuration, so a run can be replayed
//! in virtual time exactly.
//!
//! - [`Schedule`]: open-loop send times, constant rate or Poisson, or the sizes and gaps of
//!   a [`Traffic`]: a game traffic model ([`model`], Table 1 of Harcsik et al.) or a replayed
//!   trace. The schedule never waits for
//!   a response, and a sender that falls behind sends the probes it owes at once.
//! - [`Sender`]: writes the probe header of each packet as it falls due.
//! - [`Meter`]: matches responses by flow and sequence number and records latency from the
//!   *intended* send time, so a stalled sender cannot hide its own delay (no coordinated
//!   omission). It counts duplicated, reordered and malformed responses and keeps warm-up
//!   samples out of the result.
//! - [`FanoutMeter`]: the same for a game server's fan-out, where every probe one client sends
//!   comes back at every client of its game; latency until the first and the last copy.
//! - [`Run`]: one whole generator run over a sender and a [`Metering`] meter: the start time
//!   ([`START_DELAY_NS`] after the run is made), which probe is due, the per-interval
//!   histograms, progress, and the stop rule (every probe back, or the grace period after the
//!   last send over). Engines only move packets; [`Run`]'s doc has the call order, and its
//!   [`Sending`] and [`Receiving`] halves serve a send thread and a receive thread.
//!
//! Order of calls for the bare parts: `Sender::poll_timeout` → `Sender::poll_transmit(now,
//! buf)` while it returns `Some` → the engine stamps the actual send time and sends →
//! `Meter::handle_response` for every datagram received → after the last send and a grace
//! period, `Meter::report` with the sender's counts.
//!
//! ```
//! use latlab_probe::{Meter, Pattern, ProbeConfig, Sender, Response};
//! let cfg = ProbeConfig { rate_pps: 1000.0, duration_ns: 10_000_000, ..ProbeConfig::default() };
//! let mut sender = Sender::new(&cfg).unwrap();
//! let mut meter = Meter::new(&cfg);
//! let mut buf = [0u8; 64];
//! let mut now = cfg.start_ns;
//! while let Some(due) = sender.poll_timeout() {
//!     now = now.max(due);
//!     let sent = sender.poll_transmit(now, &mut buf).unwrap();
//!     // ... the network echoes the probe back 20 µs later:
//!     assert!(matches!(meter.handle_response(now + 20_000, &buf), Response::Recorded { .. }));
//!     let _ = sent;
//! }
//! let report = meter.report(&sender.counts());
//! assert_eq!(report.received, 10);
//! assert_eq!(report.lost, 0);
//! // 20 µs, to the 3 significant digits the histogram keeps:
//! assert!((20_000..20_020).contains(&report.latency.max()));
//! ```
#![forbid(unsafe_code)]

mod fanout;
mod meter;
pub mod model;
pub mod protocol;
mod run;
mod schedule;
mod sender;

pub use fanout::{FanoutMeter, FanoutReport, FanoutResponse};
pub use meter::{Malformed, Meter, MeterReport, OneWay, Response, TRACE_CAP};
pub use run::{
    Interval, Live, Metering, Outcome, Progress, Receiving, Run, RunConfig, SendStatus, Sending,
    MAX_LEDGER_SLOTS, MIN_INTERVAL_NS, PROGRESS_NS, START_DELAY_NS,
};
pub use schedule::{Pattern, Schedule, Traffic};
pub use sender::{SendCounts, Sender, Transmit};

/// Errors in a probe configuration. Each message is the [`ProbeConfig`] field at fault,
/// spelled as in the struct ([`Error::field`]), then what it must be ([`Error::requirement`]),
/// so a front end can put its own option's name before the same requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The rate is not a finite number above zero.
    BadRate(f64),
    /// The rate is above [`MAX_RATE_PPS`]: due times closer than a nanosecond, which the
    /// schedule cannot tell apart.
    RateTooHigh(f64),
    /// The payload is too short to carry a probe header.
    SizeTooSmall {
        /// Requested payload size.
        got: usize,
        /// The probe header length.
        min: usize,
    },
    /// The payload does not fit in one UDP datagram.
    SizeTooLarge {
        /// Requested payload size.
        got: usize,
        /// Largest UDP payload.
        max: usize,
    },
    /// No flows.
    NoFlows,
    /// The traffic is a trace without a single message.
    EmptyTrace,
    /// A message of the traffic is longer than the payload buffers the run is sized for.
    TrafficTooLarge {
        /// The largest message of the traffic.
        largest: usize,
        /// The configured payload length.
        payload_len: usize,
    },
}

impl Error {
    /// The [`ProbeConfig`] field at fault: `rate_pps`, `payload_len`, `flows` or `traffic`.
    pub fn field(&self) -> &'static str {
        match self {
            Error::BadRate(_) | Error::RateTooHigh(_) => "rate_pps",
            Error::SizeTooSmall { .. } | Error::SizeTooLarge { .. } => "payload_len",
            Error::NoFlows => "flows",
            Error::EmptyTrace | Error::TrafficTooLarge { .. } => "traffic",
        }
    }

    /// What the field must be and what it was, the message without the field's name:
    /// `must be at least 1`.
    pub fn requirement(&self) -> String {
        match self {
            Error::BadRate(rate) => {
                format!("must be a number of packets per second above 0, not {rate}")
            }
            Error::RateTooHigh(rate) => format!(
                "must be at most 1e9 packets per second (one probe per nanosecond, the \
                 resolution of the send schedule), not {rate:e}"
            ),
            Error::SizeTooSmall { got, min } => {
                format!("must be at least {min} bytes (the probe header), not {got}")
            }
            Error::SizeTooLarge { got, max } => format!("must be at most {max} bytes, not {got}"),
            Error::NoFlows => "must be at least 1".into(),
            Error::EmptyTrace => "must hold at least one message; the trace is empty".into(),
            Error::TrafficTooLarge {
                largest,
                payload_len,
            } => format!("has messages of {largest} bytes, longer than payload_len {payload_len}"),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.field(), self.requirement())
    }
}

impl std::error::Error for Error {}

/// The highest rate a schedule keeps: one probe per nanosecond. Due times are whole
/// nanoseconds, so above it probes would be due at the same instant (at `1e30` every probe
/// of the run is due at its start); no sender comes near it (a 100 GbE link carries at most
/// 148.8 million of the smallest frames a second).
pub const MAX_RATE_PPS: f64 = 1e9;

/// Largest UDP payload over IPv4.
pub const MAX_PAYLOAD: usize = 65_507;

/// Everything the sender and the meter of one run agree on.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeConfig {
    /// Random per run; responses carrying another run's id are counted as malformed.
    pub run_id: u32,
    /// Number of flows; probes go round-robin over them. At least 1.
    pub flows: u32,
    /// UDP payload bytes per probe, at least the probe header.
    pub payload_len: usize,
    /// Send pattern.
    pub pattern: Pattern,
    /// Offered load over all flows, packets per second, above 0 and at most [`MAX_RATE_PPS`].
    pub rate_pps: f64,
    /// When the first probe is due (ns, the engine's clock).
    pub start_ns: u64,
    /// How long probes are sent, warm-up included.
    pub duration_ns: u64,
    /// The first part of the run whose responses are kept out of the result.
    pub warmup_ns: u64,
    /// Seed of the Poisson schedule, and of a traffic model.
    pub seed: u64,
    /// Messages of their own sizes and gaps instead of `pattern` at `rate_pps`: a traffic
    /// model or a replayed trace ([`Traffic`]). `payload_len` is then the largest datagram
    /// (at least the traffic's largest message); each probe has its message's size, raised
    /// to the probe header when smaller ([`SendCounts::raised`]). `rate_pps` should be the
    /// traffic's average rate ([`Traffic::rate_pps`]); the schedule does not use it.
    pub traffic: Option<Traffic>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            run_id: 0x4c4c_0001,
            flows: 1,
            payload_len: 64,
            pattern: Pattern::Constant,
            rate_pps: 1000.0,
            start_ns: 1_000_000_000,
            duration_ns: 1_000_000_000,
            warmup_ns: 0,
            seed: 1,
            traffic: None,
        }
    }
}

impl ProbeConfig {
    /// Checks the ranges documented on the fields.
    pub fn validate(&self) -> Result<(), Error> {
        if !(self.rate_pps.is_finite() && self.rate_pps > 0.0) {
            return Err(Error::BadRate(self.rate_pps));
        }
        if self.rate_pps > MAX_RATE_PPS {
            return Err(Error::RateTooHigh(self.rate_pps));
        }
        if self.payload_len < latlab_wire::probe::HEADER_LEN {
            return Err(Error::SizeTooSmall {
                got: self.payload_len,
                min: latlab_wire::probe::HEADER_LEN,
            });
        }
        if self.payload_len > MAX_PAYLOAD {
            return Err(Error::SizeTooLarge {
                got: self.payload_len,
                max: MAX_PAYLOAD,
            });
        }
        if self.flows == 0 {
            return Err(Error::NoFlows);
        }
        if let Some(traffic) = &self.traffic {
            if let Traffic::Trace(messages) = traffic {
                if messages.is_empty() {
                    return Err(Error::EmptyTrace);
                }
            }
            let largest = traffic.max_size();
            if largest > self.payload_len {
                return Err(Error::TrafficTooLarge {
                    largest,
                    payload_len: self.payload_len,
                });
            }
        }
        Ok(())
    }

    /// When sending stops.
    pub fn end_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.duration_ns)
    }

    /// Responses to probes due before this time are warm-up.
    pub fn measure_from_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.warmup_ns)
    }

    /// An upper bound on the probes one flow can send in this run (sequence numbers at or
    /// above it are not ours). Constant schedules send exactly rate × duration; Poisson ones
    /// are allowed ten standard deviations more; a [`Traffic`] says its own
    /// ([`Traffic::max_messages`]).
    pub fn max_probes_per_flow(&self) -> u64 {
        if let Some(traffic) = &self.traffic {
            let bound = traffic.max_messages(self.duration_ns);
            return bound.div_ceil(self.flows as u64) + 1;
        }
        let expected = self.rate_pps * self.duration_ns as f64 / 1e9;
        let bound = expected + 10.0 * expected.sqrt() + 16.0;
        (bound / self.flows as f64).ceil() as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_its_field_then_what_the_field_must_be() {
        let cases = [
            (
                Error::BadRate(0.0),
                "rate_pps must be a number of packets per second above 0, not 0",
            ),
            (
                Error::RateTooHigh(1e30),
                "rate_pps must be at most 1e9 packets per second (one probe per nanosecond, the \
                 resolution of the send schedule), not 1e30",
            ),
            (
                Error::SizeTooSmall { got: 10, min: 56 },
                "payload_len must be at least 56 bytes (the probe header), not 10",
            ),
            (Error::NoFlows, "flows must be at least 1"),
            (
                Error::EmptyTrace,
                "traffic must hold at least one message; the trace is empty",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
            assert_eq!(format!("{} {}", error.field(), error.requirement()), text);
        }
    }
}
