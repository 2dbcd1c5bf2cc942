//! The send half of a run ([`Sending`]) and how far it is ([`SendStatus`]).

use super::*;
use crate::protocol::{Ledger, Request, Requests, Sent};
use std::sync::Arc;

/// How far the send half is: what the receive half needs for progress and the stop rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendStatus {
    /// Probes the engine reported sent, warm-up included.
    pub sent: u64,
    /// When the last probe left (or sending ended without it), once sending is over.
    pub finished_at: Option<u64>,
}

/// The send half of a run: the schedule, and which probes the engine has sent.
///
/// Call order: [`poll_timeout`](Sending::poll_timeout) for when the next probe is due;
/// [`poll_transmit`](Sending::poll_transmit) while it returns `Some` (and the engine has room);
/// the engine stamps and sends, then reports what left with
/// [`handle_sent`](Sending::handle_sent) (or [`handle_send_failed`](Sending::handle_send_failed)
/// for those its port could not send). Sending is over once the schedule is exhausted and
/// every probe handed out was reported sent or failed.
#[derive(Debug)]
pub struct Sending {
    sender: Sender,
    handed: u64,
    pub(super) sent: u64,
    failed: u64,
    pub(super) first_send_ns: Option<u64>,
    pub(super) last_send_ns: u64,
    finished_at: Option<u64>,
    /// The schedule was ended early ([`Sending::stop`]).
    stopped: bool,
    /// The protocol's send half, when the run speaks one.
    protocol: Option<ProtocolSend>,
}

/// The send half of a protocol run: who writes the requests, where they are recorded.
struct ProtocolSend {
    requests: Box<dyn Requests>,
    ledger: Arc<Ledger>,
    one_in_flight: bool,
    /// How long a one-in-flight flow waits for an answer before its next request goes anyway.
    timeout_ns: u64,
    /// Requests not sent because their flow waited: (warm-up, measured).
    busy: (u64, u64),
}

impl std::fmt::Debug for ProtocolSend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolSend")
            .field("one_in_flight", &self.one_in_flight)
            .field("busy", &self.busy)
            .finish_non_exhaustive()
    }
}

impl Sending {
    /// The send half of the run `probe` describes (its `start_ns` is taken as it is).
    pub fn new(probe: &ProbeConfig) -> Result<Sending, Error> {
        Ok(Sending {
            sender: Sender::new(probe)?,
            handed: 0,
            sent: 0,
            failed: 0,
            first_send_ns: None,
            last_send_ns: 0,
            finished_at: None,
            stopped: false,
            protocol: None,
        })
    }

    /// The send half of a run whose requests `requests` writes (a [`crate::protocol`]
    /// run), each recorded in `ledger`; with `one_in_flight`, a request due while its flow
    /// still waits (for less than `timeout_ns`) for its last one is not sent and is counted
    /// as busy.
    pub fn with_protocol(
        probe: &ProbeConfig,
        requests: Box<dyn Requests>,
        ledger: Arc<Ledger>,
        one_in_flight: bool,
        timeout_ns: u64,
    ) -> Result<Sending, Error> {
        let mut sending = Sending::new(probe)?;
        sending.protocol = Some(ProtocolSend {
            requests,
            ledger,
            one_in_flight,
            timeout_ns,
            busy: (0, 0),
        });
        Ok(sending)
    }

    /// Whether the engine stamps the actual send time into each payload (latlab's probes);
    /// a protocol's requests are not touched once written.
    pub fn stamps_payload(&self) -> bool {
        self.protocol.is_none()
    }

    /// When the next probe is due; `None` when the schedule has nothing more.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.stopped {
            return None;
        }
        self.sender.poll_timeout()
    }

    /// Ends the schedule at `now` (a stopping signal): no probe is handed out after it, and
    /// sending is over once those already handed out are reported sent or failed. What was
    /// sent is still waited for, for the grace period, as at the schedule's own end: a probe
    /// in flight at the stop is not lost.
    pub fn stop(&mut self, now: u64) {
        self.stopped = true;
        self.check_finished(now);
    }

    /// If a probe is due at `now`, writes its header into `buf` and returns it (see
    /// [`Sender::poll_transmit`]); the engine sends it and reports it with `handle_sent`.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        if self.stopped {
            self.check_finished(now);
            return None;
        }
        loop {
            let Some(mut t) = self.sender.poll_transmit(now, buf) else {
                self.check_finished(now);
                return None;
            };
            if let Some(p) = &mut self.protocol {
                let warmup = t.intended_ns < self.sender.config().measure_from_ns();
                if p.one_in_flight && p.ledger.waiting(t.flow) {
                    let waited = p
                        .ledger
                        .last(t.flow)
                        .map_or(0, |s| now - s.intended_ns.min(now));
                    if waited < p.timeout_ns {
                        if warmup {
                            p.busy.0 += 1;
                        } else {
                            p.busy.1 += 1;
                        }
                        continue;
                    }
                }
                let request = Request {
                    flow: t.flow,
                    seq: t.seq,
                    warmup,
                };
                let written = p.requests.write(request, buf);
                t.len = written.len;
                p.ledger.record(
                    t.flow,
                    Sent {
                        seq: t.seq,
                        intended_ns: t.intended_ns,
                        actual_ns: now,
                        aux: written.aux,
                    },
                );
            }
            self.handed += 1;
            return Some(t);
        }
    }

    /// `count` of the probes handed out left at `tx_ns` (the actual send time stamped in them).
    pub fn handle_sent(&mut self, tx_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        debug_assert!(
            self.sent + count <= self.handed,
            "more sent than handed out"
        );
        self.sent += count;
        self.first_send_ns.get_or_insert(tx_ns);
        self.last_send_ns = tx_ns;
        self.check_finished(tx_ns);
    }

    /// `count` of the probes handed out could not be sent (the port reported them unsent
    /// and dropped them) at `now`: nothing comes back for them, and they count as lost.
    pub fn handle_send_failed(&mut self, now: u64, count: u64) {
        if count == 0 {
            return;
        }
        debug_assert!(self.sent + self.failed + count <= self.handed);
        self.failed += count;
        self.check_finished(now);
    }

    /// Probes handed out that could not be sent.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    fn check_finished(&mut self, now: u64) {
        if self.finished_at.is_none()
            && self.poll_timeout().is_none()
            && self.sent + self.failed >= self.handed
        {
            self.finished_at = Some(now);
        }
    }

    /// Probes sent and whether sending is over.
    pub fn status(&self) -> SendStatus {
        SendStatus {
            sent: self.sent,
            finished_at: self.finished_at,
        }
    }

    /// Whether sending is over: nothing more due and nothing handed out left unsent.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }

    /// The sender's counts (warm-up, measured, per flow, unsent).
    pub fn counts(&self) -> SendCounts {
        let mut counts = self.sender.counts();
        if let Some(p) = &self.protocol {
            counts.warmup -= p.busy.0;
            counts.measured -= p.busy.1;
            counts.busy = p.busy.0 + p.busy.1;
        }
        counts
    }

    /// The run's probe configuration, start time included.
    pub fn config(&self) -> &ProbeConfig {
        self.sender.config()
    }
}
