//! The time-stamp counter: a cycle clock for emulating CPU work and for spinning to a deadline.
//!
//! On x86-64 this reads `rdtsc` (constant and non-stop on the machines latlab targets); on other
//! architectures it falls back to the monotonic clock in nanoseconds, calibrated as 1 GHz.

use std::time::{Duration, Instant};

/// The counter's current value.
#[inline]
pub fn read() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64; it only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        crate::clock::now_ns()
    }
}

/// Spins until the counter has advanced `cycles`: emulated CPU work that keeps the core busy,
/// unlike a sleep.
#[inline]
pub fn spin_cycles(cycles: u64) {
    if cycles == 0 {
        return;
    }
    let start = read();
    while read().wrapping_sub(start) < cycles {
        std::hint::spin_loop();
    }
}

/// Measures the counter's frequency in Hz over `over` (10 ms gives about 4 significant digits).
pub fn frequency_hz(over: Duration) -> f64 {
    let (t0, c0) = (Instant::now(), read());
    while t0.elapsed() < over {
        std::hint::spin_loop();
    }
    let (t1, c1) = (Instant::now(), read());
    c1.wrapping_sub(c0) as f64 / (t1 - t0).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_moves_forward_at_a_plausible_rate() {
        let hz = frequency_hz(Duration::from_millis(20));
        assert!((1e8..1e10).contains(&hz), "{hz} Hz");
    }

    #[test]
    fn spinning_takes_at_least_the_cycles_asked_for() {
        let start = read();
        spin_cycles(150);
        assert!(read() - start >= 150);
        let hz = frequency_hz(Duration::from_millis(10));
        let t = Instant::now();
        spin_cycles((hz / 1000.0) as u64);
        assert!(
            t.elapsed() >= Duration::from_micros(900),
            "{:?}",
            t.elapsed()
        );
    }
}
