//! The generator against the reflector on loopback, with garbage thrown at both.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::generator::{self, GeneratorConfig, Threads};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_probe::{Pattern, ProbeConfig};

/// The tests of this file spin (a busy reflector, generators on their schedules) and would
/// take the two cores from each other: they take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Kernel receive stamps, and buffers deep enough that a test thread the scheduler leaves out
/// for a while (tests run side by side on few cores) loses nothing.
fn stamped() -> UdpOptions {
    UdpOptions {
        rx_timestamps: true,
        rcvbuf: Some(4 << 20),
        ..UdpOptions::default()
    }
}

struct Echo {
    addr: SocketAddr,
    stop: Arc<Stop>,
    counters: Arc<ReflectorCounters>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start(poll: PollMode) -> Echo {
        let socket = UdpSocket::bind(localhost(), &stamped()).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(Stop::new());
        let counters = Arc::new(ReflectorCounters::default());
        let (s, c) = (stop.clone(), counters.clone());
        let config = ReflectorConfig {
            poll,
            ..ReflectorConfig::default()
        };
        let thread =
            std::thread::spawn(move || reflector::run_udp(&socket, &config, &s, &c).unwrap());
        Echo {
            addr,
            stop,
            counters,
            thread: Some(thread),
        }
    }
}

impl Echo {
    /// Stops the reflector and returns its final counters (read after its thread ended, so
    /// the last batch is counted).
    fn finish(mut self) -> latlab_engine::reflector::ReflectorReport {
        self.stop.raise();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.counters.snapshot()
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn config(target: SocketAddr, flows: u32, pattern: Pattern) -> GeneratorConfig {
    GeneratorConfig {
        probe: ProbeConfig {
            run_id: 77,
            flows,
            payload_len: 100,
            pattern,
            rate_pps: 5000.0,
            start_ns: 0,
            duration_ns: 400_000_000,
            warmup_ns: 100_000_000,
            seed: 3,
            traffic: None,
        },
        target,
        batch: 16,
        poll: PollMode::Block,
        grace_ns: 300_000_000,
        interval_ns: 100_000_000,
        threads: Threads::OneLoop { cpu: None },
    }
}

/// Sends `n` datagrams that are not probes (and a few that look like them) to `to`.
fn throw_garbage(to: SocketAddr, n: usize) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..n {
        let junk: Vec<u8> = match i % 4 {
            0 => b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            1 => vec![0u8; i % 40],
            // Long enough for a probe header, but not one (regression: the reflector once
            // checked only the length and echoed these).
            3 => vec![0x5a; 80],
            _ => {
                // The right magic, then a header cut short.
                let mut v = b"LLPB".to_vec();
                v.extend_from_slice(&[1, 0, 0, 56]);
                v
            }
        };
        s.send_to(&junk, to).unwrap();
    }
}

#[test]
fn every_probe_comes_back_and_garbage_is_counted_and_dropped() {
    let _turn = turn();
    let echo = Echo::start(PollMode::Block);
    throw_garbage(echo.addr, 30);
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let gen_port = sockets[0].local_addr().unwrap();
    let cfg = config(echo.addr, 1, Pattern::Constant);
    // Garbage also lands on the generator's own receive port while it runs.
    let garbage = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        throw_garbage(gen_port, 25);
    });
    let mut updates = 0;
    let result = generator::run(&sockets, &cfg, &Stop::new(), &mut |_| updates += 1).unwrap();
    garbage.join().unwrap();
    let r = &result.report;
    // Every probe falls due; a guest stall at the very end may leave a few unsent (counted
    // apart, never as lost).
    assert_eq!((r.warmup_sent, r.sent + r.unsent), (500, 1500));
    assert!(r.unsent <= 15, "{} unsent", r.unsent);
    assert_eq!(r.received, r.sent, "loopback loses nothing at 5 kpps");
    assert_eq!(r.lost, 0);
    assert_eq!(r.not_a_probe, 25);
    assert_eq!(r.latency.len(), r.sent);
    assert_eq!(r.duplicated, 0);
    // Round trips on loopback are microseconds to milliseconds, never zero, never seconds.
    assert!(r.latency.min() > 0 && r.latency.max() < 1_000_000_000);
    assert_eq!(
        r.responder_dwell.len(),
        r.sent,
        "the reflector stamped every probe"
    );
    assert!(updates >= 2, "progress was reported");
    let rate = result.achieved_pps();
    assert!((rate - 5000.0).abs() < 250.0, "achieved {rate} pps");
    // Intervals cover the run and add up to the whole.
    let in_intervals: u64 = result.intervals.iter().map(|i| i.histogram.len()).sum();
    assert_eq!(in_intervals, r.latency.len());
    assert_eq!(result.timestamp_source.name(), "kernel-software");
    let c = echo.finish();
    assert_eq!(c.malformed, 30);
    assert_eq!(c.reflected, 2000);
}

#[test]
fn poisson_flows_are_matched_per_flow() {
    let _turn = turn();
    let echo = Echo::start(PollMode::Busy);
    let sockets: Vec<UdpSocket> = (0..4)
        .map(|_| UdpSocket::bind(localhost(), &stamped()).unwrap())
        .collect();
    let cfg = config(echo.addr, 4, Pattern::Poisson);
    let result = generator::run(&sockets, &cfg, &Stop::new(), &mut |_| {}).unwrap();
    let r = &result.report;
    // 2000 probes expected; a Poisson count has a standard deviation of about 45.
    let total = r.sent + r.warmup_sent;
    assert!((1700..2300).contains(&total), "sent {total}");
    assert_eq!(r.received, r.sent);
    assert_eq!(r.reordered + r.duplicated + r.malformed(), 0);
}

#[test]
fn a_stop_flag_ends_the_run_early_and_says_so() {
    let _turn = turn();
    let echo = Echo::start(PollMode::Block);
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let mut cfg = config(echo.addr, 1, Pattern::Constant);
    cfg.probe.duration_ns = 60_000_000_000;
    let stop = Stop::new();
    let started = std::time::Instant::now();
    let result = generator::run(&sockets, &cfg, &stop, &mut |p| {
        if p.elapsed_ns > 200_000_000 {
            stop.raise();
        }
    })
    .unwrap();
    assert!(result.stopped_early);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_split_generator_measures_like_one_loop() {
    let _turn = turn();
    let cpus = latlab_io::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU, no room for a split generator");
        return;
    }
    let echo = Echo::start(PollMode::Block);
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let mut cfg = config(echo.addr, 1, Pattern::Constant);
    cfg.threads = Threads::Split {
        tx_cpu: cpus[0],
        rx_cpu: cpus[1],
    };
    let result = generator::run(&sockets, &cfg, &Stop::new(), &mut |_| {}).unwrap();
    assert_eq!(result.report.received, result.report.sent);
    assert_eq!(result.report.sent, 1500);
}
