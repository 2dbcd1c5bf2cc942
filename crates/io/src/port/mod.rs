//! Ports: the two shapes every engine of latlab moves packets through, whatever the backend.
//!
//! - A [`DatagramPort`] moves UDP payloads with their peer's address: kernel UDP sockets one
//!   datagram per call or in `recvmmsg`/`sendmmsg` batches ([`UdpPort`]), or an AF_XDP socket
//!   whose IPv4 and UDP are handled in user space ([`XdpEndpoint`]).
//! - A [`FramePort`] moves whole Ethernet frames: an AF_PACKET socket or an AF_XDP socket fed
//!   every frame of its interface (a bridge's two sides).
//!
//! Both receive in batches, each packet with its receive stamp (from the source
//! [`TimestampSource`] says) and its source, and send in batches. A datagram port writes the
//! transmit stamp at the last moment: its flush calls a [`TxStamp`] on each queued payload
//! right before the system call (before the UDP checksum on AF_XDP) with the send time.
//!
//! Guarantees:
//! - no call blocks but `wait_readable`/`wait_either`;
//! - a datagram that cannot be sent to its destination (port 0, an unreachable network, a
//!   broadcast, too long, no link-layer address known) is reported to the flush's `unsent`
//!   callback with its destination and the cause ([`Unsent`]), dropped, and the rest of the
//!   batch goes on; only a failure of the socket itself is an `Err`;
//! - a full socket or ring moves nothing and is not an error: what did not leave stays queued,
//!   in order, for the next flush (or [`SendQueue::clear`]);
//! - engines are generic over the port traits, so every call is monomorphized: no dynamic
//!   dispatch per packet, no allocation per packet.
//!
//! ```no_run
//! use latlab_io::port::{DatagramPort, DatagramRx, DatagramTx, PortSizes, SendQueue, UdpMode, UdpPort};
//! use latlab_io::udp::{UdpOptions, UdpSocket};
//! let sock = UdpSocket::bind("127.0.0.1:7777".parse().unwrap(), &UdpOptions::default())?;
//! let mut port = UdpPort::new(&sock, UdpMode::Batched, PortSizes::new(32, 2048));
//! loop {
//!     port.wait_readable(None)?;
//!     // Echo every datagram back to its sender.
//!     port.recv_with_queue(|d, queue| {
//!         if let Some(slot) = queue.push(d.from, d.data.len()) {
//!             slot.copy_from_slice(d.data);
//!         }
//!     })?;
//!     port.flush(&mut latlab_io::port::NoStamp, |unsent| eprintln!("{unsent:?}"))?;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod frame;
mod udp;
mod xdp;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

pub use crate::udp::TimestampSource;
pub use frame::{FramePort, FrameQueued, RecvBatch, SocketCounters, WireFrameStats};
pub use udp::{UdpMode, UdpPort, UdpQueue, UdpRxHalf, UdpTxHalf};
pub use xdp::{LinkRoute, XdpEndpoint, XdpRxHalf, XdpTxHalf, XdpTxQueue};

/// One received datagram.
#[derive(Clone, Copy, Debug)]
pub struct Datagram<'a> {
    /// The UDP payload (at most the port's slot size; see `truncated`).
    pub data: &'a [u8],
    /// Who sent it.
    pub from: SocketAddr,
    /// When it arrived, ns of `CLOCK_REALTIME`, from the port's [`TimestampSource`] (a packet
    /// the source had no stamp for is stamped when it was read).
    pub rx_ns: u64,
    /// It was longer than the port's slot and was cut.
    pub truncated: bool,
    /// A frame that reached the port but is not an IPv4 UDP datagram it can read (AF_XDP:
    /// a bad IPv4 header); `data` is empty and `from` is `0.0.0.0:0`.
    pub unparsed: bool,
}

/// Batch sizes of a port's memory, allocated once when the port is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortSizes {
    /// Datagrams one receive call takes at most (at least 1).
    pub rx_batch: usize,
    /// Datagrams the send queue holds (at least 1).
    pub tx_batch: usize,
    /// Bytes of one datagram slot: a longer datagram received is cut and flagged
    /// `truncated`; a longer one queued is cut to it.
    pub slot: usize,
}

impl PortSizes {
    /// `batch` datagrams of `slot` bytes each way.
    pub fn new(batch: usize, slot: usize) -> PortSizes {
        PortSizes {
            rx_batch: batch.max(1),
            tx_batch: batch.max(1),
            slot,
        }
    }
}

/// Why one queued datagram was not sent. Each names the errors it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendFailure {
    /// The destination cannot be addressed: port 0, a wrong address family (`EINVAL`,
    /// `EDESTADDRREQ`, `EAFNOSUPPORT`).
    InvalidDestination,
    /// No route to the network or host (`ENETUNREACH`, `EHOSTUNREACH`).
    Unreachable,
    /// The peer refused an earlier datagram with an ICMP port unreachable
    /// (`ECONNREFUSED`, reported again on the retry).
    Refused,
    /// Not permitted: a broadcast without `SO_BROADCAST`, a firewall (`EACCES`, `EPERM`).
    NotPermitted,
    /// The source address cannot be used for that destination (`EADDRNOTAVAIL`).
    AddressNotAvailable,
    /// Longer than the path allows (`EMSGSIZE`), or (AF_XDP) than a UMEM frame holds or the
    /// interface's MTU allows.
    TooLong,
    /// AF_XDP: no link-layer (MAC) address is known for the destination, or it is not IPv4.
    NoLinkAddress,
}

impl SendFailure {
    /// The failure an error number of a send stands for, or `None` when it is not one of a
    /// single destination (then it is the socket's).
    pub fn from_errno(errno: i32) -> Option<SendFailure> {
        Some(match errno {
            libc::EINVAL | libc::EDESTADDRREQ | libc::EAFNOSUPPORT => {
                SendFailure::InvalidDestination
            }
            libc::ENETUNREACH | libc::EHOSTUNREACH | libc::ENETDOWN | libc::EHOSTDOWN => {
                SendFailure::Unreachable
            }
            libc::ECONNREFUSED => SendFailure::Refused,
            libc::EACCES | libc::EPERM => SendFailure::NotPermitted,
            libc::EADDRNOTAVAIL => SendFailure::AddressNotAvailable,
            libc::EMSGSIZE => SendFailure::TooLong,
            _ => return None,
        })
    }

    /// Every failure, in the order [`SendFailures`] keeps them.
    pub const ALL: [SendFailure; 7] = [
        SendFailure::InvalidDestination,
        SendFailure::Unreachable,
        SendFailure::Refused,
        SendFailure::NotPermitted,
        SendFailure::AddressNotAvailable,
        SendFailure::TooLong,
        SendFailure::NoLinkAddress,
    ];

    /// The name written into results files and `--json`: `invalid_destination`,
    /// `unreachable`, `refused`, `not_permitted`, `address_not_available`, `too_long`,
    /// `no_link_address`.
    pub fn name(self) -> &'static str {
        match self {
            SendFailure::InvalidDestination => "invalid_destination",
            SendFailure::Unreachable => "unreachable",
            SendFailure::Refused => "refused",
            SendFailure::NotPermitted => "not_permitted",
            SendFailure::AddressNotAvailable => "address_not_available",
            SendFailure::TooLong => "too_long",
            SendFailure::NoLinkAddress => "no_link_address",
        }
    }

    /// Its place in [`SendFailure::ALL`] (for counters kept in an array).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Datagrams not sent, counted by cause: what an engine keeps of the [`Unsent`] reports of
/// its flushes.
///
/// ```
/// use latlab_io::port::{SendFailure, SendFailures};
/// let mut failed = SendFailures::default();
/// failed.count(SendFailure::Unreachable);
/// failed.count(SendFailure::Unreachable);
/// failed.count(SendFailure::InvalidDestination);
/// assert_eq!((failed.get(SendFailure::Unreachable), failed.total()), (2, 3));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFailures {
    /// Counts in the order of [`SendFailure::ALL`].
    counts: [u64; SendFailure::ALL.len()],
}

impl SendFailures {
    /// Counts one datagram not sent for `failure`.
    #[inline]
    pub fn count(&mut self, failure: SendFailure) {
        self.counts[failure.index()] += 1;
    }

    /// Adds `n` datagrams not sent for `failure`.
    #[inline]
    pub fn add(&mut self, failure: SendFailure, n: u64) {
        self.counts[failure.index()] += n;
    }

    /// Datagrams not sent for `failure`.
    pub fn get(&self, failure: SendFailure) -> u64 {
        self.counts[failure.index()]
    }

    /// Datagrams not sent, whatever the cause.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Every cause with its count, in the order of [`SendFailure::ALL`] (zeros included).
    pub fn iter(&self) -> impl Iterator<Item = (SendFailure, u64)> + '_ {
        SendFailure::ALL
            .into_iter()
            .zip(self.counts.iter().copied())
    }
}

/// A queued datagram that was not sent, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsent {
    /// Where it was going.
    pub to: SocketAddr,
    /// Why it did not leave.
    pub failure: SendFailure,
}

/// What one flush did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Datagrams handed to the kernel.
    pub sent: usize,
    /// Datagrams reported to the `unsent` callback and dropped.
    pub failed: usize,
    /// The send time handed to the [`TxStamp`] of the last group that left (0 when none did,
    /// or when the stamp reads no time: [`NoStamp`]).
    pub sent_ns: u64,
}

/// Writes a transmit stamp into a payload right before it leaves.
pub trait TxStamp {
    /// Whether this stamp uses the time at all (a port skips reading the clock when not).
    const USES_TIME: bool = true;
    /// Called on each queued payload right before its send call, with the send time (ns of
    /// `CLOCK_REALTIME`).
    fn stamp(&mut self, payload: &mut [u8], now_ns: u64);
}

/// No transmit stamp: payloads leave as queued.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoStamp;

impl TxStamp for NoStamp {
    const USES_TIME: bool = false;
    #[inline]
    fn stamp(&mut self, _payload: &mut [u8], _now_ns: u64) {}
}

impl<F: FnMut(&mut [u8], u64)> TxStamp for F {
    #[inline]
    fn stamp(&mut self, payload: &mut [u8], now_ns: u64) {
        self(payload, now_ns)
    }
}

/// The send queue of a datagram port: memory for a batch, filled by the engine, emptied by a
/// flush.
pub trait SendQueue {
    /// Queues a datagram of `len` bytes (cut to the slot size) to `to` and returns its bytes
    /// to write, or `None` when the queue is full.
    fn push(&mut self, to: SocketAddr, len: usize) -> Option<&mut [u8]>;
    /// How many datagrams are queued.
    fn len(&self) -> usize;
    /// How many datagrams fit.
    fn capacity(&self) -> usize;
    /// Drops everything queued; returns how many were dropped.
    fn clear(&mut self) -> usize;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether no more datagrams fit.
    fn is_full(&self) -> bool {
        self.len() >= self.capacity()
    }
}

/// The receiving side of a datagram port.
pub trait DatagramRx: Send {
    /// Hands every datagram ready now (at most the port's receive batch) to `f`; returns how
    /// many. Never blocks; `Ok(0)` when none is ready.
    fn recv<F: FnMut(Datagram<'_>)>(&mut self, f: F) -> io::Result<usize>;
    /// Blocks until a datagram is ready or `timeout` passes (`None`: no limit); `Ok(true)`
    /// when one is. A signal ends the wait with `Ok(false)`.
    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool>;
    /// Where the receive stamps come from.
    fn timestamp_source(&self) -> TimestampSource;
    /// Datagrams the kernel dropped for this port before it could read them, where the
    /// backend counts them.
    fn kernel_drops(&self) -> Option<u64>;
}

/// The sending side of a datagram port.
pub trait DatagramTx: Send {
    /// The queue datagrams are written into.
    type Queue: SendQueue;
    /// The send queue.
    fn queue(&mut self) -> &mut Self::Queue;
    /// Sends what is queued, in order, as far as the socket takes it: `stamp` is called on
    /// each payload right before it leaves, with the send time; a datagram that cannot go to
    /// its destination is handed to `unsent` and dropped; what the socket has no room for
    /// stays queued. `Err` only when the socket itself failed.
    fn flush<S: TxStamp, U: FnMut(Unsent)>(
        &mut self,
        stamp: &mut S,
        unsent: U,
    ) -> io::Result<Flushed>;
}

/// A datagram port: both sides on one socket, which an engine may also split into a send half
/// and a receive half for two threads.
pub trait DatagramPort: DatagramRx + DatagramTx {
    /// The send half of [`DatagramPort::split`].
    type TxHalf<'a>: DatagramTx
    where
        Self: 'a;
    /// The receive half of [`DatagramPort::split`].
    type RxHalf<'a>: DatagramRx
    where
        Self: 'a;

    /// As [`DatagramRx::recv`], with the send queue at hand, so an engine answers each
    /// datagram as it reads it without copying it first.
    fn recv_with_queue<F: FnMut(Datagram<'_>, &mut Self::Queue)>(
        &mut self,
        f: F,
    ) -> io::Result<usize>;

    /// Splits the port into a send half and a receive half that may run on two threads.
    fn split(&mut self) -> (Self::TxHalf<'_>, Self::RxHalf<'_>);
}

/// Sends everything queued in `tx`, trying up to `tries` flushes while the socket is full; what
/// is still queued then is dropped, so receiving never stalls behind sending. Returns the
/// datagrams sent and those dropped (a full socket's, and those handed to `unsent`).
pub fn flush_or_drop<T: DatagramTx, S: TxStamp, U: FnMut(Unsent)>(
    tx: &mut T,
    tries: usize,
    mut stamp: S,
    mut unsent: U,
) -> io::Result<(u64, u64)> {
    let (mut sent, mut dropped) = (0u64, 0u64);
    for _ in 0..tries.max(1) {
        let f = tx.flush(&mut stamp, &mut unsent)?;
        sent += f.sent as u64;
        dropped += f.failed as u64;
        if tx.queue().is_empty() {
            return Ok((sent, dropped));
        }
    }
    dropped += tx.queue().clear() as u64;
    Ok((sent, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_has_its_own_counter_and_name() {
        let mut failed = SendFailures::default();
        for (i, failure) in SendFailure::ALL.into_iter().enumerate() {
            assert_eq!(failure.index(), i);
            failed.add(failure, i as u64 + 1);
        }
        let names: Vec<(&str, u64)> = failed.iter().map(|(f, n)| (f.name(), n)).collect();
        assert_eq!(
            names,
            [
                ("invalid_destination", 1),
                ("unreachable", 2),
                ("refused", 3),
                ("not_permitted", 4),
                ("address_not_available", 5),
                ("too_long", 6),
                ("no_link_address", 7),
            ]
        );
        assert_eq!(failed.total(), 28);
    }

    #[test]
    fn the_errors_of_one_destination_are_failures_and_the_sockets_are_not() {
        assert_eq!(
            SendFailure::from_errno(libc::EINVAL),
            Some(SendFailure::InvalidDestination)
        );
        assert_eq!(
            SendFailure::from_errno(libc::ENETUNREACH),
            Some(SendFailure::Unreachable)
        );
        assert_eq!(
            SendFailure::from_errno(libc::EACCES),
            Some(SendFailure::NotPermitted)
        );
        for socket_error in [libc::EBADF, libc::ENOTSOCK, libc::EFAULT] {
            assert_eq!(SendFailure::from_errno(socket_error), None);
        }
    }
}
