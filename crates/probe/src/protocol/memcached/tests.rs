//! memcached runs in virtual time against a fake server that speaks memcached's UDP protocol.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::protocol::{ProtocolReport, SharedProtocol};
use crate::run::{Run, RunConfig};
use crate::ProbeConfig;

const MADE_AT: u64 = 1_000_000_000;

/// A memcached in memory: replies in datagrams of at most 1400 bytes, as memcached 1.6 does.
#[derive(Default)]
struct Fake {
    items: HashMap<Vec<u8>, Vec<u8>>,
}

impl Fake {
    fn answer(&mut self, request: &[u8]) -> Vec<Vec<u8>> {
        let (frame, text) = Frame::parse(request).unwrap();
        let line_end = text.windows(2).position(|w| w == b"\r\n").unwrap();
        let words: Vec<&[u8]> = text[..line_end].split(|&b| b == b' ').collect();
        let reply = match words[0] {
            b"get" => match self.items.get(words[1]) {
                Some(v) => {
                    let mut r = format!(
                        "VALUE {} 0 {}\r\n",
                        String::from_utf8_lossy(words[1]),
                        v.len()
                    )
                    .into_bytes();
                    r.extend(v);
                    r.extend(b"\r\nEND\r\n");
                    r
                }
                None => b"END\r\n".to_vec(),
            },
            b"set" => {
                let n: usize = std::str::from_utf8(words[4]).unwrap().parse().unwrap();
                let data = text[line_end + 2..line_end + 2 + n].to_vec();
                self.items.insert(words[1].to_vec(), data);
                b"STORED\r\n".to_vec()
            }
            _ => b"ERROR\r\n".to_vec(),
        };
        let chunks: Vec<&[u8]> = reply.chunks(1392).collect();
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut d = vec![0u8; 8];
                Frame {
                    request_id: frame.request_id,
                    sequence: i as u16,
                    total: chunks.len() as u16,
                }
                .emit(&mut d)
                .unwrap();
                d.extend(*c);
                d
            })
            .collect()
    }
}

fn config(rate_pps: f64, duration_ms: u64, warmup_ms: u64, flows: u32) -> RunConfig {
    RunConfig {
        probe: ProbeConfig {
            rate_pps,
            flows,
            duration_ns: duration_ms * 1_000_000,
            warmup_ns: warmup_ms * 1_000_000,
            ..ProbeConfig::default()
        },
        grace_ns: 50_000_000,
        interval_ns: 10_000_000,
        live: false,
    }
}

/// Runs `protocol` against `fake`, each reply's datagrams passed through `shuffle` (which
/// may reorder, duplicate or drop them) and arriving 100 µs after the request.
fn run(
    protocol: Memcached,
    config: &RunConfig,
    fake: &mut Fake,
    shuffle: &dyn Fn(u64, Vec<Vec<u8>>) -> Vec<Vec<u8>>,
) -> ProtocolReport {
    let target: SocketAddr = "127.0.0.1:11211".parse().unwrap();
    let locals: Vec<SocketAddr> = (0..config.probe.flows)
        .map(|f| SocketAddr::from(([127, 0, 0, 1], 40_000 + f as u16)))
        .collect();
    let len = protocol.max_request_len().max(64);
    let shared: SharedProtocol = Arc::new(protocol);
    let mut run = Run::with_protocol(config, MADE_AT, shared, &locals, target).unwrap();
    let mut buf = vec![0u8; len];
    let mut flight: Vec<(u64, usize, Vec<u8>)> = Vec::new();
    let mut now = MADE_AT;
    let mut k = 0;
    loop {
        while let Some(t) = run.poll_transmit(now, &mut buf) {
            for d in shuffle(k, fake.answer(&buf[..t.len])) {
                flight.push((now + 100_000, t.flow as usize, d));
            }
            k += 1;
            run.handle_sent(now, 1);
        }
        flight.sort_by_key(|f| std::cmp::Reverse(f.0));
        while flight.last().is_some_and(|f| f.0 <= now) {
            let (at, flow, d) = flight.pop().unwrap();
            run.handle_datagram(now, flow, at, &d);
        }
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        let mut next = run.poll_timeout();
        if let Some(f) = flight.last() {
            next = next.min(f.0);
        }
        now = next.max(now + 1);
    }
    let outcome = run.finish(now);
    outcome.meter.protocol_report(&outcome.counts)
}

fn outcome(r: &ProtocolReport, name: &str) -> u64 {
    r.outcomes.iter().find(|o| o.0 == name).unwrap().1
}

fn straight(_: u64, d: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    d
}

#[test]
fn keys_and_requests_are_written_as_memcached_reads_them() {
    let mut k = [0u8; 16];
    assert_eq!(key(0, &mut k), b"key:0");
    assert_eq!(key(4_294_967_295, &mut k), b"key:4294967295");
    assert_eq!(key_index(b"key:17"), Some(17));
    for other in [
        &b"key:017"[..],
        b"key:",
        b"key:x",
        b"kez:1",
        b"key:99999999999",
    ] {
        assert_eq!(key_index(other), None);
    }
    let m = Memcached {
        keys: 1000,
        set_ratio: 0.5,
        value_size: 3,
    };
    assert_eq!(
        m.max_request_len(),
        b"........set key:999 0 0 3\r\nabc\r\n".len()
    );
    let (mut requests, _) = m.split(7, &["127.0.0.1:1".parse().unwrap(); 2]);
    let mut buf = vec![0u8; m.max_request_len()];
    let w = requests.write(
        Request {
            flow: 1,
            seq: 0x1_0005,
            warmup: true,
        },
        &mut buf,
    );
    assert_eq!(
        &buf[..w.len],
        b"\x00\x05\x00\x00\x00\x01\x00\x00set key:83 0 0 3\r\nabc\r\n"
    );
    assert_eq!(
        w.aux,
        SET | 83,
        "warm-up: key (seq × flows + flow) mod keys"
    );
}

#[test]
fn the_share_of_sets_follows_the_ratio_and_the_run_asks_the_same_each_time() {
    let m = Memcached {
        keys: 50,
        set_ratio: 0.25,
        value_size: 1,
    };
    let picks = |run_id| {
        let (mut r, _) = m.split(run_id, &["127.0.0.1:1".parse().unwrap()]);
        let mut buf = vec![0u8; 64];
        (0..4000)
            .map(|seq| {
                let req = Request {
                    flow: 0,
                    seq,
                    warmup: false,
                };
                r.write(req, &mut buf).aux
            })
            .collect::<Vec<_>>()
    };
    let a = picks(1);
    assert_eq!(a, picks(1));
    assert_ne!(a, picks(2));
    let sets = a.iter().filter(|x| *x & SET != 0).count();
    assert!((800..1200).contains(&sets), "{sets} sets of 4000");
    assert!(a.iter().all(|x| x & !SET < 50));
}

#[test]
fn a_warm_up_of_at_least_keys_requests_makes_every_get_a_hit() {
    let mut fake = Fake::default();
    let m = Memcached {
        keys: 100,
        set_ratio: 0.0,
        value_size: 10,
    };
    // 10 ms of warm-up at 20k/s over 3 flows: 200 sets of 100 keys.
    let r = run(m, &config(20_000.0, 30, 10, 3), &mut fake, &straight);
    assert_eq!(fake.items.len(), 100);
    assert_eq!(r.answered, 400);
    assert_eq!(r.unanswered, 0);
    assert_eq!(outcome(&r, "stored"), 200);
    assert_eq!(outcome(&r, "hit"), 400);
    assert!(r.malformed.is_empty() && r.mismatch.is_empty(), "{r:?}");
}

#[test]
fn without_a_warm_up_gets_miss_and_sets_are_stored() {
    let mut fake = Fake::default();
    let m = Memcached {
        keys: 1000,
        set_ratio: 0.5,
        value_size: 10,
    };
    let r = run(m, &config(10_000.0, 20, 0, 1), &mut fake, &straight);
    let (hit, miss, stored) = (
        outcome(&r, "hit"),
        outcome(&r, "miss"),
        outcome(&r, "stored"),
    );
    assert_eq!(hit + miss + stored, r.answered);
    assert_eq!(r.answered, 200);
    assert!(miss > 0 && stored > 0, "{r:?}");
}

#[test]
fn replies_of_several_datagrams_are_put_together_in_any_order_with_duplicates() {
    let mut fake = Fake::default();
    let m = Memcached {
        keys: 10,
        set_ratio: 0.0,
        value_size: 3000,
    };
    let reversed_twice = |_: u64, mut d: Vec<Vec<u8>>| {
        d.reverse();
        let again = d.clone();
        d.extend(again);
        d
    };
    let r = run(m, &config(5_000.0, 12, 2, 1), &mut fake, &reversed_twice);
    assert_eq!(r.answered, 50);
    assert_eq!(outcome(&r, "hit"), 50);
    assert_eq!(outcome(&r, "stored"), 10);
    // Each reply's second copy: the single STORED ones are duplicates of an answer, the
    // three datagrams of a hit's second copy come after it was whole.
    assert_eq!(r.duplicate, 10);
    assert_eq!(r.malformed.get("datagram of a whole reply"), Some(&150));
}

#[test]
fn replies_that_never_complete_are_dropped_and_counted_and_the_run_goes_on() {
    let mut fake = Fake::default();
    let m = Memcached {
        keys: 10,
        set_ratio: 0.0,
        value_size: 3000,
    };
    // Every hit's last datagram is lost: the reply promises three and two come.
    let lose_last = |_: u64, mut d: Vec<Vec<u8>>| {
        if d.len() > 1 {
            d.pop();
        }
        d
    };
    let r = run(m, &config(10_000.0, 21, 1, 1), &mut fake, &lose_last);
    assert_eq!(outcome(&r, "stored"), 10);
    assert_eq!(r.answered, 0);
    assert_eq!(r.unanswered, 200);
    assert_eq!(
        r.malformed.get("incomplete reply"),
        Some(&(200 - MAX_PENDING as u64))
    );
}

#[test]
fn a_reply_naming_another_key_or_a_set_answered_with_a_value_is_a_mismatch() {
    let m = Memcached {
        keys: 10,
        set_ratio: 0.0,
        value_size: 1,
    };
    let (_, mut replies) = m.split(1, &["127.0.0.1:1".parse().unwrap()]);
    let sent = |aux| Sent {
        seq: 0x1_0002,
        intended_ns: 0,
        actual_ns: 0,
        aux,
    };
    let hit = b"\x00\x02\x00\x00\x00\x01\x00\x00VALUE key:3 0 1\r\nx\r\nEND\r\n";
    assert_eq!(replies.read(0, hit), Ok(Read::Answer(Key::Slot(2))));
    assert_eq!(replies.judge(0, &sent(3), hit).map(|v| v.outcome), Ok(0));
    replies.read(0, hit).unwrap();
    assert_eq!(replies.judge(0, &sent(4), hit), Err("another key"));
    replies.read(0, hit).unwrap();
    assert_eq!(
        replies.judge(0, &sent(SET | 3), hit),
        Err("value for a set")
    );
    let stored = b"\x00\x02\x00\x00\x00\x01\x00\x00STORED\r\n";
    replies.read(0, stored).unwrap();
    assert_eq!(replies.judge(0, &sent(3), stored), Err("stored for a get"));
    assert_eq!(
        replies.read(0, b"\x00\x02\x00\x00\x00\x01\x00\x00OK\r\n"),
        Err("unknown reply")
    );
    assert_eq!(
        replies.read(0, b"\x00\x02\x00\x00\x01\x00\x00\x00"),
        Err("too many datagrams")
    );
}

#[test]
fn an_older_reply_overtaking_a_newer_one_drops_neither_and_an_old_one_is_dropped() {
    let m = Memcached {
        keys: 10,
        set_ratio: 0.0,
        value_size: 1,
    };
    let (_, mut replies) = m.split(1, &["127.0.0.1:1".parse().unwrap()]);
    let part = |id: u16, sequence: u16, text: &[u8]| {
        let mut d = vec![0u8; 8];
        Frame {
            request_id: id,
            sequence,
            total: 2,
        }
        .emit(&mut d)
        .unwrap();
        d.extend(text);
        d
    };
    let hit = b"VALUE key:3 0 1\r\nx\r\nEND\r\n";
    let (head, tail) = hit.split_at(10);
    assert_eq!(replies.read(0, &part(10, 0, head)), Ok(Read::Partial));
    assert_eq!(replies.read(0, &part(9, 1, tail)), Ok(Read::Partial));
    assert_eq!(
        replies.read(0, &part(10, 1, tail)),
        Ok(Read::Answer(Key::Slot(10)))
    );
    assert_eq!(
        replies.read(0, &part(9, 0, head)),
        Ok(Read::Answer(Key::Slot(9)))
    );
    // Request 20 is left incomplete; its flow goes PENDING_AGE + 1 IDs past it.
    assert_eq!(replies.read(0, &part(20, 0, head)), Ok(Read::Partial));
    assert_eq!(
        replies.read(0, &part(20, 0, head)),
        Ok(Read::Partial),
        "a duplicate"
    );
    let later = 20 + PENDING_AGE + 1;
    assert_eq!(
        replies.read(0, &part(later, 0, head)),
        Err("incomplete reply")
    );
    assert_eq!(
        replies.read(0, &part(later, 1, tail)),
        Ok(Read::Answer(Key::Slot(u64::from(later))))
    );
}
