//! `kcp`: KCP (the `kcp` crate, a Rust port of skywind3000/kcp) in message mode over UDP, with
//! the two settings KCP's README names: `mode=fast` (`nodelay 1, interval 10, resend 2, nc 1`)
//! and `mode=normal` (KCP's defaults: `nodelay 0, interval 40, resend 0, nc 0`).
//!
//! The conversation id is the run's id, so datagrams of another run (or garbage) are counted
//! and dropped before KCP sees them. KCP's clock is milliseconds since the endpoint opened, and
//! `update` runs when `check` says it is due, as KCP's README asks.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kcp::Kcp;

use super::endpoint::Endpoint;
use super::wire::{CountingSocket, WireCounts};

/// The socket KCP's output writes to and the endpoint reads from, and where to send.
#[derive(Debug)]
struct Shared {
    socket: CountingSocket,
    /// The other side; the receiver learns it from the first datagram of its run.
    peer: Option<SocketAddr>,
}

/// KCP's output: each write is one KCP datagram.
#[derive(Debug)]
struct Output(Arc<Mutex<Shared>>);

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // Only this endpoint's thread ever holds it; a poisoned lock still holds valid counters.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl Write for Output {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        let mut s = lock(&self.0);
        if let Some(peer) = s.peer {
            s.socket.send_to(datagram, peer)?;
        }
        Ok(datagram.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Either side of a `kcp` run.
pub struct KcpEndpoint {
    kcp: Kcp<Output>,
    shared: Arc<Mutex<Shared>>,
    run: u32,
    start: Instant,
    foreign: u64,
    buf: Vec<u8>,
}

impl std::fmt::Debug for KcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KcpEndpoint")
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl KcpEndpoint {
    /// The sending side, towards `target`.
    pub fn sender(target: SocketAddr, run: u32, fast: bool) -> io::Result<KcpEndpoint> {
        KcpEndpoint::new(CountingSocket::towards(target)?, Some(target), run, fast)
    }

    /// The receiving side, on the receiver's socket.
    pub fn receiver(socket: UdpSocket, run: u32, fast: bool) -> io::Result<KcpEndpoint> {
        KcpEndpoint::new(CountingSocket::new(socket)?, None, run, fast)
    }

    fn new(
        socket: CountingSocket,
        peer: Option<SocketAddr>,
        run: u32,
        fast: bool,
    ) -> io::Result<KcpEndpoint> {
        let shared = Arc::new(Mutex::new(Shared { socket, peer }));
        let mut kcp = Kcp::new(run, Output(shared.clone()));
        configure(&mut kcp, fast);
        // KCP's clock starts at 0 with a first update, before anything is sent.
        kcp.update(0).map_err(kcp_error)?;
        Ok(KcpEndpoint {
            kcp,
            shared,
            run,
            start: Instant::now(),
            foreign: 0,
            buf: vec![0; 65_536],
        })
    }

    /// KCP's clock: milliseconds since the endpoint opened (wrapping, as KCP expects).
    fn now_ms(&self) -> u32 {
        self.start.elapsed().as_millis() as u32
    }

    fn update(&mut self) -> io::Result<()> {
        self.kcp.update(self.now_ms()).map_err(kcp_error)
    }
}

/// KCP's settings for `mode=fast` (`nodelay 1, interval 10, resend 2, nc 1`) or `mode=normal`
/// (its defaults: `nodelay 0, interval 40, resend 0, nc 0`).
pub(crate) fn configure<W: Write>(kcp: &mut Kcp<W>, fast: bool) {
    if fast {
        kcp.set_nodelay(true, 10, 2, true);
    } else {
        kcp.set_nodelay(false, 40, 0, false);
    }
}

fn kcp_error(e: kcp::Error) -> io::Error {
    match e {
        kcp::Error::IoError(e) => e,
        other => io::Error::other(format!("kcp: {other}")),
    }
}

impl Endpoint for KcpEndpoint {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        // Queued: KCP sends it at its next update (`poll`), as it is meant to run.
        self.kcp.send(message).map(|_| ()).map_err(kcp_error)
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let mut now = self.now_ms();
        // KCP's times wrap: the signed difference says how far ahead its next update is.
        let mut ahead = self.kcp.check(now).wrapping_sub(now) as i32;
        if ahead <= 0 {
            self.update()?;
            now = self.now_ms();
            ahead = self.kcp.check(now).wrapping_sub(now) as i32;
        }
        // After an update `check` can still say "now": a segment whose resend time has passed
        // waits for the next flush, which `check` does not tell. KCP's clock counts whole
        // milliseconds, so waiting less than one only spins.
        let wait = wait.min(Duration::from_millis(ahead.max(1) as u64));
        let readable = lock(&self.shared).socket.wait(wait)?;
        if readable {
            loop {
                let got = {
                    let mut s = lock(&self.shared);
                    match s.socket.recv_from(&mut self.buf)? {
                        Some((n, from)) => {
                            let ours = n >= kcp::KCP_OVERHEAD
                                && kcp::get_conv(&self.buf[..n]) == self.run
                                && s.peer.is_none_or(|p| p == from);
                            if ours && s.peer.is_none() {
                                s.peer = Some(from);
                            }
                            Some((n, ours))
                        }
                        None => None,
                    }
                };
                match got {
                    None => break,
                    Some((n, true)) => {
                        if self.kcp.input(&self.buf[..n]).is_err() {
                            self.foreign += 1;
                        }
                    }
                    Some((_, false)) => self.foreign += 1,
                }
            }
        }
        self.update()?;
        loop {
            match self.kcp.recv(&mut self.buf) {
                Ok(n) => deliver(&self.buf[..n]),
                Err(kcp::Error::RecvQueueEmpty) | Err(kcp::Error::ExpectingFragment) => break,
                Err(e) => return Err(kcp_error(e)),
            }
        }
        Ok(())
    }

    fn wire(&mut self) -> WireCounts {
        // KCP keeps its retransmission count to itself.
        lock(&self.shared).socket.sent()
    }

    fn foreign(&self) -> u64 {
        self.foreign
    }

    fn close(&mut self) {
        let _ = self.kcp.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_datagrams_of_the_run_never_panic_kcp() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut e = KcpEndpoint::receiver(socket, 7, true).unwrap();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = [0u8; 200];
        let mut out = vec![0u8; 65_536];
        for i in 0..50_000u32 {
            let len = (next() % 200) as usize;
            for b in &mut buf[..len] {
                *b = next() as u8;
            }
            if len >= 24 {
                // The run's conversation, and now and then a command KCP knows (81..=84) with a
                // length that fits, so the input gets past its first checks.
                buf[..4].copy_from_slice(&7u32.to_le_bytes());
                if next() % 2 == 0 {
                    buf[4] = 81 + (next() % 4) as u8;
                    let data = (len - 24) as u32;
                    buf[20..24].copy_from_slice(&data.to_le_bytes());
                }
            }
            let _ = e.kcp.input(&buf[..len]);
            let _ = e.kcp.update(i);
            while let Ok(n) = e.kcp.recv(&mut out) {
                assert!(n <= out.len());
            }
        }
    }
}
