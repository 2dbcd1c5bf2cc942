//! The generator against the reflector on loopback, with garbage thrown at both.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::generator::{self, GeneratorConfig, GeneratorResult, Threads};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, PollSwitch, Stop};
use latlab_io::clock::now_ns;
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
        switch: None,
        // A run ends as soon as every probe is back: the grace period only bounds the wait for
        // a probe that is really gone, so it may be long enough for a guest that stalls.
        grace_ns: 20_000_000_000,
        interval_ns: 100_000_000,
        threads: Threads::OneLoop { cpu: None },
        protocol: None,
        locals: Vec::new(),
        live: false,
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

/// The intended send times a constant schedule owes over a run whose first probe was due at
/// `start_ns`: one every 1/rate from the start, before the end of the sending time (worked out
/// here from the configuration, not by the schedule under test).
fn owed_dues(probe: &ProbeConfig, start_ns: u64) -> Vec<u64> {
    let mut schedule =
        latlab_probe::Schedule::new(probe.pattern, probe.rate_pps, start_ns, probe.seed).unwrap();
    let mut dues = Vec::new();
    while schedule.next_due() < start_ns + probe.duration_ns {
        dues.push(schedule.advance());
    }
    dues
}

/// Checks a run's books against its schedule (constant or Poisson, the same seed), from counts and stamps only: the
/// probes sent are the schedule's first ones, every probe owed and not sent is counted unsent,
/// and each measured probe came back once, carrying its own intended send time (so the
/// intended times follow the rate exactly, whatever the guest's speed).
fn assert_every_probe_owed_is_accounted_for(result: &GeneratorResult, probe: &ProbeConfig) {
    let r = &result.report;
    let dues = owed_dues(probe, result.start_ns);
    let sent = r.warmup_sent + r.sent;
    // A Poisson schedule that fell behind counts what it skipped by one draw from the law of
    // the arrivals left (Schedule::skip_until, constant time), not one by one: then only the
    // probes sent are checked against the schedule, and they are fewer than it owed.
    if probe.pattern == Pattern::Poisson && r.unsent > 0 {
        assert!(
            sent < dues.len() as u64,
            "{sent} sent of {} owed",
            dues.len()
        );
    } else {
        assert_eq!(
            sent + r.unsent,
            dues.len() as u64,
            "{} warm-up + {} measured sent and {} unsent, of {} owed",
            r.warmup_sent,
            r.sent,
            r.unsent,
            dues.len()
        );
    }
    let measure_from = result.start_ns + probe.warmup_ns;
    let (warmup, measured): (Vec<u64>, Vec<u64>) = dues[..sent as usize]
        .iter()
        .partition(|&&due| due < measure_from);
    assert_eq!(r.warmup_sent, warmup.len() as u64, "warm-up probes sent");
    // Every measured probe sent is back exactly once, by its intended send time.
    let mut back: Vec<u64> = r.trace.iter().map(|&(intended, _)| intended).collect();
    back.sort_unstable();
    let differs = |i: &usize| back.get(*i) != measured.get(*i);
    if let Some(i) = (0..back.len().max(measured.len())).find(differs) {
        panic!(
            "{} probes came back for {} measured ones sent; first difference at {i}: intended \
             {:?}, owed {:?} (start {}, period {} ns)",
            back.len(),
            measured.len(),
            back.get(i),
            measured.get(i),
            result.start_ns,
            1e9 / probe.rate_pps
        );
    }
    assert_eq!(result.send_failed.total(), 0, "{:?}", result.send_failed);
}

/// Checks that each measured probe's latency is its own receive stamp less its own intended
/// send time, against the other stamps of the same run: the sender's (when the probe left) and
/// the reflector's (when it came in and went out). Per probe, latency = send lag + time from
/// the actual send = forward + dwell + back, so their means agree within the histograms'
/// resolution (10^-3 of each value) and their extremes bound it. `ended_ns` was read after the
/// run returned.
fn assert_latency_is_from_each_probes_own_stamps(result: &GeneratorResult, ended_ns: u64) {
    let r = &result.report;
    assert!(!r.trace.is_empty());
    for &(intended, latency) in &r.trace {
        let received = intended + latency;
        assert!(
            latency > 0 && received <= ended_ns,
            "probe due at {intended}: latency {latency} ns puts its receive stamp at \
             {received}, the run ended at {ended_ns}"
        );
    }
    let n = r.trace.len() as f64;
    let mean = r.trace.iter().map(|&(_, l)| l as f64).sum::<f64>() / n;
    let (min, max) = (
        r.trace.iter().map(|&(_, l)| l).min().unwrap(),
        r.trace.iter().map(|&(_, l)| l).max().unwrap(),
    );
    // Every probe left at or after its due time and before its response came (the meter keeps
    // the sender's figures only then), and every response carried the reflector's stamps on
    // this one clock.
    for (name, h) in [
        ("send lag", &r.send_lag),
        ("latency from the actual send", &r.latency_from_actual),
        ("forward", &r.forward),
        ("responder dwell", &r.responder_dwell),
        ("reverse", &r.reverse),
    ] {
        assert_eq!(h.len(), r.trace.len() as u64, "{name}");
    }
    assert_eq!(r.one_way_impossible, 0);
    let (lag, from_actual) = (&r.send_lag, &r.latency_from_actual);
    // A histogram's min is its bucket's lowest value and its max its bucket's highest: exact
    // bounds.
    assert!(
        min >= lag.min() + from_actual.min() && max <= lag.max() + from_actual.max(),
        "latency {min}..={max} ns, send lag {}..={} ns, from the actual send {}..={} ns",
        lag.min(),
        lag.max(),
        from_actual.min(),
        from_actual.max()
    );
    let parts = [
        (
            "send lag + latency from the actual send",
            vec![lag.mean(), from_actual.mean()],
        ),
        (
            "forward + dwell + reverse",
            vec![r.forward.mean(), r.responder_dwell.mean(), r.reverse.mean()],
        ),
    ];
    for (name, means) in parts {
        let sum: f64 = means.iter().sum();
        assert!(
            (mean - sum).abs() <= sum / 1000.0 + 2.0,
            "mean latency {mean:.1} ns, mean {name} {sum:.1} ns ({means:?})"
        );
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
    let ended_ns = now_ns();
    garbage.join().unwrap();
    let r = &result.report;
    // A guest stall at the very end may leave a few probes unsent: they are counted apart,
    // never as lost, and every probe owed is one or the other.
    assert_every_probe_owed_is_accounted_for(&result, &cfg.probe);
    assert!(
        result.first_send_ns >= result.start_ns,
        "a probe left early"
    );
    assert_eq!(r.received, r.sent, "loopback loses nothing at 5 kpps");
    assert_eq!(r.lost, 0);
    assert_eq!(r.not_a_probe, 25);
    assert_eq!(r.latency.len(), r.sent);
    assert_eq!(r.duplicated, 0);
    assert_latency_is_from_each_probes_own_stamps(&result, ended_ns);
    // The first turn of the loop reports, and so does the last (the run cannot end before its
    // 400 ms of sending are over, more than one PROGRESS_NS after the first), whatever the
    // speed of the machine.
    assert!(updates >= 2, "progress was reported {updates} times");
    // Intervals cover the run and add up to the whole.
    let in_intervals: u64 = result.intervals.iter().map(|i| i.histogram.len()).sum();
    assert_eq!(in_intervals, r.latency.len());
    assert_eq!(result.timestamp_source.name(), "kernel-software");
    let c = echo.finish();
    assert_eq!(c.malformed, 30);
    assert_eq!(c.reflected, r.warmup_sent + r.sent);
}

#[test]
fn a_sender_stalled_past_the_end_counts_every_probe_it_still_owed_as_unsent() {
    let _turn = turn();
    let echo = Echo::start(PollMode::Block);
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let cfg = config(echo.addr, 1, Pattern::Constant);
    // The progress callback runs in the generator's loop: halfway through, it holds the loop
    // until the sending time is over, so the rest of the schedule falls due unsent.
    let mut stalled = false;
    let result = generator::run(&sockets, &cfg, &Stop::new(), &mut |p| {
        if !stalled && p.elapsed_ns >= p.total_ns / 2 {
            stalled = true;
            let rest = p.total_ns.saturating_sub(p.elapsed_ns);
            std::thread::sleep(Duration::from_nanos(rest) + Duration::from_millis(20));
        }
    })
    .unwrap();
    let r = &result.report;
    assert!(stalled);
    assert!(r.unsent > 0, "{r:?}");
    assert_every_probe_owed_is_accounted_for(&result, &cfg.probe);
    assert_eq!((r.received, r.lost), (r.sent, 0));
    assert_eq!(echo.finish().reflected, r.warmup_sent + r.sent);
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
    // The Poisson schedule's own count of probes owed (its seed's), each sent or unsent.
    assert_every_probe_owed_is_accounted_for(&result, &cfg.probe);
    assert_eq!(r.received, r.sent);
    assert_eq!(r.reordered + r.duplicated + r.malformed(), 0);
}

/// A run of ten minutes stopped by the flag 200 ms in, in one loop or in two threads: it says so,
/// and the probes in flight at the stop are waited for, never counted lost.
fn stopped_early(threads: Option<Threads>) {
    let _turn = turn();
    let echo = Echo::start(PollMode::Block);
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let mut cfg = config(echo.addr, 1, Pattern::Constant);
    cfg.probe.duration_ns = 600_000_000_000;
    if let Some(threads) = threads {
        cfg.threads = threads;
    }
    let stop = Stop::new();
    let started = std::time::Instant::now();
    let result = generator::run(&sockets, &cfg, &stop, &mut |p| {
        if p.elapsed_ns > 200_000_000 {
            stop.raise();
        }
    })
    .unwrap();
    assert!(result.stopped_early);
    // Ten minutes of sending asked: ending within one, on however slow a machine, is the stop.
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "the run went on for {took:?}"
    );
    let r = &result.report;
    assert!(r.warmup_sent + r.sent > 0, "{r:?}");
    assert_eq!((r.received, r.lost), (r.sent, 0), "{r:?}");
}

#[test]
fn a_stop_flag_ends_the_run_early_and_says_so() {
    stopped_early(None);
}

#[test]
fn a_stop_flag_ends_a_split_run_early_and_loses_nothing_in_flight() {
    let cpus = latlab_io::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        latlab_io::precondition::missing("one CPU, no room for a split generator");
        return;
    }
    stopped_early(Some(Threads::Split {
        tx_cpu: cpus[0],
        rx_cpu: cpus[1],
    }));
}

#[test]
fn a_split_generator_measures_like_one_loop() {
    let _turn = turn();
    let cpus = latlab_io::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        latlab_io::precondition::missing("one CPU, no room for a split generator");
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
    // Every probe owed sent or counted unsent (a loaded guest may leave some unsent).
    assert_every_probe_owed_is_accounted_for(&result, &cfg.probe);
}

#[test]
fn a_loop_switched_from_spinning_to_blocking_stops_spinning_and_keeps_answering() {
    let _turn = turn();
    // The reflector and the generator spin until told otherwise, then block, while every probe
    // is still answered. Told apart by what each thread did, not by the share of the CPU it
    // got (a spinning loop on a loaded machine gets little more than a blocking one that
    // spins the last stretch before each deadline): a spinning loop never gives up its CPU of
    // its own accord, a blocking one sleeps in the kernel between probes (voluntary context
    // switches).
    let socket = UdpSocket::bind(localhost(), &stamped()).unwrap();
    let addr = socket.local_addr().unwrap();
    let switch = PollSwitch::new(PollMode::Busy);
    let config = ReflectorConfig {
        poll: PollMode::Busy,
        switch: Some(switch.clone()),
        ..ReflectorConfig::default()
    };
    let stop = Arc::new(Stop::new());
    let counters = Arc::new(ReflectorCounters::default());
    let (s, c) = (stop.clone(), counters.clone());
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (spinning_tx, spinning_rx) = std::sync::mpsc::channel();
    let echo = std::thread::spawn(move || {
        tid_tx.send(latlab_io::cpu::current_thread_id()).unwrap();
        spinning_rx.recv().unwrap();
        reflector::run_udp(&socket, &config, &s, &c).unwrap();
    });
    let echo_tid = tid_rx.recv().unwrap();
    let gen_tid = latlab_io::cpu::current_thread_id();
    let sockets = vec![UdpSocket::bind(localhost(), &stamped()).unwrap()];
    let mut cfg = config_for_switch(addr);
    let gen_switch = PollSwitch::new(PollMode::Busy);
    cfg.switch = Some(gen_switch.clone());
    let mut switched = None;
    let (echo_started, gen_started) = (Sleeps::of(echo_tid), Sleeps::of(gen_tid));
    spinning_tx.send(()).unwrap();
    let result = generator::run(&sockets, &cfg, &Stop::new(), &mut |p| {
        if switched.is_none() && p.elapsed_ns >= cfg.probe.duration_ns / 3 {
            let at = (Sleeps::of(gen_tid), Sleeps::of(echo_tid));
            switch.set(PollMode::Block);
            gen_switch.set(PollMode::Block);
            switched = Some((at, p.sent));
        }
    })
    .unwrap();
    let (gen_ended, echo_ended) = (Sleeps::of(gen_tid), Sleeps::of(echo_tid));
    stop.raise();
    echo.join().unwrap();
    let ((gen_at_switch, echo_at_switch), sent_at_switch) = switched.expect("switched");
    let r = &result.report;
    assert_eq!(r.received, r.sent, "every probe answered across the switch");
    assert_eq!(gen_switch.mode(), PollMode::Block);
    // Probes the generator sent after the switch (a few hundred at 500 pps): a blocking loop
    // sleeps for each one it waits for, or for each batch of them when a loaded machine wakes
    // it late; a spinning one never sleeps (none was seen in hundreds of milliseconds).
    let after = r.warmup_sent + r.sent - sent_at_switch;
    assert!(after >= 20, "{after} probes sent after the switch");
    for (name, started, at_switch, ended) in [
        ("generator", gen_started, gen_at_switch, gen_ended),
        ("reflector", echo_started, echo_at_switch, echo_ended),
    ] {
        let spinning = at_switch.since(&started);
        let blocking = ended.since(&at_switch);
        eprintln!(
            "{name}: spinning, {} voluntary switches and {:.1} ms of CPU in {:.1} ms; \
             blocking, {} and {:.1} ms in {:.1} ms; {after} probes after the switch",
            spinning.voluntary,
            spinning.cpu_ns as f64 / 1e6,
            spinning.wall_ns as f64 / 1e6,
            blocking.voluntary,
            blocking.cpu_ns as f64 / 1e6,
            blocking.wall_ns as f64 / 1e6,
        );
        assert!(
            spinning.voluntary <= 2,
            "the {name} slept while it should spin: {spinning:?}"
        );
        assert!(
            blocking.voluntary >= 5,
            "the {name} still spins after the switch: {blocking:?} for {after} probes"
        );
    }
}

/// A thread's voluntary context switches (each a sleep in the kernel), its CPU time and the
/// wall clock, read together.
#[derive(Clone, Copy, Debug)]
struct Sleeps {
    voluntary: u64,
    cpu_ns: u64,
    wall_ns: u64,
}

impl Sleeps {
    /// The counts of thread `tid` of this process now, from its `status` and `schedstat`.
    fn of(tid: i32) -> Sleeps {
        let task = format!("/proc/self/task/{tid}");
        let status = std::fs::read_to_string(format!("{task}/status")).unwrap();
        let voluntary = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .expect("voluntary_ctxt_switches in the thread's status")
            .trim()
            .parse()
            .unwrap();
        let schedstat = std::fs::read_to_string(format!("{task}/schedstat")).unwrap();
        let cpu_ns = schedstat
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Sleeps {
            voluntary,
            cpu_ns,
            wall_ns: now_ns(),
        }
    }

    /// What happened from `earlier` to this one.
    fn since(&self, earlier: &Sleeps) -> Sleeps {
        Sleeps {
            voluntary: self.voluntary - earlier.voluntary,
            cpu_ns: self.cpu_ns - earlier.cpu_ns,
            wall_ns: self.wall_ns - earlier.wall_ns,
        }
    }
}

/// A run of 600 ms at 500 pps whose loop starts spinning (a probe every 2 ms: time enough
/// for a blocking loop to sleep before nearly every one).
fn config_for_switch(target: SocketAddr) -> GeneratorConfig {
    let mut cfg = config(target, 1, Pattern::Constant);
    cfg.poll = PollMode::Busy;
    cfg.probe.rate_pps = 500.0;
    cfg.probe.duration_ns = 600_000_000;
    cfg
}
