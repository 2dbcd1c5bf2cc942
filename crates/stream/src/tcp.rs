//! `tcp`: messages framed on one TCP connection (`TCP_NODELAY`), with the congestion control
//! and the thin-stream knobs a user picks, and what `TCP_INFO` says it put on the wire.
//!
//! The socket is non-blocking; what the kernel's send buffer cannot take waits here, in order,
//! so a blocked connection delays the messages behind it exactly as it would delay a game.

use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::endpoint::Endpoint;
use super::message::{frame, Deframer};
use super::wire::{tcp_counts, WireCounts};

/// The options of `tcp`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// `TCP_CONGESTION`; `None` keeps the system's default.
    pub cc: Option<String>,
    /// "Modified TCP" for thin streams: `TCP_THIN_LINEAR_TIMEOUTS` on the socket.
    pub thin: bool,
    /// The sender's minimum retransmission timeout: `TCP_RTO_MIN_US` on its socket, or on a
    /// kernel without it (before 6.16) `net.ipv4.tcp_rto_min_us` of the sender's network
    /// namespace (only inside a namespace the lab made). Above 0 and at most
    /// [`latlab_io::tcp::RTO_MIN_MAX`]; the kernel also wants at least two of its ticks.
    pub rto_min: Option<Duration>,
}

/// The one line that refuses `rto_min=TEXT`: the range `TCP_RTO_MIN_US` takes, with this
/// kernel's tick when it is known (`tick`).
pub fn rto_min_out_of_range(text: &str, tick: Option<Duration>) -> String {
    let ticks = match tick {
        Some(tick) => format!("this kernel's: {tick:?}"),
        None => "1ms at HZ=1000, 4ms at HZ=250, 10ms at HZ=100".to_string(),
    };
    format!(
        "tcp: rto_min={text}: out of range: TCP_RTO_MIN_US takes more than one kernel tick \
         ({ticks}) and at most {:?}",
        latlab_io::tcp::RTO_MIN_MAX
    )
}

/// Either side of a `tcp` run.
#[derive(Debug)]
pub struct TcpEndpoint {
    stream: TcpStream,
    /// Framed bytes the kernel has not taken yet.
    pending: Vec<u8>,
    deframer: Deframer,
    /// The stream broke (a frame out of range, or the far end closed): nothing more is read.
    broken: bool,
    foreign: u64,
    buf: Vec<u8>,
}

impl TcpEndpoint {
    /// Drives `stream`, a connected data connection whose hello has been exchanged.
    pub fn new(stream: TcpStream) -> io::Result<TcpEndpoint> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(TcpEndpoint {
            stream,
            pending: Vec::new(),
            deframer: Deframer::new(),
            broken: false,
            foreign: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Writes as much of `pending` as the kernel takes now.
    fn flush(&mut self) -> io::Result<()> {
        let mut written = 0;
        while written < self.pending.len() {
            match self.stream.write(&self.pending[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.pending.drain(..written);
        Ok(())
    }
}

impl Endpoint for TcpEndpoint {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        frame(message, &mut self.pending);
        self.flush()
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.flush()?;
        // While bytes wait for room in the send buffer, look again soon.
        let wait = if self.pending.is_empty() {
            wait
        } else {
            wait.min(Duration::from_micros(200))
        };
        if self.broken {
            std::thread::sleep(wait);
            return Ok(());
        }
        if !latlab_io::tcp::wait_readable(&[self.stream.as_raw_fd()], Some(wait))?[0] {
            return Ok(());
        }
        loop {
            match self.stream.read(&mut self.buf) {
                Ok(0) => {
                    self.broken = true;
                    break;
                }
                Ok(n) => self.deframer.push(&self.buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        loop {
            match self.deframer.next_frame() {
                Ok(Some(message)) => deliver(message),
                Ok(None) => break,
                Err(_) => {
                    // Not latlab's framing: nothing after it can be read as messages.
                    self.foreign += self.deframer.pending() as u64;
                    self.broken = true;
                    break;
                }
            }
        }
        Ok(())
    }

    fn wire(&mut self) -> WireCounts {
        let ipv6 = self.stream.local_addr().is_ok_and(|a| a.is_ipv6());
        latlab_io::tcp::tcp_info(&self.stream)
            .map(|info| tcp_counts(&info, ipv6))
            .unwrap_or_default()
    }

    fn foreign(&self) -> u64 {
        self.foreign
    }

    fn close(&mut self) {
        let _ = self.stream.set_nonblocking(false);
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = self.stream.write_all(&self.pending);
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }
}

/// Sets the socket options of `options` on a data connection's socket before it connects:
/// `TCP_NODELAY`, the congestion control, `TCP_THIN_LINEAR_TIMEOUTS`, `TCP_RTO_MIN_US` (on a
/// kernel that has it: see [`rto_min_way`]). Returns what it set, for the result.
pub fn configure(socket: &socket2::Socket, options: &TcpOptions) -> io::Result<Vec<String>> {
    let mut set = vec!["TCP_NODELAY".to_string()];
    socket.set_tcp_nodelay(true)?;
    if let Some(cc) = &options.cc {
        latlab_io::tcp::set_congestion(socket, cc)
            .map_err(|e| io::Error::new(e.kind(), format!("TCP_CONGESTION {cc}: {e}")))?;
    }
    set.push(format!(
        "TCP_CONGESTION {}",
        latlab_io::tcp::congestion(socket)?
    ));
    if options.thin {
        latlab_io::tcp::set_thin_linear_timeouts(socket, true)?;
        set.push("TCP_THIN_LINEAR_TIMEOUTS 1".into());
    }
    if let Some(rto_min) = options.rto_min {
        let us = rto_min.as_micros();
        latlab_io::tcp::set_rto_min(socket, rto_min)
            .map_err(|e| io::Error::new(e.kind(), format!("TCP_RTO_MIN_US {us}: {e}")))?;
        // The kernel keeps whole ticks, rounded up: say so when that is not the value asked.
        let held = latlab_io::tcp::rto_min(socket)?.as_micros();
        set.push(if held == us {
            format!("TCP_RTO_MIN_US {us}")
        } else {
            format!("TCP_RTO_MIN_US {us} (the kernel holds {held}: whole ticks)")
        });
    }
    Ok(set)
}

/// Where a run's minimum RTO goes on this kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoMinWay {
    /// On the data connection's socket: `TCP_RTO_MIN_US`, set by [`configure`].
    Socket,
    /// In the sender's network namespace ([`RtoMinGuard`]): the kernel has no
    /// `TCP_RTO_MIN_US` (before 6.16).
    Namespace,
}

/// How `rto_min` can be set here, asked of the kernel once with a throwaway socket before
/// anything connects. A value its `TCP_RTO_MIN_US` refuses is refused with one line naming
/// `rto_min` and the range this kernel takes.
pub fn rto_min_way(rto_min: Duration) -> Result<RtoMinWay, String> {
    use latlab_io::tcp::RtoMinSupport;
    let text = format!("{}us", rto_min.as_micros());
    match latlab_io::tcp::try_rto_min(rto_min) {
        Ok(RtoMinSupport::Taken) => Ok(RtoMinWay::Socket),
        Ok(RtoMinSupport::Missing) => Ok(RtoMinWay::Namespace),
        Ok(RtoMinSupport::OutOfRange { least }) => Err(rto_min_out_of_range(
            &text,
            Some(least - Duration::from_micros(1)),
        )),
        Err(e) => Err(format!("tcp: rto_min={text}: TCP_RTO_MIN_US: {e}")),
    }
}

const RTO_MIN_US: &str = "/proc/sys/net/ipv4/tcp_rto_min_us";

/// `net.ipv4.tcp_rto_min_us` set in this thread's network namespace for as long as it lives,
/// put back on drop: the minimum RTO on a kernel without `TCP_RTO_MIN_US`.
#[derive(Debug)]
pub struct RtoMinGuard {
    old: String,
}

impl RtoMinGuard {
    /// Sets `tcp_rto_min_us` to `rto_min`, only when this thread runs inside a network
    /// namespace the lab made (never on the host).
    pub fn set(rto_min: Duration) -> Result<RtoMinGuard, String> {
        if !in_lab_namespace() {
            return Err(format!(
                "tcp: rto_min={}us: net.ipv4.tcp_rto_min_us is only set inside a network \
                 namespace the lab made, never on the host (run the sender in one, as the \
                 tests and studies do)",
                rto_min.as_micros()
            ));
        }
        let old = fs::read_to_string(RTO_MIN_US)
            .map_err(|e| format!("{RTO_MIN_US}: {e} (this kernel has no tcp_rto_min_us)"))?;
        fs::write(RTO_MIN_US, rto_min.as_micros().to_string())
            .map_err(|e| format!("{RTO_MIN_US}: {e}"))?;
        Ok(RtoMinGuard {
            old: old.trim().to_string(),
        })
    }
}

impl Drop for RtoMinGuard {
    fn drop(&mut self) {
        let _ = fs::write(RTO_MIN_US, &self.old);
    }
}

/// Whether this thread's network namespace is one of the lab's: named in `/run/netns` and
/// marked with the lab's owner lock (`/run/latlab/<name>.lock`). The host's namespace never
/// is: the lab only names namespaces it made.
fn in_lab_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(own) = fs::metadata("/proc/thread-self/ns/net") else {
        return false;
    };
    let Ok(names) = fs::read_dir("/run/netns") else {
        return false;
    };
    names.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        entry
            .metadata()
            .is_ok_and(|m| m.ino() == own.ino() && m.dev() == own.dev())
            && latlab_lab::topology::lock_path(&name).exists()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Whether this kernel has `TCP_RTO_MIN_US` (Linux 6.16 on). When it has not, checks the
    /// fallback instead (the sender sets its namespace's sysctl) and says so.
    fn has_rto_min_us() -> bool {
        let missing = latlab_io::tcp::try_rto_min(Duration::from_millis(40)).unwrap()
            == latlab_io::tcp::RtoMinSupport::Missing;
        if missing {
            assert_eq!(
                rto_min_way(Duration::from_millis(10)),
                Ok(RtoMinWay::Namespace)
            );
            eprintln!(
                "this kernel has no TCP_RTO_MIN_US (Linux 6.16 on): checked the namespace fallback"
            );
        }
        !missing
    }

    #[test]
    fn modified_tcp_sets_its_minimum_rto_on_the_socket_and_says_so() {
        if !has_rto_min_us() {
            return;
        }
        let options: TcpOptions = match "tcp:cc=reno,thin,rto_min=10ms".parse() {
            Ok(super::super::TransportSpec::Tcp(o)) => o,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            rto_min_way(Duration::from_millis(10)),
            Ok(RtoMinWay::Socket)
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        let set = configure(&socket, &options).unwrap();
        socket
            .connect(&listener.local_addr().unwrap().into())
            .unwrap();
        let stream: TcpStream = socket.into();
        // The kernel keeps whole ticks, rounded up (10 ms is 12 ms at HZ=250); the setting says
        // the value asked, and the one held when they differ.
        let held = latlab_io::tcp::rto_min(&stream).unwrap();
        assert!(
            held >= Duration::from_millis(10) && held < Duration::from_millis(20),
            "{held:?}"
        );
        let line = if held == Duration::from_millis(10) {
            "TCP_RTO_MIN_US 10000".to_string()
        } else {
            format!(
                "TCP_RTO_MIN_US 10000 (the kernel holds {}: whole ticks)",
                held.as_micros()
            )
        };
        assert_eq!(
            set,
            [
                "TCP_NODELAY".to_string(),
                "TCP_CONGESTION reno".into(),
                "TCP_THIN_LINEAR_TIMEOUTS 1".into(),
                line,
            ]
        );
        // Connecting kept it.
        assert_eq!(latlab_io::tcp::rto_min(&stream).unwrap(), held);
    }

    #[test]
    fn a_minimum_rto_the_kernel_refuses_is_one_line_with_its_range() {
        if !has_rto_min_us() {
            return;
        }
        let err = rto_min_way(Duration::from_micros(1)).unwrap_err();
        let tick = err
            .strip_prefix(
                "tcp: rto_min=1us: out of range: TCP_RTO_MIN_US takes more than one kernel tick \
                 (this kernel's: ",
            )
            .and_then(|rest| rest.strip_suffix(") and at most 200ms"))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(
            ["1ms", "3.333ms", "4ms", "10ms"].contains(&tick),
            "{err}: a tick of HZ=1000, 300, 250 or 100"
        );
        assert!(!err.contains('\n'));
    }
}
