//! `latlab stream` through an emulated link: `client — emu — server` namespaces with the link
//! emulator in the middle (10 ms each way, 1% loss each way), every transport at once, each on
//! its own port (root; must run under CI=true).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_lab::topology::{why_no_namespaces, ClientEmuServer};
use latlab_link::{LinkConfig, LossModel};
use latlab_stream::recv::{Receiver, RecvReport};
use latlab_stream::tcp::RtoMinGuard;
use latlab_stream::{send, RecvCommand, SendCommand, StreamSummary};

mod common;
use common::TRANSPORTS;

const MESSAGES: u64 = 1000;
const EVERY: Duration = Duration::from_millis(5);

/// The three namespaces and a running emulator; everything stops and is removed on drop.
struct Lab {
    topo: ClientEmuServer,
    stop: Arc<Stop>,
    emu: Option<std::thread::JoinHandle<EmulatorReport>>,
}

impl Lab {
    fn start() -> Option<Lab> {
        if !latlab_io::precondition::met(why_no_namespaces()) {
            return None;
        }
        let topo = ClientEmuServer::build().unwrap();
        let (mut a, mut b) = latlab_io::netns::run_in(topo.emu.name(), || {
            let opts = PacketOptions::default();
            (
                PacketSocket::open(ClientEmuServer::EMU_A, &opts).unwrap(),
                PacketSocket::open(ClientEmuServer::EMU_B, &opts).unwrap(),
            )
        })
        .unwrap();
        let link = |seed| LinkConfig {
            delay_ns: 10_000_000,
            loss: LossModel::Bernoulli { p: 0.01 },
            seed,
            ..LinkConfig::default()
        };
        let stop = Arc::new(Stop::new());
        let s = stop.clone();
        let emu = std::thread::spawn(move || {
            emulator::run(
                &mut a,
                &mut b,
                link(1),
                link(2),
                2048,
                PollMode::Block,
                &s,
                &EmulatorLive::default(),
            )
            .unwrap()
        });
        Some(Lab {
            topo,
            stop,
            emu: Some(emu),
        })
    }

    /// A receiver of `transport` in the server namespace on `port`, serving in a thread.
    fn serve(
        &self,
        transport: &str,
        port: u16,
    ) -> (SocketAddr, Arc<Stop>, std::thread::JoinHandle<RecvReport>) {
        let listen = SocketAddr::from((self.topo.server_addr, port));
        let command = RecvCommand {
            listen,
            transport: transport.parse().unwrap(),
            json: None,
            runs: Some(1),
        };
        let receiver = latlab_io::netns::run_in(self.topo.server.name(), move || {
            Receiver::bind(&command).unwrap()
        })
        .unwrap();
        let stop = Arc::new(Stop::new());
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            receiver
                .serve(&s, &mut |line: &str| eprintln!("{line}"))
                .unwrap()
        });
        (listen, stop, thread)
    }

    /// Sends from the client namespace.
    fn send(&self, command: SendCommand) -> std::thread::JoinHandle<StreamSummary> {
        let client = self.topo.client.name().to_string();
        let name = command.transport.to_string();
        std::thread::spawn(move || {
            latlab_io::netns::run_in(&client, move || {
                send::run(&command, &Stop::new(), &mut |l: &str| eprintln!("{l}"))
            })
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
    }
}

impl Lab {
    /// Stops the emulator and returns its report.
    fn finish(mut self) -> EmulatorReport {
        self.stop.raise();
        self.emu.take().unwrap().join().unwrap()
    }

    /// Datagrams the UDP sockets of the client's and the server's namespaces could not take.
    fn udp_in_errors(&self) -> u64 {
        [self.topo.client.name(), self.topo.server.name()]
            .iter()
            .map(|ns| {
                latlab_io::netns::run_in(ns, || latlab_io::udpmib::UdpMib::open()?.read())
                    .unwrap()
                    .unwrap()
                    .in_errors
            })
            .sum()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(emu) = self.emu.take() {
            let _ = emu.join();
        }
    }
}

fn command(target: SocketAddr, transport: &str) -> SendCommand {
    let mut c = SendCommand::new(target, transport.parse().unwrap());
    c.interval = EVERY;
    c.duration = EVERY * MESSAGES as u32;
    // The receiver ends a run as soon as every message is in; the grace only bounds a transport
    // that falls behind the schedule while it catches up: KCP's normal mode, whose congestion
    // window falls to one segment at every timeout, carries fewer than the 200 messages a second
    // sent here through 1% loss, and delivers its backlog seconds after the last one was due.
    c.grace = Duration::from_secs(20);
    c
}

#[test]
fn every_transport_delivers_1000_messages_through_a_10ms_1_percent_loss_link() {
    let Some(lab) = Lab::start() else {
        return;
    };
    let udp_errors_before = lab.udp_in_errors();
    let receivers: Vec<_> = TRANSPORTS
        .iter()
        .enumerate()
        .map(|(i, t)| lab.serve(t, 7300 + i as u16))
        .collect();
    let senders: Vec<_> = TRANSPORTS
        .iter()
        .zip(&receivers)
        .map(|(t, (addr, _, _))| lab.send(command(*addr, t)))
        .collect();
    let summaries: Vec<StreamSummary> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    for (_, stop, thread) in receivers {
        stop.raise();
        let report = thread.join().unwrap();
        assert_eq!(report.runs.len(), 1, "{}", report.transport);
        assert_eq!(report.runs[0].outcome, "ok", "{}", report.transport);
    }
    // Frames lost on the path by causes other than the link's 1% (all transports' together):
    // a loaded machine may leave the emulator's or the endpoints' readers out for a while.
    let udp_errors = lab.udp_in_errors() - udp_errors_before;
    let emu = lab.finish();
    let path_drops: u64 = udp_errors
        + [&emu.a_to_b, &emu.b_to_a]
            .iter()
            .map(|d| {
                d.kernel_drops
                    + d.tx_ring_full
                    + d.tx_too_long
                    + d.tx_too_short
                    + d.queue_slots_full
                    + (d.link.dropped() - d.link.dropped_loss)
            })
            .sum::<u64>();
    eprintln!("dropped on the path besides the link's loss: {path_drops}");
    for s in &summaries {
        eprintln!("{}", s.text());
        let t = &s.transport;
        assert_eq!(s.sent, MESSAGES, "{t}");
        assert_eq!(s.latency_ns.count, s.delivered, "{t}");
        // Nothing arrives sooner than the link's 10 ms.
        assert!(
            s.latency_ns.min_ns >= 10_000_000,
            "{t}: {}",
            s.latency_ns.min_ns
        );
        if s.reliable {
            assert_eq!(s.lost, 0, "{t} is reliable");
            assert_eq!(s.failure, None, "{t}");
            // 1% loss each way: a transport that counts its retransmissions made some (all but
            // KCP count them), unless it bundles unacknowledged messages into new packets
            // (RDB), which then carried the lost ones: several times the payload's bytes on the
            // wire. Only where it put enough packets on the link that none lost is unlikely
            // (0.99^700 < 0.1%): a sender the scheduler left out for a while coalesces the
            // messages that fell due meanwhile into fewer, longer segments.
            if let Some(r) = s.wire.forward.retransmissions {
                let bundled = t.contains("rdb") && s.wire.bytes_ratio > 2.0;
                let sure_to_lose = s.wire.forward.packets >= 700;
                assert!(r > 0 || bundled || !sure_to_lose, "{t}: {:?}", s.wire);
            }
        } else {
            // About 1% lost (10 expected of 1000; none would say the link or the count is
            // wrong), and the rest delivered.
            assert_eq!(s.delivered + s.lost, s.sent, "{t}");
            assert!(s.lost >= 1, "{t}: none lost");
            // More than 40 would too, beyond what the path dropped otherwise; except for
            // ENet, which sheds unreliable packets itself when the round trip grows (its
            // packet throttle), as it does on a loaded machine.
            if !t.starts_with("enet") {
                assert!(
                    s.lost <= 40 + path_drops,
                    "{t}: {} lost, {path_drops} dropped on the path besides the link",
                    s.lost
                );
            }
        }
        assert!(s.wire.bytes_ratio >= 1.0 - 0.05, "{t}: {:?}", s.wire);
    }
    let by = |name: &str| summaries.iter().find(|s| s.transport == name).unwrap();
    // Plain UDP puts exactly its datagrams on the wire, one per message.
    assert_eq!(by("udp").wire.forward.packets, MESSAGES);
    assert_eq!(by("udp").wire.reverse.packets, 0);
    // TCP, ENet and QUIC tell their retransmissions; KCP does not.
    for told in ["tcp:cc=cubic", "enet", "quic", "quic:datagrams"] {
        assert!(by(told).wire.forward.retransmissions.is_some(), "{told}");
    }
    assert_eq!(by("kcp:mode=fast").wire.forward.retransmissions, None);
    // TCP also tells which retransmissions were not needed: the DSACKs its peer sent.
    for told in ["tcp:cc=cubic", "tcp:cc=reno,thin", "tcp:cc=bbr"] {
        assert!(
            by(told).wire.forward.spurious_retransmissions.is_some(),
            "{told}"
        );
    }
}

#[test]
fn modified_tcp_sets_its_minimum_rto_on_its_socket_and_the_sysctl_only_in_a_lab_namespace() {
    let Some(lab) = Lab::start() else {
        return;
    };
    let transport = "tcp:cc=reno,thin,rto_min=10ms";
    const SYSCTL: &str = "/proc/sys/net/ipv4/tcp_rto_min_us";
    let read = || std::fs::read_to_string(SYSCTL).ok();
    let client = lab.topo.client.name().to_string();
    let in_client = |f: fn() -> Option<String>| latlab_io::netns::run_in(&client, f).unwrap();
    let host_before = read();
    let client_before = in_client(|| std::fs::read_to_string(SYSCTL).ok());
    let (addr, stop, thread) = lab.serve(transport, 7400);
    let mut c = command(addr, transport);
    c.duration = EVERY * 400;
    let s = lab.send(c).join().unwrap();
    stop.raise();
    thread.join().unwrap();
    eprintln!("{}", s.text());
    assert_eq!(s.lost, 0);
    assert!(s.settings.iter().any(|x| x == "TCP_THIN_LINEAR_TIMEOUTS 1"));
    // On its socket where the kernel has TCP_RTO_MIN_US (6.16 on), else in the client's
    // namespace, the setting saying which.
    let no_option = latlab_io::tcp::try_rto_min(std::time::Duration::from_millis(10)).unwrap()
        == latlab_io::tcp::RtoMinSupport::Missing;
    let line = if no_option {
        "net.ipv4.tcp_rto_min_us=10000 in the sender's network namespace (this kernel has no \
         TCP_RTO_MIN_US)"
    } else {
        "TCP_RTO_MIN_US 10000"
    };
    assert!(
        s.settings.iter().any(|x| x.starts_with(line)),
        "{:?}",
        s.settings
    );
    // Either way, the namespaces' values are as they were after the run.
    assert_eq!(read(), host_before);
    assert_eq!(
        in_client(|| std::fs::read_to_string(SYSCTL).ok()),
        client_before
    );
    // The fallback sets the sysctl of a lab namespace for as long as it lives...
    latlab_io::netns::run_in(&client, || {
        let before = std::fs::read_to_string(SYSCTL).ok();
        let guard = RtoMinGuard::set(std::time::Duration::from_millis(10)).unwrap();
        assert_eq!(std::fs::read_to_string(SYSCTL).unwrap().trim(), "10000");
        drop(guard);
        assert_eq!(std::fs::read_to_string(SYSCTL).ok(), before);
    })
    .unwrap();
    // ... and refuses to touch the host's, naming the option.
    let err = RtoMinGuard::set(std::time::Duration::from_millis(10)).unwrap_err();
    assert!(
        err.starts_with("tcp: rto_min=10000us: net.ipv4.tcp_rto_min_us is only set inside a network namespace the lab made"),
        "{err}"
    );
    assert_eq!(read(), host_before);
}
