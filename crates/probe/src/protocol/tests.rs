//! A protocol run in virtual time, with a toy protocol and a server that misbehaves on cue.

use std::net::SocketAddr;
use std::sync::Arc;

use super::*;
use crate::{ProbeConfig, Run, RunConfig};

/// Requests are the 8-byte sequence number, big-endian, after a 4-byte run id; a reply is the
/// request, with one more byte: the outcome (0 or 1). With `one`, no token: one in flight.
#[derive(Debug)]
struct Toy {
    one: bool,
    ids: Option<u64>,
}

struct ToyRequests;
struct ToyReplies {
    run_id: u32,
    one: bool,
}

impl Protocol for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }
    fn max_request_len(&self) -> usize {
        12
    }
    fn one_in_flight(&self) -> bool {
        self.one
    }
    fn id_space(&self) -> Option<u64> {
        self.ids
    }
    fn outcomes(&self) -> &'static [&'static str] {
        &["good", "bad"]
    }
    fn split(&self, run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let _ = run_id;
        (
            Box::new(ToyRequests),
            Box::new(ToyReplies {
                run_id,
                one: self.one,
            }),
        )
    }
}

thread_local! {
    static RUN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl Requests for ToyRequests {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        buf[..4].copy_from_slice(&RUN.with(|r| r.get()).to_be_bytes());
        buf[4..12].copy_from_slice(&request.seq.to_be_bytes());
        Written {
            len: 12,
            aux: request.seq as u32 ^ 0x55,
        }
    }
}

impl Replies for ToyReplies {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        if payload.len() != 13 {
            return Err("not toy");
        }
        if self.one {
            return Ok(Read::Answer(Key::Oldest));
        }
        if payload[..4] != self.run_id.to_be_bytes() {
            return Ok(Read::Answer(Key::Slot(u64::MAX)));
        }
        let seq = u64::from_be_bytes(payload[4..12].try_into().unwrap());
        Ok(Read::Answer(Key::Seq(seq)))
    }
    fn judge(&mut self, _flow: u32, sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        if sent.aux != sent.seq as u32 ^ 0x55 {
            return Err("aux lost");
        }
        match payload[12] {
            0 | 1 => Ok(Verdict {
                outcome: usize::from(payload[12]),
                server_ns: Some(1_000),
            }),
            _ => Err("another thing"),
        }
    }
}

const TARGET: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9);

fn config(rate: f64, flows: u32) -> RunConfig {
    RunConfig {
        probe: ProbeConfig {
            run_id: 4242,
            flows,
            rate_pps: rate,
            duration_ns: 100_000_000,
            warmup_ns: 10_000_000,
            ..ProbeConfig::default()
        },
        grace_ns: 50_000_000,
        interval_ns: 1_000_000_000,
        live: false,
    }
}

/// What the server does with the `k`-th request it sees.
type Server<'a> = dyn FnMut(u64, &[u8]) -> Vec<(u64, SocketAddr, Vec<u8>)> + 'a;

/// Runs the toy protocol against `server` (given each request and its send time, it returns the
/// datagrams it sends back: when, from where, what).
fn run(
    config: &RunConfig,
    toy: Toy,
    server: &mut Server<'_>,
) -> (ProtocolReport, crate::MeterReport) {
    RUN.with(|r| r.set(config.probe.run_id));
    let locals: Vec<SocketAddr> = (0..config.probe.flows)
        .map(|f| SocketAddr::from(([127, 0, 0, 1], 4000 + f as u16)))
        .collect();
    let mut run = Run::with_protocol(config, 0, Arc::new(toy), &locals, TARGET).unwrap();
    let mut buf = [0u8; 64];
    let mut now = 0;
    let mut flight: Vec<(u64, usize, SocketAddr, Vec<u8>)> = Vec::new();
    loop {
        while let Some(t) = run.poll_transmit(now, &mut buf) {
            run.handle_sent(now, 1);
            for (at, from, bytes) in server(now, &buf[..t.len]) {
                flight.push((at, t.flow as usize, from, bytes));
            }
        }
        flight.sort_by_key(|f| f.0);
        while flight.first().is_some_and(|f| f.0 <= now) {
            let (at, flow, from, bytes) = flight.remove(0);
            run.handle_datagram_from(now, flow, (at, from, false), &bytes);
        }
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        now = flight
            .iter()
            .map(|f| f.0)
            .fold(run.poll_timeout(), u64::min);
    }
    let outcome = run.finish(now);
    (
        outcome.meter.protocol_report(&outcome.counts),
        outcome.meter.report(&outcome.counts),
    )
}

fn answer(bytes: &[u8], outcome: u8) -> Vec<u8> {
    let mut reply = bytes.to_vec();
    reply.push(outcome);
    reply
}

#[test]
fn every_reply_is_matched_by_its_token_and_the_rest_counted_by_cause() {
    let mut k = 0u64;
    let mut server = |now: u64, req: &[u8]| {
        k += 1;
        let back = |d: u64, bytes: Vec<u8>| (now + d, TARGET, bytes);
        match k % 10 {
            // Lost.
            1 => vec![],
            // Answered twice, the copy later.
            2 => vec![back(30_000, answer(req, 0)), back(40_000, answer(req, 0))],
            // Garbage, then the answer.
            3 => vec![back(10_000, vec![1, 2, 3]), back(30_000, answer(req, 1))],
            // From another address only.
            4 => vec![(
                now + 30_000,
                SocketAddr::from(([10, 0, 0, 1], 9)),
                answer(req, 0),
            )],
            // Another run's token, then the answer.
            5 => {
                let mut other = answer(req, 0);
                other[0] ^= 0xff;
                vec![back(5_000, other), back(30_000, answer(req, 0))]
            }
            // An answer that does not answer: counted as a mismatch.
            6 => vec![back(30_000, answer(req, 7))],
            _ => vec![back(30_000, answer(req, 0))],
        }
    };
    let (p, r) = run(
        &config(1000.0, 2),
        Toy {
            one: false,
            ids: None,
        },
        &mut server,
    );
    // 100 requests, 10 of them warm-up; per ten: 1 lost, 1 from elsewhere only, 1 mismatch.
    assert_eq!(r.sent + r.warmup_sent, 100);
    assert_eq!(p.answered + p.unanswered, r.sent);
    assert_eq!(p.wrong_source, 10);
    assert_eq!(p.duplicate, 10);
    assert_eq!(p.malformed.get("not toy"), Some(&10));
    assert_eq!(p.wrong_id, 10);
    assert_eq!(p.mismatch.get("another thing"), Some(&10));
    let outcomes: u64 = p.outcomes.iter().map(|o| o.1).sum();
    assert_eq!(outcomes, 70, "every answer once, warm-up included");
    assert_eq!(p.outcomes[1], ("bad", 10));
    assert_eq!(r.received + r.warmup_received, 70);
    assert_eq!(p.unanswered, r.sent - r.received);
    assert!((30_000..30_100).contains(&r.latency.max()));
    // The server's own microsecond is taken out of the path.
    assert_eq!(p.server_time.len(), r.received);
    assert!(p.path.max() < r.latency_from_actual.max());
}

#[test]
fn a_reply_after_its_slot_was_reused_is_late_not_matched() {
    // A ledger of 64 slots: the first request answered after 99 newer ones.
    let mut first = None;
    let mut server = |now: u64, req: &[u8]| {
        let reply = answer(req, 0);
        if first.is_none() {
            first = Some(reply);
            return vec![];
        }
        let mut out = vec![(now + 10_000, TARGET, reply)];
        if req[4..12] == 99u64.to_be_bytes() {
            out.push((now + 20_000, TARGET, first.clone().unwrap()));
        }
        out
    };
    let (p, _) = run(
        &config(1000.0, 1),
        Toy {
            one: false,
            ids: Some(64),
        },
        &mut server,
    );
    assert_eq!(p.slots, 64);
    assert_eq!(p.late, 1);
    assert_eq!(p.wrong_id, 0);
    assert_eq!(
        p.ids_reused, 1,
        "slot 0 was taken again while request 0 was unanswered"
    );
}

#[test]
fn without_a_token_one_request_is_in_flight_per_flow_and_the_rest_is_busy() {
    // 10k a second over 2 flows, answered after 250 µs: each flow can carry one request in
    // 250 µs, so about half of what falls due waits and is not sent.
    let mut server = |now: u64, req: &[u8]| vec![(now + 250_000, TARGET, answer(req, 0))];
    let (p, r) = run(
        &config(10_000.0, 2),
        Toy {
            one: true,
            ids: None,
        },
        &mut server,
    );
    assert!(p.one_in_flight);
    assert!(p.busy > 0);
    assert_eq!(p.unanswered, 0, "every request sent was answered");
    // Busy requests were never sent: the schedule's 1000 requests are sent or busy.
    assert_eq!(r.sent + r.warmup_sent + p.busy, 1000);
    // (To the histogram's three digits.)
    assert!(r.latency.min() >= 249_000);
    assert!(r.latency.max() < 260_000);
}

#[test]
fn a_lost_request_does_not_hold_its_flow_past_the_grace_period() {
    // The first request is lost: its flow waits the grace period (50 ms), then goes on.
    let mut k = 0;
    let mut server = |now: u64, req: &[u8]| {
        k += 1;
        if k == 1 {
            return vec![];
        }
        vec![(now + 10_000, TARGET, answer(req, 0))]
    };
    let (p, r) = run(
        &config(1000.0, 1),
        Toy {
            one: true,
            ids: None,
        },
        &mut server,
    );
    // Due in the 49 ms after it; the one due 50 ms after it goes.
    assert_eq!(p.busy, 49, "due while the lost one was awaited");
    assert_eq!(r.sent + r.warmup_sent, 51);
    assert_eq!(r.received + r.warmup_received, 50);
}
