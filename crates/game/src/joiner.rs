//! The client side of the join handshake.

use latlab_wire::game::{self as msg, JOIN_REQUEST_LEN};

/// How long a [`Joiner`] waits for an answer before it sends its last
/// message again: 200 ms.
pub const RETRANSMIT_NS: u64 = 200_000_000;

/// What a datagram meant to a [`Joiner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinEvent {
    /// The server welcomed us; game packets may flow.
    Joined {
        /// Our slot in the server's table.
        slot: u32,
    },
    /// The server refused us, with a [`RejectReason`](crate::RejectReason)
    /// byte (1 TableFull, 2 BadCookie, 3 Expired, 4 HostFull). Final: to try again, make
    /// a new `Joiner` (with a new nonce).
    Rejected(u8),
    /// A `Challenge` for us: a `JoinConfirm` now waits in
    /// [`Joiner::poll_transmit`].
    Challenged,
    /// Not for us (another nonce or game), not a handshake message, or
    /// nothing new (a duplicate answer, or an answer after the join ended).
    Ignored,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Sending `JoinRequest`s.
    Requesting,
    /// Sending `JoinConfirm`s with this cookie.
    Confirming {
        epoch: u32,
        mac: u64,
    },
    Joined {
        slot: u32,
    },
    Rejected {
        reason: u8,
    },
}

/// The join handshake of one client socket.
///
/// Call order: [`poll_transmit`](Self::poll_transmit) until `None` and send
/// what it wrote to the server; [`handle_datagram`](Self::handle_datagram)
/// for every datagram from the server; [`handle_timeout`](Self::handle_timeout)
/// once `now` reaches [`poll_timeout`](Self::poll_timeout); after each
/// `handle_*`, `poll_transmit` again. The first `poll_transmit` yields the
/// `JoinRequest`. Until joined or rejected, the last message is sent again
/// every [`RETRANSMIT_NS`] without an answer.
#[derive(Clone, Debug)]
pub struct Joiner {
    client_nonce: u64,
    game: u32,
    state: State,
    /// A message of the current state is due.
    transmit_due: bool,
    /// When to send again if nothing arrives (set when a message is sent).
    retransmit_at: Option<u64>,
}

impl Joiner {
    /// A joiner for `game` with a nonce the caller drew at random (it tells
    /// this join apart from others on the same address and guards `Leave`).
    pub fn new(client_nonce: u64, game: u32) -> Joiner {
        Joiner {
            client_nonce,
            game,
            state: State::Requesting,
            transmit_due: true,
            retransmit_at: None,
        }
    }

    /// Writes the message that is due, if any, and returns its length:
    /// a 64-byte `JoinRequest` at start and on retransmit, a 32-byte
    /// `JoinConfirm` after a `Challenge`.
    ///
    /// # Panics
    /// Panics if `buf` is shorter than 64 bytes.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<usize> {
        assert!(
            buf.len() >= JOIN_REQUEST_LEN,
            "Joiner::poll_transmit: buffer under 64 bytes"
        );
        if !self.transmit_due {
            return None;
        }
        let message = match self.state {
            State::Requesting => msg::Repr::JoinRequest {
                client_nonce: self.client_nonce,
                game: self.game,
            },
            State::Confirming { epoch, mac } => msg::Repr::JoinConfirm {
                client_nonce: self.client_nonce,
                game: self.game,
                epoch,
                mac,
            },
            State::Joined { .. } | State::Rejected { .. } => return None,
        };
        self.transmit_due = false;
        self.retransmit_at = Some(now.saturating_add(RETRANSMIT_NS));
        Some(message.emit_bytes(buf))
    }

    /// Takes a datagram from the server: a `Challenge`, `Welcome` or `Reject`
    /// carrying our nonce (and game). Anything else is
    /// [`JoinEvent::Ignored`].
    pub fn handle_datagram(&mut self, _now: u64, data: &[u8]) -> JoinEvent {
        let Ok(message) = msg::Repr::parse_bytes(data) else {
            return JoinEvent::Ignored;
        };
        if message.client_nonce() != self.client_nonce || self.is_finished() {
            return JoinEvent::Ignored;
        }
        match message {
            msg::Repr::Challenge {
                game, epoch, mac, ..
            } if game == self.game => {
                self.state = State::Confirming { epoch, mac };
                self.transmit_due = true;
                JoinEvent::Challenged
            }
            msg::Repr::Welcome { game, slot, .. } if game == self.game => {
                self.state = State::Joined { slot };
                self.retransmit_at = None;
                JoinEvent::Joined { slot }
            }
            msg::Repr::Reject { reason, .. } => {
                let reason = reason as u8;
                self.state = State::Rejected { reason };
                self.retransmit_at = None;
                JoinEvent::Rejected(reason)
            }
            _ => JoinEvent::Ignored,
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due: the retransmit
    /// deadline while a message is outstanding, `None` once joined or
    /// rejected or while a message waits in `poll_transmit`.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.is_finished() || self.transmit_due {
            return None;
        }
        self.retransmit_at
    }

    /// At or after the deadline, makes the last message due again.
    pub fn handle_timeout(&mut self, now: u64) {
        if let Some(at) = self.poll_timeout() {
            if now >= at {
                self.transmit_due = true;
                self.retransmit_at = None;
            }
        }
    }

    /// Whether the server welcomed us.
    pub fn is_joined(&self) -> bool {
        matches!(self.state, State::Joined { .. })
    }

    /// Our slot, once joined.
    pub fn slot(&self) -> Option<u32> {
        match self.state {
            State::Joined { slot } => Some(slot),
            _ => None,
        }
    }

    /// The reject reason byte, once rejected.
    pub fn rejected(&self) -> Option<u8> {
        match self.state {
            State::Rejected { reason } => Some(reason),
            _ => None,
        }
    }

    /// The nonce this joiner was made with.
    pub fn client_nonce(&self) -> u64 {
        self.client_nonce
    }

    /// The game this joiner joins.
    pub fn game(&self) -> u32 {
        self.game
    }

    /// Writes a 20-byte `Leave` for this join into `buf` and returns its
    /// length. The server removes the client only if nonce and game match.
    ///
    /// # Panics
    /// Panics if `buf` is shorter than 20 bytes.
    pub fn write_leave(&self, buf: &mut [u8]) -> usize {
        msg::Repr::Leave {
            client_nonce: self.client_nonce,
            game: self.game,
        }
        .emit_bytes(buf)
    }

    fn is_finished(&self) -> bool {
        matches!(self.state, State::Joined { .. } | State::Rejected { .. })
    }
}
