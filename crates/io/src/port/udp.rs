//! The datagram port over a kernel UDP socket: one `recvfrom`/`sendto` per datagram, as a plain
//! kernel-socket server does, or `recvmmsg`/`sendmmsg` batches.

use std::borrow::Borrow;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::{
    Datagram, DatagramPort, DatagramRx, DatagramTx, Flushed, PortSizes, SendFailure, SendQueue,
    TxStamp, Unsent,
};
use crate::clock::now_ns;
use crate::udp::{RecvBatch, SendBatch, TimestampSource, UdpSocket};

/// How a [`UdpPort`] talks to its socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UdpMode {
    /// One `recvfrom` per datagram received and one `sendto` per datagram sent; receive
    /// stamps are taken in user space after each call.
    Single,
    /// `recvmmsg` and `sendmmsg` batches, with the socket's kernel receive stamps when it has
    /// them.
    #[default]
    Batched,
}

/// A datagram port over a kernel UDP socket, with its batch memory: a borrowed socket
/// (`UdpPort<&UdpSocket>`, the engines' ports over sockets they share) or one it owns
/// (`UdpPort<UdpSocket>`, a port that lives alone, as `latlab stream`'s transports do).
#[derive(Debug)]
pub struct UdpPort<H: Borrow<UdpSocket>> {
    socket: H,
    mode: UdpMode,
    rx: RecvBatch,
    tx: UdpQueue,
    /// The buffer of one `recvfrom` ([`UdpMode::Single`]; empty otherwise).
    one: Vec<u8>,
}

impl<H: Borrow<UdpSocket>> UdpPort<H> {
    /// A port over `socket` moving datagrams as `mode` says, with memory for `sizes`.
    pub fn new(socket: H, mode: UdpMode, sizes: PortSizes) -> UdpPort<H> {
        let rx_batch = if mode == UdpMode::Single {
            1
        } else {
            sizes.rx_batch
        };
        UdpPort {
            socket,
            mode,
            rx: RecvBatch::new(rx_batch, sizes.slot),
            tx: UdpQueue(SendBatch::new(sizes.tx_batch, sizes.slot)),
            one: match mode {
                UdpMode::Single => vec![0; sizes.slot],
                UdpMode::Batched => Vec::new(),
            },
        }
    }

    /// The socket under the port (to wait on several at once:
    /// [`crate::udp::wait_any_readable`]).
    pub fn socket(&self) -> &UdpSocket {
        self.socket.borrow()
    }

    /// How the port talks to its socket.
    pub fn mode(&self) -> UdpMode {
        self.mode
    }
}

/// The send queue of a [`UdpPort`]: a [`SendBatch`] every datagram of which has a
/// destination.
#[derive(Debug)]
pub struct UdpQueue(SendBatch);

impl SendQueue for UdpQueue {
    #[inline]
    fn push(&mut self, to: SocketAddr, len: usize) -> Option<&mut [u8]> {
        self.0.push(len, Some(to))
    }

    #[inline]
    fn len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.0.capacity()
    }

    fn clear(&mut self) -> usize {
        let n = self.0.len();
        self.0.clear();
        n
    }
}

/// Receives with `mode` into `rx` (batched) or `one` (single).
fn recv<F: FnMut(Datagram<'_>)>(
    socket: &UdpSocket,
    mode: UdpMode,
    rx: &mut RecvBatch,
    one: &mut [u8],
    mut f: F,
) -> io::Result<usize> {
    match mode {
        UdpMode::Batched => {
            let n = socket.recv_batch(rx)?;
            for pkt in rx.iter() {
                f(Datagram {
                    data: pkt.data,
                    from: pkt.from,
                    rx_ns: pkt.rx_ns,
                    truncated: pkt.truncated,
                    unparsed: false,
                });
            }
            Ok(n)
        }
        UdpMode::Single => match socket.recv_from_one(one) {
            Ok((n, from)) => {
                f(Datagram {
                    data: &one[..n],
                    from,
                    rx_ns: now_ns(),
                    truncated: false,
                    unparsed: false,
                });
                Ok(1)
            }
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // A previous send's ICMP error (port unreachable) surfaces here: not fatal.
                io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            },
        },
    }
}

/// What one send error means for the datagram it belongs to.
enum Outcome {
    /// The socket is full (or the call was interrupted): keep the rest queued.
    Full,
    /// An earlier datagram's ICMP error, consumed by this call: send the same datagram again.
    Retry,
    /// This datagram cannot go to its destination.
    Failed(SendFailure),
}

fn classify(err: &io::Error, retried: bool) -> Option<Outcome> {
    let errno = err.raw_os_error()?;
    match errno {
        libc::EAGAIN | libc::EINTR | libc::ENOBUFS => Some(Outcome::Full),
        libc::ECONNREFUSED if !retried => Some(Outcome::Retry),
        _ => SendFailure::from_errno(errno).map(Outcome::Failed),
    }
}

/// Flushes `tx` to `socket` as `mode` says; see [`DatagramTx::flush`].
fn flush<S: TxStamp, U: FnMut(Unsent)>(
    socket: &UdpSocket,
    mode: UdpMode,
    tx: &mut SendBatch,
    stamp: &mut S,
    mut unsent: U,
) -> io::Result<Flushed> {
    let mut done = Flushed::default();
    let mut retried = false;
    match mode {
        UdpMode::Batched => {
            while !tx.is_empty() {
                let t = if S::USES_TIME { now_ns() } else { 0 };
                if S::USES_TIME {
                    for i in 0..tx.len() {
                        if let Some(slot) = tx.slot_mut(i) {
                            stamp.stamp(slot, t);
                        }
                    }
                }
                // A datagram that fails after others in the same call left is not reported by
                // that call: the next call starts with it and returns its error.
                match tx.send_raw(socket.as_raw_fd()) {
                    Ok(n) => {
                        done.sent += n;
                        done.sent_ns = t;
                        retried = false;
                    }
                    Err(e) => match classify(&e, retried) {
                        Some(Outcome::Full) => break,
                        Some(Outcome::Retry) => retried = true,
                        Some(Outcome::Failed(failure)) => {
                            unsent(Unsent {
                                to: tx.destination(0),
                                failure,
                            });
                            tx.drop_first(1);
                            done.failed += 1;
                            retried = false;
                        }
                        None => return Err(e),
                    },
                }
            }
        }
        UdpMode::Single => {
            let mut i = 0;
            while i < tx.len() {
                let t = if S::USES_TIME { now_ns() } else { 0 };
                if let Some(slot) = tx.slot_mut(i) {
                    stamp.stamp(slot, t);
                }
                let Some((data, to)) = tx.get(i) else { break };
                let result = match to {
                    Some(to) => socket.raw().send_to(data, to),
                    None => socket.raw().send(data),
                };
                match result {
                    Ok(_) => {
                        done.sent += 1;
                        done.sent_ns = t;
                        retried = false;
                        i += 1;
                    }
                    Err(e) => match classify(&e, retried) {
                        Some(Outcome::Full) => break,
                        Some(Outcome::Retry) => retried = true,
                        Some(Outcome::Failed(failure)) => {
                            unsent(Unsent {
                                to: tx.destination(i),
                                failure,
                            });
                            done.failed += 1;
                            retried = false;
                            i += 1;
                        }
                        None => {
                            tx.drop_first(i);
                            return Err(e);
                        }
                    },
                }
            }
            tx.drop_first(i);
        }
    }
    Ok(done)
}

/// Datagrams the kernel dropped for `socket` (a full receive buffer), from `SO_MEMINFO`.
fn kernel_drops(socket: &UdpSocket) -> Option<u64> {
    socket.kernel_drops().ok()
}

fn timestamp_source(socket: &UdpSocket, mode: UdpMode) -> TimestampSource {
    match mode {
        UdpMode::Batched => socket.rx_timestamp_source(),
        UdpMode::Single => TimestampSource::UserSpace,
    }
}

impl<H: Borrow<UdpSocket> + Send> DatagramRx for UdpPort<H> {
    #[inline]
    fn recv<F: FnMut(Datagram<'_>)>(&mut self, f: F) -> io::Result<usize> {
        recv(
            self.socket.borrow(),
            self.mode,
            &mut self.rx,
            &mut self.one,
            f,
        )
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        self.socket.borrow().wait_readable(timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        timestamp_source(self.socket.borrow(), self.mode)
    }

    fn kernel_drops(&self) -> Option<u64> {
        kernel_drops(self.socket.borrow())
    }
}

impl<H: Borrow<UdpSocket> + Send> DatagramTx for UdpPort<H> {
    type Queue = UdpQueue;

    #[inline]
    fn queue(&mut self) -> &mut UdpQueue {
        &mut self.tx
    }

    #[inline]
    fn flush<S: TxStamp, U: FnMut(Unsent)>(
        &mut self,
        stamp: &mut S,
        unsent: U,
    ) -> io::Result<Flushed> {
        flush(
            self.socket.borrow(),
            self.mode,
            &mut self.tx.0,
            stamp,
            unsent,
        )
    }
}

impl<H: Borrow<UdpSocket> + Send> DatagramPort for UdpPort<H> {
    type TxHalf<'a>
        = UdpTxHalf<'a>
    where
        Self: 'a;
    type RxHalf<'a>
        = UdpRxHalf<'a>
    where
        Self: 'a;

    #[inline]
    fn recv_with_queue<F: FnMut(Datagram<'_>, &mut UdpQueue)>(
        &mut self,
        mut f: F,
    ) -> io::Result<usize> {
        let tx = &mut self.tx;
        recv(
            self.socket.borrow(),
            self.mode,
            &mut self.rx,
            &mut self.one,
            |d| f(d, tx),
        )
    }

    fn split(&mut self) -> (UdpTxHalf<'_>, UdpRxHalf<'_>) {
        (
            UdpTxHalf {
                socket: self.socket.borrow(),
                mode: self.mode,
                tx: &mut self.tx,
            },
            UdpRxHalf {
                socket: self.socket.borrow(),
                mode: self.mode,
                rx: &mut self.rx,
                one: &mut self.one,
            },
        )
    }
}

/// The send half of a [`UdpPort`] (see [`DatagramPort::split`]).
#[derive(Debug)]
pub struct UdpTxHalf<'a> {
    socket: &'a UdpSocket,
    mode: UdpMode,
    tx: &'a mut UdpQueue,
}

impl DatagramTx for UdpTxHalf<'_> {
    type Queue = UdpQueue;

    #[inline]
    fn queue(&mut self) -> &mut UdpQueue {
        self.tx
    }

    #[inline]
    fn flush<S: TxStamp, U: FnMut(Unsent)>(
        &mut self,
        stamp: &mut S,
        unsent: U,
    ) -> io::Result<Flushed> {
        flush(self.socket, self.mode, &mut self.tx.0, stamp, unsent)
    }
}

/// The receive half of a [`UdpPort`] (see [`DatagramPort::split`]).
#[derive(Debug)]
pub struct UdpRxHalf<'a> {
    socket: &'a UdpSocket,
    mode: UdpMode,
    rx: &'a mut RecvBatch,
    one: &'a mut Vec<u8>,
}

impl<'a> UdpRxHalf<'a> {
    /// The socket under the half, to wait on several at once
    /// ([`crate::udp::wait_any_readable`]).
    pub fn socket(&self) -> &'a UdpSocket {
        self.socket
    }
}

impl<'a> UdpTxHalf<'a> {
    /// The socket under the half.
    pub fn socket(&self) -> &'a UdpSocket {
        self.socket
    }
}

impl DatagramRx for UdpRxHalf<'_> {
    #[inline]
    fn recv<F: FnMut(Datagram<'_>)>(&mut self, f: F) -> io::Result<usize> {
        recv(self.socket, self.mode, self.rx, self.one, f)
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        self.socket.wait_readable(timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        timestamp_source(self.socket, self.mode)
    }

    fn kernel_drops(&self) -> Option<u64> {
        kernel_drops(self.socket)
    }
}
