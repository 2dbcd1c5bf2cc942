//! Specification tests of the model game server, in virtual time.
//!
//! [`Lab`] wires [`Joiner`]s (side A) to a [`Server`] (side B) over the
//! virtual-time network of `latlab_link::sim`: the emulator's own link model,
//! a one-way delay each way; a drop filter on the network loses the datagrams
//! a scenario picks. Every datagram the server takes goes through
//! [`Lab::server_receives`], which checks the anti-amplification rule on each
//! answer.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use latlab_link::sim::{Datagram, Network, Side};
use latlab_link::LinkConfig;
use latlab_wire::{game as msg, probe};

use crate::*;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;
const SECRET: [u8; 16] = *b"latlab test key!";
const SERVER_ADDR: &str = "10.0.0.1:7777";

fn server_addr() -> SocketAddr {
    SERVER_ADDR.parse().unwrap() // a literal that parses
}

/// Client `i` lives at 10.0.1.i:(40000 + i).
fn client_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, i as u8], 40_000 + i as u16))
}

fn config() -> ServerConfig {
    ServerConfig {
        secret: SECRET,
        ..ServerConfig::default()
    }
}

/// A 128-byte probe, the game packet size of the paper.
fn probe_packet(seq: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; 128];
    probe::Repr {
        run_id: 9,
        flow: 0,
        seq,
        ..probe::Repr::default()
    }
    .emit(&mut probe::Packet::new_unchecked(&mut bytes[..]));
    bytes
}

fn encode(message: msg::Repr) -> Vec<u8> {
    let mut bytes = vec![0u8; message.buffer_len()];
    message.emit_bytes(&mut bytes);
    bytes
}

/// A [`Verdict`] that does not borrow the server.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    FanOut(Vec<SocketAddr>),
    Handshake,
    Dropped(DropCause),
}

impl From<Verdict<'_>> for Outcome {
    fn from(verdict: Verdict<'_>) -> Outcome {
        match verdict {
            Verdict::FanOut { recipients } => Outcome::FanOut(recipients.to_vec()),
            Verdict::Handshake => Outcome::Handshake,
            Verdict::Dropped(cause) => Outcome::Dropped(cause),
        }
    }
}

/// The link each way: 50 µs one way, nothing lost at random.
fn link() -> LinkConfig {
    LinkConfig {
        delay_ns: 50_000,
        ..LinkConfig::default()
    }
}

/// One request and the answer it caused.
#[derive(Clone, Debug)]
struct Exchange {
    request_len: usize,
    answer: msg::Repr,
    answer_len: usize,
}

/// A server, its clients and the wire between them, in virtual time.
struct Lab {
    /// The lab's clock; the network catches up with it in [`Lab::run_until`].
    now: u64,
    server: Server,
    clients: Vec<(SocketAddr, Joiner)>,
    /// Clients on side A, the server on side B.
    network: Network,
    events: Vec<(SocketAddr, JoinEvent)>,
    exchanges: Vec<Exchange>,
}

impl Lab {
    /// A lab whose client `i` wants to join `games[i]`, 50 µs one way.
    fn new(config: ServerConfig, games: &[u32]) -> Lab {
        Lab {
            now: SECOND,
            server: Server::new(config),
            clients: games
                .iter()
                .enumerate()
                .map(|(i, &game)| (client_addr(i), Joiner::new(0xc0de_0000 + i as u64, game)))
                .collect(),
            network: Network::new(SECOND, link(), link()).expect("the test link is valid"),
            events: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    /// Hands one datagram to the server at the current time and collects
    /// the answers it queued. Checks the anti-amplification rule: at most
    /// one answer, to the sender, no longer than the datagram.
    fn server_receives(&mut self, from: SocketAddr, bytes: &[u8]) -> (Outcome, Vec<Vec<u8>>) {
        let outcome = Outcome::from(self.server.handle_datagram(self.now, from, bytes));
        let mut answers = Vec::new();
        let mut buf = [0u8; msg::MAX_ANSWER_LEN];
        while let Some((to, n)) = self.server.poll_transmit(&mut buf) {
            assert_eq!(to, from, "answers go back to the source address");
            assert!(
                n <= bytes.len(),
                "{n}-byte answer to a {}-byte request",
                bytes.len()
            );
            let answer = msg::Repr::parse_bytes(&buf[..n]).expect("server emits valid messages");
            self.exchanges.push(Exchange {
                request_len: bytes.len(),
                answer,
                answer_len: n,
            });
            answers.push(buf[..n].to_vec());
        }
        assert!(answers.len() <= 1, "one datagram, at most one answer");
        if matches!(outcome, Outcome::FanOut(_)) {
            assert!(answers.is_empty(), "game packets are not answered");
        }
        (outcome, answers)
    }

    /// Runs the handshake traffic until `until` (virtual ns); the network
    /// loses every datagram for which `lose` returns true when it is sent.
    fn run_until(&mut self, until: u64, lose: impl FnMut(&Datagram) -> bool + 'static) {
        self.network.set_drop_filter(lose);
        self.network.advance_to(self.now);
        let mut buf = [0u8; 64];
        loop {
            for (addr, joiner) in &mut self.clients {
                while let Some(n) = joiner.poll_transmit(self.now, &mut buf) {
                    let datagram = Datagram {
                        from: *addr,
                        to: server_addr(),
                        payload: buf[..n].to_vec(),
                    };
                    self.network.send(Side::A, &datagram);
                }
            }
            let next_arrival = self.network.poll_timeout();
            let next_timeout = self
                .clients
                .iter()
                .filter_map(|(_, j)| j.poll_timeout())
                .min();
            let next_server_timeout = self.server.poll_timeout();
            let Some(next) = [next_arrival, next_timeout, next_server_timeout]
                .into_iter()
                .flatten()
                .min()
            else {
                break;
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
            self.network.advance_to(self.now);
            while let Some(delivery) = self.network.poll_delivery() {
                let datagram = delivery.datagram;
                if datagram.to == server_addr() {
                    let (_, answers) = self.server_receives(datagram.from, &datagram.payload);
                    for payload in answers {
                        let answer = Datagram {
                            from: server_addr(),
                            to: datagram.from,
                            payload,
                        };
                        self.network.send(Side::B, &answer);
                    }
                } else if let Some((addr, joiner)) =
                    self.clients.iter_mut().find(|(a, _)| *a == datagram.to)
                {
                    let event = joiner.handle_datagram(self.now, &datagram.payload);
                    self.events.push((*addr, event));
                }
            }
            for (_, joiner) in &mut self.clients {
                joiner.handle_timeout(self.now);
            }
        }
        self.now = self.now.max(until);
        self.network.clear_drop_filter();
    }

    /// Runs one second with a perfect network.
    fn join_all(&mut self) {
        self.run_until(self.now + SECOND, |_| false);
    }

    fn addr(&self, i: usize) -> SocketAddr {
        self.clients[i].0
    }

    fn joined(&self) -> BTreeSet<SocketAddr> {
        self.clients
            .iter()
            .filter(|(_, j)| j.is_joined())
            .map(|(a, _)| *a)
            .collect()
    }

    fn send_probe(&mut self, i: usize, seq: u64) -> Outcome {
        let from = self.addr(i);
        self.server_receives(from, &probe_packet(seq)).0
    }

    /// Asks the server for a cookie as `addr` would: returns (epoch, mac).
    fn challenge(&mut self, addr: SocketAddr, client_nonce: u64, game: u32) -> (u32, u64) {
        let request = encode(msg::Repr::JoinRequest { client_nonce, game });
        let (outcome, answers) = self.server_receives(addr, &request);
        assert_eq!(outcome, Outcome::Handshake);
        match msg::Repr::parse_bytes(&answers[0]) {
            Ok(msg::Repr::Challenge {
                client_nonce: n,
                game: g,
                epoch,
                mac,
            }) if (n, g) == (client_nonce, game) => (epoch, mac),
            other => panic!("expected our Challenge, got {other:?}"),
        }
    }

    fn confirm(
        &mut self,
        from: SocketAddr,
        client_nonce: u64,
        game: u32,
        (epoch, mac): (u32, u64),
    ) -> (Outcome, Vec<Vec<u8>>) {
        let confirm = encode(msg::Repr::JoinConfirm {
            client_nonce,
            game,
            epoch,
            mac,
        });
        self.server_receives(from, &confirm)
    }
}

mod lockout;

/// xorshift64*, for the random-bytes test.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn fan_out_reaches_every_client_of_the_game_including_the_sender() {
    let mut lab = Lab::new(config(), &[0; 5]);
    lab.join_all();
    assert_eq!(lab.server.clients(), 5);
    let everyone: Vec<SocketAddr> = (0..5).map(|i| lab.addr(i)).collect();
    for i in 0..5 {
        match lab.send_probe(i, i as u64) {
            Outcome::FanOut(recipients) => {
                assert_eq!(recipients, everyone, "all clients, in join order");
                assert!(
                    recipients.contains(&lab.addr(i)),
                    "the sender gets its copy"
                );
            }
            other => panic!("client {i}: {other:?}"),
        }
    }
    let c = lab.server.counters();
    assert_eq!((c.game_packets, c.copies, c.joins), (5, 25, 5));
}

#[test]
fn separate_games_do_not_see_each_other() {
    let games = [0, 0, 1, 1, 1, 2];
    let mut lab = Lab::new(config(), &games);
    lab.join_all();
    for (i, &game) in games.iter().enumerate() {
        let Outcome::FanOut(recipients) = lab.send_probe(i, 0) else {
            panic!("client {i} not fanned out");
        };
        let same_game: Vec<SocketAddr> = (0..games.len())
            .filter(|&j| games[j] == game)
            .map(|j| lab.addr(j))
            .collect();
        assert_eq!(recipients, same_game, "client {i} of game {game}");
    }
    assert_eq!(lab.server.recipients(1).len(), 3);
    assert_eq!(lab.server.recipients(5), &[] as &[SocketAddr]);
}

#[test]
fn table_is_bounded_and_the_next_join_is_rejected_table_full() {
    let mut lab = Lab::new(
        ServerConfig {
            max_clients: 4,
            ..config()
        },
        &[0; 5],
    );
    lab.join_all();
    assert_eq!(lab.server.clients(), 4);
    let rejected: Vec<_> = lab.clients.iter().filter(|(_, j)| !j.is_joined()).collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(
        rejected[0].1.rejected(),
        Some(RejectReason::TableFull as u8)
    );
    assert!(lab.events.contains(&(
        rejected[0].0,
        JoinEvent::Rejected(RejectReason::TableFull as u8)
    )));
    let c = lab.server.counters();
    assert_eq!((c.joins, c.table_full), (4, 1));
    // Slots are 0..max_clients.
    let slots: BTreeSet<u32> = lab.clients.iter().filter_map(|(_, j)| j.slot()).collect();
    assert_eq!(slots, (0..4).collect());
}

#[test]
fn confirm_from_another_address_than_the_challenge_is_a_bad_cookie() {
    let mut lab = Lab::new(config(), &[]);
    let (victim, attacker) = (client_addr(1), client_addr(2));
    // The attacker asked with the victim's address as source (spoofed) and
    // somehow saw the cookie; it cannot confirm it from its own address.
    let cookie = lab.challenge(victim, 77, 0);
    let (outcome, answers) = lab.confirm(attacker, 77, 0, cookie);
    assert_eq!(outcome, Outcome::Dropped(DropCause::BadCookie));
    assert!(answers.is_empty(), "forgeries are not answered");
    assert_eq!(lab.server.clients(), 0);
    assert!(!lab.server.is_client(attacker) && !lab.server.is_client(victim));
    assert_eq!(lab.server.counters().bad_cookie, 1);
}

#[test]
fn forged_mac_is_a_bad_cookie() {
    let mut lab = Lab::new(config(), &[]);
    let addr = client_addr(1);
    let (epoch, mac) = lab.challenge(addr, 77, 0);
    for forged in [(epoch, mac ^ 1), (epoch, 0), (epoch ^ 1, mac)] {
        let (outcome, answers) = lab.confirm(addr, 77, 0, forged);
        assert_eq!(outcome, Outcome::Dropped(DropCause::BadCookie));
        assert!(answers.is_empty());
    }
    // Changing nonce or game breaks the MAC too.
    assert_eq!(
        lab.confirm(addr, 78, 0, (epoch, mac)).0,
        Outcome::Dropped(DropCause::BadCookie)
    );
    assert_eq!(
        lab.confirm(addr, 77, 1, (epoch, mac)).0,
        Outcome::Dropped(DropCause::BadCookie)
    );
    assert_eq!(lab.server.counters().bad_cookie, 5);
    assert_eq!(lab.server.clients(), 0);
    // The genuine cookie still works.
    assert_eq!(lab.confirm(addr, 77, 0, (epoch, mac)).0, Outcome::Handshake);
    assert!(lab.server.is_client(addr));
}

#[test]
fn cookie_is_valid_in_its_epoch_and_the_next_and_expired_after() {
    let lifetime = 10 * SECOND;
    let mut lab = Lab::new(config(), &[]);
    lab.now = 100 * lifetime; // the start of an epoch
    let (a, b) = (client_addr(1), client_addr(2));
    let cookie_a = lab.challenge(a, 1, 0);
    let cookie_b = lab.challenge(b, 2, 0);
    assert_eq!(cookie_a.0, 100);

    lab.now += lifetime + lifetime / 2; // the next epoch: still valid
    assert_eq!(lab.confirm(a, 1, 0, cookie_a).0, Outcome::Handshake);
    assert!(lab.server.is_client(a));

    lab.now += lifetime; // two epochs after the cookie's
    let (outcome, answers) = lab.confirm(b, 2, 0, cookie_b);
    assert_eq!(outcome, Outcome::Dropped(DropCause::Expired));
    assert_eq!(
        msg::Repr::parse_bytes(&answers[0]),
        Ok(msg::Repr::Reject {
            client_nonce: 2,
            reason: RejectReason::Expired
        })
    );
    assert!(!lab.server.is_client(b));
    assert_eq!(lab.server.counters().expired, 1);
}

#[test]
fn join_request_shorter_than_64_bytes_is_dropped_unanswered() {
    let mut lab = Lab::new(config(), &[]);
    let full = encode(msg::Repr::JoinRequest {
        client_nonce: 5,
        game: 0,
    });
    for len in 6..msg::JOIN_REQUEST_LEN {
        let (outcome, answers) = lab.server_receives(client_addr(1), &full[..len]);
        assert_eq!(
            outcome,
            Outcome::Dropped(DropCause::ShortJoin),
            "{len} bytes"
        );
        assert!(answers.is_empty());
    }
    assert_eq!(lab.server.counters().short_join, 58);
    let (outcome, answers) = lab.server_receives(client_addr(1), &full);
    assert_eq!(outcome, Outcome::Handshake);
    assert_eq!(answers[0].len(), msg::CHALLENGE_LEN);
}

#[test]
fn every_answer_is_no_longer_than_the_request_that_caused_it() {
    // Walk every handshake path; `Lab::server_receives` asserts the rule on each
    // answer, and here we check that every kind of answer was produced.
    let mut lab = Lab::new(
        ServerConfig {
            max_clients: 1,
            ..config()
        },
        &[0, 0],
    );
    // Lose the first Welcome so that the confirm is retransmitted.
    let mut welcomes_lost = 0;
    lab.run_until(lab.now + SECOND, move |d| {
        let welcome = msg::message_type(&d.payload) == Some(msg::MessageType::Welcome);
        if welcome && welcomes_lost == 0 {
            welcomes_lost += 1;
            return true;
        }
        false
    });
    // Expired, bad cookie, short join, oversized-but-allowed padding, leave.
    let stale = lab.challenge(client_addr(9), 9, 0);
    lab.now += 30 * SECOND;
    lab.confirm(client_addr(9), 9, 0, stale);
    lab.confirm(client_addr(9), 9, 0, (0, 0));
    lab.server_receives(client_addr(9), &[b'L', b'L', b'G', b'M', 1, 1]);
    let mut padded = vec![0u8; 1472];
    msg::Repr::JoinRequest {
        client_nonce: 9,
        game: 0,
    }
    .emit_bytes(&mut padded);
    lab.server_receives(client_addr(9), &padded);
    let leave = {
        let mut buf = [0u8; 20];
        let n = lab.clients[0].1.write_leave(&mut buf);
        buf[..n].to_vec()
    };
    let first = lab.addr(0);
    lab.server_receives(first, &leave);

    let kinds: BTreeSet<String> = lab
        .exchanges
        .iter()
        .map(|e| match e.answer {
            msg::Repr::Reject { reason, .. } => format!("Reject {reason:?}"),
            other => format!("{:?}", other.message_type()),
        })
        .collect();
    let want = ["Challenge", "Welcome", "Reject TableFull", "Reject Expired"];
    assert_eq!(kinds, want.iter().map(|s| s.to_string()).collect());
    let worst = lab
        .exchanges
        .iter()
        .map(|e| e.answer_len as f64 / e.request_len as f64)
        .fold(0.0, f64::max);
    assert!(worst <= 1.0, "amplification factor {worst}");
    // The retransmitted confirm was answered with the same slot, once counted.
    assert_eq!(lab.server.counters().joins, 1);
    assert!(
        lab.exchanges
            .iter()
            .filter(|e| matches!(e.answer, msg::Repr::Welcome { .. }))
            .count()
            >= 2
    );
}

#[test]
fn rate_limit_passes_the_burst_then_the_rate_in_virtual_time() {
    let mut lab = Lab::new(
        ServerConfig {
            rate_limit_pps: Some(100.0),
            rate_burst: 10,
            ..config()
        },
        &[0],
    );
    lab.join_all();
    let t0 = lab.now;
    let passed = (0..1000)
        .filter(|&seq| matches!(lab.send_probe(0, seq), Outcome::FanOut(_)))
        .count();
    assert_eq!(passed, 10, "1000 at one instant: the burst passes");
    assert_eq!(lab.server.counters().rate_limited, 990);

    // Over the next second, one probe per ms: one token per 10 ms.
    let mut passed = 0;
    for ms in 1..=1000 {
        lab.now = t0 + ms * MS;
        if matches!(lab.send_probe(0, 1000 + ms), Outcome::FanOut(_)) {
            passed += 1;
        }
    }
    assert_eq!(passed, 100, "1 s later: 100 more");
    assert_eq!(lab.server.counters().rate_limited, 990 + 900);
}

#[test]
fn rate_limit_is_per_client() {
    let mut lab = Lab::new(
        ServerConfig {
            rate_limit_pps: Some(1.0),
            rate_burst: 2,
            ..config()
        },
        &[0, 0],
    );
    lab.join_all();
    let outcomes: Vec<bool> = [0, 0, 0, 1, 1, 1]
        .iter()
        .map(|&i| matches!(lab.send_probe(i, 0), Outcome::FanOut(_)))
        .collect();
    assert_eq!(outcomes, [true, true, false, true, true, false]);
}

#[test]
fn probe_from_an_unknown_sender_is_dropped() {
    let mut lab = Lab::new(config(), &[0]);
    lab.join_all();
    let (outcome, answers) = lab.server_receives(client_addr(200), &probe_packet(1));
    assert_eq!(outcome, Outcome::Dropped(DropCause::UnknownSender));
    assert!(answers.is_empty());
    // Same IP, other port: another address.
    let mut other_port = lab.addr(0);
    other_port.set_port(1);
    assert_eq!(
        lab.server_receives(other_port, &probe_packet(2)).0,
        Outcome::Dropped(DropCause::UnknownSender)
    );
    assert_eq!(lab.server.counters().unknown_sender, 2);
    assert_eq!(lab.server.counters().copies, 0);
}

#[test]
fn leave_removes_the_client_and_frees_its_slot() {
    let mut lab = Lab::new(config(), &[0, 0, 0]);
    lab.join_all();
    let leaver = lab.addr(1);
    let leave = |lab: &Lab, nonce_delta: u64| {
        let j = &lab.clients[1].1;
        encode(msg::Repr::Leave {
            client_nonce: j.client_nonce() + nonce_delta,
            game: j.game(),
        })
    };
    // A Leave with another nonce (say, spoofed by an off-path attacker) or
    // from another address removes nothing.
    let wrong_nonce = leave(&lab, 1);
    assert_eq!(
        lab.server_receives(leaver, &wrong_nonce).0,
        Outcome::Dropped(DropCause::UnknownSender)
    );
    let right = leave(&lab, 0);
    assert_eq!(
        lab.server_receives(client_addr(99), &right).0,
        Outcome::Dropped(DropCause::UnknownSender)
    );
    assert_eq!(lab.server.clients(), 3);

    let (outcome, answers) = lab.server_receives(leaver, &right);
    assert_eq!(outcome, Outcome::Handshake);
    assert!(answers.is_empty());
    assert_eq!(lab.server.clients(), 2);
    assert_eq!(lab.server.recipients(0), &[lab.addr(0), lab.addr(2)]);
    assert_eq!(
        lab.send_probe(1, 0),
        Outcome::Dropped(DropCause::UnknownSender)
    );
    assert_eq!(
        lab.send_probe(0, 0),
        Outcome::FanOut(vec![lab.addr(0), lab.addr(2)])
    );
    assert_eq!(lab.server.counters().leaves, 1);

    // The freed slot goes to the next client.
    let freed = lab.clients[1].1.slot().unwrap();
    lab.clients.push((client_addr(7), Joiner::new(0x77, 0)));
    lab.join_all();
    assert_eq!(lab.clients[3].1.slot(), Some(freed));
}

#[test]
fn repeated_confirm_is_idempotent() {
    let mut lab = Lab::new(config(), &[]);
    let addr = client_addr(1);
    let cookie = lab.challenge(addr, 5, 3);
    let (_, first) = lab.confirm(addr, 5, 3, cookie);
    let (outcome, second) = lab.confirm(addr, 5, 3, cookie);
    assert_eq!(outcome, Outcome::Handshake);
    assert_eq!(first, second, "same Welcome, same slot");
    assert_eq!(lab.server.clients(), 1);
    assert_eq!(lab.server.recipients(3), &[addr]);
    assert_eq!(lab.server.counters().joins, 1);

    // The same socket joining another game moves, keeping its slot.
    let cookie = lab.challenge(addr, 6, 4);
    let (_, moved) = lab.confirm(addr, 6, 4, cookie);
    assert_eq!(
        msg::Repr::parse_bytes(&moved[0]),
        Ok(msg::Repr::Welcome {
            client_nonce: 6,
            game: 4,
            slot: 0
        })
    );
    assert!(lab.server.recipients(3).is_empty());
    assert_eq!(lab.server.recipients(4), &[addr]);
    assert_eq!(lab.server.clients(), 1);
}

#[test]
fn oversized_and_malformed_datagrams_are_dropped_by_cause() {
    let mut lab = Lab::new(
        ServerConfig {
            max_datagram: 200,
            ..config()
        },
        &[0],
    );
    lab.join_all();
    let from = lab.addr(0);
    let mut big = probe_packet(0);
    big.resize(201, 0);
    assert_eq!(
        lab.server_receives(from, &big).0,
        Outcome::Dropped(DropCause::Oversized)
    );
    let server_messages = [
        msg::Repr::Challenge {
            client_nonce: 1,
            game: 0,
            epoch: 0,
            mac: 0,
        },
        msg::Repr::Welcome {
            client_nonce: 1,
            game: 0,
            slot: 0,
        },
        msg::Repr::Reject {
            client_nonce: 1,
            reason: RejectReason::TableFull,
        },
    ];
    for message in server_messages {
        assert_eq!(
            lab.server_receives(from, &encode(message)).0,
            Outcome::Dropped(DropCause::Malformed)
        );
    }
    for junk in [
        &b""[..],
        b"hello",
        b"LLGM",
        b"LLGM\x02\x01\x00\x00",
        &[0u8; 100],
    ] {
        assert_eq!(
            lab.server_receives(from, junk).0,
            Outcome::Dropped(DropCause::Malformed)
        );
    }
    let c = lab.server.counters();
    assert_eq!((c.oversized, c.malformed), (1, 8));
}

#[test]
fn answer_queue_is_bounded_and_drops_the_oldest() {
    let mut server = Server::new(ServerConfig {
        max_queued_answers: 2,
        ..config()
    });
    for nonce in 1..=3 {
        let request = encode(msg::Repr::JoinRequest {
            client_nonce: nonce,
            game: 0,
        });
        server.handle_datagram(0, client_addr(1), &request);
    }
    assert_eq!(server.counters().answers_dropped, 1);
    let mut buf = [0u8; 32];
    let mut nonces = Vec::new();
    while let Some((_, n)) = server.poll_transmit(&mut buf) {
        nonces.push(msg::Repr::parse_bytes(&buf[..n]).unwrap().client_nonce());
    }
    assert_eq!(nonces, [2, 3]);
}

#[test]
fn random_datagrams_never_panic_and_never_fan_out_to_a_stranger() {
    let mut lab = Lab::new(config(), &[0, 0, 1, 1]);
    lab.join_all();
    let joined = lab.joined();
    assert_eq!(joined.len(), 4);
    let prefixes: [&[u8]; 4] = [
        &probe_packet(0)[..8],
        b"LLGM\x01\x01\x00\x00",
        b"LLGM\x01\x03\x00\x00",
        b"LLGM\x01\x06\x00\x00",
    ];
    let mut rng = XorShift(0x5eed_6a3e);
    let mut buf = vec![0u8; 1600];
    let mut fanned_out = 0;
    for _ in 0..100_000 {
        let len = (rng.next_u64() % 1600) as usize;
        let len = if rng.next_u64() % 2 == 0 {
            len % 130
        } else {
            len
        };
        for b in &mut buf[..len] {
            *b = rng.next_u64() as u8;
        }
        let pick = rng.next_u64() % 8;
        if let Some(prefix) = prefixes.get(pick as usize) {
            if prefix.len() <= len {
                buf[..prefix.len()].copy_from_slice(prefix);
            }
        }
        let from = if rng.next_u64() % 2 == 0 {
            lab.addr((rng.next_u64() % 4) as usize)
        } else {
            let bits = rng.next_u64();
            SocketAddr::from(((bits as u32).to_be_bytes(), (bits >> 32) as u16))
        };
        lab.now += rng.next_u64() % (10 * MS);
        if let (Outcome::FanOut(recipients), _) = lab.server_receives(from, &buf[..len]) {
            fanned_out += 1;
            assert!(joined.contains(&from));
            assert!(
                recipients.iter().all(|r| joined.contains(r)),
                "{recipients:?}"
            );
        }
    }
    assert!(
        fanned_out > 1000,
        "the loop reached the fan-out path ({fanned_out})"
    );
    assert_eq!(
        lab.server.clients(),
        4,
        "random bytes neither join nor leave"
    );
    let c = lab.server.counters();
    let drops = c.malformed
        + c.oversized
        + c.unknown_sender
        + c.bad_cookie
        + c.expired
        + c.table_full
        + c.rate_limited
        + c.short_join;
    assert!(drops > 50_000);
}

#[test]
fn joiner_retransmits_after_200_ms() {
    let mut joiner = Joiner::new(42, 0);
    let mut buf = [0u8; 64];
    let t0 = 5 * SECOND;
    let n = joiner.poll_transmit(t0, &mut buf).unwrap();
    assert_eq!(n, msg::JOIN_REQUEST_LEN);
    let first = buf;
    assert_eq!(
        joiner.poll_transmit(t0, &mut buf),
        None,
        "one message per deadline"
    );
    assert_eq!(joiner.poll_timeout(), Some(t0 + 200 * MS));
    joiner.handle_timeout(t0 + 199 * MS);
    assert_eq!(joiner.poll_transmit(t0 + 199 * MS, &mut buf), None);
    joiner.handle_timeout(t0 + 200 * MS);
    assert_eq!(joiner.poll_transmit(t0 + 200 * MS, &mut buf), Some(64));
    assert_eq!(buf, first, "the same JoinRequest again");
    assert_eq!(joiner.poll_timeout(), Some(t0 + 400 * MS));
}

#[test]
fn joiner_joins_through_loss_by_retransmitting() {
    let mut lab = Lab::new(config(), &[0]);
    let start = lab.now;
    // The first two JoinRequests and the first JoinConfirm are lost.
    let (mut requests_lost, mut confirms_lost) = (0, 0);
    lab.run_until(start + 2 * SECOND, move |d| {
        match msg::message_type(&d.payload) {
            Some(msg::MessageType::JoinRequest) if requests_lost < 2 => requests_lost += 1,
            Some(msg::MessageType::JoinConfirm) if confirms_lost < 1 => confirms_lost += 1,
            _ => return false,
        }
        true
    });
    assert!(lab.clients[0].1.is_joined());
    let joined_at = lab
        .events
        .iter()
        .position(|(_, e)| matches!(e, JoinEvent::Joined { .. }))
        .unwrap();
    assert_eq!(lab.events.len(), joined_at + 1, "nothing after the Welcome");
    assert_eq!(lab.server.counters().joins, 1);
    assert_eq!(
        lab.clients[0].1.poll_timeout(),
        None,
        "no timer once joined"
    );
}

#[test]
fn joiner_ignores_datagrams_with_another_nonce_or_game() {
    let mut joiner = Joiner::new(42, 3);
    let mut buf = [0u8; 64];
    joiner.poll_transmit(0, &mut buf);
    let foreign = [
        msg::Repr::Challenge {
            client_nonce: 43,
            game: 3,
            epoch: 1,
            mac: 2,
        },
        msg::Repr::Challenge {
            client_nonce: 42,
            game: 4,
            epoch: 1,
            mac: 2,
        },
        msg::Repr::Welcome {
            client_nonce: 43,
            game: 3,
            slot: 0,
        },
        msg::Repr::Welcome {
            client_nonce: 42,
            game: 4,
            slot: 0,
        },
        msg::Repr::Reject {
            client_nonce: 43,
            reason: RejectReason::TableFull,
        },
        // Client-to-server messages are not answers.
        msg::Repr::JoinRequest {
            client_nonce: 42,
            game: 3,
        },
    ];
    for message in foreign {
        assert_eq!(
            joiner.handle_datagram(0, &encode(message)),
            JoinEvent::Ignored,
            "{message:?}"
        );
    }
    assert_eq!(
        joiner.handle_datagram(0, &probe_packet(1)),
        JoinEvent::Ignored
    );
    assert_eq!(joiner.handle_datagram(0, b"LLGM"), JoinEvent::Ignored);
    assert_eq!(
        joiner.poll_transmit(0, &mut buf),
        None,
        "nothing new to send"
    );
    assert!(!joiner.is_joined());

    // Ours: challenge → confirm echoes it; welcome → joined; then ignore.
    let challenge = msg::Repr::Challenge {
        client_nonce: 42,
        game: 3,
        epoch: 7,
        mac: 0xabc,
    };
    assert_eq!(
        joiner.handle_datagram(0, &encode(challenge)),
        JoinEvent::Challenged
    );
    let n = joiner.poll_transmit(0, &mut buf).unwrap();
    assert_eq!(
        msg::Repr::parse_bytes(&buf[..n]),
        Ok(msg::Repr::JoinConfirm {
            client_nonce: 42,
            game: 3,
            epoch: 7,
            mac: 0xabc
        })
    );
    let welcome = msg::Repr::Welcome {
        client_nonce: 42,
        game: 3,
        slot: 9,
    };
    assert_eq!(
        joiner.handle_datagram(0, &encode(welcome)),
        JoinEvent::Joined { slot: 9 }
    );
    assert_eq!(
        joiner.handle_datagram(0, &encode(welcome)),
        JoinEvent::Ignored
    );
    let reject = msg::Repr::Reject {
        client_nonce: 42,
        reason: RejectReason::TableFull,
    };
    assert_eq!(
        joiner.handle_datagram(0, &encode(reject)),
        JoinEvent::Ignored
    );
    assert_eq!(joiner.slot(), Some(9));
}

#[test]
fn config_debug_does_not_show_the_secret() {
    let shown = format!("{:?}", Server::new(config()));
    assert!(!shown.contains("latlab test key"));
    assert!(!shown.contains(&format!("{:?}", SECRET)));
    assert!(shown.contains("<redacted>"));
}
