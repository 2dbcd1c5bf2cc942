//! The model game server and its measuring clients on loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::game::{self, Flood, GameClientConfig, GameServerConfig, ServerIo, ServerLive};
use latlab_engine::{PollMode, Stop};
use latlab_game::ServerCounters;
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_probe::{Pattern, ProbeConfig};

/// How long a join may wait for the server's answer: an answer normally takes microseconds; the
/// wait only runs out when something is broken, so it is long enough for a stalled guest.
const JOIN_WAIT: Duration = Duration::from_secs(30);

/// Time the clients wait for copies after the last probe (the run ends as soon as every copy
/// is in, so this only costs time when one is really lost).
const GRACE_NS: u64 = 20_000_000_000;

/// The tests of this file spin (servers and clients on their schedules) and would take the two
/// cores from each other: they take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

struct RunningServer {
    addr: SocketAddr,
    stop: Arc<Stop>,
    thread: Option<std::thread::JoinHandle<ServerCounters>>,
}

impl RunningServer {
    fn start(io: ServerIo, rate_limit_pps: Option<f64>) -> RunningServer {
        RunningServer::start_with(
            io,
            latlab_game::ServerConfig {
                max_clients: 8,
                rate_limit_pps,
                rate_burst: 8,
                secret: [7; 16],
                ..latlab_game::ServerConfig::default()
            },
        )
    }

    fn start_with(io: ServerIo, game: latlab_game::ServerConfig) -> RunningServer {
        // A buffer deep enough that a server thread the scheduler leaves out for a while
        // loses nothing of the clients' schedules.
        let opts = UdpOptions {
            rcvbuf: Some(4 << 20),
            ..UdpOptions::default()
        };
        let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(Stop::new());
        let config = GameServerConfig {
            io,
            poll: PollMode::Block,
            game,
            ..GameServerConfig::default()
        };
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            game::serve(&socket, &config, &s, &ServerLive::default()).unwrap()
        });
        RunningServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> ServerCounters {
        self.stop.raise();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn clients(n: usize) -> Vec<UdpSocket> {
    let opts = UdpOptions {
        rx_timestamps: true,
        rcvbuf: Some(4 << 20),
        ..UdpOptions::default()
    };
    (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap())
        .collect()
}

fn probe(rate: f64) -> ProbeConfig {
    ProbeConfig {
        run_id: 99,
        flows: 1,
        payload_len: 128,
        pattern: Pattern::Constant,
        rate_pps: rate,
        start_ns: 0,
        duration_ns: 500_000_000,
        warmup_ns: 100_000_000,
        seed: 1,
        traffic: None,
    }
}

fn measure(io: ServerIo) {
    let server = RunningServer::start(io, None);
    let sockets = clients(4);
    game::join_all(&sockets, server.addr, 0, JOIN_WAIT).unwrap();
    // Garbage and a probe from an address that never joined: counted, dropped, served on.
    let stranger = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..20 {
        stranger.send_to(&vec![0xee; 3 + i], server.addr).unwrap();
    }
    let mut fake = [0u8; 64];
    latlab_wire::probe::Repr {
        run_id: 99,
        flow: 0,
        seq: 0,
        intended_send_ns: 1,
        actual_send_ns: 1,
        responder: None,
        responder_clock: latlab_wire::probe::ResponderClock::NotAsked,
    }
    .emit(&mut latlab_wire::probe::Packet::new_unchecked(
        &mut fake[..],
    ));
    stranger.send_to(&fake, server.addr).unwrap();
    let config = GameClientConfig {
        probe: probe(2000.0),
        server: server.addr,
        batch: 16,
        grace_ns: GRACE_NS,
        cpu: None,
    };
    let result = game::run_clients(&sockets, &config, None, &Stop::new(), &mut |_| {}).unwrap();
    let counters = server.finish();
    let r = &result.report;
    // A guest stall may leave probes unsent (counted apart): every measured probe owed is sent
    // or unsent, and the server fanned out every game packet that was sent.
    assert_eq!(r.warmup_sent + r.sent + r.unsent, 1000, "{r:?}");
    assert!(r.sent <= 800, "{r:?}");
    assert_eq!(
        r.complete, r.sent,
        "every client got every copy on loopback ({io:?})"
    );
    assert_eq!(r.copies_received, 4 * r.sent);
    assert_eq!(r.latency_last.len(), r.sent);
    assert!(r.latency_first.max() <= r.latency_last.max());
    assert!(r.latency_first.mean() <= r.latency_last.mean());
    assert_eq!(counters.joins, 4);
    assert_eq!(counters.game_packets, r.warmup_sent + r.sent);
    assert_eq!(
        counters.copies,
        4 * counters.game_packets,
        "one copy per client per game packet"
    );
    assert_eq!(counters.malformed, 20);
    assert_eq!(counters.unknown_sender, 1);
}

#[test]
fn the_socket_server_fans_every_packet_out_to_every_client() {
    let _turn = turn();
    measure(ServerIo::Socket);
}

#[test]
fn the_batched_server_fans_every_packet_out_to_every_client() {
    let _turn = turn();
    measure(ServerIo::Batched);
}

#[test]
fn a_rate_limit_keeps_a_flooder_from_reaching_the_others() {
    let _turn = turn();
    // A limit far above the honest client's rate (and a bucket deep enough for a server that
    // was left out for a while and then reads a backlog at once), far below any flood.
    const LIMIT_PPS: f64 = 200.0;
    const BURST: u32 = 64;
    let server = RunningServer::start_with(
        ServerIo::Batched,
        latlab_game::ServerConfig {
            max_clients: 8,
            rate_limit_pps: Some(LIMIT_PPS),
            rate_burst: BURST,
            secret: [7; 16],
            ..latlab_game::ServerConfig::default()
        },
    );
    let mut sockets = clients(4);
    game::join_all(&sockets, server.addr, 0, JOIN_WAIT).unwrap();
    let flooder = sockets.pop().unwrap();
    let p = probe(50.0);
    let flood = Flood {
        socket: &flooder,
        probe: ProbeConfig {
            run_id: 5,
            rate_pps: 20_000.0,
            ..p.clone()
        },
    };
    let config = GameClientConfig {
        probe: p,
        server: server.addr,
        batch: 16,
        grace_ns: GRACE_NS,
        cpu: None,
    };
    let started = std::time::Instant::now();
    let result =
        game::run_clients(&sockets, &config, Some(flood), &Stop::new(), &mut |_| {}).unwrap();
    // Until the server has handled the last flood packet left in its socket.
    let counters = server.finish();
    let took = started.elapsed().as_secs_f64();
    let r = &result.report;
    // The honest client stays under the limit: all of its packets went through.
    assert!(r.sent > 0, "{r:?}");
    assert_eq!(r.complete, r.sent);
    // What the server fanned out beyond the honest packets came from the flooder: its bucket,
    // then at most the limit's rate over the whole run; the rest of what it took in was
    // dropped for the limit.
    let honest = r.warmup_sent + r.sent;
    let flood_through = counters.game_packets - honest;
    let allowed = BURST as f64 + LIMIT_PPS * took;
    eprintln!(
        "flood sent {}, {flood_through} through, {} rate limited in {took:.2} s (the limit \
         lets {allowed:.0}); {honest} honest packets",
        result.flood_sent, counters.rate_limited
    );
    assert!(
        flood_through as f64 <= allowed,
        "{flood_through} flood packets went through in {took:.2} s (the limit lets {allowed:.0})"
    );
    assert!(
        flood_through >= u64::from(BURST).min(result.flood_sent),
        "the bucket's first {BURST} packets went through: {flood_through} did"
    );
    assert!(
        counters.rate_limited > 0 && flood_through + counters.rate_limited <= result.flood_sent,
        "{} flood packets sent, {flood_through} through, {} rate limited",
        result.flood_sent,
        counters.rate_limited
    );
    assert_eq!(counters.copies, 4 * counters.game_packets);
}

#[test]
fn joining_a_missing_server_fails_with_the_reason() {
    let _turn = turn();
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let err = game::join_all(&clients(2), addr, 0, Duration::from_millis(500)).unwrap_err();
    assert!(err.to_string().contains("no game server"), "{err}");
}

#[test]
fn silent_clients_holding_the_table_expire_and_a_new_client_joins() {
    let _turn = turn();
    let server = RunningServer::start_with(
        ServerIo::Batched,
        latlab_game::ServerConfig {
            max_clients: 2,
            // Long enough that the holders cannot expire before the first newcomer is refused,
            // however long this thread waits for a core in between.
            idle_timeout_ns: Some(2_000_000_000),
            secret: [7; 16],
            ..latlab_game::ServerConfig::default()
        },
    );
    let holders = clients(2);
    game::join_all(&holders, server.addr, 0, JOIN_WAIT).unwrap();
    let newcomer = clients(1);
    let refused = game::join_all(&newcomer, server.addr, 0, JOIN_WAIT).unwrap_err();
    assert!(refused.to_string().contains("full"), "{refused}");
    // The holders say nothing more; the blocking server wakes for their deadline.
    std::thread::sleep(Duration::from_millis(2_100));
    let newcomer = clients(1);
    game::join_all(&newcomer, server.addr, 0, JOIN_WAIT).unwrap();
    let counters = server.finish();
    assert_eq!((counters.joins, counters.idle_expired), (3, 2));
    assert_eq!(counters.table_full, 1);
}

#[test]
fn one_host_cannot_take_more_clients_than_its_cap() {
    let _turn = turn();
    let server = RunningServer::start_with(
        ServerIo::Socket,
        latlab_game::ServerConfig {
            max_clients: 8,
            max_clients_per_host: Some(2),
            secret: [7; 16],
            ..latlab_game::ServerConfig::default()
        },
    );
    // Every loopback socket is the same host, 127.0.0.1.
    game::join_all(&clients(2), server.addr, 0, JOIN_WAIT).unwrap();
    let refused = game::join_all(&clients(1), server.addr, 0, JOIN_WAIT).unwrap_err();
    assert!(refused.to_string().contains("refused"), "{refused}");
    let counters = server.finish();
    assert_eq!((counters.joins, counters.host_full), (2, 1));
}

/// Issue 10, item 1, for the study's clients: a probe or flood packet the server's address
/// cannot take (here port 0) is counted by cause, and the clients run to their end.
#[test]
fn game_clients_count_what_cannot_be_sent_and_run_to_the_end() {
    let _turn = turn();
    use latlab_io::port::SendFailure;
    let mut sockets = clients(2);
    let flooder = sockets.pop().unwrap();
    let nowhere: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let p = ProbeConfig {
        duration_ns: 200_000_000,
        warmup_ns: 0,
        ..probe(500.0)
    };
    let flood = Flood {
        socket: &flooder,
        probe: ProbeConfig {
            run_id: 5,
            rate_pps: 2_000.0,
            ..p.clone()
        },
    };
    let config = GameClientConfig {
        probe: p,
        server: nowhere,
        batch: 16,
        grace_ns: 50_000_000,
        cpu: None,
    };
    let result =
        game::run_clients(&sockets, &config, Some(flood), &Stop::new(), &mut |_| {}).unwrap();
    assert!(!result.stopped_early);
    // 100 probes and 400 flood packets were due; a loaded machine sends fewer in time (the
    // rest is counted unsent): every probe handed to the port failed, by its cause.
    let r = &result.report;
    let probes = result.send_failed.get(SendFailure::InvalidDestination);
    assert_eq!(r.sent + r.unsent, 100, "{r:?}");
    assert!(probes > 0, "{:?}", result.send_failed);
    assert_eq!(probes, r.sent, "{:?}", result.send_failed);
    assert_eq!(probes, result.send_failed.total());
    assert_eq!(result.report.copies_received, 0);
    let flood = result
        .flood_send_failed
        .get(SendFailure::InvalidDestination);
    // The flood went on after its first failure (one packet more than a batch).
    assert!(
        (17..=401).contains(&flood),
        "{:?}",
        result.flood_send_failed
    );
    assert_eq!(flood, result.flood_send_failed.total());
    assert_eq!(result.flood_sent, 0);
}
