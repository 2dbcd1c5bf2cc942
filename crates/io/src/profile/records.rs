//! The records of a perf ring, parsed from bytes: no system call, so tests feed it synthetic
//! rings.
//!
//! A ring is `size` bytes (a power of two) read from `tail` to `head`, two byte positions that
//! only grow; position `p` lives at offset `p % size`, so a record that starts near the end
//! continues at the ring's start. [`segments`] says which two stretches of the ring hold the
//! bytes from `tail` to `head`; the caller copies them out, one after the other, and
//! [`parse`] reads the copy, where no record wraps any more.
//!
//! A record is a `perf_event_header` (`u32` type, `u16` misc, `u16` size, the size counting
//! the header) and its body. With `sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID` a sample's
//! body is the `u64` instruction pointer then the `u32` pid and `u32` tid. Nothing read here
//! can panic or loop: a header whose size is below the header's own or runs past the bytes
//! there are is counted as malformed and ends the read (what follows it cannot be found).

use std::collections::HashMap;
use std::ops::Range;

/// `PERF_RECORD_LOST`: the kernel dropped samples because the ring was full.
const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`: the kernel lowered the sampling rate (interrupts took too long).
const RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_SAMPLE`.
const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MISC_CPUMODE_MASK`: the bits of `misc` saying where the CPU was.
const CPUMODE_MASK: u16 = 7;
/// `PERF_RECORD_MISC_KERNEL`.
const CPUMODE_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`.
const CPUMODE_USER: u16 = 2;

/// Bytes of a `perf_event_header`.
pub(crate) const HEADER_LEN: usize = 8;
/// Bytes of a sample's body with `PERF_SAMPLE_IP | PERF_SAMPLE_TID`.
const SAMPLE_BODY_LEN: usize = 16;
/// Bytes of a lost record's body: `u64` id, `u64` samples lost.
const LOST_BODY_LEN: usize = 16;

/// What the records read so far say; [`parse`] adds to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Sample records read, wherever the CPU was.
    pub(crate) samples: u64,
    /// Samples taken in the kernel, by instruction pointer.
    pub(crate) kernel_ips: HashMap<u64, u64>,
    /// Samples taken in user space.
    pub(crate) user: u64,
    /// Samples taken elsewhere (hypervisor, guest, or a mode the kernel did not say).
    pub(crate) other_mode: u64,
    /// Samples taken while the idle task (pid 0) was current, in any function: the idle loop
    /// and the interrupts and softirqs it served.
    pub(crate) idle_task: u64,
    /// Samples the kernel says it dropped (the sum of the lost records' counts).
    pub(crate) lost: u64,
    /// Throttle records: the kernel lowered the rate because sampling interrupts took too long.
    pub(crate) throttled: u64,
    /// Records too short for their type, or headers that could not be read (each ends a read).
    pub(crate) malformed: u64,
}

/// The stretches of a ring of `size` bytes (a power of two) that hold the bytes from position
/// `tail` to `head`, in order; the second is empty unless they wrap past the ring's end. `None`
/// when `head` is before `tail` or more than `size` past it (positions the kernel cannot have
/// written).
pub(crate) fn segments(size: usize, tail: u64, head: u64) -> Option<(Range<usize>, Range<usize>)> {
    debug_assert!(size.is_power_of_two());
    let len = usize::try_from(head.checked_sub(tail)?).ok()?;
    if len > size {
        return None;
    }
    let start = (tail % size as u64) as usize;
    let first = len.min(size - start);
    Some((start..start + first, 0..len - first))
}

/// Reads the records in `bytes` (the ring from the tail on, unwrapped) into `tally`.
pub(crate) fn parse(bytes: &[u8], tally: &mut Tally) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(header) = rest.get(..HEADER_LEN) else {
            tally.malformed += 1;
            return;
        };
        let kind = u32::from_ne_bytes(header[0..4].try_into().unwrap());
        let misc = u16::from_ne_bytes(header[4..6].try_into().unwrap());
        let size = u16::from_ne_bytes(header[6..8].try_into().unwrap()) as usize;
        if size < HEADER_LEN || size > rest.len() {
            tally.malformed += 1;
            return;
        }
        let body = &rest[HEADER_LEN..size];
        match kind {
            RECORD_SAMPLE if body.len() >= SAMPLE_BODY_LEN => {
                let ip = u64::from_ne_bytes(body[0..8].try_into().unwrap());
                let pid = u32::from_ne_bytes(body[8..12].try_into().unwrap());
                tally.samples += 1;
                if pid == 0 {
                    tally.idle_task += 1;
                }
                match misc & CPUMODE_MASK {
                    CPUMODE_KERNEL => *tally.kernel_ips.entry(ip).or_insert(0) += 1,
                    CPUMODE_USER => tally.user += 1,
                    _ => tally.other_mode += 1,
                }
            }
            RECORD_LOST if body.len() >= LOST_BODY_LEN => {
                tally.lost += u64::from_ne_bytes(body[8..16].try_into().unwrap());
            }
            RECORD_SAMPLE | RECORD_LOST => tally.malformed += 1,
            RECORD_THROTTLE => tally.throttled += 1,
            _ => {}
        }
        rest = &rest[size..];
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sample record taken in `cpumode` at `ip` by task `pid`.
    pub(crate) fn sample(cpumode: u16, ip: u64, pid: u32) -> Vec<u8> {
        let mut r = record(RECORD_SAMPLE, cpumode, 24);
        r.extend_from_slice(&ip.to_ne_bytes());
        r.extend_from_slice(&pid.to_ne_bytes());
        r.extend_from_slice(&pid.to_ne_bytes());
        r
    }

    /// A lost record saying `lost` samples were dropped.
    fn lost(lost: u64) -> Vec<u8> {
        let mut r = record(RECORD_LOST, 0, 24);
        r.extend_from_slice(&7u64.to_ne_bytes());
        r.extend_from_slice(&lost.to_ne_bytes());
        r
    }

    /// A header alone.
    fn record(kind: u32, misc: u16, size: u16) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        r
    }

    fn parsed(bytes: &[u8]) -> Tally {
        let mut t = Tally::default();
        parse(bytes, &mut t);
        t
    }

    /// Reads a ring the way the profiler does: the segments copied out, then parsed.
    fn read_ring(ring: &[u8], tail: u64, head: u64) -> Tally {
        let (a, b) = segments(ring.len(), tail, head).unwrap();
        let mut copy = ring[a].to_vec();
        copy.extend_from_slice(&ring[b]);
        parsed(&copy)
    }

    #[test]
    fn a_kernel_sample_is_counted_at_its_ip_and_a_user_sample_apart() {
        let mut bytes = sample(CPUMODE_KERNEL, 0xffff_ffff_8100_1234, 42);
        bytes.extend(sample(CPUMODE_KERNEL, 0xffff_ffff_8100_1234, 0));
        bytes.extend(sample(CPUMODE_USER, 0x5555_0000, 42));
        bytes.extend(sample(0, 0x1, 42));
        let t = parsed(&bytes);
        assert_eq!(t.samples, 4);
        assert_eq!(t.kernel_ips, HashMap::from([(0xffff_ffff_8100_1234, 2)]));
        assert_eq!((t.user, t.other_mode, t.idle_task), (1, 1, 1));
        assert_eq!((t.lost, t.malformed), (0, 0));
    }

    #[test]
    fn a_lost_record_adds_its_count_and_other_records_are_skipped() {
        let mut bytes = lost(17);
        bytes.extend(record(RECORD_THROTTLE, 0, 24));
        bytes.extend([0; 16]);
        bytes.extend(record(3, 0, 16)); // PERF_RECORD_COMM, short: skipped by its size
        bytes.extend([0; 8]);
        bytes.extend(lost(3));
        bytes.extend(sample(CPUMODE_USER, 1, 1));
        let t = parsed(&bytes);
        assert_eq!((t.lost, t.throttled, t.samples, t.malformed), (20, 1, 1, 0));
    }

    #[test]
    fn a_record_wrapped_around_the_rings_end_is_read_whole() {
        // A 64-byte ring: a sample at 32..56, then one that starts at 56 and ends at 16.
        let first = sample(CPUMODE_KERNEL, 0xaaaa, 1);
        let second = sample(CPUMODE_KERNEL, 0xbbbb, 1);
        let mut ring = vec![0xee; 64];
        ring[32..56].copy_from_slice(&first);
        ring[56..64].copy_from_slice(&second[..8]);
        ring[0..16].copy_from_slice(&second[8..]);
        // Positions keep growing across laps: this is the third lap.
        let t = read_ring(&ring, 128 + 32, 128 + 64 + 16);
        assert_eq!(t.kernel_ips, HashMap::from([(0xaaaa, 1), (0xbbbb, 1)]));
        assert_eq!(t.malformed, 0);
        assert_eq!(segments(64, 128 + 32, 128 + 64 + 16), Some((32..64, 0..16)));
    }

    #[test]
    fn positions_the_kernel_cannot_have_written_have_no_segments() {
        assert_eq!(segments(64, 10, 9), None);
        assert_eq!(segments(64, 0, 65), None);
        assert_eq!(segments(64, 0, 64), Some((0..64, 0..0)));
        assert_eq!(segments(64, 5, 5), Some((5..5, 0..0)));
    }

    #[test]
    fn a_truncated_record_is_counted_and_ends_the_read() {
        let mut bytes = sample(CPUMODE_KERNEL, 0xaaaa, 1);
        bytes.extend(&sample(CPUMODE_KERNEL, 0xbbbb, 1)[..20]);
        let t = parsed(&bytes);
        assert_eq!((t.samples, t.malformed), (1, 1));
        // A header cut short, too.
        let t = parsed(&sample(CPUMODE_KERNEL, 0xaaaa, 1)[..5]);
        assert_eq!((t.samples, t.malformed), (0, 1));
        // A sample whose size leaves no room for its body.
        let mut bytes = record(RECORD_SAMPLE, CPUMODE_KERNEL, 16);
        bytes.extend([0; 8]);
        bytes.extend(sample(CPUMODE_USER, 1, 1));
        let t = parsed(&bytes);
        assert_eq!((t.samples, t.user, t.malformed), (1, 1, 1));
    }

    #[test]
    fn a_header_of_size_zero_is_counted_and_ends_the_read() {
        let mut bytes = record(RECORD_SAMPLE, CPUMODE_KERNEL, 0);
        bytes.extend(sample(CPUMODE_KERNEL, 0xaaaa, 1));
        let t = parsed(&bytes);
        assert_eq!((t.samples, t.malformed), (0, 1));
        let t = parsed(&[0; 64]);
        assert_eq!((t.samples, t.malformed), (0, 1));
    }
}
