//! What a transport put on the wire, counted the same way for every peer.
//!
//! UDP-based peers (UDP, ENet, KCP, QUIC) send and receive through a [`CountingSocket`], which
//! counts every datagram with its IP and UDP headers (28 bytes on IPv4, 48 on IPv6). TCP tells
//! its own counts through `TCP_INFO` ([`tcp_counts`]): segments and payload bytes, to which the
//! IP and TCP headers are added (20 + 20 bytes on IPv4, 40 + 20 on IPv6, plus 12 when TCP
//! timestamps were negotiated; SACK blocks on acknowledgements are not seen and so not
//! counted). Each side counts what it sent, so the sender's counts are the forward direction
//! and the receiver's the reverse one.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use latlab_io::port::{DatagramRx, DatagramTx, NoStamp, PortSizes, SendQueue, UdpMode, UdpPort};
use latlab_io::tcp::TcpInfo;
use latlab_io::udp::{UdpOptions, UdpSocket};
use serde::{Deserialize, Serialize};

/// Packets and bytes one side sent, headers included, and the retransmissions it made where
/// its transport tells them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireCounts {
    /// IP packets sent.
    pub packets: u64,
    /// Bytes of those packets: IP and transport headers and payload.
    pub bytes: u64,
    /// Retransmissions, in the transport's own unit (TCP: segments; QUIC: packets declared
    /// lost, whose frames went again; ENet, UDP with application retransmission: messages);
    /// `None` where the transport does not tell.
    pub retransmissions: Option<u64>,
    /// Of those, the ones that were not needed (the original arrived), where the transport
    /// tells: latlab's transport detects them from its acknowledgements; TCP counts the DSACK
    /// blocks its peer sent back (`tcpi_dsack_dups`: segments the peer already had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmissions: Option<u64>,
}

impl WireCounts {
    /// Counts one UDP datagram of `payload` bytes to or from `peer`: the packet, and its
    /// payload with the IP and UDP headers.
    pub fn add_datagram(&mut self, payload: usize, peer: SocketAddr) {
        self.packets += 1;
        self.bytes += payload as u64 + udp_overhead(peer);
    }
}

/// IP + UDP header bytes of one datagram to or from `addr`.
pub fn udp_overhead(addr: SocketAddr) -> u64 {
    match addr {
        SocketAddr::V4(_) => 20 + 8,
        SocketAddr::V6(_) => 40 + 8,
    }
}

/// What `TCP_INFO` says one side of a connection sent: its segments, and their payload with
/// the IP and TCP headers (and the timestamp option, when negotiated) added; its
/// retransmissions, and as spurious the ones its peer reported with a DSACK.
pub fn tcp_counts(info: &TcpInfo, ipv6: bool) -> WireCounts {
    let header = if ipv6 { 40 } else { 20 } + 20 + if info.timestamps { 12 } else { 0 };
    WireCounts {
        packets: info.segs_out,
        bytes: info.bytes_sent + info.segs_out * header,
        retransmissions: Some(info.total_retrans),
        spurious_retransmissions: Some(info.dsack_dups),
    }
}

/// A UDP socket that counts every datagram it sends and receives, headers included: io's
/// [`UdpPort`] over a socket of its own, one `sendto` and one `recvfrom` per datagram. Every
/// UDP-based peer (the sans-IO sides' `driver::Driver`, ENet) moves its datagrams
/// through one, so their bytes on the wire are counted here and only here.
///
/// Sends never block the caller for long: a full send buffer drops the datagram (as a network
/// would), and so does a destination that cannot be reached (a receiver not listening yet, no
/// route), counted in [`CountingSocket::send_dropped`]; the transport above recovers it or not.
#[derive(Debug)]
pub struct CountingSocket {
    port: UdpPort<UdpSocket>,
    sent: WireCounts,
    received: WireCounts,
    send_dropped: u64,
}

/// The largest datagram a stream's socket sends or reads whole.
const SLOT: usize = 65_536;

impl CountingSocket {
    /// Wraps `socket` (a clone of the receiver's shared socket), which it makes non-blocking.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<CountingSocket> {
        Ok(CountingSocket::over(UdpSocket::from_std(socket)?))
    }

    fn over(socket: UdpSocket) -> CountingSocket {
        CountingSocket {
            port: UdpPort::new(socket, UdpMode::Single, PortSizes::new(1, SLOT)),
            sent: WireCounts::default(),
            received: WireCounts::default(),
            send_dropped: 0,
        }
    }

    /// A socket bound to the unspecified address of `target`'s family, to send to it.
    pub fn towards(target: SocketAddr) -> io::Result<CountingSocket> {
        let any: SocketAddr = match target {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        Ok(CountingSocket::over(UdpSocket::bind(
            any,
            &UdpOptions::default(),
        )?))
    }

    /// Sends one datagram; `Ok(false)` when it was dropped (a full send buffer, or a
    /// destination it cannot go to).
    pub fn send_to(&mut self, payload: &[u8], to: SocketAddr) -> io::Result<bool> {
        let Some(slot) = self.port.queue().push(to, payload.len()) else {
            // The queue holds one datagram and is emptied by every call: never full here.
            self.send_dropped += 1;
            return Ok(false);
        };
        slot.copy_from_slice(payload);
        let flushed = self.port.flush(&mut NoStamp, |_| {})?;
        if flushed.sent == 1 {
            self.sent.add_datagram(payload.len(), to);
            return Ok(true);
        }
        // Refused, unreachable, too long (handed to `unsent`), or no room in the socket.
        self.port.queue().clear();
        self.send_dropped += 1;
        Ok(false)
    }

    /// Receives one datagram if one is waiting: its length and source.
    pub fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        let mut got = None;
        self.port.recv(|d| {
            let n = d.data.len().min(buf.len());
            buf[..n].copy_from_slice(&d.data[..n]);
            got = Some((n, d.from));
        })?;
        if let Some((n, from)) = got {
            self.received.add_datagram(n, from);
        }
        Ok(got)
    }

    /// Waits until a datagram can be read or `wait` passes.
    pub fn wait(&mut self, wait: Duration) -> io::Result<bool> {
        self.port.wait_readable(Some(wait))
    }

    /// What this socket sent.
    pub fn sent(&self) -> WireCounts {
        self.sent
    }

    /// What this socket received.
    pub fn received(&self) -> WireCounts {
        self.received
    }

    /// Datagrams dropped because the send buffer was full or their destination could not be
    /// reached.
    pub fn send_dropped(&self) -> u64 {
        self.send_dropped
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.port.socket().local_addr()
    }
}

impl AsRawFd for CountingSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.port.socket().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_costs_its_payload_and_the_ip_and_udp_headers() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = a.local_addr().unwrap();
        let mut s = CountingSocket::towards(to).unwrap();
        assert!(s.send_to(&[0u8; 100], to).unwrap());
        assert!(s.send_to(&[0u8; 24], to).unwrap());
        assert_eq!(
            s.sent(),
            WireCounts {
                packets: 2,
                bytes: 128 + 52,
                retransmissions: None,
                spurious_retransmissions: None,
            }
        );
        let from = s.local_addr().unwrap();
        let from = SocketAddr::from(([127, 0, 0, 1], from.port()));
        a.send_to(&[1u8; 10], from).unwrap();
        let mut buf = [0u8; 64];
        assert!(s.wait(Duration::from_secs(1)).unwrap());
        assert_eq!(s.recv_from(&mut buf).unwrap().map(|r| r.0), Some(10));
        assert_eq!(s.recv_from(&mut buf).unwrap(), None);
        assert_eq!(s.received().packets, 1);
        assert_eq!(s.received().bytes, 38);
    }

    #[test]
    fn tcp_segments_cost_their_payload_and_ip_tcp_and_timestamp_headers() {
        let info = TcpInfo {
            segs_out: 10,
            bytes_sent: 1000,
            total_retrans: 2,
            timestamps: true,
            ..TcpInfo::default()
        };
        assert_eq!(
            tcp_counts(&info, false),
            WireCounts {
                packets: 10,
                bytes: 1000 + 10 * 52,
                retransmissions: Some(2),
                spurious_retransmissions: Some(0),
            }
        );
        let no_ts = TcpInfo {
            timestamps: false,
            ..info
        };
        assert_eq!(tcp_counts(&no_ts, true).bytes, 1000 + 10 * 60);
        assert_eq!(udp_overhead("[::1]:1".parse().unwrap()), 48);
    }

    #[test]
    fn tcp_counts_the_dsacks_its_peer_sent_as_spurious_retransmissions() {
        let info = TcpInfo {
            segs_out: 40,
            bytes_sent: 4000,
            total_retrans: 5,
            dsack_dups: 3,
            ..TcpInfo::default()
        };
        let counts = tcp_counts(&info, false);
        assert_eq!(counts.retransmissions, Some(5));
        assert_eq!(counts.spurious_retransmissions, Some(3));
    }
}
