//! The latlab game handshake: how a client joins and leaves the model game
//! server (`latlab-game`) and proves that it owns its address.
//!
//! Game *traffic* is latlab probes ([`crate::probe`]); this module covers only
//! the handshake messages around it. Every message starts with an 8-byte
//! header; all integers are big-endian.
//!
//! | offset | size | field                      |
//! |-------:|-----:|----------------------------|
//! | 0      | 4    | magic `"LLGM"`             |
//! | 4      | 1    | version (1)                |
//! | 5      | 1    | type ([`MessageType`])     |
//! | 6      | 2    | reserved, 0                |
//!
//! The body depends on the type:
//!
//! | type | message        | direction | bytes 8.. (offset: field)                                         | length |
//! |-----:|----------------|-----------|-------------------------------------------------------------------|-------:|
//! | 1    | `JoinRequest`  | c → s     | 8: client_nonce u64, 16: game u32, 20..64: zero padding           | 64     |
//! | 2    | `Challenge`    | s → c     | 8: client_nonce u64, 16: game u32, 20: epoch u32, 24: mac u64     | 32     |
//! | 3    | `JoinConfirm`  | c → s     | same as `Challenge` (echoes epoch and mac)                        | 32     |
//! | 4    | `Welcome`      | s → c     | 8: client_nonce u64, 16: game u32, 20: slot u32                   | 24     |
//! | 5    | `Reject`       | s → c     | 8: client_nonce u64, 16: reason u8 ([`RejectReason`]), 17..24: 0  | 24     |
//! | 6    | `Leave`        | c → s     | 8: client_nonce u64, 16: game u32                                 | 20     |
//!
//! A `JoinRequest` is padded to [`JOIN_REQUEST_LEN`] bytes so that the
//! server's answer (a 32-byte `Challenge`) is never longer than the request
//! that caused it: a spoofed request cannot be used to amplify traffic
//! towards a victim.
//!
//! # Canonical form
//!
//! Reserved bytes, the `JoinRequest` padding and bytes 17..24 of a `Reject`
//! must be zero; [`Repr::parse`] refuses anything else, so a parsed message
//! re-emits to exactly the bytes it was parsed from (its first
//! [`Repr::buffer_len`] bytes). Bytes past a message's length are ignored.

use crate::{be, Error, Result};

/// The four bytes every game handshake message starts with.
pub const MAGIC: [u8; 4] = *b"LLGM";

/// The only version of the handshake this crate reads and writes.
pub const VERSION: u8 = 1;

/// Length of the common header (magic, version, type, reserved).
pub const HEADER_LEN: usize = 8;

/// Length a `JoinRequest` datagram is padded to; shorter ones are refused.
pub const JOIN_REQUEST_LEN: usize = 64;

/// Length of a `Challenge` and of a `JoinConfirm`.
pub const CHALLENGE_LEN: usize = 32;

/// Length of a `Welcome`.
pub const WELCOME_LEN: usize = 24;

/// Length of a `Reject`.
pub const REJECT_LEN: usize = 24;

/// Length of a `Leave`.
pub const LEAVE_LEN: usize = 20;

/// Longest message a server sends (a `Challenge`): a buffer this long fits
/// every server answer.
pub const MAX_ANSWER_LEN: usize = CHALLENGE_LEN;

// Anti-amplification, checked at compile time: every answer fits in
// MAX_ANSWER_LEN, which is no longer than the shortest message that causes
// one (a JoinConfirm causes a Welcome or a Reject, a JoinRequest a Challenge).
const _: () = assert!(
    WELCOME_LEN <= MAX_ANSWER_LEN
        && REJECT_LEN <= MAX_ANSWER_LEN
        && CHALLENGE_LEN <= MAX_ANSWER_LEN
        && WELCOME_LEN <= CHALLENGE_LEN
        && REJECT_LEN <= CHALLENGE_LEN
        && CHALLENGE_LEN <= JOIN_REQUEST_LEN
);

mod field {
    use crate::Field;

    pub(crate) const MAGIC: Field = 0..4;
    pub(crate) const VERSION: usize = 4;
    pub(crate) const TYPE: usize = 5;
    pub(crate) const RESERVED: Field = 6..8;
    pub(crate) const CLIENT_NONCE: Field = 8..16;
    pub(crate) const GAME: Field = 16..20;
    pub(crate) const REASON: usize = 16;
    pub(crate) const REJECT_ZERO: Field = 17..24;
    pub(crate) const EPOCH: Field = 20..24;
    pub(crate) const SLOT: Field = 20..24;
    pub(crate) const MAC: Field = 24..32;
    pub(crate) const JOIN_PADDING: Field = 20..64;
}

/// The type byte of a handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// Client → server: "I want to join `game`".
    JoinRequest = 1,
    /// Server → client: a cookie bound to the client's address.
    Challenge = 2,
    /// Client → server: the cookie echoed from the client's address.
    JoinConfirm = 3,
    /// Server → client: the client is in the table.
    Welcome = 4,
    /// Server → client: the join failed.
    Reject = 5,
    /// Client → server: remove me from the table.
    Leave = 6,
}

impl MessageType {
    /// The type named by a type byte, `None` for unknown values.
    pub const fn from_u8(value: u8) -> Option<MessageType> {
        match value {
            1 => Some(MessageType::JoinRequest),
            2 => Some(MessageType::Challenge),
            3 => Some(MessageType::JoinConfirm),
            4 => Some(MessageType::Welcome),
            5 => Some(MessageType::Reject),
            6 => Some(MessageType::Leave),
            _ => None,
        }
    }

    /// Length of a message of this type, padding included.
    pub const fn message_len(self) -> usize {
        match self {
            MessageType::JoinRequest => JOIN_REQUEST_LEN,
            MessageType::Challenge | MessageType::JoinConfirm => CHALLENGE_LEN,
            MessageType::Welcome => WELCOME_LEN,
            MessageType::Reject => REJECT_LEN,
            MessageType::Leave => LEAVE_LEN,
        }
    }
}

/// Why a server refused a join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RejectReason {
    /// The client table is full.
    TableFull = 1,
    /// The cookie did not verify. Defined for completeness: the reference
    /// server never answers a forged cookie.
    BadCookie = 2,
    /// The cookie verified but its epoch is too old; ask for a new one.
    Expired = 3,
    /// The client's host (its IPv4 address, or IPv6 /64) already holds as many clients as
    /// the server allows one host; the table itself may have room.
    HostFull = 4,
}

impl RejectReason {
    /// The reason named by a reason byte, `None` for unknown values.
    pub const fn from_u8(value: u8) -> Option<RejectReason> {
        match value {
            1 => Some(RejectReason::TableFull),
            2 => Some(RejectReason::BadCookie),
            3 => Some(RejectReason::Expired),
            4 => Some(RejectReason::HostFull),
            _ => None,
        }
    }
}

/// Cheap test whether `bytes` starts with [`MAGIC`], i.e. is meant to be a
/// game handshake message rather than a probe. Unlike
/// [`probe::is_probe`](crate::probe::is_probe), `true` does *not* promise
/// that [`Repr::parse`] succeeds.
pub fn is_game_message(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && bytes[field::MAGIC] == MAGIC
}

/// The type of a message whose magic and version are right, read without
/// checking anything past the type byte: `None` if `bytes` is not a version-1
/// game message or names an unknown type. Lets a server tell a short
/// `JoinRequest` from other garbage.
pub fn message_type(bytes: &[u8]) -> Option<MessageType> {
    if bytes.len() <= field::TYPE || !is_game_message(bytes) || bytes[field::VERSION] != VERSION {
        return None;
    }
    MessageType::from_u8(bytes[field::TYPE])
}

/// A read/write view of a game handshake message.
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]: the
/// buffer is at least [`HEADER_LEN`] bytes and, if the type byte names a
/// known type, at least that type's [`MessageType::message_len`], so every
/// getter and setter *of a field that type has* is in bounds. Getters of
/// fields the type does not have (`mac` of a `Welcome`) may panic. Magic,
/// version and reserved bytes are *not* checked there; [`Repr::parse`]
/// checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Buffer shorter than [`HEADER_LEN`], or shorter than the length of the
    /// type its type byte names → [`Error::Truncated`]; unknown type →
    /// [`Error::Malformed`].
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let ty = self.message_type().ok_or(Error::Malformed)?;
        if len < ty.message_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The magic bytes (should be [`MAGIC`]).
    pub fn magic(&self) -> [u8; 4] {
        let mut m = [0u8; 4];
        m.copy_from_slice(&self.buffer.as_ref()[field::MAGIC]);
        m
    }

    /// Version (should be [`VERSION`]).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Raw type byte.
    pub fn type_byte(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The type the type byte names, `None` if unknown.
    pub fn message_type(&self) -> Option<MessageType> {
        MessageType::from_u8(self.type_byte())
    }

    /// Reserved header bytes 6..8 (should be 0).
    pub fn reserved(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::RESERVED)
    }

    /// Nonce the client drew for this join attempt (all types).
    pub fn client_nonce(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::CLIENT_NONCE)
    }

    /// Game number (all types but `Reject`).
    pub fn game(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::GAME)
    }

    /// Cookie epoch (`Challenge`, `JoinConfirm`).
    pub fn epoch(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::EPOCH)
    }

    /// Cookie MAC (`Challenge`, `JoinConfirm`).
    pub fn mac(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::MAC)
    }

    /// Slot the server gave the client (`Welcome`).
    pub fn slot(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::SLOT)
    }

    /// Raw reason byte (`Reject`).
    pub fn reason(&self) -> u8 {
        self.buffer.as_ref()[field::REASON]
    }

    /// Whether bytes that must be zero for this type are zero: the
    /// `JoinRequest` padding (20..64) and `Reject` bytes 17..24. Always
    /// `true` for other types.
    pub fn body_padding_is_zero(&self) -> bool {
        let buf = self.buffer.as_ref();
        match self.message_type() {
            Some(MessageType::JoinRequest) => buf[field::JOIN_PADDING].iter().all(|&b| b == 0),
            Some(MessageType::Reject) => buf[field::REJECT_ZERO].iter().all(|&b| b == 0),
            _ => true,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes [`MAGIC`].
    pub fn set_magic(&mut self) {
        self.buffer.as_mut()[field::MAGIC].copy_from_slice(&MAGIC);
    }

    /// Sets the version byte.
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION] = value;
    }

    /// Sets the type byte.
    pub fn set_message_type(&mut self, value: MessageType) {
        self.buffer.as_mut()[field::TYPE] = value as u8;
    }

    /// Sets the reserved header bytes.
    pub fn set_reserved(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::RESERVED, value);
    }

    /// Sets the client nonce.
    pub fn set_client_nonce(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::CLIENT_NONCE, value);
    }

    /// Sets the game number.
    pub fn set_game(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::GAME, value);
    }

    /// Sets the cookie epoch.
    pub fn set_epoch(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::EPOCH, value);
    }

    /// Sets the cookie MAC.
    pub fn set_mac(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::MAC, value);
    }

    /// Sets the slot.
    pub fn set_slot(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::SLOT, value);
    }

    /// Sets the reason byte.
    pub fn set_reason(&mut self, value: RejectReason) {
        self.buffer.as_mut()[field::REASON] = value as u8;
    }

    /// Zeroes the `JoinRequest` padding (bytes 20..64).
    pub fn clear_join_padding(&mut self) {
        self.buffer.as_mut()[field::JOIN_PADDING].fill(0);
    }

    /// Zeroes `Reject` bytes 17..24.
    pub fn clear_reject_padding(&mut self) {
        self.buffer.as_mut()[field::REJECT_ZERO].fill(0);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A game handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// Client → server, padded to [`JOIN_REQUEST_LEN`].
    JoinRequest {
        /// Drawn at random by the client per join attempt.
        client_nonce: u64,
        /// The game the client wants to join.
        game: u32,
    },
    /// Server → client: a cookie for the address the request came from.
    Challenge {
        /// Echoed from the request.
        client_nonce: u64,
        /// Echoed from the request.
        game: u32,
        /// Server cookie epoch the MAC was made in.
        epoch: u32,
        /// MAC over the client's address, epoch, nonce and game.
        mac: u64,
    },
    /// Client → server: the `Challenge` fields echoed unchanged.
    JoinConfirm {
        /// As in the `Challenge`.
        client_nonce: u64,
        /// As in the `Challenge`.
        game: u32,
        /// As in the `Challenge`.
        epoch: u32,
        /// As in the `Challenge`.
        mac: u64,
    },
    /// Server → client: joined.
    Welcome {
        /// Echoed from the confirm.
        client_nonce: u64,
        /// The game joined.
        game: u32,
        /// The client's slot in the server's table.
        slot: u32,
    },
    /// Server → client: not joined.
    Reject {
        /// Echoed from the confirm.
        client_nonce: u64,
        /// Why.
        reason: RejectReason,
    },
    /// Client → server: leave the game.
    Leave {
        /// The nonce the client joined with.
        client_nonce: u64,
        /// The game it joined.
        game: u32,
    },
}

impl Repr {
    /// Parses a handshake message.
    ///
    /// Errors, in the order checked: buffer shorter than [`HEADER_LEN`] →
    /// [`Error::Truncated`]; magic ≠ [`MAGIC`] → [`Error::BadMagic`];
    /// version ≠ [`VERSION`] → [`Error::UnsupportedVersion`]; unknown type →
    /// [`Error::Malformed`]; buffer shorter than the type's length →
    /// [`Error::Truncated`]; non-zero reserved bytes, non-zero padding or an
    /// unknown reject reason → [`Error::Malformed`]. Bytes past the type's
    /// length are ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        if packet.version() != VERSION {
            return Err(Error::UnsupportedVersion);
        }
        packet.check_len()?;
        if packet.reserved() != 0 || !packet.body_padding_is_zero() {
            return Err(Error::Malformed);
        }
        // check_len succeeded, so the type is known.
        let ty = packet.message_type().ok_or(Error::Malformed)?;
        let client_nonce = packet.client_nonce();
        Ok(match ty {
            MessageType::JoinRequest => Repr::JoinRequest {
                client_nonce,
                game: packet.game(),
            },
            MessageType::Challenge => Repr::Challenge {
                client_nonce,
                game: packet.game(),
                epoch: packet.epoch(),
                mac: packet.mac(),
            },
            MessageType::JoinConfirm => Repr::JoinConfirm {
                client_nonce,
                game: packet.game(),
                epoch: packet.epoch(),
                mac: packet.mac(),
            },
            MessageType::Welcome => Repr::Welcome {
                client_nonce,
                game: packet.game(),
                slot: packet.slot(),
            },
            MessageType::Reject => Repr::Reject {
                client_nonce,
                reason: RejectReason::from_u8(packet.reason()).ok_or(Error::Malformed)?,
            },
            MessageType::Leave => Repr::Leave {
                client_nonce,
                game: packet.game(),
            },
        })
    }

    /// Parses a message straight from datagram bytes.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Repr> {
        Repr::parse(&Packet::new_unchecked(bytes))
    }

    /// The message's type.
    pub const fn message_type(&self) -> MessageType {
        match self {
            Repr::JoinRequest { .. } => MessageType::JoinRequest,
            Repr::Challenge { .. } => MessageType::Challenge,
            Repr::JoinConfirm { .. } => MessageType::JoinConfirm,
            Repr::Welcome { .. } => MessageType::Welcome,
            Repr::Reject { .. } => MessageType::Reject,
            Repr::Leave { .. } => MessageType::Leave,
        }
    }

    /// The nonce every message carries.
    pub const fn client_nonce(&self) -> u64 {
        match *self {
            Repr::JoinRequest { client_nonce, .. }
            | Repr::Challenge { client_nonce, .. }
            | Repr::JoinConfirm { client_nonce, .. }
            | Repr::Welcome { client_nonce, .. }
            | Repr::Reject { client_nonce, .. }
            | Repr::Leave { client_nonce, .. } => client_nonce,
        }
    }

    /// Bytes [`emit`](Self::emit) writes, which is the datagram length to
    /// send: 64 for a `JoinRequest` (padding included), 32, 32, 24, 24, 20.
    pub const fn buffer_len(&self) -> usize {
        self.message_type().message_len()
    }

    /// Writes the whole message: header, fields, zeroed reserved bytes and
    /// padding. Bytes past [`buffer_len`](Self::buffer_len) are not touched.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        assert!(
            packet.buffer.as_ref().len() >= self.buffer_len(),
            "game::Repr::emit: buffer shorter than buffer_len()"
        );
        packet.set_magic();
        packet.set_version(VERSION);
        packet.set_message_type(self.message_type());
        packet.set_reserved(0);
        packet.set_client_nonce(self.client_nonce());
        match *self {
            Repr::JoinRequest { game, .. } => {
                packet.set_game(game);
                packet.clear_join_padding();
            }
            Repr::Challenge {
                game, epoch, mac, ..
            }
            | Repr::JoinConfirm {
                game, epoch, mac, ..
            } => {
                packet.set_game(game);
                packet.set_epoch(epoch);
                packet.set_mac(mac);
            }
            Repr::Welcome { game, slot, .. } => {
                packet.set_game(game);
                packet.set_slot(slot);
            }
            Repr::Reject { reason, .. } => {
                packet.set_reason(reason);
                packet.clear_reject_padding();
            }
            Repr::Leave { game, .. } => packet.set_game(game),
        }
    }

    /// Emits into the front of `buf` and returns the length written
    /// ([`buffer_len`](Self::buffer_len)).
    ///
    /// # Panics
    /// Panics if `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit_bytes(&self, buf: &mut [u8]) -> usize {
        self.emit(&mut Packet::new_unchecked(&mut *buf));
        self.buffer_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: u64 = 0x0102_0304_0506_0708;

    const JOIN_REQUEST: [u8; 64] = {
        let mut b = [0u8; 64];
        let head = [
            0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x01, 0x00, 0x00, // LLGM v1 type 1
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
            0x00, 0x00, 0x00, 0x07, // game 7
        ];
        let mut i = 0;
        while i < head.len() {
            b[i] = head[i];
            i += 1;
        }
        b
    };

    const CHALLENGE: [u8; 32] = [
        0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x02, 0x00, 0x00, // LLGM v1 type 2
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
        0x00, 0x00, 0x00, 0x07, // game 7
        0x00, 0x00, 0x01, 0x2c, // epoch 300
        0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xf0, 0x0d, // mac
    ];

    const JOIN_CONFIRM: [u8; 32] = [
        0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x03, 0x00, 0x00, // LLGM v1 type 3
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
        0x00, 0x00, 0x00, 0x07, // game 7
        0x00, 0x00, 0x01, 0x2c, // epoch 300
        0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xf0, 0x0d, // mac
    ];

    const WELCOME: [u8; 24] = [
        0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x04, 0x00, 0x00, // LLGM v1 type 4
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
        0x00, 0x00, 0x00, 0x07, // game 7
        0x00, 0x00, 0x00, 0x03, // slot 3
    ];

    const REJECT: [u8; 24] = [
        0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x05, 0x00, 0x00, // LLGM v1 type 5
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // TableFull, zero
    ];

    const LEAVE: [u8; 20] = [
        0x4c, 0x4c, 0x47, 0x4d, 0x01, 0x06, 0x00, 0x00, // LLGM v1 type 6
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // client_nonce
        0x00, 0x00, 0x00, 0x07, // game 7
    ];

    /// Every golden message with the `Repr` it encodes.
    fn goldens() -> [(&'static [u8], Repr); 6] {
        [
            (
                &JOIN_REQUEST,
                Repr::JoinRequest {
                    client_nonce: NONCE,
                    game: 7,
                },
            ),
            (
                &CHALLENGE,
                Repr::Challenge {
                    client_nonce: NONCE,
                    game: 7,
                    epoch: 300,
                    mac: 0xdead_beef_cafe_f00d,
                },
            ),
            (
                &JOIN_CONFIRM,
                Repr::JoinConfirm {
                    client_nonce: NONCE,
                    game: 7,
                    epoch: 300,
                    mac: 0xdead_beef_cafe_f00d,
                },
            ),
            (
                &WELCOME,
                Repr::Welcome {
                    client_nonce: NONCE,
                    game: 7,
                    slot: 3,
                },
            ),
            (
                &REJECT,
                Repr::Reject {
                    client_nonce: NONCE,
                    reason: RejectReason::TableFull,
                },
            ),
            (
                &LEAVE,
                Repr::Leave {
                    client_nonce: NONCE,
                    game: 7,
                },
            ),
        ]
    }

    #[test]
    fn golden_messages_parse() {
        for (bytes, repr) in goldens() {
            assert!(is_game_message(bytes));
            assert_eq!(message_type(bytes), Some(repr.message_type()));
            assert_eq!(bytes.len(), repr.buffer_len());
            assert_eq!(Repr::parse_bytes(bytes), Ok(repr), "{repr:?}");
        }
    }

    #[test]
    fn golden_messages_emit() {
        for (bytes, repr) in goldens() {
            let mut buf = [0xa5u8; 80];
            let n = repr.emit_bytes(&mut buf);
            assert_eq!(&buf[..n], bytes, "{repr:?}");
            assert!(
                buf[n..].iter().all(|&b| b == 0xa5),
                "emit wrote past its length"
            );
        }
    }

    #[test]
    fn view_getters_read_the_golden_fields() {
        let p = Packet::new_checked(&CHALLENGE[..]).unwrap();
        assert_eq!(p.magic(), MAGIC);
        assert_eq!(p.version(), VERSION);
        assert_eq!(p.message_type(), Some(MessageType::Challenge));
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.client_nonce(), NONCE);
        assert_eq!(p.game(), 7);
        assert_eq!(p.epoch(), 300);
        assert_eq!(p.mac(), 0xdead_beef_cafe_f00d);
        let p = Packet::new_checked(&WELCOME[..]).unwrap();
        assert_eq!(p.slot(), 3);
        let p = Packet::new_checked(&REJECT[..]).unwrap();
        assert_eq!(p.reason(), RejectReason::TableFull as u8);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for (bytes, repr) in goldens() {
            for len in 0..bytes.len() {
                assert_eq!(
                    Repr::parse_bytes(&bytes[..len]),
                    Err(Error::Truncated),
                    "{repr:?} cut to {len}"
                );
                if len < HEADER_LEN {
                    assert_eq!(Packet::new_checked(&bytes[..len]), Err(Error::Truncated));
                }
            }
        }
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        for (bytes, repr) in goldens() {
            let mut long = bytes.to_vec();
            long.extend_from_slice(&[0xff; 9]);
            assert_eq!(Repr::parse_bytes(&long), Ok(repr));
        }
    }

    #[test]
    fn rejects_bad_fields() {
        let check = |golden: &[u8], at: usize, value: u8, want: Error| {
            let mut buf = golden.to_vec();
            buf[at] = value;
            assert_eq!(Repr::parse_bytes(&buf), Err(want), "byte {at} = {value}");
        };
        check(&WELCOME, 0, b'X', Error::BadMagic);
        check(&WELCOME, 3, b'B', Error::BadMagic);
        check(&WELCOME, 4, 0, Error::UnsupportedVersion);
        check(&WELCOME, 4, 2, Error::UnsupportedVersion);
        check(&WELCOME, 5, 0, Error::Malformed);
        check(&WELCOME, 5, 7, Error::Malformed);
        check(&WELCOME, 6, 1, Error::Malformed);
        check(&WELCOME, 7, 1, Error::Malformed);
        check(&REJECT, 16, 0, Error::Malformed);
        check(&REJECT, 16, 5, Error::Malformed);
        check(&REJECT, 23, 1, Error::Malformed);
        check(&JOIN_REQUEST, 20, 1, Error::Malformed);
        check(&JOIN_REQUEST, 63, 1, Error::Malformed);
        // A Welcome relabelled as a Challenge is now too short.
        check(&WELCOME, 5, 2, Error::Truncated);
        assert!(!is_game_message(b"LLG"));
        assert!(!is_game_message(b"LLPB\x01\x01\x00\x38"));
        assert_eq!(message_type(b"LLGM\x01"), None);
        assert_eq!(message_type(b"LLGM\x02\x01"), None);
        assert_eq!(
            message_type(b"LLGM\x01\x01"),
            Some(MessageType::JoinRequest)
        );
    }

    #[test]
    fn roundtrip_many() {
        let mut rng = crate::testutil::XorShift(0x6a3e);
        let reasons = [
            RejectReason::TableFull,
            RejectReason::BadCookie,
            RejectReason::Expired,
            RejectReason::HostFull,
        ];
        for _ in 0..6000 {
            let (nonce, a, b, c) = (
                rng.next_u64(),
                rng.next_u64() as u32,
                rng.next_u64() as u32,
                rng.next_u64(),
            );
            let repr = match rng.next_u64() % 6 {
                0 => Repr::JoinRequest {
                    client_nonce: nonce,
                    game: a,
                },
                1 => Repr::Challenge {
                    client_nonce: nonce,
                    game: a,
                    epoch: b,
                    mac: c,
                },
                2 => Repr::JoinConfirm {
                    client_nonce: nonce,
                    game: a,
                    epoch: b,
                    mac: c,
                },
                3 => Repr::Welcome {
                    client_nonce: nonce,
                    game: a,
                    slot: b,
                },
                4 => Repr::Reject {
                    client_nonce: nonce,
                    reason: reasons[(c % reasons.len() as u64) as usize],
                },
                _ => Repr::Leave {
                    client_nonce: nonce,
                    game: a,
                },
            };
            let mut buf = [0xffu8; 64];
            let n = repr.emit_bytes(&mut buf);
            assert_eq!(Repr::parse_bytes(&buf[..n]), Ok(repr));
            assert_eq!(message_type(&buf), Some(repr.message_type()));
        }
    }

    #[test]
    fn random_inputs_never_panic() {
        crate::testutil::random_inputs(0x9a3e, &JOIN_CONFIRM[..8], |buf| {
            let _ = message_type(buf);
            let parsed = Repr::parse_bytes(buf);
            if parsed.is_ok() {
                assert!(is_game_message(buf));
            }
            if let Ok(repr) = parsed {
                let mut out = buf.to_vec();
                let n = repr.emit_bytes(&mut out);
                assert_eq!(&out[..n], &buf[..n]);
            }
            if let Ok(mut packet) = Packet::new_checked(&mut *buf) {
                let _ = packet.client_nonce();
                packet.set_client_nonce(1);
            }
        });
    }
}
