//! `enet`: ENet 1.3 (`rusty_enet`, a pure-Rust port of the C library) over UDP, one channel:
//! reliable packets (`enet`) or unreliable sequenced ones (`enet:unreliable`).
//!
//! The sender connects with the run's id as the connect data; the receiver refuses any other.
//! Every send is flushed at once (`enet_host_flush`), as a game does after queuing its frame's
//! packets. ENet's retransmissions are its reliable commands that timed out (`packetsLost`,
//! which ENet resets every 10 s: the endpoint sums it over those windows after every service).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use rusty_enet as enet;

use super::endpoint::Endpoint;
use super::wire::{CountingSocket, WireCounts};

impl enet::Socket for CountingSocket {
    type Address = SocketAddr;
    type Error = io::Error;

    fn send(&mut self, address: SocketAddr, buffer: &[u8]) -> io::Result<usize> {
        // A full send buffer drops the datagram, as a network would; ENet recovers it.
        self.send_to(buffer, address)?;
        Ok(buffer.len())
    }

    fn receive(
        &mut self,
        buffer: &mut [u8; enet::MTU_MAX],
    ) -> io::Result<Option<(SocketAddr, enet::PacketReceived)>> {
        Ok(self
            .recv_from(buffer)?
            .map(|(n, from)| (from, enet::PacketReceived::Complete(n))))
    }
}

/// Either side of an `enet` run.
pub struct EnetEndpoint {
    host: enet::Host<CountingSocket>,
    peer: Option<enet::PeerID>,
    run: u32,
    reliable: bool,
    /// The sending side (its connect event carries no data; the receiver's carries the run).
    sender: bool,
    /// Reliable commands that timed out, summed over ENet's windows, and the last reading.
    lost_total: u64,
    lost_seen: u32,
    foreign: u64,
}

impl std::fmt::Debug for EnetEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnetEndpoint")
            .field("run", &self.run)
            .field("reliable", &self.reliable)
            .finish_non_exhaustive()
    }
}

fn host(socket: CountingSocket) -> io::Result<enet::Host<CountingSocket>> {
    let settings = enet::HostSettings {
        peer_limit: 1,
        channel_limit: 1,
        ..enet::HostSettings::default()
    };
    enet::Host::new(socket, settings).map_err(|e| io::Error::other(format!("enet: {e:?}")))
}

impl EnetEndpoint {
    /// The sending side: connects to `target` and waits (at most `timeout`) until connected.
    pub fn sender(
        target: SocketAddr,
        run: u32,
        reliable: bool,
        timeout: Duration,
    ) -> io::Result<EnetEndpoint> {
        let mut e = EnetEndpoint::new(CountingSocket::towards(target)?, run, reliable, true)?;
        e.host
            .connect(target, 1, run)
            .map_err(|_| io::Error::other("enet: no free peer to connect with"))?;
        let until = Instant::now() + timeout;
        while e.peer.is_none() {
            if Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "enet: no connection to {target} within {}",
                        latlab_lab::units::format_duration(timeout)
                    ),
                ));
            }
            e.poll(Duration::from_millis(5), &mut |_| {})?;
        }
        Ok(e)
    }

    /// The receiving side, on the receiver's socket: takes the connection of run `run`.
    pub fn receiver(socket: UdpSocket, run: u32, reliable: bool) -> io::Result<EnetEndpoint> {
        EnetEndpoint::new(CountingSocket::new(socket)?, run, reliable, false)
    }

    fn new(
        socket: CountingSocket,
        run: u32,
        reliable: bool,
        sender: bool,
    ) -> io::Result<EnetEndpoint> {
        Ok(EnetEndpoint {
            host: host(socket)?,
            peer: None,
            run,
            reliable,
            sender,
            lost_total: 0,
            lost_seen: 0,
            foreign: 0,
        })
    }

    /// Runs ENet's service until it has no more events, handing over what was received.
    fn service(&mut self, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        while let Some(event) = self.host.service()? {
            match event {
                enet::Event::Connect { peer, data } => {
                    if (self.sender || data == self.run) && self.peer.is_none() {
                        self.peer = Some(peer.id());
                    } else {
                        self.foreign += 1;
                        peer.disconnect_now(0);
                    }
                }
                enet::Event::Disconnect { peer, .. } => {
                    if self.peer == Some(peer.id()) {
                        self.peer = None;
                    }
                }
                enet::Event::Receive { peer, packet, .. } => {
                    if self.peer == Some(peer.id()) {
                        deliver(packet.data());
                    } else {
                        self.foreign += 1;
                    }
                }
            }
        }
        if let Some(peer) = self.peer.and_then(|id| self.host.get_peer(id)) {
            let lost = peer.packets_lost();
            if lost < self.lost_seen {
                // ENet started a new window.
                self.lost_total += u64::from(self.lost_seen);
            }
            self.lost_seen = lost;
        }
        Ok(())
    }
}

impl Endpoint for EnetEndpoint {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        let Some(peer) = self.peer.and_then(|id| self.host.get_peer_mut(id)) else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "enet: the connection is gone",
            ));
        };
        let packet = if self.reliable {
            enet::Packet::reliable(message)
        } else {
            enet::Packet::unreliable(message)
        };
        peer.send(0, &packet)
            .map_err(|e| io::Error::other(format!("enet: {e:?}")))?;
        self.host.flush();
        Ok(())
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        // ENet's own timers (retransmissions, pings) need a service at least every few ms.
        let fd = self.host.socket().as_raw_fd();
        latlab_io::tcp::wait_readable(&[fd], Some(wait.min(Duration::from_millis(5))))?;
        self.service(deliver)
    }

    fn wire(&mut self) -> WireCounts {
        WireCounts {
            retransmissions: Some(self.lost_total + u64::from(self.lost_seen)),
            spurious_retransmissions: None,
            ..self.host.socket().sent()
        }
    }

    fn foreign(&self) -> u64 {
        self.foreign
    }

    fn close(&mut self) {
        if let Some(peer) = self.peer.and_then(|id| self.host.get_peer_mut(id)) {
            peer.disconnect_now(0);
        }
        self.host.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_datagrams_never_panic_enet_and_a_sender_still_connects() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let mut receiver = EnetEndpoint::receiver(socket, 9, true).unwrap();
        let spray = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = [0u8; 300];
        for round in 0..200 {
            for _ in 0..100 {
                let len = (next() % 300) as usize;
                for b in &mut buf[..len] {
                    *b = next() as u8;
                }
                if len >= 4 && next() % 2 == 0 {
                    // "No peer yet" (peer id 0xfff, with or without the sent-time flag), then a
                    // command number ENet knows (1..=12), so parsing goes past the header.
                    buf[0] = if round % 2 == 0 { 0x0f } else { 0x8f };
                    buf[1] = 0xff;
                    let at = if round % 2 == 0 { 2 } else { 4 };
                    if len > at {
                        buf[at] = (1 + (next() % 12) as u8) | (next() as u8 & 0xc0);
                    }
                }
                spray.send_to(&buf[..len], addr).unwrap();
            }
            receiver
                .poll(Duration::from_millis(1), &mut |_| {})
                .unwrap();
        }
        // The receiver still takes its run's connection and its messages.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let poller = std::thread::spawn(move || {
            let mut got = Vec::new();
            while !d.load(std::sync::atomic::Ordering::Relaxed) || got.is_empty() {
                receiver
                    .poll(Duration::from_millis(2), &mut |m| got.push(m.to_vec()))
                    .unwrap();
            }
            got
        });
        let mut sender = EnetEndpoint::sender(addr, 9, true, Duration::from_secs(30)).unwrap();
        sender.send(b"still here").unwrap();
        for _ in 0..50 {
            sender.poll(Duration::from_millis(2), &mut |_| {}).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(poller.join().unwrap(), vec![b"still here".to_vec()]);
    }
}
