//! The reflector: echoes latlab probes back to their sender.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::udp::{RecvBatch, SendBatch, UdpSocket};
use latlab_wire::{probe, udp_frame};

use crate::{PollMode, Stop};

/// How the reflector runs.
#[derive(Clone, Debug)]
pub struct ReflectorConfig {
    /// Datagrams per `recvmmsg`/`sendmmsg` call.
    pub batch: usize,
    /// Busy polling or blocking.
    pub poll: PollMode,
    /// Write the reflector's receive and transmit times into the probe (bytes 40..56).
    pub stamp: bool,
    /// Largest datagram accepted; longer ones are counted as oversized and dropped.
    pub max_datagram: usize,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            batch: 32,
            poll: PollMode::Busy,
            stamp: true,
            max_datagram: 9216,
        }
    }
}

/// Live counters of a reflector, readable from other threads while it runs.
#[derive(Debug, Default)]
pub struct ReflectorCounters {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Probes sent back.
    pub reflected: AtomicU64,
    /// Datagrams that were not latlab probes: dropped.
    pub malformed: AtomicU64,
    /// Datagrams longer than the largest accepted: dropped.
    pub oversized: AtomicU64,
    /// Probes that could not be sent back because the socket stayed full: dropped.
    pub send_dropped: AtomicU64,
}

/// A snapshot of [`ReflectorCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReflectorReport {
    /// Datagrams received.
    pub received: u64,
    /// Probes sent back.
    pub reflected: u64,
    /// Not latlab probes.
    pub malformed: u64,
    /// Too long.
    pub oversized: u64,
    /// Dropped on a full socket.
    pub send_dropped: u64,
}

impl ReflectorCounters {
    /// The counters' values now.
    pub fn snapshot(&self) -> ReflectorReport {
        ReflectorReport {
            received: self.received.load(Ordering::Relaxed),
            reflected: self.reflected.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            oversized: self.oversized.load(Ordering::Relaxed),
            send_dropped: self.send_dropped.load(Ordering::Relaxed),
        }
    }
}

/// Reflects probes arriving on `socket` until `stop` is raised.
pub fn run(
    socket: &UdpSocket,
    config: &ReflectorConfig,
    stop: &Stop,
    counters: &ReflectorCounters,
) -> io::Result<()> {
    // One byte more than the largest accepted datagram shows which ones were longer.
    let slot = config.max_datagram + 1;
    let mut rx = RecvBatch::new(config.batch, slot);
    let mut tx = SendBatch::new(config.batch, slot);
    while !stop.is_raised() {
        if config.poll == PollMode::Block
            && !socket.wait_readable(Some(Duration::from_millis(50)))?
        {
            continue;
        }
        let n = socket.recv_batch(&mut rx)?;
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        counters.received.fetch_add(n as u64, Ordering::Relaxed);
        let (mut malformed, mut oversized) = (0, 0);
        for pkt in rx.iter() {
            if pkt.truncated || pkt.data.len() > config.max_datagram {
                oversized += 1;
                continue;
            }
            // The whole header is checked (magic, version, lengths), not only the length: a
            // reflector must never echo a datagram that is not a probe.
            if !probe::is_probe(pkt.data) {
                malformed += 1;
                continue;
            }
            // The batch has as many slots as the receive batch, so there is always room.
            let Some(out) = tx.push(pkt.data.len(), Some(pkt.from)) else {
                break;
            };
            out.copy_from_slice(pkt.data);
            if config.stamp {
                probe::Packet::new_unchecked(out).set_responder_stamps(pkt.rx_ns, 0);
            }
        }
        if config.stamp {
            let tx_ns = now_ns();
            for i in 0..tx.len() {
                if let Some(slot) = tx.slot_mut(i) {
                    let mut p = probe::Packet::new_unchecked(slot);
                    let rx_ns = p.responder_rx_ns();
                    p.set_responder_stamps(rx_ns, tx_ns);
                }
            }
        }
        let queued = tx.len() as u64;
        let mut sent = 0u64;
        // A full socket buffer gets a few tries, then the rest is dropped and counted: the
        // reflector never stalls its receive side behind its send side.
        for _ in 0..64 {
            sent += socket.send_batch(&mut tx)? as u64;
            if tx.is_empty() {
                break;
            }
        }
        tx.clear();
        counters.reflected.fetch_add(sent, Ordering::Relaxed);
        counters
            .send_dropped
            .fetch_add(queued - sent, Ordering::Relaxed);
        counters.malformed.fetch_add(malformed, Ordering::Relaxed);
        counters.oversized.fetch_add(oversized, Ordering::Relaxed);
    }
    Ok(())
}

/// Builds the reply to `frame` (an Ethernet/IPv4/UDP frame carrying a probe) into `out`:
/// addresses and ports swapped, the probe stamped with `rx_ns` and `tx_ns` when `stamp`,
/// checksums made anew. Returns the reply's length, or `None` when `frame` is not a probe.
pub fn reply_frame(frame: &[u8], out: &mut [u8], stamp: Option<(u64, u64)>) -> Option<usize> {
    // The UDP checksum is not verified (a veth peer leaves it unfinished); the probe header's
    // own checks remain.
    let request = udp_frame::Frame::new_unchecked(frame);
    let repr = udp_frame::Repr::parse(&request).ok()?;
    if !probe::is_probe(request.payload()) {
        return None;
    }
    let len = repr.reply().emit_into(out, request.payload()).ok()?;
    if let Some((rx, tx)) = stamp {
        stamp_reply(&mut out[..len], rx, tx);
    }
    Some(len)
}

/// Writes the responder's stamps into the probe of the reply frame `reply` and makes its UDP
/// checksum again.
fn stamp_reply(reply: &mut [u8], rx_ns: u64, tx_ns: u64) {
    // `reply_frame` wrote `reply`, so its headers are in bounds.
    let mut reply = udp_frame::Frame::new_unchecked(reply);
    probe::Packet::new_unchecked(reply.payload_mut()).set_responder_stamps(rx_ns, tx_ns);
    reply.fill_udp_checksum();
}

/// Reflects probes arriving on an AF_XDP socket (whose program redirects the reflector's UDP
/// port to it) until `stop` is raised: IPv4 and UDP are handled in user space, and each reply
/// goes back to the MAC address the probe came from.
pub fn run_xdp(
    socket: &mut latlab_io::xdp::XdpSocket,
    config: &ReflectorConfig,
    stop: &Stop,
    counters: &ReflectorCounters,
) -> io::Result<()> {
    let mut replies: Vec<Vec<u8>> = (0..config.batch.max(1) * 2)
        .map(|_| vec![0u8; 2048])
        .collect();
    // Each reply's length and its probe's arrival time.
    let mut lens: Vec<(usize, u64)> = Vec::with_capacity(replies.len());
    while !stop.is_raised() {
        if config.poll == PollMode::Block
            && !socket.wait_readable(Some(Duration::from_millis(50)))?
        {
            continue;
        }
        lens.clear();
        let rx_ns = now_ns();
        let (mut malformed, mut received) = (0u64, 0u64);
        let stamp = config.stamp;
        let n = socket.recv_batch_stamped(|frame, arrival| {
            received += 1;
            let Some(out) = replies.get_mut(lens.len()) else {
                malformed += 1;
                return;
            };
            // The XDP program's arrival stamp, else the time the batch was read. The stamps
            // go in once the transmit time is known.
            let rx = arrival.unwrap_or(rx_ns);
            match reply_frame(frame, out, None) {
                Some(len) => lens.push((len, rx)),
                None => malformed += 1,
            }
        })?;
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        let tx_ns = now_ns();
        let mut sent = 0u64;
        for (i, &(len, rx)) in lens.iter().enumerate() {
            if stamp {
                stamp_reply(&mut replies[i][..len], rx, tx_ns);
            }
            if socket.send(&replies[i][..len])? {
                sent += 1;
            } else {
                socket.flush_tx()?;
                if socket.send(&replies[i][..len])? {
                    sent += 1;
                }
            }
        }
        socket.flush_tx()?;
        counters.received.fetch_add(received, Ordering::Relaxed);
        counters.reflected.fetch_add(sent, Ordering::Relaxed);
        counters.malformed.fetch_add(malformed, Ordering::Relaxed);
        counters
            .send_dropped
            .fetch_add(lens.len() as u64 - sent, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_wire::{ethernet, ipv4, udp};

    fn request() -> Vec<u8> {
        let addrs = crate::blaster::FrameAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.1:40000".parse().unwrap(),
            dst: "198.18.0.2:7777".parse().unwrap(),
        };
        let mut frame = crate::blaster::udp_frame(&addrs, 64 + 42 + 4).unwrap();
        probe::Repr {
            run_id: 9,
            flow: 0,
            seq: 5,
            intended_send_ns: 100,
            actual_send_ns: 110,
            responder: None,
        }
        .emit(&mut probe::Packet::new_unchecked(&mut frame[42..]));
        let (s, d) = ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
        udp::Packet::new_unchecked(&mut frame[34..]).fill_checksum(s, d);
        frame
    }

    #[test]
    fn a_reply_swaps_addresses_and_ports_and_keeps_the_probe() {
        let req = request();
        let mut out = vec![0u8; 2048];
        let len = reply_frame(&req, &mut out, Some((1000, 2000))).unwrap();
        assert_eq!(len, req.len());
        let eth = ethernet::Frame::new_checked(&out[..len]).unwrap();
        assert_eq!(eth.dst_addr().0, [2, 0, 0, 0, 0, 1]);
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        let ip_repr = ipv4::Repr::parse(&ip).unwrap();
        assert_eq!(ip_repr.dst_addr.to_string(), "198.18.0.1");
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        let u_repr = udp::Repr::parse(&u, ip_repr.src_addr, ip_repr.dst_addr).unwrap();
        assert_eq!((u_repr.src_port, u_repr.dst_port), (7777, 40000));
        let p = probe::Repr::parse(&probe::Packet::new_checked(u.payload()).unwrap()).unwrap();
        assert_eq!(
            (p.seq, p.intended_send_ns, p.responder),
            (5, 100, Some((1000, 2000)))
        );
    }

    #[test]
    fn frames_that_are_not_probes_get_no_reply_and_offloaded_checksums_do_not_matter() {
        let mut req = request();
        req[42..46].copy_from_slice(b"JUNK");
        let (s, d) = ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
        udp::Packet::new_unchecked(&mut req[34..]).fill_checksum(s, d);
        let mut out = vec![0u8; 2048];
        assert_eq!(reply_frame(&req, &mut out, None), None);
        assert_eq!(reply_frame(&req[..20], &mut out, None), None);
        // A checksum left unfinished for an offload (a veth peer's) does not stop the reply,
        // and the reply's own checksum is complete.
        let mut partial = request();
        partial[40..42].copy_from_slice(&[0x12, 0x34]);
        let len = reply_frame(&partial, &mut out, None).unwrap();
        let ip = ipv4::Packet::new_checked(&out[14..len]).unwrap();
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        assert!(udp::Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(s, d));
        let mut bad_ip = request();
        bad_ip[24] ^= 0xff;
        assert_eq!(
            reply_frame(&bad_ip, &mut out, None),
            None,
            "a bad IPv4 checksum is refused"
        );
    }
}
