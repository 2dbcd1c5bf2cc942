//! No host can lock the server: silent clients expire after the idle timeout, and one host
//! holds at most its cap of the table (regression tests of issue 10, item 5).

use super::*;

const IDLE: u64 = 10 * SECOND;

/// The host that tries to take every slot.
const GREEDY_HOST: [u8; 4] = [10, 0, 9, 9];

fn greedy(port: u16) -> SocketAddr {
    SocketAddr::from((GREEDY_HOST, port))
}

impl Lab {
    /// Adds a client at `addr` that wants to join game 0; it joins at the next `run_until`.
    fn add_client(&mut self, addr: SocketAddr) -> usize {
        let nonce = 0xadd0_0000 + self.clients.len() as u64;
        self.clients.push((addr, Joiner::new(nonce, 0)));
        self.clients.len() - 1
    }

    /// The clients the server refused for `reason`.
    fn rejected_clients(&self, reason: RejectReason) -> Vec<SocketAddr> {
        self.clients
            .iter()
            .filter(|(_, j)| j.rejected() == Some(reason as u8))
            .map(|(a, _)| *a)
            .collect()
    }

    /// Joins `addr` by hand (request, confirm) at the current time; returns the outcome of
    /// the confirm.
    fn join_now(&mut self, addr: SocketAddr, client_nonce: u64) -> Outcome {
        let cookie = self.challenge(addr, client_nonce, 0);
        self.confirm(addr, client_nonce, 0, cookie).0
    }
}

#[test]
fn one_host_holding_every_slot_does_not_lock_the_server_for_ever() {
    let mut lab = Lab::new(
        ServerConfig {
            max_clients: 4,
            idle_timeout_ns: Some(IDLE),
            ..config()
        },
        &[],
    );
    for port in 5000..5004 {
        lab.add_client(greedy(port));
    }
    lab.join_all();
    assert_eq!(lab.server.clients(), 4, "one host holds the whole table");

    let newcomer = lab.add_client(client_addr(1));
    lab.join_all();
    assert_eq!(
        lab.rejected_clients(RejectReason::TableFull),
        [client_addr(1)],
        "the table is full"
    );
    assert_eq!(lab.server.counters().table_full, 1);

    // The greedy host says nothing more: its clients fall idle and leave the table.
    let deadline = lab.server.poll_timeout().expect("clients have a deadline");
    assert!(
        deadline <= lab.now + IDLE - SECOND,
        "joined over a second ago"
    );
    lab.run_until(deadline + 1, |_| false);
    assert_eq!(lab.server.clients(), 0);
    assert_eq!(lab.server.counters().idle_expired, 4);
    assert_eq!(
        lab.server.poll_timeout(),
        None,
        "an empty table has no timer"
    );
    assert_eq!(
        lab.send_probe(0, 1),
        Outcome::Dropped(DropCause::UnknownSender),
        "an expired client is a stranger"
    );

    // The newcomer tries again and gets the lowest freed slot.
    lab.clients[newcomer].1 = Joiner::new(0x2222, 0);
    lab.join_all();
    assert!(lab.server.is_client(client_addr(1)));
    assert_eq!(lab.clients[newcomer].1.slot(), Some(0));
}

#[test]
fn one_host_fills_its_cap_and_other_hosts_still_join() {
    let mut lab = Lab::new(
        ServerConfig {
            max_clients: 8,
            max_clients_per_host: Some(2),
            ..config()
        },
        &[],
    );
    for port in 5000..5005 {
        lab.add_client(greedy(port));
    }
    lab.add_client(client_addr(1));
    lab.add_client(client_addr(2));
    lab.join_all();

    assert_eq!(lab.server.clients_of_host(greedy(1)), 2);
    assert_eq!(
        lab.rejected_clients(RejectReason::HostFull).len(),
        3,
        "the greedy host's other three, told that their host is full"
    );
    assert!(lab.rejected_clients(RejectReason::TableFull).is_empty());
    assert!(lab
        .rejected_clients(RejectReason::HostFull)
        .iter()
        .all(|a| a.ip() == greedy(0).ip()));
    assert!(lab.server.is_client(client_addr(1)) && lab.server.is_client(client_addr(2)));
    let c = lab.server.counters();
    assert_eq!((c.joins, c.host_full, c.table_full), (4, 3, 0));
    assert_eq!(lab.server.poll_timeout(), None, "no idle timeout, no timer");

    // A Leave gives the host its room back.
    let leaver = lab.clients.iter().position(|(_, j)| j.is_joined()).unwrap();
    let mut buf = [0u8; 20];
    let n = lab.clients[leaver].1.write_leave(&mut buf);
    let from = lab.addr(leaver);
    assert_eq!(lab.server_receives(from, &buf[..n]).0, Outcome::Handshake);
    assert_eq!(lab.server.clients_of_host(greedy(1)), 1);
    assert_eq!(lab.join_now(greedy(6000), 0x6000), Outcome::Handshake);
    assert_eq!(
        lab.join_now(greedy(6001), 0x6001),
        Outcome::Dropped(DropCause::HostFull)
    );
    // A client already in the table may confirm again at the cap.
    assert_eq!(lab.join_now(greedy(6000), 0x6002), Outcome::Handshake);
    assert_eq!(lab.server.counters().host_full, 4);
}

#[test]
fn an_idle_client_expires_and_its_slot_is_reused() {
    let mut lab = Lab::new(
        ServerConfig {
            max_clients: 2,
            idle_timeout_ns: Some(IDLE),
            ..config()
        },
        &[0, 0],
    );
    lab.join_all();
    let (active, silent) = (lab.addr(0), lab.addr(1));
    let silent_slot = lab.clients[1].1.slot().unwrap();
    // Client 0 plays on, once a second; client 1 says nothing after joining.
    let t0 = lab.now;
    for s in 0..8 {
        lab.now = t0 + s * SECOND;
        assert!(matches!(lab.send_probe(0, s), Outcome::FanOut(_)));
    }
    let deadline = lab.server.poll_timeout().unwrap();
    assert!(
        deadline < t0 + IDLE,
        "the silent client's deadline: it joined before t0"
    );

    lab.server.handle_timeout(deadline - 1);
    assert_eq!(lab.server.clients(), 2, "not a nanosecond early");
    lab.server.handle_timeout(deadline);
    assert_eq!(lab.server.clients(), 1);
    assert!(lab.server.is_client(active) && !lab.server.is_client(silent));
    assert_eq!(lab.server.counters().idle_expired, 1);
    assert_eq!(lab.server.recipients(0), &[active]);
    assert_eq!(
        lab.server.poll_timeout(),
        Some(t0 + 7 * SECOND + IDLE),
        "next: the active client, from its last probe"
    );

    // The slot goes to the next client.
    lab.now = deadline;
    let newcomer = lab.add_client(client_addr(7));
    lab.join_all();
    assert_eq!(lab.clients[newcomer].1.slot(), Some(silent_slot));
    assert_eq!(lab.server.clients(), 2);
}

#[test]
fn a_game_packet_or_a_confirm_keeps_a_client_but_a_join_request_does_not() {
    let mut lab = Lab::new(
        ServerConfig {
            idle_timeout_ns: Some(IDLE),
            rate_limit_pps: Some(1.0),
            rate_burst: 1,
            ..config()
        },
        &[0, 0, 0],
    );
    lab.join_all();
    let t0 = lab.now;
    for s in 1..=12 {
        lab.now = t0 + s * SECOND;
        // Client 0 floods: one probe a second passes, the other is rate-limited; both
        // count as hearing from it.
        lab.send_probe(0, 2 * s);
        lab.send_probe(0, 2 * s + 1);
        // Client 1 only asks for cookies: that is stateless and proves nothing.
        lab.challenge(lab.addr(1), 0x1111, 0);
        // Client 2 confirms its membership again with a fresh cookie.
        assert_eq!(lab.join_now(lab.addr(2), 0x2222), Outcome::Handshake);
        lab.server.handle_timeout(lab.now);
    }
    assert!(lab.server.is_client(lab.addr(0)));
    assert!(!lab.server.is_client(lab.addr(1)));
    assert!(lab.server.is_client(lab.addr(2)));
    let c = lab.server.counters();
    assert_eq!((c.idle_expired, c.rate_limited), (1, 12));
}

#[test]
fn a_host_is_an_ipv4_address_or_an_ipv6_slash_64() {
    let mut lab = Lab::new(
        ServerConfig {
            max_clients_per_host: Some(1),
            ..config()
        },
        &[],
    );
    let addr = |text: &str| -> SocketAddr { text.parse().unwrap() }; // literals that parse
    let cases = [
        ("10.0.0.5:1", Outcome::Handshake),
        ("10.0.0.5:2", Outcome::Dropped(DropCause::HostFull)),
        ("[::ffff:10.0.0.5]:3", Outcome::Dropped(DropCause::HostFull)),
        ("10.0.0.6:1", Outcome::Handshake),
        ("[2001:db8::1]:1", Outcome::Handshake),
        (
            "[2001:db8::ffff:2]:1",
            Outcome::Dropped(DropCause::HostFull),
        ),
        ("[2001:db8:0:1::1]:1", Outcome::Handshake),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        assert_eq!(lab.join_now(addr(text), i as u64), want, "{text}");
    }
    assert_eq!(lab.server.clients(), 4);
    assert_eq!(lab.server.counters().host_full, 3);
}

#[test]
fn a_clock_that_steps_back_never_expires_a_client_early() {
    let mut lab = Lab::new(
        ServerConfig {
            idle_timeout_ns: Some(IDLE),
            ..config()
        },
        &[0, 0],
    );
    lab.join_all();
    let t = lab.now + SECOND;
    lab.now = t;
    lab.send_probe(0, 0);
    // A stamp from slightly earlier (the kernel stamped it before the engine looked).
    lab.now = t - MS;
    lab.send_probe(1, 1);
    lab.server.handle_timeout(t + IDLE - 1);
    assert_eq!(lab.server.clients(), 2);
    lab.server.handle_timeout(t + IDLE);
    assert_eq!(lab.server.clients(), 0, "both were last heard from at t");
}
