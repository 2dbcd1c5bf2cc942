//! The clock latlab measures with.
//!
//! All times are nanoseconds of `CLOCK_REALTIME` since the Unix epoch: the clock the kernel uses
//! for its software timestamps (`SO_TIMESTAMPING`), so a user-space stamp and a kernel stamp can
//! be subtracted from each other. All network namespaces of one host share it, and so do its
//! time namespaces, which shift `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME` only: [`clock_identity`]
//! names it, so that two ends of a measurement can tell whether they read one clock.

use std::sync::OnceLock;
use std::time::Duration;

/// Where the kernel keeps the random id it drew at boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// Where a process reads its time namespace's offsets.
const TIMENS_OFFSETS: &str = "/proc/self/timens_offsets";

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

/// Now, in nanoseconds of the host's `CLOCK_MONOTONIC`, the clock of `bpf_ktime_get_ns()`: this
/// process's `CLOCK_MONOTONIC` with its time namespace's offset taken out (none outside one).
#[inline]
pub(crate) fn host_monotonic_ns() -> u64 {
    monotonic_ns().wrapping_sub(monotonic_offset_ns() as u64)
}

/// Now, in nanoseconds of `CLOCK_MONOTONIC` as this process's time namespace shows it.
#[inline]
fn monotonic_ns() -> u64 {
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

/// The identity of the clock every latlab stamp on this host is in: the kernel's
/// `CLOCK_REALTIME`, named by the 64-bit FNV-1a hash of `latlab clock ` and the kernel's boot id
/// (`/proc/sys/kernel/random/boot_id`). Every network namespace, container and time namespace
/// of one boot reads the same boot id and the same `CLOCK_REALTIME`; another host, a virtual
/// machine, or the next boot draws another id. `None` when the boot id cannot be read, or does
/// not read as one: then latlab names no clock. Read once per process.
pub fn clock_identity() -> Option<u64> {
    static IDENTITY: OnceLock<Option<u64>> = OnceLock::new();
    *IDENTITY.get_or_init(|| {
        std::fs::read_to_string(BOOT_ID)
            .ok()
            .and_then(|text| identity_of_boot_id(&text))
    })
}

/// The clock identity of the kernel whose boot id reads `text` (a UUID in its 36-character
/// form, a newline after it or not); `None` for anything else, the nil UUID included, so that
/// a missing or blanked boot id never names a clock two hosts could share.
pub fn identity_of_boot_id(text: &str) -> Option<u64> {
    let id = text.strip_suffix('\n').unwrap_or(text);
    let bytes = id.as_bytes();
    let shaped = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    let nil = bytes.iter().all(|b| matches!(b, b'0' | b'-'));
    (shaped && !nil).then(|| fnv1a(b"latlab clock ".iter().chain(bytes)))
}

/// The 64-bit FNV-1a hash of `bytes`.
fn fnv1a<'a>(bytes: impl Iterator<Item = &'a u8>) -> u64 {
    bytes.fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// How far this process's time namespace moves `CLOCK_MONOTONIC` from the host's, ns (0 outside
/// a time namespace, or on a kernel without them). Read once per process.
fn monotonic_offset_ns() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::fs::read_to_string(TIMENS_OFFSETS)
            .ok()
            .and_then(|text| monotonic_offset_of(&text))
            .unwrap_or(0)
    })
}

/// The monotonic offset in the text of `/proc/PID/timens_offsets` (`monotonic SECS NANOS`, or
/// the clock's number `1` for its name), ns; `None` when no line gives it.
fn monotonic_offset_of(text: &str) -> Option<i64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let clock = words.next()?;
        if clock != "monotonic" && clock != "1" {
            return None;
        }
        let secs: i64 = words.next()?.parse().ok()?;
        let nanos: i64 = words.next()?.parse().ok()?;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    })
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
    fn a_clock_is_named_by_the_boot_id_and_nothing_else_names_one() {
        let id = "6a1f3c2e-9b0d-4e8a-a1b2-0c9d8e7f6a5b";
        let named = identity_of_boot_id(id).unwrap();
        assert_eq!(identity_of_boot_id(&format!("{id}\n")), Some(named));
        // FNV-1a of "latlab clock " and the id: the value PROBE_FORMAT.md describes.
        let mut expected: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!("latlab clock {id}").bytes() {
            expected = (expected ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        assert_eq!(named, expected);
        let other = identity_of_boot_id("6a1f3c2e-9b0d-4e8a-a1b2-0c9d8e7f6a5c").unwrap();
        assert_ne!(named, other);
        for bad in [
            "",
            "\n",
            "00000000-0000-0000-0000-000000000000",
            "6a1f3c2e9b0d4e8aa1b20c9d8e7f6a5b",
            "6a1f3c2e-9b0d-4e8a-a1b2-0c9d8e7f6a5",
            "6a1f3c2e-9b0d-4e8a-a1b2-0c9d8e7f6a5bb",
            "6a1f3c2e-9b0d-4e8a-a1b2-0c9d8e7f6a5g",
            "6a1f3c2e_9b0d-4e8a-a1b2-0c9d8e7f6a5b",
        ] {
            assert_eq!(identity_of_boot_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_kernel_names_its_clock_the_same_every_time() {
        let text = std::fs::read_to_string(BOOT_ID).unwrap();
        assert_eq!(clock_identity(), identity_of_boot_id(&text));
        assert!(clock_identity().is_some(), "{BOOT_ID}: {text:?}");
    }

    #[test]
    fn the_time_namespaces_monotonic_offset_is_read_by_name_or_number() {
        let text = "monotonic       3600  500000000\nboottime           0         0\n";
        assert_eq!(monotonic_offset_of(text), Some(3_600_500_000_000));
        assert_eq!(monotonic_offset_of("1 -2 0\n7 5 0\n"), Some(-2_000_000_000));
        assert_eq!(monotonic_offset_of("boottime 5 0\n"), None);
        assert_eq!(monotonic_offset_of("monotonic x 0\n"), None);
        assert_eq!(monotonic_offset_of(""), None);
        // Outside a time namespace (this test's), the host's monotonic clock is this one.
        if std::fs::read_to_string(TIMENS_OFFSETS)
            .map_or(true, |t| monotonic_offset_of(&t).unwrap_or(0) == 0)
        {
            let (a, host, b) = (monotonic_ns(), host_monotonic_ns(), monotonic_ns());
            assert!(a <= host && host <= b, "{a} {host} {b}");
        }
    }

    #[test]
    fn wait_until_does_not_return_early() {
        let deadline = now_ns() + 2_000_000;
        wait_until(deadline, 100_000);
        assert!(now_ns() >= deadline);
    }
}
