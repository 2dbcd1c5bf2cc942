//! NTP requests and replies, and whole runs in virtual time against a fake server.

use std::sync::Arc;

use super::*;
use crate::protocol::ProtocolReport;
use crate::run::{Run, RunConfig};
use crate::{Pattern, ProbeConfig};

const MADE_AT: u64 = 1_000_000_000;

fn target() -> SocketAddr {
    "198.18.0.2:123".parse().unwrap()
}

fn request(seq: u64) -> [u8; 48] {
    let (mut requests, _) = Ntp.split(7, &[]);
    let mut buf = [0u8; 64];
    let written = requests.write(
        Request {
            flow: 0,
            seq,
            warmup: false,
        },
        &mut buf,
    );
    assert_eq!(written.len, 48);
    buf[..48].try_into().unwrap()
}

/// A server's reply to `request`: stratum 8, T2 at `t2`, T3 `dwell_ns` later.
fn reply(request: &[u8], t2: u64, dwell_ns: u64) -> Vec<u8> {
    let asked = Repr::parse(&Packet::new_checked(request).unwrap()).unwrap();
    let repr = Repr {
        leap: 0,
        version: 4,
        mode: Mode::Server,
        stratum: 8,
        poll: 0,
        precision: -25,
        root_delay: 0,
        root_dispersion: 0,
        reference_id: [127, 127, 1, 1],
        reference: Timestamp::from_unix_ns(t2 - 1_000_000_000),
        origin: asked.transmit,
        receive: Timestamp::from_unix_ns(t2),
        transmit: Timestamp::from_unix_ns(t2 + dwell_ns),
    };
    let mut out = vec![0u8; 48];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    out
}

#[test]
fn a_request_is_a_version_4_client_packet_carrying_its_token() {
    let bytes = request(5);
    let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    assert_eq!(bytes[0], 0x23);
    assert_eq!(Repr::client(r.transmit), r);
    assert_ne!(r.transmit.0, 0);
    assert_ne!(request(6), bytes);
}

#[test]
fn tokens_give_back_their_sequence_number_and_no_other_runs() {
    for run in [0, 1, 7, u32::MAX] {
        let key = RunKey::new(run, SALT);
        for seq in [0, 1, 2, 1 << 39, crate::protocol::token::SEQ_MASK] {
            let token = key.token(seq);
            assert_ne!(token, 0, "a zero origin is no reply's");
            assert_eq!(key.seq(token), Some(seq));
        }
    }
    let (a, b) = (RunKey::new(1, SALT), RunKey::new(2, SALT));
    assert_eq!(b.seq(a.token(3)), None);
}

#[test]
fn a_reply_names_its_request_and_says_the_servers_time() {
    let (_, mut replies) = Ntp.split(7, &[]);
    let bytes = reply(&request(9), 1_796_189_123_000_000_000, 25_000);
    assert_eq!(replies.read(0, &bytes), Ok(Read::Answer(Key::Seq(9))));
    let sent = Sent {
        seq: 9,
        intended_ns: 0,
        actual_ns: 0,
        aux: 0,
    };
    let verdict = replies.judge(0, &sent, &bytes).unwrap();
    assert_eq!(OUTCOMES[verdict.outcome], "synchronized");
    // 25 µs through 32.32 fractions, rounded down twice: within 2 ns.
    assert!(verdict.server_ns.unwrap().abs_diff(25_000) <= 2);
}

#[test]
fn what_is_no_answer_is_named() {
    let (_, mut replies) = Ntp.split(7, &[]);
    let good = reply(&request(1), 1_796_189_123_000_000_000, 1_000);
    assert_eq!(replies.read(0, &good[..47]), Err("not ntp"));
    let mut client = good.clone();
    client[0] = 0x23;
    assert_eq!(replies.read(0, &client), Err("not a server reply"));
    let mut zero = good.clone();
    zero[24..32].fill(0);
    assert_eq!(replies.read(0, &zero), Err("zero origin"));
    let mut backwards = good.clone();
    let t2 = u64::from_be_bytes(good[32..40].try_into().unwrap());
    backwards[40..48].copy_from_slice(&(t2 - 1).to_be_bytes()); // T3 before T2
    assert_eq!(
        replies.read(0, &backwards),
        Err("server times out of order")
    );
    let slow = reply(&request(1), 1_796_189_123_000_000_000, 2_000_000_000);
    assert_eq!(replies.read(0, &slow), Err("server times out of order"));
    let (mut other_run, _) = Ntp.split(8, &[]);
    let mut buf = [0u8; 48];
    other_run.write(
        Request {
            flow: 0,
            seq: 1,
            warmup: false,
        },
        &mut buf,
    );
    let foreign = reply(&buf, 1_796_189_123_000_000_000, 1_000);
    assert_eq!(
        replies.read(0, &foreign),
        Ok(Read::Answer(Key::Seq(u64::MAX)))
    );
}

#[test]
fn stratum_leap_and_kiss_codes_make_the_outcome() {
    let (_, mut replies) = Ntp.split(7, &[]);
    let sent = Sent {
        seq: 1,
        intended_ns: 0,
        actual_ns: 0,
        aux: 0,
    };
    let base = reply(&request(1), 1_796_189_123_000_000_000, 1_000);
    let outcome = |replies: &mut Box<dyn Replies>, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = base.clone();
        edit(&mut b);
        assert!(replies.read(0, &b).is_ok());
        let v = replies.judge(0, &sent, &b).unwrap();
        (OUTCOMES[v.outcome], v.server_ns.is_some())
    };
    assert_eq!(outcome(&mut replies, &|_| {}), ("synchronized", true));
    let leap3 = |b: &mut Vec<u8>| b[0] |= 0xc0;
    assert_eq!(outcome(&mut replies, &leap3), ("unsynchronized", true));
    let s16 = |b: &mut Vec<u8>| b[1] = 16;
    assert_eq!(outcome(&mut replies, &s16), ("unsynchronized", true));
    // chronyd before it has a reference: leap 3, stratum 0, no kiss code.
    let unset = |b: &mut Vec<u8>| {
        b[0] |= 0xc0;
        b[1] = 0;
        b[12..16].fill(0);
    };
    assert_eq!(outcome(&mut replies, &unset), ("unsynchronized", true));
    for (code, name) in [
        (b"RATE", "kiss-o'-death RATE"),
        (b"DENY", "kiss-o'-death DENY"),
        (b"RSTR", "kiss-o'-death RSTR"),
        (b"AUTH", "kiss-o'-death other"),
    ] {
        let kod = |b: &mut Vec<u8>| {
            b[1] = 0;
            b[12..16].copy_from_slice(code);
            b[32..48].fill(0xff); // a kiss need not carry times in order
            b[24..32].copy_from_slice(&base[24..32]);
        };
        assert_eq!(outcome(&mut replies, &kod), (name, false));
    }
}

/// What a fake server does to request number `k`: its reply (`None`: dropped) and after how
/// long it arrives.
type Server<'a> = dyn Fn(u64, &[u8], u64) -> Option<(Vec<u8>, u64)> + 'a;

/// Runs 200 requests (20 ms at 10k/s) through `server` in virtual time.
fn run(server: &Server<'_>) -> ProtocolReport {
    let config = RunConfig {
        probe: ProbeConfig {
            pattern: Pattern::Constant,
            rate_pps: 10_000.0,
            duration_ns: 20_000_000,
            warmup_ns: 0,
            run_id: 7,
            ..ProbeConfig::default()
        },
        grace_ns: 50_000_000,
        interval_ns: 10_000_000,
        live: false,
    };
    let locals = ["198.18.0.1:40000".parse().unwrap()];
    let mut run = Run::with_protocol(&config, MADE_AT, Arc::new(Ntp), &locals, target()).unwrap();
    let mut now = MADE_AT;
    let mut buf = vec![0u8; 64];
    let mut flight: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut k = 0;
    loop {
        while let Some(t) = run.poll_transmit(now, &mut buf) {
            assert_eq!(t.len, 48);
            if let Some((bytes, after)) = server(k, &buf[..t.len], now) {
                flight.push((now + after, bytes));
            }
            k += 1;
            run.handle_sent(now, 1);
        }
        flight.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        while flight.last().is_some_and(|(at, _)| *at <= now) {
            let (at, bytes) = flight.pop().unwrap();
            run.handle_datagram(now, 0, at, &bytes);
        }
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        let mut next = run.poll_timeout();
        if let Some((at, _)) = flight.last() {
            next = next.min(*at);
        }
        now = next.max(now + 1);
    }
    let outcome = run.finish(now);
    outcome.meter.protocol_report(&outcome.counts)
}

fn count(report: &ProtocolReport, outcome: &str) -> u64 {
    report
        .outcomes
        .iter()
        .find(|(name, _)| *name == outcome)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn a_run_against_a_good_server_has_every_request_answered_and_its_time_apart() {
    // 100 µs each way on the path, 30 µs in the server.
    let report = run(&|_, request, now| Some((reply(request, now + 100_000, 30_000), 230_000)));
    assert_eq!(report.answered, 200);
    assert_eq!(report.unanswered, 0);
    assert_eq!(count(&report, "synchronized"), 200);
    assert_eq!((report.wrong_id, report.late, report.duplicate), (0, 0, 0));
    assert!(report.malformed.is_empty() && report.mismatch.is_empty());
    assert_eq!(report.server_time.len(), 200);
    // HdrHistogram's 3 significant figures: within a thousandth.
    let (server, path) = (report.server_time.mean(), report.path.mean());
    assert!((server - 30_000.0).abs() < 60.0, "server time {server}");
    assert!((path - 200_000.0).abs() < 300.0, "path {path}");
}

#[test]
fn a_bad_server_has_its_replies_counted_by_cause() {
    let report = run(&|k, request, now| {
        let mut bytes = reply(request, now, 10_000);
        match k % 5 {
            0 => {}
            1 => bytes[24..32].fill(0),
            2 => bytes[0] = 0x25, // broadcast
            3 => bytes.copy_within(32..40, 40),
            _ => {
                bytes.copy_within(32..40, 40);
                bytes[32] = bytes[32].wrapping_add(1); // T2 a second after T3
            }
        }
        Some((bytes, 50_000))
    });
    assert_eq!(report.answered, 80);
    assert_eq!(report.unanswered, 120);
    assert_eq!(report.malformed.get("zero origin"), Some(&40));
    assert_eq!(report.malformed.get("not a server reply"), Some(&40));
    // T3 = T2 is a server's time of zero: an answer, not out of order.
    assert_eq!(report.malformed.get("server times out of order"), Some(&40));
    assert_eq!(count(&report, "synchronized"), 80);
}

#[test]
fn replies_to_another_run_and_second_copies_are_not_answers() {
    let other = RunKey::new(8, SALT);
    let report = run(&|k, request, now| {
        if k % 2 == 0 {
            let mut foreign = [0u8; 48];
            Repr::client(Timestamp(other.token(k)))
                .emit(&mut Packet::new_unchecked(&mut foreign[..]));
            return Some((reply(&foreign, now, 1_000), 10_000));
        }
        Some((reply(request, now, 1_000), 10_000))
    });
    assert_eq!(report.answered, 100);
    assert_eq!(report.unanswered, 100);
    assert_eq!(report.wrong_id, 100);
    assert!(report.malformed.is_empty());
}
