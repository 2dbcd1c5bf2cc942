//! The clock latlab measures with.
//!
//! All times are nanoseconds of `CLOCK_REALTIME` since the Unix epoch: the clock the kernel uses
//! for its software timestamps (`SO_TIMESTAMPING`), so a user-space stamp and a kernel stamp can
//! be subtracted from each other. All network namespaces of one host share it.

use std::time::Duration;

/// Now, in nanoseconds of `CLOCK_REALTIME` since the Unix epoch.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    timespec_ns(&ts)
}

/// Now, in nanoseconds of `CLOCK_MONOTONIC` (the clock of `bpf_ktime_get_ns()`).
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    timespec_ns(&ts)
}

/// The CPU time the calling thread has used, ns (`CLOCK_THREAD_CPUTIME_ID`): user and
/// system time, the kernel's work done inside its system calls included.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the calling thread's CPU clock exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    timespec_ns(&ts)
}

/// Converts a `timespec` to nanoseconds; negative times become 0.
#[inline]
pub(crate) fn timespec_ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec.max(0) as u64) * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// Spins until [`now_ns`] reaches `deadline_ns`, sleeping first when the deadline is far away.
///
/// Sleeping is coarse (tens of microseconds late with the default timer slack), so this sleeps
/// only until `spin_ns` before the deadline and spins the rest.
pub fn wait_until(deadline_ns: u64, spin_ns: u64) {
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return;
        }
        let left = deadline_ns - now;
        if left > spin_ns {
            std::thread::sleep(Duration::from_nanos(left - spin_ns));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_after_2020_and_moves_forward() {
        let a = now_ns();
        assert!(a > 1_577_836_800_000_000_000, "clock reads {a}");
        let b = now_ns();
        assert!(b >= a);
    }

    #[test]
    fn wait_until_does_not_return_early() {
        let deadline = now_ns() + 2_000_000;
        wait_until(deadline, 100_000);
        assert!(now_ns() >= deadline);
    }
}
