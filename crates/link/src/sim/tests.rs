//! The virtual-time network, with a pinging client and an echo server.

use super::*;
use crate::LossModel;

const MS: u64 = 1_000_000;

fn client_addr() -> SocketAddr {
    "10.0.0.2:40000".parse().unwrap() // a literal that parses
}

fn server_addr() -> SocketAddr {
    "[2001:db8::1]:7".parse().unwrap() // a literal that parses
}

fn delay(ms: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: ms * MS,
        ..LinkConfig::default()
    }
}

/// Sends `count` pings, one every `every` ns from time 0, and keeps (seq, rtt) of each echo.
struct Pinger {
    count: u64,
    every: u64,
    next_seq: u64,
    echoes: Vec<(u64, u64)>,
}

impl Endpoint for Pinger {
    fn handle_datagram(&mut self, now: u64, datagram: Datagram) {
        let seq = u64::from_be_bytes(datagram.payload[..8].try_into().unwrap());
        let sent = u64::from_be_bytes(datagram.payload[8..16].try_into().unwrap());
        self.echoes.push((seq, now - sent));
    }

    fn poll_transmit(&mut self, now: u64) -> Option<Datagram> {
        let due = self.poll_timeout()?;
        if due > now {
            return None;
        }
        let mut payload = self.next_seq.to_be_bytes().to_vec();
        payload.extend_from_slice(&now.to_be_bytes());
        self.next_seq += 1;
        Some(Datagram {
            from: client_addr(),
            to: server_addr(),
            payload,
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        (self.next_seq < self.count).then_some(self.next_seq * self.every)
    }

    fn handle_timeout(&mut self, _now: u64) {}
}

/// Sends every datagram back to where it came from.
#[derive(Default)]
struct Echo {
    answers: Vec<Datagram>,
}

impl Endpoint for Echo {
    fn handle_datagram(&mut self, _now: u64, datagram: Datagram) {
        self.answers.push(Datagram {
            from: datagram.to,
            to: datagram.from,
            payload: datagram.payload,
        });
    }

    fn poll_transmit(&mut self, _now: u64) -> Option<Datagram> {
        self.answers.pop()
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn handle_timeout(&mut self, _now: u64) {}
}

fn pair(count: u64, every: u64, a_to_b: LinkConfig, b_to_a: LinkConfig) -> Pair<Pinger, Echo> {
    let pinger = Pinger {
        count,
        every,
        next_seq: 0,
        echoes: Vec::new(),
    };
    Pair::new(
        pinger,
        Echo::default(),
        Network::new(0, a_to_b, b_to_a).unwrap(),
    )
}

#[test]
fn every_round_trip_is_the_two_delays_exactly() {
    let mut pair = pair(100, MS, delay(3), delay(7));
    pair.drive_until(SECOND);
    assert_eq!(pair.a.echoes.len(), 100);
    assert!(pair.a.echoes.iter().all(|&(_, rtt)| rtt == 10 * MS));
    assert_eq!(pair.network.now(), SECOND);
    assert_eq!(pair.network.pipe(Side::A).counters().delivered, 100);
    assert_eq!(pair.network.pipe(Side::B).counters().delivered, 100);
}

const SECOND: u64 = 1_000 * MS;

#[test]
fn losses_on_either_pipe_are_the_echoes_missing() {
    let lossy = LinkConfig {
        loss: LossModel::Bernoulli { p: 0.2 },
        seed: 1,
        ..delay(1)
    };
    let mut pair = pair(1000, MS, lossy.clone(), LinkConfig { seed: 2, ..lossy });
    pair.drive_until(2 * SECOND);
    let there = pair.network.pipe(Side::A).counters();
    let back = pair.network.pipe(Side::B).counters();
    assert_eq!(there.arrived, 1000);
    assert_eq!(back.arrived, there.delivered);
    assert_eq!(pair.a.echoes.len() as u64, back.delivered);
    assert!((550..730).contains(&back.delivered), "{back:?}");
}

#[test]
fn the_drop_filter_loses_exactly_the_datagrams_it_picks() {
    let mut pair = pair(10, MS, delay(1), delay(1));
    pair.network.set_drop_filter(|d| d.payload[7] % 2 == 1);
    pair.drive_until(SECOND);
    let seqs: Vec<u64> = pair.a.echoes.iter().map(|&(seq, _)| seq).collect();
    assert_eq!(seqs, [0, 2, 4, 6, 8]);
    assert_eq!(pair.network.filtered(), 5);
    assert_eq!(pair.network.pipe(Side::A).counters().arrived, 5);
}

#[test]
fn reconfiguring_mid_run_changes_later_datagrams_only() {
    let mut pair = pair(20, MS, delay(5), delay(5));
    pair.drive_until(10 * MS - 1);
    pair.network.handle_config(Side::A, delay(15)).unwrap();
    pair.drive_until(SECOND);
    let rtts: Vec<u64> = pair.a.echoes.iter().map(|&(_, rtt)| rtt / MS).collect();
    // Pings 0..=9 were on their way or sent before: 10 ms; the rest 20 ms.
    assert_eq!(rtts, [[10; 10], [20; 10]].concat());
}

#[test]
fn datagrams_keep_their_addresses_and_send_times_across_the_wire() {
    let mut network = Network::new(5, delay(2), delay(2)).unwrap();
    let datagram = Datagram {
        from: server_addr(),
        to: client_addr(),
        payload: vec![1, 2, 3],
    };
    assert!(matches!(
        network.send(Side::B, &datagram),
        Some(Fate::Deliver { .. })
    ));
    assert_eq!(network.pipe(Side::B).queued_bytes(), HEADER_LEN + 3);
    assert_eq!(network.poll_delivery(), None);
    network.advance_to(2 * MS + 5);
    assert_eq!(
        network.poll_delivery(),
        Some(Delivery {
            side: Side::A,
            datagram,
            sent_ns: 5,
            delivered_ns: 2 * MS + 5,
        })
    );
    assert_eq!(network.poll_timeout(), None);
}
