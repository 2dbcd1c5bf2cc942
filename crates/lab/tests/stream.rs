//! `latlab stream` end to end: a receiver and a sender over real sockets for every transport,
//! on loopback and through an emulated 10 ms, 1%-loss link between namespaces (root; must run
//! under CI=true).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::Stop;
use latlab_lab::stream::recv::{Receiver, RecvReport};
use latlab_lab::stream::{send, RecvCommand, SendCommand, StreamSummary};

/// Every transport this machine runs, with its options.
const TRANSPORTS: &[&str] = &[
    "udp",
    "tcp:cc=cubic",
    "tcp:cc=reno,thin",
    "tcp:cc=bbr",
    "enet",
    "enet:unreliable",
    "kcp:mode=fast",
    "kcp:mode=normal",
    "quic",
    "quic:datagrams",
];

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
            receiver.serve(&s, &mut |line| eprintln!("{line}")).unwrap()
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
    c.grace = Duration::from_secs(2);
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
        let command = send_command(serving.addr, transport, 200, Duration::from_millis(1));
        let summary = send::run(&command, &Stop::new(), &mut |l| eprintln!("{l}")).unwrap();
        eprintln!("{}", summary.text());
        assert_delivered(&summary, 200);
        assert_eq!(summary.delivered, 200, "{transport}");
        let report = serving.finish();
        assert_eq!(report.runs.len(), 1, "{transport}");
        assert_eq!(report.runs[0].outcome, "ok", "{transport}");
    }
}
