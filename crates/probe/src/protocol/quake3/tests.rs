//! getinfo queries and infoResponses, and whole runs in virtual time against a fake engine
//! that rate-limits as ioquake3 does.

use std::sync::Arc;

use super::*;
use crate::protocol::ProtocolReport;
use crate::run::{Run, RunConfig};
use crate::{Pattern, ProbeConfig};

const MADE_AT: u64 = 1_000_000_000;

fn query(run: u32, seq: u64) -> Vec<u8> {
    let (mut requests, _) = Quake3.split(run, &[]);
    let mut buf = [0u8; 64];
    let written = requests.write(
        Request {
            flow: 0,
            seq,
            warmup: false,
        },
        &mut buf,
    );
    assert!(written.len <= Quake3.max_request_len());
    buf[..written.len].to_vec()
}

/// The engine's answer to `query`, with `clients` of 8.
fn answer(query: &[u8], clients: u32) -> Vec<u8> {
    let challenge = &query[b"\xff\xff\xff\xffgetinfo ".len()..];
    let mut out = format!(
        "\u{0}\u{0}\u{0}\u{0}infoResponse\n\\sv_maxclients\\8\\clients\\{clients}\\mapname\\oa_dm1\\challenge\\"
    )
    .into_bytes();
    out[..4].fill(0xff);
    out.extend_from_slice(challenge);
    out
}

const SENT: Sent = Sent {
    seq: 0,
    intended_ns: 0,
    actual_ns: 0,
    aux: 0,
};

#[test]
fn a_query_is_getinfo_with_sixteen_hex_digits() {
    let q = query(7, 3);
    assert_eq!(q.len(), 4 + 8 + 16);
    assert_eq!(Quake3.max_request_len(), q.len());
    assert!(q.starts_with(b"\xff\xff\xff\xffgetinfo "));
    assert!(q[12..]
        .iter()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_ne!(query(7, 4), q);
    assert_ne!(query(8, 3), q);
}

#[test]
fn challenges_give_back_their_sequence_number_and_no_other_runs() {
    for run in [0, 7, u32::MAX] {
        let key = Challenges::new(run);
        for seq in [0, 1, 1 << 39, crate::protocol::token::SEQ_MASK] {
            assert_eq!(key.seq(&key.challenge(seq)), Ok(Some(seq)));
        }
    }
    assert_eq!(
        Challenges::new(2).seq(&Challenges::new(1).challenge(5)),
        Ok(None)
    );
    let key = Challenges::new(7);
    assert_eq!(key.seq(b"abc"), Err("challenge not latlab's"));
    assert_eq!(key.seq(b"ABCDEF0123456789"), Err("challenge not latlab's"));
}

#[test]
fn an_answer_names_its_query_and_says_whether_the_server_is_full() {
    let (_, mut replies) = Quake3.split(7, &[]);
    let reply = answer(&query(7, 42), 3);
    assert_eq!(replies.read(0, &reply), Ok(Read::Answer(Key::Seq(42))));
    let verdict = replies.judge(0, &SENT, &reply).unwrap();
    assert_eq!(
        (OUTCOMES[verdict.outcome], verdict.server_ns),
        ("info", None)
    );
    let full = answer(&query(7, 42), 8);
    let verdict = replies.judge(0, &SENT, &full).unwrap();
    assert_eq!(OUTCOMES[verdict.outcome], "info, server full");
    let other = answer(&query(8, 42), 0);
    assert_eq!(
        replies.read(0, &other),
        Ok(Read::Answer(Key::Seq(u64::MAX)))
    );
}

#[test]
fn what_is_no_answer_is_named() {
    let (_, mut replies) = Quake3.split(7, &[]);
    let cases: [(&[u8], &str); 6] = [
        (b"\x01\x02\x03\x04infoResponse\n", "not out-of-band"),
        (b"\xff\xff", "not out-of-band"),
        (
            b"\xff\xff\xff\xffstatusResponse\n\\a\\b\n",
            "not an infoResponse",
        ),
        (
            b"\xff\xff\xff\xffinfoResponse\n\\a",
            "malformed info string",
        ),
        (b"\xff\xff\xff\xffinfoResponse\n\\a\\b", "no challenge"),
        (
            b"\xff\xff\xff\xffinfoResponse\n\\challenge\\xyz",
            "challenge not latlab's",
        ),
    ];
    for (bytes, cause) in cases {
        assert_eq!(replies.read(0, bytes), Err(cause), "{bytes:?}");
    }
}

#[test]
fn the_limit_note_names_the_engines_limiter_above_one_query_a_second() {
    assert_eq!(Quake3.limit_note(0.2), None);
    assert_eq!(Quake3.limit_note(1.0), None);
    let note = Quake3.limit_note(5.0).unwrap();
    assert!(note.contains("5.0 queries/s"), "{note}");
    assert!(note.contains("SVC_RateLimitAddress"), "{note}");
    assert!(note.contains("not loss on the path"), "{note}");
    assert!(!note.contains("SVC_RateLimit)"), "{note}");
    assert!(Quake3
        .limit_note(50.0)
        .unwrap()
        .contains("from all addresses"));
}

/// ioquake3's leaky bucket (`SVC_RateLimit`): `burst` at once, then one per `period_ns`.
struct Bucket {
    held: u64,
    last_ns: u64,
}

impl Bucket {
    fn admits(&mut self, now: u64, burst: u64, period_ns: u64) -> bool {
        let interval = now - self.last_ns;
        let expired = interval / period_ns;
        if expired > self.held {
            self.held = 0;
            self.last_ns = now;
        } else {
            self.held -= expired;
            self.last_ns = now - interval % period_ns;
        }
        if self.held < burst {
            self.held += 1;
            return true;
        }
        false
    }
}

/// `seconds` of queries at `pps` (no warm-up) through a fake engine that answers after
/// 40 µs what its per-address bucket admits.
fn run(pps: f64, seconds: u64) -> ProtocolReport {
    let config = RunConfig {
        probe: ProbeConfig {
            pattern: Pattern::Constant,
            rate_pps: pps,
            duration_ns: seconds * 1_000_000_000,
            warmup_ns: 0,
            run_id: 7,
            ..ProbeConfig::default()
        },
        grace_ns: 500_000_000,
        interval_ns: 1_000_000_000,
        live: false,
    };
    let locals = ["198.18.0.1:40000".parse().unwrap()];
    let target = "198.18.0.2:27960".parse().unwrap();
    let mut run = Run::with_protocol(&config, MADE_AT, Arc::new(Quake3), &locals, target).unwrap();
    let mut bucket = Bucket {
        held: 0,
        last_ns: MADE_AT,
    };
    let (mut now, mut buf) = (MADE_AT, vec![0u8; 64]);
    let mut flight: Vec<(u64, Vec<u8>)> = Vec::new();
    loop {
        while let Some(t) = run.poll_transmit(now, &mut buf) {
            if bucket.admits(now, 10, 1_000_000_000) {
                flight.push((now + 40_000, answer(&buf[..t.len], 0)));
            }
            run.handle_sent(now, 1);
        }
        flight.retain(|(at, bytes)| {
            if *at <= now {
                run.handle_datagram(now, 0, *at, bytes);
            }
            *at > now
        });
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        let next = flight
            .iter()
            .map(|(at, _)| *at)
            .fold(run.poll_timeout(), u64::min);
        now = next.max(now + 1);
    }
    let outcome = run.finish(now);
    outcome.meter.protocol_report(&outcome.counts)
}

#[test]
fn under_the_engines_limit_every_query_is_answered_with_its_challenge() {
    let report = run(0.9, 30);
    assert_eq!(report.answered, 27);
    assert_eq!(report.unanswered, 0);
    assert_eq!(
        report.outcomes,
        vec![("info", 27), ("info, server full", 0)]
    );
    assert!(report.malformed.is_empty() && report.wrong_id == 0);
}

#[test]
fn over_it_the_burst_and_one_a_second_are_answered() {
    // 5/s for 20 s: the burst of 10, then one a second.
    let report = run(5.0, 20);
    assert_eq!(report.answered + report.unanswered, 100);
    assert!(
        report.answered.abs_diff(10 + 20) <= 1,
        "{}",
        report.answered
    );
    assert!(report.malformed.is_empty() && report.wrong_id == 0);
}
