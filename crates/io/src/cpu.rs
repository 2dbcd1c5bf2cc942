//! CPU pinning and timer slack for the calling thread.

use std::io;

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads the set, and every index is below its size in bits.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin_thread(0, cpu)
}

/// Pins the thread `tid` (a kernel thread too, such as a threaded NAPI poller; 0: the calling
/// thread) to `cpu`.
pub fn pin_thread(tid: i32, cpu: usize) -> io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is out of range"),
        ));
    }
    // SAFETY: all zeroes is a valid, empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` was checked to be below the set's size in bits.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lets the thread `tid` (0: the calling thread) run on any of `cpus` (one or more; a blocking
/// loop kept off the CPUs others spin on).
pub fn set_thread_cpus(tid: i32, cpus: &[usize]) -> io::Result<()> {
    let bits = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpus.is_empty() || cpus.iter().any(|&c| c >= bits) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpus {cpus:?}: none given, or one out of range"),
        ));
    }
    // SAFETY: all zeroes is a valid, empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: every `cpu` was checked to be below the set's size in bits.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's id of the calling thread (`gettid`), for [`pin_thread`] and
/// [`set_thread_cpus`] from another thread.
pub fn current_thread_id() -> i32 {
    // SAFETY: gettid takes no argument, touches no memory and cannot fail.
    unsafe { libc::gettid() }
}

/// The CPU the calling thread runs on now (`sched_getcpu`), `None` if the kernel does not say.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no argument and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Puts the calling thread in the `SCHED_IDLE` class: it runs only when nothing else on its
/// CPU wants to.
pub fn set_current_thread_idle_class() -> io::Result<()> {
    // SAFETY: sched_param is a plain struct; priority 0 is the only one SCHED_IDLE takes, and
    // pid 0 is the calling thread.
    let rc = unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SCHED_RESET_ON_FORK`: threads and processes the thread starts get the default policy.
const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

/// Puts thread `tid` (0: the calling thread) in the `SCHED_FIFO` class at `priority` (1 is the
/// lowest), with `SCHED_RESET_ON_FORK`, so threads and processes it starts are ordinary
/// again. A `SCHED_FIFO` thread that wakes runs at once, ahead of every ordinary thread on
/// its CPU, and keeps it until it sleeps: a loop that sleeps between frames is then woken
/// within microseconds whatever else runs. Needs `CAP_SYS_NICE` (or `RLIMIT_RTPRIO`).
pub fn set_thread_realtime(tid: i32, priority: i32) -> io::Result<()> {
    // SAFETY: sched_param is a plain struct passed by pointer for the duration of the call.
    let rc = unsafe {
        let param = libc::sched_param {
            sched_priority: priority,
        };
        libc::sched_setscheduler(tid, libc::SCHED_FIFO | SCHED_RESET_ON_FORK, &param)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts thread `tid` (0: the calling thread) back in the ordinary class (`SCHED_OTHER`, its
/// nice value kept). Always allowed.
pub fn set_thread_ordinary(tid: i32) -> io::Result<()> {
    // SAFETY: sched_param is a plain struct passed by pointer for the duration of the call.
    let rc = unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(tid, libc::SCHED_OTHER | SCHED_RESET_ON_FORK, &param)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The realtime priority of thread `tid` (0: the calling thread), `None` if it is not in the
/// `SCHED_FIFO` class.
pub fn thread_realtime_priority(tid: i32) -> io::Result<Option<i32>> {
    if !thread_is_realtime(tid)? {
        return Ok(None);
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam writes one sched_param through the pointer we own.
    let rc = unsafe { libc::sched_getparam(tid, &mut param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(param.sched_priority))
}

/// Whether this process may put its threads in `SCHED_FIFO` ([`set_thread_realtime`]):
/// tried on a thread of its own, which ends at once, so nothing of the caller's changes.
pub fn may_run_realtime() -> bool {
    std::thread::spawn(|| set_thread_realtime(0, 1).is_ok())
        .join()
        .unwrap_or(false)
}

/// Whether thread `tid` (0: the calling thread) runs in the `SCHED_FIFO` class.
pub fn thread_is_realtime(tid: i32) -> io::Result<bool> {
    // SAFETY: sched_getscheduler takes a thread id and touches no memory of ours.
    let rc = unsafe { libc::sched_getscheduler(tid) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc & !SCHED_RESET_ON_FORK == libc::SCHED_FIFO)
}

/// The share of each period the kernel lets realtime threads run (`sched_rt_runtime_us` over
/// `sched_rt_period_us`, 0.95 by default); `None` where it does not limit them (a runtime of
/// -1) or does not say. Past it the kernel takes the CPU from a realtime loop until the period
/// ends: ~50 ms once a second at the defaults.
pub fn realtime_share() -> Option<f64> {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).ok();
    parse_realtime_share(&read("sched_rt_runtime_us")?, &read("sched_rt_period_us")?)
}

/// [`realtime_share`] from the two files' text.
fn parse_realtime_share(runtime_us: &str, period_us: &str) -> Option<f64> {
    let runtime: i64 = runtime_us.trim().parse().ok()?;
    let period: i64 = period_us.trim().parse().ok()?;
    (runtime >= 0 && period > 0).then(|| (runtime as f64 / period as f64).min(1.0))
}

/// Time the hypervisor gave this machine's CPUs to others while they had work (the `steal`
/// column of `/proc/stat`'s `cpu` line, all CPUs summed), ns; `None` where the kernel does not
/// report it. On a guest, a thread can stall for tens of milliseconds while its vCPU is
/// stolen, which no scheduling inside the guest prevents.
pub fn steal_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal_ns(&stat)
}

/// [`steal_ns`] from the text of `/proc/stat` (ticks of `USER_HZ`, 100 per second on Linux).
fn parse_steal_ns(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(ticks * 10_000_000)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`), so short sleeps wake on time.
///
/// The default slack of 50 µs makes a 1 µs sleep last ~56 µs; 1 ns brings it to a few µs.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    let ns = ns.max(1) as libc::c_ulong;
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's timer slack in ns (`PR_GET_TIMERSLACK`).
pub fn timer_slack_ns() -> io::Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no argument and touches no memory of ours; it returns
    // the slack, or -1 on error.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    u64::try_from(slack).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  1940119 0 424218 1759517 23726 0 136851 23734 0 0\n\
                    cpu0 877726 0 214870 982277 7182 0 58247 11769 0 0\n";
        assert_eq!(parse_steal_ns(stat), Some(23_734 * 10_000_000));
        assert_eq!(parse_steal_ns("cpu  1 2 3 4\n"), None);
        assert_eq!(parse_steal_ns("intr 5\n"), None);
        assert!(steal_ns().is_some());
    }

    #[test]
    fn the_realtime_share_is_runtime_over_period_and_none_when_unlimited() {
        assert_eq!(parse_realtime_share("950000\n", "1000000\n"), Some(0.95));
        assert_eq!(parse_realtime_share("-1\n", "1000000\n"), None);
        assert_eq!(parse_realtime_share("2000000", "1000000"), Some(1.0));
        assert_eq!(parse_realtime_share("x", "1000000"), None);
        assert_eq!(parse_realtime_share("5", "0"), None);
        let share = realtime_share();
        assert!(share.is_none_or(|s| (0.0..=1.0).contains(&s)), "{share:?}");
    }

    #[test]
    fn a_thread_can_be_pinned_to_an_allowed_cpu() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let cpu = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_can_be_moved_by_another_to_a_set_of_cpus() {
        let cpus = allowed_cpus().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(current_thread_id()).unwrap();
            done_rx.recv().unwrap();
            allowed_cpus().unwrap()
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, current_thread_id(), "each thread has its own id");
        let first = vec![cpus[0]];
        set_thread_cpus(tid, &first).unwrap();
        done_tx.send(()).unwrap();
        assert_eq!(worker.join().unwrap(), first);
        assert!(set_thread_cpus(0, &[]).is_err(), "an empty set is refused");
        assert!(current_cpu().is_some_and(|c| cpus.contains(&c)));
    }

    #[test]
    fn out_of_range_cpu_is_an_error_not_a_crash() {
        assert!(pin_current_thread(1 << 20).is_err());
    }

    #[test]
    fn timer_slack_can_be_set() {
        // In a thread of its own, whose slack goes with it; still put back and checked.
        std::thread::spawn(|| {
            let before = timer_slack_ns().unwrap();
            for ns in [1, 12_345, before + 1] {
                set_timer_slack_ns(ns).unwrap();
                assert_eq!(timer_slack_ns().unwrap(), ns, "the slack set");
            }
            // 0 would give the thread its default slack back: it is taken as 1 ns.
            set_timer_slack_ns(0).unwrap();
            assert_eq!(timer_slack_ns().unwrap(), 1);
            set_timer_slack_ns(before).unwrap();
            assert_eq!(timer_slack_ns().unwrap(), before, "restored");
        })
        .join()
        .unwrap();
    }
}
