//! A CPU-wide sampling profiler on the software CPU clock, for machines without hardware
//! counters (virtual machines): where one CPU spends its time, kernel function by kernel
//! function, whatever task runs there.
//!
//! [`Profiler::start`] opens a `perf_event_open(2)` event of type `PERF_TYPE_SOFTWARE`, config
//! `PERF_COUNT_SW_CPU_CLOCK`, for every task on one CPU (`pid = -1`), kernel and user, idle
//! included (`exclude_idle = 0`: the idle loop's samples tell an idle CPU from a busy one). The
//! kernel takes a sample `freq_hz` times per second of CPU time from an hrtimer, recording the
//! instruction pointer, the task and whether the CPU was in the kernel or in user space, into a
//! ring of 256 KiB shared with this process. A background thread empties the ring every
//! [`DRAIN_EVERY`]; at 10 kHz the ring holds about a second of samples, so it does not
//! overflow. When it does, the kernel says how many samples it dropped ([`Samples::lost`]).
//!
//! [`Profiler::stop`] hands back [`Samples`]: counts per kernel instruction pointer, which
//! [`Samples::by_function`] names with [`KernelSymbols`] (`/proc/kallsyms`). Self time only:
//! no call stacks are recorded. The paper's processing steps (RX, TX, memory, skb, processing)
//! are made of these functions in `latlab_bench::kernel_steps`.
//!
//! Needs root (or `kernel.perf_event_paranoid` ≤ 0 with `CAP_PERFMON`); every error names what
//! failed and, where the kernel's settings are the likely cause, their values.
//!
//! ```no_run
//! use latlab_io::profile::{KernelSymbols, Profiler};
//! let profiler = Profiler::start(1, 5_000)?;
//! std::thread::sleep(std::time::Duration::from_millis(300));
//! let samples = profiler.stop()?;
//! let symbols = KernelSymbols::load()?;
//! for (function, n) in samples.by_function(&symbols).iter().take(10) {
//!     println!("{n:>6} {function}");
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod kallsyms;
mod records;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use kallsyms::{KernelSymbol, KernelSymbols};
use records::Tally;

/// How often the background thread empties the ring: at 10 kHz, 24-byte samples fill 5 KB of
/// the 256 KiB ring in this time.
pub const DRAIN_EVERY: Duration = Duration::from_millis(20);

/// Bytes of the ring's data area (rounded up to a power of two pages).
const RING_BYTES: usize = 256 * 1024;

/// `PERF_TYPE_SOFTWARE`.
const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CPU_CLOCK`.
const SW_CPU_CLOCK: u64 = 0;
/// `PERF_SAMPLE_IP`.
const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`.
const SAMPLE_TID: u64 = 1 << 1;
/// The `disabled` bit of `perf_event_attr`'s flags word.
const FLAG_DISABLED: u64 = 1 << 0;
/// The `exclude_idle` bit, left clear: idle samples are wanted.
#[cfg(test)]
const FLAG_EXCLUDE_IDLE: u64 = 1 << 7;
/// The `freq` bit: `sample_freq` is a rate in Hz, not a period (left clear: a fixed period).
#[cfg(test)]
const FLAG_FREQ: u64 = 1 << 10;
/// `PERF_FLAG_FD_CLOEXEC`.
const FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_EVENT_IOC_ENABLE`: `_IO('$', 0)`.
const IOC_ENABLE: u64 = 0x2400;
/// `PERF_EVENT_IOC_DISABLE`: `_IO('$', 1)`.
const IOC_DISABLE: u64 = 0x2401;
/// `PERF_ATTR_SIZE_VER7`: the bytes of [`EventAttr`].
const ATTR_SIZE: u32 = 128;

/// Offsets in the ring's first page (`struct perf_event_mmap_page`).
const DATA_HEAD_AT: usize = 1024;
const DATA_TAIL_AT: usize = 1032;
const DATA_OFFSET_AT: usize = 1040;
const DATA_SIZE_AT: usize = 1048;

/// `struct perf_event_attr` up to `sig_data` (`PERF_ATTR_SIZE_VER7`), its bitfield one `u64`
/// flags word.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct EventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period_or_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
}

const _: () = assert!(std::mem::size_of::<EventAttr>() == ATTR_SIZE as usize);

/// What a profile of one CPU saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Samples {
    /// The CPU profiled.
    pub cpu: usize,
    /// The sampling rate asked for, in samples per second of CPU time.
    pub freq_hz: u64,
    /// Wall time from enabling the event to disabling it.
    pub wall: Duration,
    /// Samples read, wherever the CPU was; about `freq_hz × wall` ([`Samples::expected`]).
    pub total: u64,
    /// Samples taken in the kernel, by instruction pointer; they add up to [`Samples::kernel`].
    pub kernel_ips: HashMap<u64, u64>,
    /// Samples taken in the kernel (idle loop included).
    pub kernel: u64,
    /// Samples taken in user space.
    pub user: u64,
    /// Samples taken in neither (hypervisor, guest, or a mode the kernel did not say).
    pub other_mode: u64,
    /// Samples taken while the idle task (pid 0) was current: its idle loop, but also the
    /// interrupts and softirqs it served (packet processing among them). The kernel functions
    /// tell the two apart.
    pub idle_task: u64,
    /// Samples the kernel dropped because the ring was full; not in `total`.
    pub lost: u64,
    /// Times the kernel lowered the rate because its sampling interrupts took too long
    /// (`kernel.perf_event_max_sample_rate` halves then): `total` then falls short of
    /// `expected`.
    pub throttled: u64,
    /// Records that could not be read (a bug of the kernel or of this module); each one lost the
    /// rest of the ring at the time.
    pub malformed: u64,
}

impl Samples {
    /// The samples a CPU-wide profile of `wall` at `freq_hz` should have: `freq_hz × wall`.
    pub fn expected(&self) -> f64 {
        self.freq_hz as f64 * self.wall.as_secs_f64()
    }

    /// Kernel samples by function name, most samples first (ties by name); instruction
    /// pointers no symbol covers count as `[unknown]`. User samples are not included (see
    /// [`Samples::user`]).
    pub fn by_function(&self, symbols: &KernelSymbols) -> Vec<(String, u64)> {
        let mut by_name: HashMap<&str, u64> = HashMap::new();
        for (&ip, &n) in &self.kernel_ips {
            *by_name
                .entry(symbols.lookup(ip).unwrap_or("[unknown]"))
                .or_insert(0) += n;
        }
        let mut out: Vec<(String, u64)> = by_name
            .into_iter()
            .map(|(name, n)| (name.to_string(), n))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    fn from_tally(cpu: usize, freq_hz: u64, wall: Duration, t: Tally) -> Samples {
        Samples {
            cpu,
            freq_hz,
            wall,
            total: t.samples,
            kernel: t.kernel_ips.values().sum(),
            kernel_ips: t.kernel_ips,
            user: t.user,
            other_mode: t.other_mode,
            idle_task: t.idle_task,
            lost: t.lost,
            throttled: t.throttled,
            malformed: t.malformed,
        }
    }
}

/// A running profile of one CPU; [`Profiler::stop`] ends it. Dropping it without `stop` ends
/// it too, its samples discarded.
#[derive(Debug)]
pub struct Profiler {
    fd: OwnedFd,
    cpu: usize,
    freq_hz: u64,
    started: Instant,
    stop: Arc<AtomicBool>,
    drain: Option<JoinHandle<Tally>>,
}

impl Profiler {
    /// Starts sampling every task on `cpu`, kernel and user, idle included, `freq_hz` times
    /// per second (at most `kernel.perf_event_max_sample_rate`).
    pub fn start(cpu: usize, freq_hz: u64) -> io::Result<Profiler> {
        if freq_hz == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "perf sampling frequency must be above 0 Hz",
            ));
        }
        let cpu_arg = libc::c_int::try_from(cpu).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is out of range"),
            )
        })?;
        let attr = EventAttr {
            kind: TYPE_SOFTWARE,
            size: ATTR_SIZE,
            config: SW_CPU_CLOCK,
            // A fixed period in nanoseconds of the CPU clock, not the kernel's frequency mode:
            // that one adjusts the period on scheduler ticks, which a CPU busy in softirqs
            // between idle spells barely has, and then samples a forwarding CPU far too rarely.
            sample_period_or_freq: (1_000_000_000 / freq_hz).max(1),
            sample_type: SAMPLE_IP | SAMPLE_TID,
            flags: FLAG_DISABLED,
            ..EventAttr::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the size it states, read by the kernel
        // during the call only; the other arguments are plain integers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const EventAttr,
                -1 as libc::pid_t,
                cpu_arg,
                -1 as libc::c_int,
                FD_CLOEXEC,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "perf_event_open on CPU {cpu}: {e}{}",
                    open_hint(&e, cpu, freq_hz)
                ),
            ));
        }
        // SAFETY: the call returned a new file descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(rc as RawFd) };
        let ring = Ring::map(fd.as_raw_fd())
            .map_err(|e| io::Error::new(e.kind(), format!("perf ring of CPU {cpu}: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let drain = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name(format!("profile-cpu{cpu}"))
                .spawn(move || drain_until(ring, &stop))
                .map_err(|e| io::Error::new(e.kind(), format!("spawn the ring's reader: {e}")))?
        };
        let mut profiler = Profiler {
            fd,
            cpu,
            freq_hz,
            started: Instant::now(),
            stop,
            drain: Some(drain),
        };
        ioctl(&profiler.fd, IOC_ENABLE).map_err(|e| {
            io::Error::new(e.kind(), format!("enable perf event on CPU {cpu}: {e}"))
        })?;
        profiler.started = Instant::now();
        Ok(profiler)
    }

    /// The CPU being profiled.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Stops sampling, reads what is left in the ring and closes the event.
    pub fn stop(mut self) -> io::Result<Samples> {
        let disabled = ioctl(&self.fd, IOC_DISABLE);
        let wall = self.started.elapsed();
        let tally = self.join();
        disabled.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("disable perf event on CPU {}: {e}", self.cpu),
            )
        })?;
        let tally = tally?;
        Ok(Samples::from_tally(self.cpu, self.freq_hz, wall, tally))
    }

    /// Tells the reader to empty the ring a last time and waits for it.
    fn join(&mut self) -> io::Result<Tally> {
        let Some(drain) = self.drain.take() else {
            return Ok(Tally::default());
        };
        self.stop.store(true, Ordering::Release);
        drain.thread().unpark();
        drain.join().map_err(|_| {
            io::Error::other(format!("the perf ring reader of CPU {} panicked", self.cpu))
        })
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        let _ = ioctl(&self.fd, IOC_DISABLE);
        let _ = self.join();
    }
}

/// Why `perf_event_open` likely failed, from the kernel's settings, as `" (…)"`; empty when
/// nothing is known.
fn open_hint(e: &io::Error, cpu: usize, freq_hz: u64) -> String {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_string())
            .ok()
    };
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            let paranoid = sysctl("perf_event_paranoid").unwrap_or_else(|| "unknown".into());
            format!(" (kernel.perf_event_paranoid is {paranoid}; run as root)")
        }
        Some(libc::EINVAL | libc::ENODEV) => {
            let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            if !online.is_empty() && !in_cpu_list(&online, cpu) {
                return format!(" (CPU {cpu} is not online; online are {online})");
            }
            match sysctl("perf_event_max_sample_rate") {
                Some(max) if max.parse::<u64>().is_ok_and(|max| freq_hz > max) => {
                    format!(" (kernel.perf_event_max_sample_rate is {max}, below {freq_hz} Hz)")
                }
                _ => String::new(),
            }
        }
        Some(libc::ENOSYS | libc::ENOENT | libc::EOPNOTSUPP) => {
            " (this kernel or its sandbox offers no software perf events)".into()
        }
        _ => String::new(),
    }
}

/// Whether `cpu` is in `list`, a kernel CPU list such as `0-3,8,10-11`.
fn in_cpu_list(list: &str, cpu: usize) -> bool {
    list.split(',').any(|part| {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        match (first.trim().parse::<usize>(), last.trim().parse::<usize>()) {
            (Ok(first), Ok(last)) => (first..=last).contains(&cpu),
            _ => false,
        }
    })
}

fn ioctl(fd: &OwnedFd, request: u64) -> io::Result<()> {
    // SAFETY: ENABLE and DISABLE take no argument and touch no memory of ours; `fd` is open.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Empties `ring` every [`DRAIN_EVERY`] until `stop` is set, then once more.
fn drain_until(mut ring: Ring, stop: &AtomicBool) -> Tally {
    let mut tally = Tally::default();
    let mut scratch = Vec::new();
    loop {
        let last = stop.load(Ordering::Acquire);
        ring.drain(&mut scratch, &mut tally);
        if last {
            return tally;
        }
        std::thread::park_timeout(DRAIN_EVERY);
    }
}

/// The event's ring mapped into this process: a metadata page, then the data area that the
/// kernel writes records into and this process reads.
struct Ring {
    map: *mut u8,
    map_len: usize,
    data: *const u8,
    data_size: usize,
    /// The position read up to, the kernel's `data_tail` (only this process writes it).
    tail: u64,
}

// SAFETY: the ring is a mapping owned by this value alone; the thread that holds it is the only
// one reading the data area and writing `data_tail`.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of event `fd`: one metadata page and [`RING_BYTES`] of data.
    fn map(fd: RawFd) -> io::Result<Ring> {
        // SAFETY: sysconf only reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let data_pages = RING_BYTES.div_ceil(page).next_power_of_two();
        let map_len = (1 + data_pages) * page;
        // SAFETY: a fresh shared mapping of the event's ring, of a length the kernel accepts
        // (1 + 2^n pages); nothing in this process aliases it.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("mmap of {} KiB: {e}", map_len / 1024),
            ));
        }
        let map = map.cast::<u8>();
        // SAFETY: both fields lie inside the first page of the mapping, 8-byte aligned; the
        // kernel wrote them before mmap returned and does not change them afterwards.
        let (offset, size) = unsafe {
            (
                ptr::read_volatile(map.add(DATA_OFFSET_AT).cast::<u64>()),
                ptr::read_volatile(map.add(DATA_SIZE_AT).cast::<u64>()),
            )
        };
        // Kernels before 4.1 leave both 0: the data starts at the second page.
        let (offset, size) = if size == 0 {
            (page, data_pages * page)
        } else {
            (offset as usize, size as usize)
        };
        let fits = size.is_power_of_two()
            && offset >= page
            && offset.checked_add(size).is_some_and(|end| end <= map_len);
        let mut ring = Ring {
            map,
            map_len,
            data: ptr::null(),
            data_size: size,
            tail: 0,
        };
        if !fits {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the kernel's data area ({size} bytes at {offset}) does not fit the mapping of {map_len}"),
            ));
        }
        // SAFETY: checked just above to lie inside the mapping.
        ring.data = unsafe { map.add(offset) };
        ring.tail = ring.data_tail().load(Ordering::Relaxed);
        Ok(ring)
    }

    fn data_head(&self) -> &AtomicU64 {
        // SAFETY: offset 1024 of the mapping's first page is `data_head`, 8-byte aligned, which
        // the kernel only ever writes whole; the mapping lives as long as `self`.
        unsafe { &*self.map.add(DATA_HEAD_AT).cast::<AtomicU64>() }
    }

    fn data_tail(&self) -> &AtomicU64 {
        // SAFETY: as for `data_head`, at offset 1032 (`data_tail`), which the kernel only reads.
        unsafe { &*self.map.add(DATA_TAIL_AT).cast::<AtomicU64>() }
    }

    /// Reads every record the kernel published since the last call into `tally` and gives
    /// their space back to the kernel.
    fn drain(&mut self, scratch: &mut Vec<u8>, tally: &mut Tally) {
        // Acquire: the records before `head` are visible once `head` is.
        let head = self.data_head().load(Ordering::Acquire);
        match records::segments(self.data_size, self.tail, head) {
            Some((first, second)) => {
                scratch.clear();
                for part in [first, second] {
                    let at = scratch.len();
                    scratch.resize(at + part.len(), 0);
                    // SAFETY: `part` lies inside the data area (`segments` keeps it below
                    // `data_size`), and the kernel does not write between the tail and the
                    // head until the tail moves past them below; `scratch` has room.
                    unsafe {
                        ptr::copy_nonoverlapping(
                            self.data.add(part.start),
                            scratch.as_mut_ptr().add(at),
                            part.len(),
                        );
                    }
                }
                records::parse(scratch, tally);
            }
            // A head the kernel cannot have written: skip to it.
            None => tally.malformed += 1,
        }
        self.tail = head;
        // Release: the kernel may reuse the space only after the reads above.
        self.data_tail().store(head, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `map` and `map_len` describe the mapping made in `Ring::map`, which nothing
        // borrows any more.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("data_size", &self.data_size)
            .field("tail", &self.tail)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn the_attr_struct_has_the_kernels_layout() {
        // Offsets from include/uapi/linux/perf_event.h.
        assert_eq!(offset_of!(EventAttr, config), 8);
        assert_eq!(offset_of!(EventAttr, sample_period_or_freq), 16);
        assert_eq!(offset_of!(EventAttr, sample_type), 24);
        assert_eq!(offset_of!(EventAttr, flags), 40);
        assert_eq!(offset_of!(EventAttr, wakeup_events), 48);
        assert_eq!(offset_of!(EventAttr, config1), 56);
        assert_eq!(offset_of!(EventAttr, branch_sample_type), 72);
        assert_eq!(offset_of!(EventAttr, sample_stack_user), 88);
        assert_eq!(offset_of!(EventAttr, sample_regs_intr), 96);
        assert_eq!(offset_of!(EventAttr, aux_sample_size), 112);
        assert_eq!(offset_of!(EventAttr, sig_data), 120);
        assert_eq!(FLAG_DISABLED | FLAG_FREQ, 0b100_0000_0001);
        assert_eq!(FLAG_DISABLED & (FLAG_EXCLUDE_IDLE | FLAG_FREQ), 0);
    }

    #[test]
    fn samples_are_named_by_function_most_first() {
        let symbols =
            KernelSymbols::parse("ffffffff81000000 T ip_forward\nffffffff81000100 T ip_rcv\n")
                .unwrap();
        let samples = Samples {
            kernel_ips: HashMap::from([
                (0xffffffff81000010, 2),
                (0xffffffff81000020, 3),
                (0xffffffff81000100, 4),
                (0x1000, 1),
            ]),
            ..Samples::default()
        };
        assert_eq!(
            samples.by_function(&symbols),
            [
                ("ip_forward".to_string(), 5),
                ("ip_rcv".to_string(), 4),
                ("[unknown]".to_string(), 1)
            ]
        );
    }

    #[test]
    fn cpu_lists_are_read_as_the_kernel_writes_them() {
        assert!(in_cpu_list("0-1", 1));
        assert!(!in_cpu_list("0-1", 2));
        assert!(in_cpu_list("0,2-3,8", 8));
        assert!(!in_cpu_list("0,2-3,8", 1));
        assert!(!in_cpu_list("", 0));
    }

    #[test]
    fn a_zero_frequency_is_refused_before_any_system_call() {
        let e = Profiler::start(0, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
