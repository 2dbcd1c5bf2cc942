use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::*;
use crate::protocol::{ProtocolMeter, ProtocolReport, Request};
use crate::run::{Run, RunConfig};
use crate::{Pattern, ProbeConfig};

const MADE_AT: u64 = 1_000_000_000;

fn q(text: &str) -> Query {
    Query::parse(text).unwrap()
}

fn dns(queries: &[&str], edns: Option<u16>) -> Dns {
    Dns::new(queries.iter().map(|t| q(t)).collect(), edns).unwrap()
}

/// The answer a server gives to `query`: its bytes with QR set and RCODE `rcode`.
fn answer(query: &[u8], rcode: u8) -> Vec<u8> {
    let mut a = query.to_vec();
    a[2] |= 0x80;
    a[3] = (a[3] & 0xf0) | rcode;
    a
}

/// Drives a run of `protocol` (10 ms at 10k/s: 100 requests) against a fake server that
/// answers request number `k` (in send order) with what `server` gives: (delay, bytes) each.
fn run(
    protocol: Dns,
    server: impl Fn(u64, &[u8]) -> Vec<(u64, Vec<u8>)>,
) -> (ProtocolReport, Vec<Vec<u8>>) {
    let config = RunConfig {
        probe: ProbeConfig {
            pattern: Pattern::Constant,
            rate_pps: 10_000.0,
            duration_ns: 10_000_000,
            warmup_ns: 0,
            ..ProbeConfig::default()
        },
        grace_ns: 20_000_000,
        interval_ns: 10_000_000,
        live: false,
    };
    let target: SocketAddr = "198.18.0.2:53".parse().unwrap();
    let local: SocketAddr = "198.18.0.1:40000".parse().unwrap();
    let mut run = Run::with_protocol(
        &config,
        MADE_AT,
        Arc::new(protocol.clone()),
        &[local],
        target,
    )
    .unwrap();
    let mut buf = vec![0u8; 2048];
    let mut flight: BinaryHeap<Reverse<(u64, u64, Vec<u8>)>> = BinaryHeap::new();
    let (mut now, mut k, mut order, mut sent) = (MADE_AT, 0u64, 0u64, Vec::new());
    loop {
        while let Some(t) = run.poll_transmit(now, &mut buf) {
            sent.push(buf[..t.len].to_vec());
            for (delay, bytes) in server(k, &buf[..t.len]) {
                flight.push(Reverse((now + delay, order, bytes)));
                order += 1;
            }
            k += 1;
            run.handle_sent(now, 1);
        }
        while flight.peek().is_some_and(|Reverse((at, ..))| *at <= now) {
            let Reverse((at, _, bytes)) = flight.pop().unwrap();
            run.handle_datagram(now, 0, at, &bytes);
        }
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        let mut next = run.poll_timeout();
        if let Some(Reverse((at, ..))) = flight.peek() {
            next = next.min(*at);
        }
        assert!(next > now, "woken in the past at {now}: {next}");
        now = next;
    }
    let outcome = run.finish(now);
    let meter: &ProtocolMeter = &outcome.meter;
    (meter.protocol_report(&outcome.counts), sent)
}

fn outcome(report: &ProtocolReport, name: &str) -> u64 {
    report.outcomes.iter().find(|(n, _)| *n == name).unwrap().1
}

#[test]
fn queries_parse_from_text_and_from_a_data_file() {
    assert_eq!(q("a.lab.test").qtype, 1);
    assert_eq!(q("a.lab.test/aaaa").qtype, 28);
    assert_eq!(q("a.lab.test./TYPE99").to_string(), "a.lab.test./TYPE99");
    assert_eq!(
        Query::parse("a.lab.test/BOGUS"),
        Err(QueryError::UnknownType("BOGUS".into()))
    );
    assert_eq!(
        Query::parse("a..test"),
        Err(QueryError::Name(dns::Error::BadText))
    );
    let file = "; dnsperf data\n\n# comment\na.lab.test A\n  b.lab.test   MX  \nc.lab.test TXT\n";
    let queries = Query::parse_file(file).unwrap();
    assert_eq!(
        queries.iter().map(|q| q.to_string()).collect::<Vec<_>>(),
        ["a.lab.test./A", "b.lab.test./MX", "c.lab.test./TXT"]
    );
    assert_eq!(
        Query::parse_file("a.lab.test A\n\nb.lab.test BOGUS\n"),
        Err(
            r#"line 3: "b.lab.test BOGUS": unknown type "BOGUS" (A, AAAA, MX, TXT… or TYPEnnn)"#
                .into()
        )
    );
    assert_eq!(
        Query::parse_file("a.lab.test\n"),
        Err(r#"line 1: "a.lab.test": not `name type`"#.into())
    );
    assert!(Dns::new(Vec::new(), None).is_none());
}

#[test]
fn each_request_asks_the_next_query_with_its_sequence_as_id() {
    let mut d = dns(&["a.lab.test", "b.lab.test/AAAA"], Some(1232));
    assert_eq!(d.id_space(), Some(65_536));
    assert_eq!(d.max_request_len(), 12 + 12 + 4 + 11);
    let mut buf = [0u8; 64];
    for seq in [0u64, 1, 2, 65_537] {
        let w = d.write(
            Request {
                flow: 0,
                seq,
                warmup: false,
            },
            &mut buf,
        );
        assert_eq!(w.aux, (seq % 2) as u32);
        let parsed = dns::Response::parse(&buf[..w.len]).unwrap();
        assert_eq!(parsed.header.id, seq as u16);
        assert!(parsed.header.rd && !parsed.header.qr);
        assert_eq!(parsed.header.arcount, 1, "the OPT record");
        assert_eq!(
            parsed.question.unwrap().name,
            d.queries()[w.aux as usize].name
        );
    }
}

#[test]
fn answers_are_counted_by_rcode_and_add_up_to_answered() {
    let d = dns(&["a.lab.test", "b.lab.test", "x.refused.test"], None);
    let (report, _) = run(d, |k, query| {
        let rcode = [0, 3, 5][(k % 3) as usize];
        vec![(50_000, answer(query, rcode))]
    });
    assert_eq!((report.answered, report.unanswered), (100, 0));
    assert_eq!(outcome(&report, "NOERROR"), 34);
    assert_eq!(outcome(&report, "NXDOMAIN"), 33);
    assert_eq!(outcome(&report, "REFUSED"), 33);
    let total: u64 = report.outcomes.iter().map(|(_, n)| n).sum();
    assert_eq!(total, report.answered);
}

#[test]
fn the_question_is_compared_without_case_and_tc_is_its_own_outcome() {
    let d = dns(&["a.lab.test"], None);
    let (report, _) = run(d, |k, query| {
        let mut a = answer(query, if k % 2 == 0 { 2 } else { 9 });
        a[13] = b'A'; // the question's first label, upper case
        if k % 4 == 3 {
            a[2] |= 0x02; // TC
        }
        vec![(10_000, a)]
    });
    assert_eq!(report.answered, 100);
    assert_eq!(outcome(&report, "SERVFAIL"), 50);
    assert_eq!(outcome(&report, "other"), 25);
    assert_eq!(outcome(&report, "truncated"), 25);
}

#[test]
fn what_is_no_answer_is_counted_under_its_cause_and_the_run_goes_on() {
    let d = dns(&["a.lab.test", "b.lab.test"], None);
    let (report, sent) = run(d, |k, query| {
        let good = answer(query, 0);
        match k % 10 {
            // Garbage, shorter than a header.
            0 => vec![(10_000, vec![0xde, 0xad])],
            // Another ID (one no request of this short run has).
            1 => {
                let mut a = good;
                a[0] ^= 0x80;
                vec![(10_000, a)]
            }
            // Twice.
            2 => vec![(10_000, good.clone()), (20_000, good)],
            // A compression loop in the question.
            3 => {
                let mut a = good[..12].to_vec();
                a.extend_from_slice(&[1, b'a', 0xc0, 12, 0, 1, 0, 1]);
                vec![(10_000, a)]
            }
            // Another question: the other query of the list.
            4 => {
                let mut a = good;
                a[13] = if a[13] == b'a' { b'b' } else { b'a' };
                vec![(10_000, a)]
            }
            // QR clear: the query itself came back.
            5 => vec![(10_000, query.to_vec())],
            // Another type.
            6 => {
                let mut a = good;
                let at = a.len() - 3;
                a[at] = 28;
                vec![(10_000, a)]
            }
            _ => vec![(10_000, good)],
        }
    });
    assert_eq!(sent.len(), 100);
    assert_eq!(
        report.answered, 40,
        "the 3 good kinds and the duplicated one"
    );
    assert_eq!(report.unanswered, 60);
    assert_eq!(report.duplicate, 10);
    assert_eq!(report.wrong_id, 10);
    assert_eq!(report.malformed["shorter than a dns header"], 10);
    assert_eq!(report.malformed["compression loop"], 10);
    assert_eq!(report.mismatch["another question"], 20);
    assert_eq!(report.mismatch["not a response (QR clear)"], 10);
}

#[test]
fn an_answer_judged_against_a_request_of_another_query_is_another_question() {
    let mut d = dns(&["a.lab.test", "b.lab.test"], None);
    let mut buf = [0u8; 64];
    let w = d.write(
        Request {
            flow: 0,
            seq: 0,
            warmup: false,
        },
        &mut buf,
    );
    let reply = answer(&buf[..w.len], 0);
    let sent = |aux| Sent {
        seq: 0,
        intended_ns: 0,
        actual_ns: 0,
        aux,
    };
    assert_eq!(d.read(0, &reply), Ok(Read::Answer(Key::Slot(0))));
    assert_eq!(d.judge(0, &sent(0), &reply).map(|v| v.outcome), Ok(0));
    assert_eq!(d.judge(0, &sent(1), &reply), Err("another question"));
    assert_eq!(d.judge(0, &sent(7), &reply), Err("another question"));
    let mut none = reply.clone();
    none[5] = 0; // QDCOUNT 0
    assert_eq!(d.judge(0, &sent(0), &none[..12]), Err("another question"));
}
