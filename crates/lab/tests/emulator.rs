//! The link emulator end to end: `client — emu — server` namespaces, the bridge in the middle,
//! real UDP probes and a real kernel TCP connection across it (root; must run under CI=true).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::Stop;
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_lab::measure::{self, GenOptions, ThreadChoice};
use latlab_lab::topology::{why_no_namespaces, ClientEmuServer};
use latlab_link::{FlowMatch, FlowRule, Flows, LinkConfig, LossModel};

/// Labs take turns: each runs a busy emulator, and two at once would measure each other.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The lab with a running emulator and reflector; everything stops and is removed on drop.
struct Lab {
    topo: ClientEmuServer,
    emu_stop: Arc<Stop>,
    emu: Option<std::thread::JoinHandle<EmulatorReport>>,
    echo_stop: Arc<Stop>,
    echo: Option<std::thread::JoinHandle<()>>,
    target: SocketAddr,
    /// Released last, when everything above has stopped and gone.
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Lab {
    fn start(a_to_b: LinkConfig, b_to_a: LinkConfig) -> Option<Lab> {
        Lab::start_with(a_to_b, b_to_a, false)
    }

    fn start_with(
        a_to_b: impl Into<Flows>,
        b_to_a: impl Into<Flows>,
        pipeline: bool,
    ) -> Option<Lab> {
        let (a_to_b, b_to_a) = (a_to_b.into(), b_to_a.into());
        if !latlab_io::precondition::met(why_no_namespaces()) {
            return None;
        }
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let topo = ClientEmuServer::build().unwrap();
        let open = || {
            let opts = PacketOptions::default();
            (
                PacketSocket::open(ClientEmuServer::EMU_A, &opts).unwrap(),
                PacketSocket::open(ClientEmuServer::EMU_B, &opts).unwrap(),
            )
        };
        let (mut a, mut b) = latlab_io::netns::run_in(topo.emu.name(), open).unwrap();
        let emu_stop = Arc::new(Stop::new());
        let s = emu_stop.clone();
        let emu = if pipeline {
            let (tx_a, tx_b) = latlab_io::netns::run_in(topo.emu.name(), open).unwrap();
            std::thread::spawn(move || {
                let sockets = emulator::PipelineSockets {
                    rx_a: a,
                    rx_b: b,
                    tx_a,
                    tx_b,
                };
                emulator::run_pipeline(
                    sockets,
                    a_to_b,
                    b_to_a,
                    4096,
                    (None, None),
                    &s,
                    &EmulatorLive::default(),
                )
                .unwrap()
            })
        } else {
            std::thread::spawn(move || {
                emulator::run(
                    &mut a,
                    &mut b,
                    a_to_b,
                    b_to_a,
                    2048,
                    latlab_engine::PollMode::Busy,
                    &s,
                    &EmulatorLive::default(),
                )
                .unwrap()
            })
        };
        let target = SocketAddr::from((topo.server_addr, 7777));
        let sock = latlab_io::netns::run_in(topo.server.name(), move || {
            UdpSocket::bind(
                target,
                &UdpOptions {
                    rx_timestamps: true,
                    // As deep as the client's: a reflector left out for a while loses nothing.
                    rcvbuf: Some(4 << 20),
                    ..UdpOptions::default()
                },
            )
        })
        .unwrap()
        .unwrap();
        let echo_stop = Arc::new(Stop::new());
        let s = echo_stop.clone();
        let echo = std::thread::spawn(move || {
            let config = ReflectorConfig {
                poll: latlab_engine::PollMode::Block,
                ..ReflectorConfig::default()
            };
            reflector::run_udp(&sock, &config, &s, &ReflectorCounters::default()).unwrap()
        });
        Some(Lab {
            _turn: turn,
            topo,
            emu_stop,
            emu: Some(emu),
            echo_stop,
            echo: Some(echo),
            target,
        })
    }

    /// Measures round trips from the client at `rate` for `duration`. A run ends once every
    /// probe is back, so the grace period after the last send (long enough for a guest that
    /// stalls: a probe later than that is counted lost) costs time only for probes really lost.
    fn measure(&self, rate: f64, duration: Duration) -> latlab_lab::results::RunSummary {
        self.measure_with_grace(rate, duration, Duration::from_secs(20))
    }

    /// [`Lab::measure`] with a grace period of `grace`.
    fn measure_with_grace(
        &self,
        rate: f64,
        duration: Duration,
        grace: Duration,
    ) -> latlab_lab::results::RunSummary {
        let mut opts = GenOptions::new(self.target);
        opts.bind = self.topo.client_addr.into();
        opts.rate = latlab_lab::units::ProbeRate::try_from(rate).expect("a probe rate");
        opts.duration = duration;
        opts.warmup = Duration::from_millis(100);
        opts.grace = grace;
        opts.threads = ThreadChoice::One;
        opts.poll = latlab_engine::PollMode::Block;
        let bind = opts.bind;
        let (sockets, check) = latlab_io::netns::run_in(self.topo.client.name(), move || {
            measure::open_sockets(bind, 1, Some(4 << 20))
        })
        .unwrap()
        .unwrap();
        measure::check_target(&check, self.target, Duration::from_secs(30)).unwrap();
        let threads = measure::pick_threads(ThreadChoice::One, None);
        let setup = measure::setup(&opts, "emulated".into(), "client-emu-server", threads);
        measure::run(&opts, &sockets, threads, setup, &Stop::new(), &mut |_| {})
            .unwrap()
            .0
    }

    fn finish(mut self) -> EmulatorReport {
        self.echo_stop.raise();
        self.echo.take().unwrap().join().unwrap();
        self.emu_stop.raise();
        self.emu.take().unwrap().join().unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.echo_stop.raise();
        self.emu_stop.raise();
        if let Some(t) = self.echo.take() {
            let _ = t.join();
        }
        if let Some(t) = self.emu.take() {
            let _ = t.join();
        }
    }
}

fn delay(ms: f64) -> LinkConfig {
    LinkConfig {
        delay_ns: (ms * 1e6) as u64,
        ..LinkConfig::default()
    }
}

/// How late the bridge released frames, at most, each way (its own measure of every frame:
/// actual less intended departure, the wait in its receive ring included): what a loaded
/// machine adds to the delay on the bridge's side.
fn lateness(report: &EmulatorReport) -> (u64, u64) {
    (
        report.a_to_b.release_error.max(),
        report.b_to_a.release_error.max(),
    )
}

/// The fastest round trip of a run through a bridge that delays `rtt_ns` in all: never less
/// than the delay (no frame leaves before it is due), and less than half a delay more than the
/// delay and the most the bridge itself released a frame late each way, `late_ns` (the delay
/// was not applied twice). The fastest of about a thousand probes, not the median, with the
/// bridge's own lateness allowed for: the check is of what the bridge decided, not of how fast
/// a loaded guest ran it.
fn fastest_round_trip_is(s: &latlab_lab::results::RunSummary, rtt_ns: u64, late_ns: (u64, u64)) {
    let min = s.latency_ns.min_ns;
    let most = rtt_ns + rtt_ns / 2 + late_ns.0 + late_ns.1;
    assert!(
        (rtt_ns..most).contains(&min),
        "fastest round trip {min} ns, {rtt_ns} ns of delay, the bridge {late_ns:?} ns late at most"
    );
}

/// The same for each way, from the one-way delays the namespaces' shared clock gives: the
/// fastest request took `forward_ns` and some, the fastest answer `return_ns` and some (less
/// than half a round trip's delay more, or 1 ms for a way without delay, and the bridge's
/// lateness that way).
fn fastest_one_way_is(
    s: &latlab_lab::results::RunSummary,
    forward_ns: u64,
    return_ns: u64,
    late_ns: (u64, u64),
) {
    let slack = ((forward_ns + return_ns) / 2).max(1_000_000);
    for (way, summary, delay, late) in [
        ("forward", &s.forward_ns, forward_ns, late_ns.0),
        ("return", &s.return_ns, return_ns, late_ns.1),
    ] {
        let min = summary
            .as_ref()
            .expect("one-way delays on a shared clock")
            .min_ns;
        assert!(
            (delay..delay + slack + late).contains(&min),
            "fastest {way} way {min} ns, {delay} ns of delay, the bridge {late} ns late at most"
        );
    }
}

/// 1 s of 1 kpps through a bridge (pipelined or not) delaying 2.5 ms each way: checks that
/// nothing was lost, that no frame left early (the bridge's own count) and the fastest round
/// trip; returns the bridge's report and how many probes left.
fn five_ms_round_trips(pipeline: bool) -> Option<(EmulatorReport, u64)> {
    let lab = Lab::start_with(delay(2.5), delay(2.5), pipeline)?;
    let s = lab.measure(1000.0, Duration::from_secs(1));
    let report = lab.finish();
    assert_eq!(s.lost, 0, "{s:?}");
    fastest_round_trip_is(&s, 5_000_000, lateness(&report));
    fastest_one_way_is(&s, 2_500_000, 2_500_000, lateness(&report));
    for d in [&report.a_to_b, &report.b_to_a] {
        assert_eq!(d.released_early, 0, "{d:?}");
        // Every frame it released was measured against the time it was due.
        assert_eq!(d.release_error.len(), d.sent, "{d:?}");
    }
    // Every probe the schedule owed after the warm-up (1 s at 1 kpps, 100 ms of it warm-up)
    // left or was counted as unsent: none vanished.
    assert_eq!(s.sent + s.unsent, 900, "{s:?}");
    let probes = s.sent + s.warmup.sent;
    Some((report, probes))
}

#[test]
fn a_5ms_round_trip_delay_is_measured_as_5ms() {
    // 2.5 ms each way: 5 ms more on every round trip.
    let Some((report, probes)) = five_ms_round_trips(false) else {
        return;
    };
    // Every probe that left crossed both ways.
    assert!(
        report.a_to_b.link.delivered >= probes && report.b_to_a.link.delivered >= probes,
        "{report:?}"
    );
    assert_eq!(
        report.a_to_b.tx_ring_full + report.a_to_b.queue_slots_full,
        0
    );
}

#[test]
fn a_pipelined_bridge_delays_as_the_single_loop_does() {
    // Its two stages spin unpinned on a two-core machine beside the probes' sender and
    // reflector: the checks of five_ms_round_trips are of counts and of the fastest probe,
    // which hold however the cores were shared.
    let Some((report, probes)) = five_ms_round_trips(true) else {
        return;
    };
    assert!(
        report.a_to_b.sent >= probes && report.b_to_a.sent >= probes,
        "{report:?}"
    );
    assert_eq!(
        report.a_to_b.queue_slots_full + report.a_to_b.tx_ring_full,
        0
    );
}

#[test]
fn a_pipelined_bridge_steers_the_probes_port_through_its_rule() {
    // The probes go to port 7777: the first rule (port 9, everything lost) never takes them,
    // the second delays them 5 ms; their answers (from port 7777) take the default link.
    let rule = |text: &str, config| FlowRule {
        matcher: FlowMatch::parse("--flow", text).unwrap(),
        config,
    };
    let lose_all = LinkConfig {
        loss: LossModel::Bernoulli { p: 1.0 },
        ..LinkConfig::default()
    };
    let a_to_b = Flows {
        default: LinkConfig::default(),
        rules: vec![
            rule("proto=udp dport=9", lose_all),
            rule("proto=udp dport=7777", delay(5.0)),
        ],
    };
    let Some(lab) = Lab::start_with(a_to_b, LinkConfig::default(), true) else {
        return;
    };
    let s = lab.measure(1000.0, Duration::from_secs(1));
    let report = lab.finish();
    assert_eq!(s.lost, 0, "{s:?}");
    // The rule's 5 ms, on the requests only: the fastest round trip is 5 ms and some, not
    // the 10 ms the rule would give if it also took the answers or were applied twice.
    fastest_round_trip_is(&s, 5_000_000, lateness(&report));
    fastest_one_way_is(&s, 5_000_000, 0, lateness(&report));
    let d = &report.a_to_b;
    assert_eq!(d.released_early, 0, "{d:?}");
    let [unused, game, default] = &d.flows[..] else {
        panic!("two rules and the default: {:?}", d.flows);
    };
    assert_eq!(unused.link.arrived, 0);
    assert!(game.sent >= s.sent + s.warmup.sent, "{game:?}");
    assert_eq!(game.matcher.as_deref(), Some("proto=udp dport=7777"));
    assert_eq!(default.matcher, None);
    let sent: u64 = d.flows.iter().map(|f| f.sent).sum();
    assert_eq!(sent, d.sent, "the flows add up to the direction");
    assert!(report.b_to_a.flows.is_empty());
}

#[test]
fn ten_percent_loss_is_measured_as_ten_percent() {
    let lossy = LinkConfig {
        loss: LossModel::Bernoulli { p: 0.1 },
        seed: 42,
        ..delay(2.0)
    };
    let Some(lab) = Lab::start(lossy, delay(2.0)) else {
        return;
    };
    // 20,000 probes owed after a 100 ms warm-up: each one sent or counted as unsent (a loaded
    // guest may leave many unsent). A grace of 3 s: the lost tenth is waited for in full.
    let udp_drops = || {
        (
            udp_in_errors(lab.topo.client.name()),
            udp_in_errors(lab.topo.server.name()),
        )
    };
    let before = udp_drops();
    let s = lab.measure_with_grace(
        10_000.0,
        Duration::from_millis(2100),
        Duration::from_secs(3),
    );
    let after = udp_drops();
    let report = lab.finish();
    assert_eq!(s.sent + s.unsent, 20_000, "{s:?}");
    // Five standard deviations of 10% for `of` trials (±1.5% for 20,000, ±4.7% for 1,000).
    let band = |of: u64| 5.0 * (0.1f64 * 0.9 / of as f64).sqrt() + 1.0 / of as f64;
    // The model dropped a tenth of what it was given.
    let link = &report.a_to_b.link;
    let model = link.dropped_loss as f64 / link.arrived.max(1) as f64;
    assert!(
        (model - 0.1).abs() <= band(link.arrived),
        "the model dropped {} of {} ({model:.4})",
        link.dropped_loss,
        link.arrived
    );
    // A probe is lost by the model or by a cause counted elsewhere on the path: the kernel
    // before the emulator's rings, the emulator's own drops, the UDP sockets at either end
    // (a loaded machine leaves the readers out for a while). Measured over the probes that
    // reached the model, the loss is the model's tenth and at most those other drops more.
    let (ab, ba) = (&report.a_to_b, &report.b_to_a);
    let engine = |d: &emulator::DirectionReport| {
        d.tx_ring_full + d.tx_too_long + d.tx_too_short + d.queue_slots_full
    };
    let elsewhere = (after.0 - before.0)
        + (after.1 - before.1)
        + ba.kernel_drops
        + engine(ab)
        + engine(ba)
        + (ab.link.dropped() - ab.link.dropped_loss)
        + ba.link.dropped();
    let reached = s.sent.saturating_sub(ab.kernel_drops).max(1);
    let (low, high) = (s.lost, s.lost.saturating_sub(elsewhere + ab.kernel_drops));
    eprintln!(
        "{} sent, {} lost; {} dropped before the emulator, {elsewhere} after it or elsewhere; \
         the model dropped {} of {}",
        s.sent, s.lost, ab.kernel_drops, link.dropped_loss, link.arrived
    );
    assert!(
        low as f64 / reached as f64 >= 0.1 - band(reached),
        "{low} of {reached} probes lost: the model's tenth was not all measured"
    );
    assert!(
        high as f64 / reached as f64 <= 0.1 + band(reached),
        "{} of {reached} probes lost, {} of them by causes other than the model: more than \
         its tenth",
        s.lost,
        elsewhere + ab.kernel_drops
    );
}

/// Datagrams the UDP sockets of network namespace `ns` could not take (`InErrors`, since
/// the namespace was made).
fn udp_in_errors(ns: &str) -> u64 {
    latlab_io::netns::run_in(ns, || latlab_io::udpmib::UdpMib::open()?.read())
        .unwrap()
        .unwrap()
        .in_errors
}

#[test]
fn a_kernel_tcp_connection_works_through_the_emulator() {
    let Some(lab) = Lab::start(delay(1.0), delay(1.0)) else {
        return;
    };
    let addr = SocketAddr::from((lab.topo.server_addr, 5001));
    let listener =
        latlab_io::netns::run_in(lab.topo.server.name(), move || TcpListener::bind(addr))
            .unwrap()
            .unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        conn.read_exact(&mut buf).unwrap();
        conn.write_all(&buf).unwrap();
    });
    let started = std::time::Instant::now();
    let mut conn = latlab_io::netns::run_in(lab.topo.client.name(), move || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(30))
    })
    .unwrap()
    .unwrap();
    let connect = started.elapsed();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    conn.write_all(&data).unwrap();
    let mut back = vec![0u8; data.len()];
    conn.read_exact(&mut back).unwrap();
    server.join().unwrap();
    assert!(back == data, "1 MiB came back intact");
    // The handshake crossed the emulated 2 ms round trip.
    assert!(
        connect >= Duration::from_millis(2),
        "connected in {connect:?}"
    );
    let report = lab.finish();
    // The 1 MiB crossed in frames of at most 64 KiB (a veth sender's largest TCP segment).
    assert!(
        report.a_to_b.link.delivered >= (1 << 20) / 65_536,
        "{:?}",
        report.a_to_b.link
    );
}
