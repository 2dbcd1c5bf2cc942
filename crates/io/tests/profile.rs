//! The CPU-wide profiler on a real kernel (root only; "skipped" otherwise, except under
//! CI=true, where it fails): a thread pinned to one CPU sends UDP datagrams to 127.0.0.1 while
//! that CPU is profiled.
//!
//! No other test of this crate's integration tests spins a CPU for long (and each test file is
//! its own process), so there is no shared turn to take; the tests of this file that spin take
//! turns through [`spinning`].

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::time::Duration;

use latlab_io::cpu::{allowed_cpus, pin_current_thread};
use latlab_io::profile::{KernelSymbols, Profiler};

/// Tests that keep a CPU busy take turns: two at once would be in each other's profiles.
static SPINNING: Mutex<()> = Mutex::new(());

/// Waits for this test's turn to keep a CPU busy; the turn ends when the guard drops.
fn spinning() -> MutexGuard<'static, ()> {
    SPINNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process runs as root; when not, says so and returns false, but under
/// `CI=true` fails instead: there the test must run.
fn root_or_skip() -> bool {
    let root = latlab_io::precondition::is_root();
    latlab_io::precondition::met((!root).then_some("the profiler needs root"))
}

/// Kernel functions of the UDP send path over loopback; a profile of a CPU sending datagrams
/// must have at least one of them.
const SEND_PATH: &[&str] = &[
    "udp_sendmsg",
    "udp_send_skb",
    "udp_",
    "ip_",
    "__ip_",
    "__dev_queue_xmit",
    "dev_hard_start_xmit",
    "loopback_xmit",
    "__sys_sendto",
    "__netif_receive_skb",
    "net_rx_action",
];

#[test]
fn a_cpu_sending_udp_is_sampled_at_the_rate_asked_with_the_send_path_in_it() {
    if !root_or_skip() {
        return;
    }
    let _turn = spinning();
    let cpu = *allowed_cpus().unwrap().last().unwrap();
    const FREQ_HZ: u64 = 5_000;

    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sending = Arc::new(Barrier::new(2));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (stop, sending, sent) = (stop.clone(), sending.clone(), sent.clone());
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.send_to(&[0; 64], to).unwrap();
            sending.wait();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                // A full receive buffer drops datagrams; the send path is what is measured.
                if sock.send_to(&[0; 64], to).is_ok() {
                    n += 1;
                }
            }
            sent.store(n, Ordering::Relaxed);
        })
    };
    sending.wait();
    let profiler = Profiler::start(cpu, FREQ_HZ).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let samples = profiler.stop().unwrap();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();

    let symbols = KernelSymbols::load().unwrap();
    let functions = samples.by_function(&symbols);
    eprintln!(
        "CPU {cpu}: {} samples in {:?} (expected {:.0}), {} kernel, {} user, {} idle task, \
         {} lost, {} throttled, {} malformed; {} datagrams sent",
        samples.total,
        samples.wall,
        samples.expected(),
        samples.kernel,
        samples.user,
        samples.idle_task,
        samples.lost,
        samples.throttled,
        samples.malformed,
        sent.load(Ordering::Relaxed),
    );
    for (name, n) in functions.iter().take(15) {
        eprintln!("{n:>6} {name}");
    }

    let ratio = samples.total as f64 / samples.expected();
    assert!(
        (0.3..=1.5).contains(&ratio),
        "{} samples where {:.0} were expected",
        samples.total,
        samples.expected()
    );
    assert_eq!(samples.lost, 0);
    assert_eq!(samples.malformed, 0);
    assert_eq!(
        samples.kernel + samples.user + samples.other_mode,
        samples.total
    );
    assert!(
        functions
            .iter()
            .any(|(name, _)| SEND_PATH.iter().any(|f| name.starts_with(f))),
        "none of {SEND_PATH:?} in {:?}",
        &functions[..functions.len().min(30)]
    );
}

#[test]
fn a_cpu_that_does_not_exist_is_named_in_the_error() {
    // Without root the kernel refuses before it looks at the CPU.
    if !root_or_skip() {
        return;
    }
    let e = Profiler::start(1 << 20, 1_000).unwrap_err();
    let e = e.to_string();
    assert!(
        e.starts_with("perf_event_open on CPU 1048576: ") && e.contains("not online"),
        "{e}"
    );
}
