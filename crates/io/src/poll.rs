//! `ppoll` with a nanosecond timeout, shared by every socket kind of the crate.

use std::io;
use std::ptr;
use std::time::Duration;

/// Waits until one of `fds` has an event or `timeout` passes (`None`: no limit), then leaves
/// each one's `revents` set. A signal ends the wait early with no events, not with an error.
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<()> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` holds `fds.len()` valid pollfds; `ts_ptr` is null or points at `ts`, which
    // lives until after the call; a null signal mask leaves the mask unchanged.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            fds.iter_mut().for_each(|f| f.revents = 0);
            return Ok(());
        }
        return Err(err);
    }
    Ok(())
}

/// Waits until one of `fds` can be read (or has an error pending) or `timeout` passes; returns
/// each one's `revents`, in order (all 0 on timeout or when a signal ended the wait).
pub(crate) fn wait_in(
    fds: &[std::os::fd::RawFd],
    timeout: Option<Duration>,
) -> io::Result<Vec<libc::c_short>> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    ppoll(&mut polled, timeout)?;
    Ok(polled.iter().map(|p| p.revents).collect())
}
