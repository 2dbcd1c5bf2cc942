//! `latlab stream` end to end: a receiver and a sender over real sockets for every transport,
//! on loopback and through an emulated 10 ms, 1%-loss link between namespaces (root; must run
//! under CI=true).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::Stop;
use latlab_lab::progress::Quiet;
use latlab_stream::recv::{Receiver, RecvReport};
use latlab_stream::{send, RecvCommand, SendCommand, StreamSummary};

mod common;
use common::TRANSPORTS;

/// A receiver serving `transport` on `listen` in a thread, until its stop is raised.
struct Serving {
    addr: SocketAddr,
    stop: Arc<Stop>,
    thread: Option<std::thread::JoinHandle<RecvReport>>,
}

impl Serving {
    fn start(receiver: Receiver) -> Serving {
        let addr = receiver.local_addr().unwrap();
        let stop = Arc::new(Stop::new());
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            receiver
                .serve(&s, &mut |line: &str| eprintln!("{line}"))
                .unwrap()
        });
        Serving {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> RecvReport {
        self.stop.raise();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.raise();
    }
}

fn recv_command(listen: SocketAddr, transport: &str) -> RecvCommand {
    RecvCommand {
        listen,
        transport: transport.parse().unwrap(),
        json: None,
        runs: None,
    }
}

fn send_command(
    target: SocketAddr,
    transport: &str,
    messages: u64,
    every: Duration,
) -> SendCommand {
    let mut c = SendCommand::new(target, transport.parse().unwrap());
    c.interval = every;
    c.duration = every * messages as u32;
    // The receiver ends a run as soon as every message is in; the grace only bounds a transport
    // that falls behind the schedule while it catches up (KCP's normal mode: its congestion
    // window and 40 ms ticks fall behind a message every few milliseconds).
    c.grace = Duration::from_secs(20);
    c
}

fn assert_delivered(s: &StreamSummary, messages: u64) {
    assert_eq!(s.sent, messages, "{}", s.transport);
    assert_eq!(s.failure, None, "{}", s.transport);
    assert_eq!(s.latency_ns.count, s.delivered, "{}", s.transport);
    assert!(
        s.wire.forward.packets > 0 && s.wire.forward.bytes > 0,
        "{}",
        s.transport
    );
}

#[test]
fn every_transport_delivers_every_message_on_loopback() {
    for transport in TRANSPORTS {
        let receiver =
            Receiver::bind(&recv_command("127.0.0.1:0".parse().unwrap(), transport)).unwrap();
        let serving = Serving::start(receiver);
        let command = send_command(serving.addr, transport, 200, Duration::from_millis(2));
        let summary = send::run(&command, &Stop::new(), &mut |l: &str| eprintln!("{l}")).unwrap();
        eprintln!("{}", summary.text());
        assert_delivered(&summary, 200);
        assert_eq!(summary.delivered, 200, "{transport}");
        let report = serving.finish();
        assert_eq!(report.runs.len(), 1, "{transport}");
        assert_eq!(report.runs[0].outcome, "ok", "{transport}");
    }
}

#[test]
fn garbage_datagrams_and_connections_do_not_stop_the_receiver() {
    for transport in [
        "udp",
        "tcp",
        "enet",
        "kcp",
        "quic",
        "quic:datagrams",
        "latlab",
        "latlab:lean",
    ] {
        let receiver =
            Receiver::bind(&recv_command("127.0.0.1:0".parse().unwrap(), transport)).unwrap();
        let serving = Serving::start(receiver);
        let addr = serving.addr;
        let spray = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Between runs: datagrams of every length, and connections that are not a sender's.
        for len in [0usize, 1, 4, 23, 24, 25, 48, 100, 1200, 1500] {
            let junk: Vec<u8> = (0..len).map(|i| (i * 131 + len) as u8).collect();
            spray.send_to(&junk, addr).unwrap();
        }
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut c, b"GET / HTTP/1.1\r\n\r\n").unwrap();
        drop(c);
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut c, b"LLSTCTRL\xff\xff\xff\xff").unwrap();
        drop(c);
        // During a run: garbage at the run's own port every millisecond.
        let done = Arc::new(Stop::new());
        let d = done.clone();
        let sprayer = std::thread::spawn(move || {
            let mut n = 0u32;
            while !d.is_raised() {
                let junk: Vec<u8> = (0..(n % 200) as usize)
                    .map(|i| (i as u32 ^ n) as u8)
                    .collect();
                let _ = spray.send_to(&junk, addr);
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let command = send_command(addr, transport, 300, Duration::from_millis(2));
        let summary = send::run(&command, &Stop::new(), &mut |l: &str| eprintln!("{l}"));
        done.raise();
        sprayer.join().unwrap();
        let summary = summary.unwrap();
        assert_delivered(&summary, 300);
        assert_eq!(summary.delivered, 300, "{transport}");
        // And the receiver still serves the next run.
        let again = send::run(
            &send_command(addr, transport, 50, Duration::from_millis(2)),
            &Stop::new(),
            &mut |l: &str| eprintln!("{l}"),
        )
        .unwrap();
        assert_eq!(again.delivered, 50, "{transport}");
        let report = serving.finish();
        assert_eq!(report.runs.len(), 2, "{transport}");
        assert!(report.bad_connections >= 2, "{transport}: {report:?}");
        assert!(report.stray_datagrams >= 1, "{transport}: {report:?}");
        if transport == "udp" {
            assert!(
                summary.malformed > 0,
                "udp hands garbage to the tally, which counts it"
            );
        }
    }
}

/// Whether this kernel has `TCP_RTO_MIN_US` (Linux 6.16 on). When it has not, checks the
/// fallback instead (the sender would set its namespace's sysctl) and says so.
fn has_rto_min_us() -> bool {
    use latlab_stream::tcp::{rto_min_way, RtoMinWay};
    let missing = latlab_io::tcp::try_rto_min(Duration::from_millis(40)).unwrap()
        == latlab_io::tcp::RtoMinSupport::Missing;
    if missing {
        assert_eq!(
            rto_min_way(Duration::from_millis(10)),
            Ok(RtoMinWay::Namespace)
        );
        eprintln!(
            "this kernel has no TCP_RTO_MIN_US (Linux 6.16 on): checked the namespace fallback"
        );
    }
    !missing
}

#[test]
fn modified_tcp_sets_its_minimum_rto_on_its_socket_even_on_the_host() {
    if !has_rto_min_us() {
        return;
    }
    let transport = "tcp:cc=reno,thin,rto_min=10ms";
    let sysctl = || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rto_min_us").ok();
    let before = sysctl();
    let receiver =
        Receiver::bind(&recv_command("127.0.0.1:0".parse().unwrap(), transport)).unwrap();
    let serving = Serving::start(receiver);
    let command = send_command(serving.addr, transport, 200, Duration::from_millis(2));
    let summary = send::run(&command, &Stop::new(), &mut |l: &str| eprintln!("{l}")).unwrap();
    eprintln!("{}", summary.text());
    assert_delivered(&summary, 200);
    assert_eq!(summary.delivered, 200);
    // The socket option, as asked (and as held, when the kernel's ticks round it up); the
    // namespace's sysctl is neither named nor touched.
    assert!(
        summary
            .settings
            .iter()
            .any(|x| x.starts_with("TCP_RTO_MIN_US 10000")),
        "{:?}",
        summary.settings
    );
    assert!(
        !summary
            .settings
            .iter()
            .any(|x| x.contains("tcp_rto_min_us")),
        "{:?}",
        summary.settings
    );
    assert_eq!(sysctl(), before);
    // TCP tells its spurious retransmissions: at most its retransmissions (on loopback
    // usually none, but a receiver held up past the 12 ms minimum RTO on a loaded machine makes
    // one).
    let wire = summary.wire.forward;
    let (spurious, retransmitted) = (wire.spurious_retransmissions, wire.retransmissions);
    assert!(
        spurious.is_some() && spurious <= retransmitted,
        "{spurious:?} of {retransmitted:?}"
    );
    serving.finish();
}

#[test]
fn a_minimum_rto_out_of_range_is_refused_with_one_line_before_the_run() {
    // Beyond the 200 ms TCP_RTO_MIN_US takes on every kernel: refused by the spec itself.
    let err = "tcp:cc=reno,thin,rto_min=250ms"
        .parse::<latlab_stream::TransportSpec>()
        .unwrap_err();
    assert_eq!(
        err,
        "tcp: rto_min=250ms: out of range: TCP_RTO_MIN_US takes more than one kernel tick \
         (1ms at HZ=1000, 4ms at HZ=250, 10ms at HZ=100) and at most 200ms"
    );
    if !has_rto_min_us() {
        return;
    }
    // Below this kernel's two ticks: refused by the sender before it connects (nothing
    // listens at the target, which would be the error had it tried).
    let command = send_command(
        "127.0.0.1:9".parse().unwrap(),
        "tcp:thin,rto_min=1us",
        10,
        Duration::from_millis(10),
    );
    let err = send::run(&command, &Stop::new(), &mut Quiet).unwrap_err();
    assert!(err.is_usage(), "{err:?}");
    let err = err.to_string();
    eprintln!("{err}");
    assert!(
        err.starts_with(
            "tcp: rto_min=1us: out of range: TCP_RTO_MIN_US takes more than one kernel tick \
             (this kernel's: "
        ) && err.ends_with(") and at most 200ms")
            && !err.contains('\n'),
        "{err}"
    );
}
