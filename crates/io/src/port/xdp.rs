//! The datagram port over an AF_XDP socket: IPv4 and UDP in user space.
//!
//! The socket's program ([`Redirect::Endpoint`](crate::xdp::Redirect::Endpoint)) takes the
//! IPv4 UDP datagrams to one port; everything else (ARP above all) stays with the kernel. Each
//! datagram is handed with the XDP program's arrival stamp. Each peer's link-layer route (its
//! MAC address, and the MAC and IPv4 address it sent to) is learnt from the frames it sends, so
//! answers go back the way the question came; a peer never heard from is reached through the
//! routes given with [`XdpEndpoint::add_route`] or [`XdpEndpoint::set_default_route`], and
//! a datagram to a peer with no route is reported as [`SendFailure::NoLinkAddress`].

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use latlab_wire::ethernet::Address;
use latlab_wire::udp_frame::{self, HEADERS_LEN};

use super::{
    Datagram, DatagramPort, DatagramRx, DatagramTx, Flushed, PortSizes, SendFailure, SendQueue,
    TxStamp, Unsent,
};
use crate::clock::now_ns;
use crate::udp::TimestampSource;
use crate::xdp::{XdpSocket, XdpWaiter};

/// How a peer is reached on the link: its MAC address, and which of ours to send from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkRoute {
    /// The peer's MAC address (or the next hop's).
    pub peer_mac: [u8; 6],
    /// Our MAC address on the interface.
    pub local_mac: [u8; 6],
    /// Our IPv4 address the peer talks to.
    pub local_ip: Ipv4Addr,
}

/// Learnt and given routes, by peer address; bounded.
#[derive(Debug)]
struct Routes {
    table: HashMap<Ipv4Addr, LinkRoute>,
    /// The last route learnt: most batches come from one peer, whose route then costs no
    /// hashing.
    last: Option<(Ipv4Addr, LinkRoute)>,
    default: Option<LinkRoute>,
    max_peers: usize,
}

impl Routes {
    #[inline]
    fn learn(&mut self, peer: Ipv4Addr, route: LinkRoute) {
        if self.last == Some((peer, route)) {
            return;
        }
        if self.table.len() < self.max_peers || self.table.contains_key(&peer) {
            self.table.insert(peer, route);
            self.last = Some((peer, route));
        }
    }

    #[inline]
    fn get(&self, peer: Ipv4Addr) -> Option<LinkRoute> {
        match self.last {
            Some((ip, route)) if ip == peer => Some(route),
            _ => self.table.get(&peer).copied().or(self.default),
        }
    }
}

/// The socket and the routes, shared by the halves of a split endpoint.
#[derive(Debug)]
struct Core {
    socket: XdpSocket,
    routes: Routes,
}

/// The send queue of an [`XdpEndpoint`]: whole frames, their payloads written by the engine
/// and their headers by the flush.
#[derive(Debug)]
pub struct XdpTxQueue {
    frames: Vec<Vec<u8>>,
    lens: Vec<usize>,
    dests: Vec<SocketAddr>,
    queued: usize,
    /// Longest payload of one frame.
    slot: usize,
}

impl XdpTxQueue {
    fn new(capacity: usize, slot: usize) -> XdpTxQueue {
        let capacity = capacity.max(1);
        XdpTxQueue {
            frames: vec![vec![0u8; HEADERS_LEN + slot]; capacity],
            lens: vec![0; capacity],
            dests: vec![SocketAddr::from(([0, 0, 0, 0], 0)); capacity],
            queued: 0,
            slot,
        }
    }

    /// Removes the first `n` queued frames, keeping the order of the rest.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.queued);
        if n == 0 {
            return;
        }
        let q = self.queued;
        self.frames[..q].rotate_left(n);
        self.lens[..q].rotate_left(n);
        self.dests[..q].rotate_left(n);
        self.queued -= n;
    }
}

impl SendQueue for XdpTxQueue {
    #[inline]
    fn push(&mut self, to: SocketAddr, len: usize) -> Option<&mut [u8]> {
        let i = self.queued;
        let frame = self.frames.get_mut(i)?;
        let len = len.min(self.slot);
        self.lens[i] = len;
        self.dests[i] = to;
        self.queued += 1;
        Some(&mut frame[HEADERS_LEN..HEADERS_LEN + len])
    }

    #[inline]
    fn len(&self) -> usize {
        self.queued
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.frames.len()
    }

    fn clear(&mut self) -> usize {
        std::mem::take(&mut self.queued)
    }
}

/// A datagram port over an AF_XDP socket whose program redirects one UDP port to it (see the
/// module's description).
#[derive(Debug)]
pub struct XdpEndpoint {
    core: Mutex<Core>,
    queue: XdpTxQueue,
    waiter: XdpWaiter,
    udp_port: u16,
    rx_batch: usize,
}

impl XdpEndpoint {
    /// An endpoint on `socket` for UDP port `udp_port` (the port its program redirects), with
    /// memory for `sizes` (a slot is cut to what one UMEM frame holds). At most 4096 peers'
    /// routes are learnt unless [`XdpEndpoint::set_max_peers`] says otherwise.
    pub fn new(socket: XdpSocket, udp_port: u16, sizes: PortSizes) -> io::Result<XdpEndpoint> {
        let waiter = socket.waiter()?;
        let slot = sizes
            .slot
            .min(socket.max_tx_frame().saturating_sub(HEADERS_LEN));
        Ok(XdpEndpoint {
            core: Mutex::new(Core {
                socket,
                routes: Routes {
                    table: HashMap::new(),
                    last: None,
                    default: None,
                    max_peers: 4096,
                },
            }),
            queue: XdpTxQueue::new(sizes.tx_batch, slot),
            waiter,
            udp_port,
            rx_batch: sizes.rx_batch.max(1),
        })
    }

    /// Learns the routes of at most `n` peers; a peer beyond them is reached only through the
    /// default route.
    pub fn set_max_peers(&mut self, n: usize) {
        self.core_mut().routes.max_peers = n;
    }

    /// How to reach `peer` before it is heard from (a frame from it replaces this route).
    pub fn add_route(&mut self, peer: Ipv4Addr, route: LinkRoute) {
        self.core_mut().routes.table.insert(peer, route);
    }

    /// How to reach a peer with no route of its own (the next hop of a gateway).
    pub fn set_default_route(&mut self, route: LinkRoute) {
        self.core_mut().routes.default = Some(route);
    }

    /// The AF_XDP socket, for its mode and counters.
    pub fn socket(&mut self) -> &mut XdpSocket {
        &mut self.core_mut().socket
    }

    /// The AF_XDP socket back.
    pub fn into_socket(self) -> XdpSocket {
        lock_owned(self.core).socket
    }

    /// The longest payload one datagram carries.
    pub fn max_payload(&self) -> usize {
        self.queue.slot
    }

    fn core_mut(&mut self) -> &mut Core {
        // A panic while the core was held ended the run that held it; the socket and the
        // routes stay consistent between calls.
        self.core.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

fn lock(core: &Mutex<Core>) -> MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock_owned(core: Mutex<Core>) -> Core {
    core.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Reads at most `max` frames; see [`DatagramRx::recv`].
#[inline]
fn recv<F: FnMut(Datagram<'_>)>(
    core: &mut Core,
    udp_port: u16,
    max: usize,
    mut f: F,
) -> io::Result<usize> {
    let Core { socket, routes } = core;
    let mut read_ns = 0;
    socket.recv_batch_stamped_max(max, |frame, stamp| {
        // The XDP program's stamp; a frame without one is stamped as read.
        let rx_ns = stamp.unwrap_or_else(|| {
            if read_ns == 0 {
                read_ns = now_ns();
            }
            read_ns
        });
        f(datagram(routes, udp_port, frame, rx_ns));
    })
}

/// The datagram in a received `frame`, its sender's route learnt; an unparsed one when the
/// frame is not an IPv4 UDP datagram to `udp_port` with a valid IPv4 header.
#[inline]
fn datagram<'f>(routes: &mut Routes, udp_port: u16, frame: &'f [u8], rx_ns: u64) -> Datagram<'f> {
    let view = udp_frame::Frame::new_unchecked(frame);
    match udp_frame::Repr::parse(&view) {
        Ok(d) if d.dst.port() == udp_port => {
            routes.learn(
                *d.src.ip(),
                LinkRoute {
                    peer_mac: d.src_mac.0,
                    local_mac: d.dst_mac.0,
                    local_ip: *d.dst.ip(),
                },
            );
            Datagram {
                data: view.payload(),
                from: SocketAddr::V4(d.src),
                rx_ns,
                truncated: false,
                unparsed: false,
            }
        }
        _ => Datagram {
            data: &[],
            from: SocketAddr::from(([0, 0, 0, 0], 0)),
            rx_ns,
            truncated: false,
            unparsed: true,
        },
    }
}

/// Writes the whole frame of queued datagram `i`: headers by its destination's route, the
/// transmit stamp at `t`, then the UDP checksum. Returns the frame's length, or why it cannot
/// be sent.
#[inline]
fn build<S: TxStamp>(
    routes: &Routes,
    udp_port: u16,
    queue: &mut XdpTxQueue,
    i: usize,
    stamp: &mut S,
    t: u64,
) -> Result<usize, SendFailure> {
    let SocketAddr::V4(to) = queue.dests[i] else {
        return Err(SendFailure::NoLinkAddress);
    };
    let route = routes.get(*to.ip()).ok_or(SendFailure::NoLinkAddress)?;
    let repr = udp_frame::Repr {
        src_mac: Address(route.local_mac),
        dst_mac: Address(route.peer_mac),
        src: SocketAddrV4::new(route.local_ip, udp_port),
        dst: to,
        payload_len: queue.lens[i],
    };
    let len = repr.buffer_len();
    // The payload is in place at HEADERS_LEN (no IPv4 options are written): the stamp goes
    // into it, then the UDP checksum is made over it, once.
    repr.emit(
        &mut udp_frame::Frame::new_unchecked(&mut queue.frames[i][..len]),
        |payload| stamp.stamp(payload, t),
    );
    Ok(len)
}

/// Writes the headers of every queued frame, stamps and checksums it, and puts it on the TX
/// ring; see [`DatagramTx::flush`].
fn flush<S: TxStamp, U: FnMut(Unsent)>(
    core: &mut Core,
    udp_port: u16,
    queue: &mut XdpTxQueue,
    stamp: &mut S,
    mut unsent: U,
) -> io::Result<Flushed> {
    let mut done = Flushed::default();
    if queue.queued == 0 {
        return Ok(done);
    }
    let Core { socket, routes } = core;
    let t = if S::USES_TIME { now_ns() } else { 0 };
    let mut handled = 0;
    while handled < queue.queued {
        let i = handled;
        let len = match build(routes, udp_port, queue, i, stamp, t) {
            Ok(len) => len,
            Err(failure) => {
                unsent(Unsent {
                    to: queue.dests[i],
                    failure,
                });
                done.failed += 1;
                handled += 1;
                continue;
            }
        };
        let frame = &queue.frames[i][..len];
        if !socket.fits_mtu(frame)? {
            // The device would drop it without a count.
            unsent(Unsent {
                to: queue.dests[i],
                failure: SendFailure::TooLong,
            });
            done.failed += 1;
            handled += 1;
            continue;
        }
        if !socket.send(frame)? {
            socket.flush_tx()?;
            if !socket.send(frame)? {
                // The TX ring stays full: the rest waits for the next flush.
                break;
            }
        }
        done.sent += 1;
        done.sent_ns = t;
        handled += 1;
    }
    socket.flush_tx()?;
    queue.consume(handled);
    Ok(done)
}

fn kernel_drops(socket: &XdpSocket) -> Option<u64> {
    // `rx_dropped` already holds the frames lost to an empty fill ring; a full RX ring is
    // counted apart.
    socket
        .statistics()
        .ok()
        .map(|s| s.rx_dropped + s.rx_ring_full)
}

impl DatagramRx for XdpEndpoint {
    #[inline]
    fn recv<F: FnMut(Datagram<'_>)>(&mut self, f: F) -> io::Result<usize> {
        let (port, max) = (self.udp_port, self.rx_batch);
        recv(self.core_mut(), port, max, f)
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        self.core_mut().socket.wait_readable(timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::XdpProgram
    }

    fn kernel_drops(&self) -> Option<u64> {
        kernel_drops(&lock(&self.core).socket)
    }
}

impl DatagramTx for XdpEndpoint {
    type Queue = XdpTxQueue;

    #[inline]
    fn queue(&mut self) -> &mut XdpTxQueue {
        &mut self.queue
    }

    #[inline]
    fn flush<S: TxStamp, U: FnMut(Unsent)>(
        &mut self,
        stamp: &mut S,
        unsent: U,
    ) -> io::Result<Flushed> {
        let core = self.core.get_mut().unwrap_or_else(|e| e.into_inner());
        flush(core, self.udp_port, &mut self.queue, stamp, unsent)
    }
}

impl DatagramPort for XdpEndpoint {
    type TxHalf<'a>
        = XdpTxHalf<'a>
    where
        Self: 'a;
    type RxHalf<'a>
        = XdpRxHalf<'a>
    where
        Self: 'a;

    #[inline]
    fn recv_with_queue<F: FnMut(Datagram<'_>, &mut XdpTxQueue)>(
        &mut self,
        mut f: F,
    ) -> io::Result<usize> {
        let core = self.core.get_mut().unwrap_or_else(|e| e.into_inner());
        let queue = &mut self.queue;
        recv(core, self.udp_port, self.rx_batch, |d| f(d, queue))
    }

    fn split(&mut self) -> (XdpTxHalf<'_>, XdpRxHalf<'_>) {
        (
            XdpTxHalf {
                core: &self.core,
                queue: &mut self.queue,
                udp_port: self.udp_port,
            },
            XdpRxHalf {
                core: &self.core,
                waiter: &self.waiter,
                udp_port: self.udp_port,
                rx_batch: self.rx_batch,
            },
        )
    }
}

/// The send half of an [`XdpEndpoint`]: holds the socket only for each flush.
#[derive(Debug)]
pub struct XdpTxHalf<'a> {
    core: &'a Mutex<Core>,
    queue: &'a mut XdpTxQueue,
    udp_port: u16,
}

impl DatagramTx for XdpTxHalf<'_> {
    type Queue = XdpTxQueue;

    #[inline]
    fn queue(&mut self) -> &mut XdpTxQueue {
        self.queue
    }

    fn flush<S: TxStamp, U: FnMut(Unsent)>(
        &mut self,
        stamp: &mut S,
        unsent: U,
    ) -> io::Result<Flushed> {
        flush(
            &mut lock(self.core),
            self.udp_port,
            self.queue,
            stamp,
            unsent,
        )
    }
}

/// The receive half of an [`XdpEndpoint`]: holds the socket only for each receive, and waits
/// without holding it.
#[derive(Debug)]
pub struct XdpRxHalf<'a> {
    core: &'a Mutex<Core>,
    waiter: &'a XdpWaiter,
    udp_port: u16,
    rx_batch: usize,
}

impl DatagramRx for XdpRxHalf<'_> {
    fn recv<F: FnMut(Datagram<'_>)>(&mut self, f: F) -> io::Result<usize> {
        recv(&mut lock(self.core), self.udp_port, self.rx_batch, f)
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        self.waiter.wait_readable(timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::XdpProgram
    }

    fn kernel_drops(&self) -> Option<u64> {
        kernel_drops(&lock(self.core).socket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_wire::{ethernet, ipv4, udp};

    const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// A frame from 198.18.0.1:40000 to 198.18.0.2:7777 carrying `payload`, checksums made.
    fn request(payload: &[u8]) -> Vec<u8> {
        let repr = udp_frame::Repr {
            src_mac: Address(CLIENT_MAC),
            dst_mac: Address(OUR_MAC),
            src: "198.18.0.1:40000".parse().unwrap(),
            dst: "198.18.0.2:7777".parse().unwrap(),
            payload_len: payload.len(),
        };
        let mut frame = vec![0u8; repr.buffer_len()];
        repr.emit_into(&mut frame, payload).unwrap();
        frame
    }

    fn routes() -> Routes {
        Routes {
            table: HashMap::new(),
            last: None,
            default: None,
            max_peers: 2,
        }
    }

    /// Receives `frame`, queues `answer` to its sender and builds the frame that leaves,
    /// stamped with `t` in its first 8 payload bytes.
    fn answer(frame: &[u8], answer: &[u8], t: u64) -> Result<Vec<u8>, SendFailure> {
        let mut routes = routes();
        let mut queue = XdpTxQueue::new(4, 2048 - HEADERS_LEN);
        let d = datagram(&mut routes, 7777, frame, 5);
        assert!(!d.unparsed);
        queue
            .push(d.from, answer.len())
            .unwrap()
            .copy_from_slice(answer);
        let mut stamp = |p: &mut [u8], t: u64| p[..8].copy_from_slice(&t.to_be_bytes());
        let len = build(&routes, 7777, &mut queue, 0, &mut stamp, t)?;
        Ok(queue.frames[0][..len].to_vec())
    }

    #[test]
    fn an_answer_goes_back_the_way_its_question_came_stamped_with_valid_checksums() {
        let req = request(&[7u8; 64]);
        let out = answer(&req, &[9u8; 64], 0x0102_0304_0506_0708).unwrap();
        assert_eq!(out.len(), req.len());
        let eth = ethernet::Frame::new_checked(&out[..]).unwrap();
        assert_eq!((eth.dst_addr().0, eth.src_addr().0), (CLIENT_MAC, OUR_MAC));
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        let ip_repr = ipv4::Repr::parse(&ip).unwrap();
        assert_eq!(
            (ip_repr.src_addr.to_string(), ip_repr.dst_addr.to_string()),
            ("198.18.0.2".into(), "198.18.0.1".into())
        );
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        let u_repr = udp::Repr::parse(&u, ip_repr.src_addr, ip_repr.dst_addr).unwrap();
        assert_eq!((u_repr.src_port, u_repr.dst_port), (7777, 40000));
        assert!(u.verify_checksum(ip_repr.src_addr, ip_repr.dst_addr));
        assert_eq!(&u.payload()[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&u.payload()[8..], &[9u8; 56]);
    }

    #[test]
    fn offloaded_checksums_do_not_matter_but_bad_ip_headers_and_other_frames_are_unparsed() {
        // A checksum left unfinished for an offload (a veth peer's) does not stop the answer,
        // and the answer's own checksum is complete.
        let mut partial = request(&[7u8; 64]);
        partial[40..42].copy_from_slice(&[0x12, 0x34]);
        let out = answer(&partial, &[7u8; 64], 1).unwrap();
        let ip = ipv4::Packet::new_checked(&out[14..]).unwrap();
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        assert!(udp::Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(s, d));
        let mut routes = routes();
        let mut bad_ip = request(&[7u8; 64]);
        bad_ip[24] ^= 0xff;
        let mut arp = request(&[7u8; 64]);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut other_port = request(&[7u8; 64]);
        other_port[36..38].copy_from_slice(&7778u16.to_be_bytes());
        for frame in [&bad_ip[..], &arp[..], &other_port[..], &bad_ip[..20]] {
            let d = datagram(&mut routes, 7777, frame, 5);
            assert!(d.unparsed && d.data.is_empty());
        }
        assert!(routes.table.is_empty(), "nothing learnt from them");
    }

    #[test]
    fn routes_are_learnt_up_to_the_bound_and_the_default_reaches_the_rest() {
        let mut routes = routes();
        let route = |n: u8| LinkRoute {
            peer_mac: [2, 0, 0, 0, 0, n],
            local_mac: OUR_MAC,
            local_ip: Ipv4Addr::new(198, 18, 0, 2),
        };
        let ip = |n: u8| Ipv4Addr::new(198, 18, 0, n);
        for n in 1..=3 {
            routes.learn(ip(n), route(n));
        }
        assert_eq!(routes.table.len(), 2, "bounded");
        assert_eq!(
            routes.get(ip(3)),
            None,
            "a peer beyond the bound is not learnt"
        );
        // A peer already known keeps being learnt (its route may change).
        let moved = LinkRoute {
            peer_mac: [2, 0, 0, 0, 0, 0x11],
            ..route(1)
        };
        routes.learn(ip(1), moved);
        assert_eq!(routes.get(ip(1)), Some(moved));
        routes.default = Some(route(9));
        assert_eq!(routes.get(ip(3)), Some(route(9)));
        assert_eq!(routes.get(ip(2)), Some(route(2)));
    }
}
