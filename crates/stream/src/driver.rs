//! The one socket driver of every transport that has a sans-IO side (`udp`, `latlab`, `kcp`,
//! `quic`): a [`Side`] over a [`CountingSocket`] (io's `DatagramPort`), as the stream command's
//! [`Endpoint`]. The virtual-time driver of the same sides is `stream::sim`.
//!
//! The side's time is nanoseconds since the driver's `base` instant (monotonic); what the side
//! puts in its outbox goes out at once, and the wait in [`Endpoint::poll`] ends at the side's
//! own next timer.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::endpoint::Endpoint;
use super::side::Side;
use super::wire::{CountingSocket, WireCounts};

/// How long a sender's poll waits at most while its handshake goes on.
const HANDSHAKE_POLL: Duration = Duration::from_millis(5);

/// A sans-IO side driven over a socket.
pub(crate) struct Driver {
    side: Box<dyn Side>,
    socket: CountingSocket,
    base: Instant,
    rx: Vec<u8>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Drives `side`, whose time 0 is `base`, over `socket`.
    pub(crate) fn new(side: Box<dyn Side>, socket: CountingSocket, base: Instant) -> Driver {
        Driver {
            side,
            socket,
            base,
            rx: vec![0; 65_536],
        }
    }

    /// Polls until the side's handshake with `target` has ended, at most `timeout`; `name`
    /// is the transport's, for the errors.
    pub(crate) fn connected(
        mut self,
        name: &str,
        target: SocketAddr,
        timeout: Duration,
    ) -> io::Result<Driver> {
        let until = Instant::now() + timeout;
        while !self.side.is_connected() {
            if let Some(why) = self.side.handshake_failure() {
                return Err(io::Error::other(why));
            }
            if Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name}: no connection to {target} within {}",
                        latlab_lab::units::format_duration(timeout)
                    ),
                ));
            }
            self.poll(HANDSHAKE_POLL, &mut |_| {})?;
        }
        Ok(self)
    }

    /// The side's time now.
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Sends everything in the side's outbox.
    fn transmit(&mut self) -> io::Result<()> {
        while let Some((to, datagram)) = self.side.boxes().outbox.pop_front() {
            self.socket.send_to(&datagram, to)?;
        }
        Ok(())
    }
}

impl Endpoint for Driver {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        let now = self.now();
        self.side.send(now, message)?;
        self.transmit()
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let now = self.now();
        if self.side.poll_timeout().is_some_and(|at| at <= now) {
            self.side.handle_timeout(now);
        }
        self.transmit()?;
        let wait = match self.side.poll_timeout() {
            Some(at) => wait.min(Duration::from_nanos(at.saturating_sub(now))),
            None => wait,
        };
        if self.socket.wait(wait)? {
            while let Some((n, from)) = self.socket.recv_from(&mut self.rx)? {
                let now = self.now();
                self.side.handle_datagram(now, from, &self.rx[..n]);
                // Answers (handshakes, acknowledgements) go at once, as the datagrams come.
                self.transmit()?;
            }
        }
        let now = self.now();
        if self.side.poll_timeout().is_some_and(|at| at <= now) {
            self.side.handle_timeout(now);
        }
        while let Some(message) = self.side.boxes().inbox.pop_front() {
            deliver(&message);
        }
        self.transmit()
    }

    fn wire(&mut self) -> WireCounts {
        let (retransmissions, spurious) = self.side.retransmissions();
        WireCounts {
            retransmissions,
            spurious_retransmissions: spurious,
            ..self.socket.sent()
        }
    }

    fn foreign(&self) -> u64 {
        self.side.foreign()
    }

    fn close(&mut self) {
        let now = self.now();
        self.side.close(now);
        let _ = self.transmit();
    }
}
