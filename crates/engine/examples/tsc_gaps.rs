//! The host's floor under a spinning loop: a thread pinned to one CPU reads the clock as fast
//! as it can for a while and records EVERY gap between two consecutive reads. The clock is
//! latlab's own (`latlab_io::clock::now_ns`, `CLOCK_REALTIME` through the vDSO, which reads the
//! TSC), the one the emulator's and the generator's loops read, so the gaps are what those
//! loops would see with no work of their own: the p50 is one clock read, the tail is the time
//! the guest's kernel or the host took the CPU away. Prints one JSON line: the number of gaps,
//! their p50, p99, p99.9, p99.99 and max (ns), how many were at least 10 µs and how long those
//! lasted together, and the thread's context switches over the run (voluntary and not: a gap
//! with none of them is the host's, the guest never scheduled anything else).
//!
//! A deadline (a frame's departure) falls at some moment of the spin, not at a clock read: it
//! waits for the rest of the gap it falls in. The gaps' percentiles count gaps; the
//! `wait_p99_ns` and `wait_p99_9_ns` it also prints sample time instead: the wait of a deadline
//! at a moment drawn uniformly from the run, the floor a loop that meets deadlines with no work
//! of its own would see.
//!
//! `cargo build --release -p latlab-engine --example tsc_gaps`, then
//! `target/release/examples/tsc_gaps [--seconds S] [--cpu N]` (default 10 s on CPU 1).

use std::process::ExitCode;

use latlab_io::clock::now_ns;
use latlab_stats::stalls::STALL_THRESHOLD_NS;
use latlab_stats::{point_rank, LatencyHistogram};

/// What to run: how long and where.
#[derive(Debug)]
struct Options {
    seconds: f64,
    cpu: usize,
}

/// The flags, or one line naming the one at fault.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        seconds: 10.0,
        cpu: 1,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag}: needs a value"))?;
        match flag.as_str() {
            "--seconds" => {
                options.seconds = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 3600.0)
                    .ok_or(format!(
                        "--seconds: {value:?} is not a number of seconds in (0, 3600]"
                    ))?;
            }
            "--cpu" => {
                options.cpu = value
                    .parse()
                    .map_err(|_| format!("--cpu: {value:?} is not a CPU number"))?;
            }
            _ => return Err(format!("{flag}: unknown flag (--seconds S, --cpu N)")),
        }
    }
    Ok(options)
}

/// The calling thread's context switches so far, voluntary and not (`/proc/thread-self/status`).
fn context_switches() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// Every gap between two consecutive clock reads for `ns`; with the stalls' count and sum.
fn spin(ns: u64) -> (LatencyHistogram, u64, u64) {
    let mut gaps = LatencyHistogram::new();
    let (mut stalls, mut stalled_ns) = (0u64, 0u64);
    let start = now_ns();
    let end = start.saturating_add(ns);
    let mut last = start;
    loop {
        let now = now_ns();
        // CLOCK_REALTIME may be stepped back: such a gap counts as none.
        let gap = now.saturating_sub(last);
        gaps.record(gap);
        if gap >= STALL_THRESHOLD_NS {
            stalls += 1;
            stalled_ns += gap;
        }
        last = now;
        if now >= end {
            return (gaps, stalls, stalled_ns);
        }
    }
}

/// The wait of a deadline at a moment drawn uniformly from the spin, at quantile `q`: a gap `g`
/// holds `g` of the run's time, and a deadline in it waits for its rest, uniform in `[0, g)`,
/// so the share waiting longer than `x` is the sum over gaps longer than `x` of `g − x`, over
/// the run's time. The smallest `x` whose share is at most `1 − q`.
fn wait_at(gaps: &LatencyHistogram, q: f64) -> u64 {
    let recorded: Vec<(u64, u64)> = gaps
        .as_hdr()
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    let total: f64 = recorded.iter().map(|&(g, n)| g as f64 * n as f64).sum();
    if total <= 0.0 {
        return 0;
    }
    let beyond = |x: u64| {
        recorded
            .iter()
            .filter(|&&(g, _)| g > x)
            .map(|&(g, n)| (g - x) as f64 * n as f64)
            .sum::<f64>()
            / total
    };
    let (mut lo, mut hi) = (0, gaps.max());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if beyond(mid) <= 1.0 - q {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(line) => {
            eprintln!("tsc_gaps: {line}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = latlab_io::cpu::pin_current_thread(options.cpu) {
        eprintln!("tsc_gaps: --cpu {}: cannot pin there: {e}", options.cpu);
        return ExitCode::from(2);
    }
    let before = context_switches();
    let (gaps, stalls, stalled_ns) = spin((options.seconds * 1e9) as u64);
    let after = context_switches();
    let at = |q: f64| gaps.value_at_rank(point_rank(gaps.len(), q)).unwrap_or(0);
    let switches = |pick: fn((u64, u64)) -> u64| {
        before
            .zip(after)
            .map_or("null".to_string(), |(b, a)| (pick(a) - pick(b)).to_string())
    };
    println!(
        "{{\"cpu\":{},\"seconds\":{},\"clock\":\"now_ns\",\"gaps\":{},\"p50_ns\":{},\
         \"p99_ns\":{},\"p99_9_ns\":{},\"p99_99_ns\":{},\"max_ns\":{},\"over_10us\":{stalls},\
         \"over_10us_total_ns\":{stalled_ns},\"voluntary_switches\":{},\
         \"involuntary_switches\":{},\"wait_p99_ns\":{},\"wait_p99_9_ns\":{}}}",
        options.cpu,
        options.seconds,
        gaps.len(),
        at(0.50),
        at(0.99),
        at(0.999),
        at(0.9999),
        gaps.max(),
        switches(|s| s.0),
        switches(|s| s.1),
        wait_at(&gaps, 0.99),
        wait_at(&gaps, 0.999),
    );
    ExitCode::SUCCESS
}
