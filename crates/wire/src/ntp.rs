//! NTPv4 packets (RFC 5905 §7.3): the 48-byte header every NTP datagram starts with, its
//! 32.32 timestamps and their conversion to Unix nanoseconds across eras.
//!
//! Layout (all integers big-endian):
//!
//! | offset | size | field                                               |
//! |-------:|-----:|-----------------------------------------------------|
//! | 0      | 1    | LI (2 bits), VN (3 bits), mode (3 bits)             |
//! | 1      | 1    | stratum (0: kiss-o'-death, 16: unsynchronized)       |
//! | 2      | 1    | poll (log2 s, signed)                               |
//! | 3      | 1    | precision (log2 s, signed)                          |
//! | 4      | 4    | root delay (16.16 s)                                |
//! | 8      | 4    | root dispersion (16.16 s)                           |
//! | 12     | 4    | reference ID (the kiss code at stratum 0)           |
//! | 16     | 8    | reference timestamp                                 |
//! | 24     | 8    | origin timestamp (T1, the client's transmit echoed) |
//! | 32     | 8    | receive timestamp (T2)                              |
//! | 40     | 8    | transmit timestamp (T3)                             |
//! | 48..   |      | extension fields, a MAC: kept, not read             |

use crate::{be, Error, Result};

/// Length of the header; the smallest NTP datagram.
pub const HEADER_LEN: usize = 48;

/// Seconds from the NTP epoch (1900-01-01) to the Unix epoch (1970-01-01).
pub const UNIX_EPOCH_NTP_SECS: u64 = 2_208_988_800;

/// One era: 2^32 seconds, in nanoseconds.
const ERA_NS: i128 = (1i128 << 32) * 1_000_000_000;

mod field {
    use crate::Field;

    pub(crate) const FLAGS: usize = 0;
    pub(crate) const STRATUM: usize = 1;
    pub(crate) const POLL: usize = 2;
    pub(crate) const PRECISION: usize = 3;
    pub(crate) const ROOT_DELAY: Field = 4..8;
    pub(crate) const ROOT_DISPERSION: Field = 8..12;
    pub(crate) const REFERENCE_ID: Field = 12..16;
    pub(crate) const REFERENCE: Field = 16..24;
    pub(crate) const ORIGIN: Field = 24..32;
    pub(crate) const RECEIVE: Field = 32..40;
    pub(crate) const TRANSMIT: Field = 40..48;
}

/// The association mode (RFC 5905 Figure 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// 1: symmetric active.
    SymmetricActive,
    /// 2: symmetric passive.
    SymmetricPassive,
    /// 3: client.
    Client,
    /// 4: server.
    Server,
    /// 5: broadcast.
    Broadcast,
    /// 6: NTP control message.
    Control,
    /// 0 (reserved) or 7 (private use).
    Other(u8),
}

impl From<u8> for Mode {
    fn from(v: u8) -> Mode {
        match v & 7 {
            1 => Mode::SymmetricActive,
            2 => Mode::SymmetricPassive,
            3 => Mode::Client,
            4 => Mode::Server,
            5 => Mode::Broadcast,
            6 => Mode::Control,
            other => Mode::Other(other),
        }
    }
}

impl From<Mode> for u8 {
    fn from(m: Mode) -> u8 {
        match m {
            Mode::SymmetricActive => 1,
            Mode::SymmetricPassive => 2,
            Mode::Client => 3,
            Mode::Server => 4,
            Mode::Broadcast => 5,
            Mode::Control => 6,
            Mode::Other(v) => v & 7,
        }
    }
}

/// A 64-bit NTP timestamp: seconds since the start of its era (32 bits) and a binary
/// fraction of a second (32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The timestamp of `unix_ns` (nanoseconds since the Unix epoch; its era dropped).
    pub fn from_unix_ns(unix_ns: u64) -> Timestamp {
        let secs = unix_ns / 1_000_000_000 + UNIX_EPOCH_NTP_SECS;
        let nanos = unix_ns % 1_000_000_000;
        let frac = (nanos << 32) / 1_000_000_000;
        Timestamp(((secs & 0xffff_ffff) << 32) | frac)
    }

    /// Seconds within the era.
    pub fn seconds(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The fraction of a second, in units of 2^-32 s.
    pub fn fraction(self) -> u32 {
        self.0 as u32
    }

    /// Nanoseconds since the start of its era (the fraction rounded down).
    pub fn era_ns(self) -> u64 {
        self.seconds() as u64 * 1_000_000_000 + ((self.fraction() as u64 * 1_000_000_000) >> 32)
    }

    /// Unix nanoseconds of this timestamp in the era that puts it nearest `pivot_unix_ns`
    /// (RFC 5905 §6: a timestamp names an instant only given a time within 68 years of it);
    /// `None` before 1970 or past `u64` nanoseconds (year 2554).
    pub fn to_unix_ns(self, pivot_unix_ns: u64) -> Option<u64> {
        let epoch = UNIX_EPOCH_NTP_SECS as i128 * 1_000_000_000;
        let pivot = pivot_unix_ns as i128 + epoch; // ns since 1900
        let base = self.era_ns() as i128;
        let era = (pivot - base + ERA_NS / 2).div_euclid(ERA_NS);
        let unix = base + era * ERA_NS - epoch;
        u64::try_from(unix).ok()
    }

    /// `self − earlier` in nanoseconds, as the two differ within half an era (so a difference
    /// across an era's end is right); negative when `self` is earlier.
    pub fn since_ns(self, earlier: Timestamp) -> i64 {
        let diff = self.0.wrapping_sub(earlier.0) as i64 as i128;
        ((diff * 1_000_000_000) >> 32) as i64
    }
}

/// A read/write view of an NTP packet.
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]: the buffer holds at least
/// [`HEADER_LEN`] bytes, so every getter and setter is in bounds.
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

    /// Shorter than [`HEADER_LEN`] → [`Error::Truncated`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Leap indicator: 0 none, 1 last minute has 61 s, 2 has 59 s, 3 unsynchronized.
    pub fn leap(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] >> 6
    }

    /// Version number.
    pub fn version(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 3) & 7
    }

    /// Mode.
    pub fn mode(&self) -> Mode {
        Mode::from(self.buffer.as_ref()[field::FLAGS])
    }

    /// Stratum.
    pub fn stratum(&self) -> u8 {
        self.buffer.as_ref()[field::STRATUM]
    }

    /// Poll interval, log2 seconds.
    pub fn poll(&self) -> i8 {
        self.buffer.as_ref()[field::POLL] as i8
    }

    /// Precision, log2 seconds.
    pub fn precision(&self) -> i8 {
        self.buffer.as_ref()[field::PRECISION] as i8
    }

    /// Root delay, 16.16 seconds.
    pub fn root_delay(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ROOT_DELAY)
    }

    /// Root dispersion, 16.16 seconds.
    pub fn root_dispersion(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ROOT_DISPERSION)
    }

    /// Reference ID: at stratum 0 the kiss code (`RATE`, `DENY`…).
    pub fn reference_id(&self) -> [u8; 4] {
        let mut id = [0u8; 4];
        id.copy_from_slice(&self.buffer.as_ref()[field::REFERENCE_ID]);
        id
    }

    /// Reference timestamp.
    pub fn reference(&self) -> Timestamp {
        Timestamp(be::u64(self.buffer.as_ref(), field::REFERENCE))
    }

    /// Origin timestamp (T1).
    pub fn origin(&self) -> Timestamp {
        Timestamp(be::u64(self.buffer.as_ref(), field::ORIGIN))
    }

    /// Receive timestamp (T2).
    pub fn receive(&self) -> Timestamp {
        Timestamp(be::u64(self.buffer.as_ref(), field::RECEIVE))
    }

    /// Transmit timestamp (T3; a client's T1).
    pub fn transmit(&self) -> Timestamp {
        Timestamp(be::u64(self.buffer.as_ref(), field::TRANSMIT))
    }

    /// What follows the header (extension fields, a MAC), not read.
    pub fn trailer(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets LI, VN and mode.
    pub fn set_flags(&mut self, leap: u8, version: u8, mode: Mode) {
        self.buffer.as_mut()[field::FLAGS] =
            ((leap & 3) << 6) | ((version & 7) << 3) | u8::from(mode);
    }

    /// Sets the stratum.
    pub fn set_stratum(&mut self, v: u8) {
        self.buffer.as_mut()[field::STRATUM] = v;
    }

    /// Sets the poll interval.
    pub fn set_poll(&mut self, v: i8) {
        self.buffer.as_mut()[field::POLL] = v as u8;
    }

    /// Sets the precision.
    pub fn set_precision(&mut self, v: i8) {
        self.buffer.as_mut()[field::PRECISION] = v as u8;
    }

    /// Sets the root delay.
    pub fn set_root_delay(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ROOT_DELAY, v);
    }

    /// Sets the root dispersion.
    pub fn set_root_dispersion(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ROOT_DISPERSION, v);
    }

    /// Sets the reference ID.
    pub fn set_reference_id(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[field::REFERENCE_ID].copy_from_slice(&v);
    }

    /// Sets the reference timestamp.
    pub fn set_reference(&mut self, v: Timestamp) {
        be::set_u64(self.buffer.as_mut(), field::REFERENCE, v.0);
    }

    /// Sets the origin timestamp.
    pub fn set_origin(&mut self, v: Timestamp) {
        be::set_u64(self.buffer.as_mut(), field::ORIGIN, v.0);
    }

    /// Sets the receive timestamp.
    pub fn set_receive(&mut self, v: Timestamp) {
        be::set_u64(self.buffer.as_mut(), field::RECEIVE, v.0);
    }

    /// Sets the transmit timestamp.
    pub fn set_transmit(&mut self, v: Timestamp) {
        be::set_u64(self.buffer.as_mut(), field::TRANSMIT, v.0);
    }
}

/// The header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Leap indicator (3: unsynchronized).
    pub leap: u8,
    /// Version number (4).
    pub version: u8,
    /// Mode.
    pub mode: Mode,
    /// Stratum.
    pub stratum: u8,
    /// Poll, log2 s.
    pub poll: i8,
    /// Precision, log2 s.
    pub precision: i8,
    /// Root delay, 16.16 s.
    pub root_delay: u32,
    /// Root dispersion, 16.16 s.
    pub root_dispersion: u32,
    /// Reference ID or kiss code.
    pub reference_id: [u8; 4],
    /// Reference timestamp.
    pub reference: Timestamp,
    /// Origin timestamp (T1).
    pub origin: Timestamp,
    /// Receive timestamp (T2).
    pub receive: Timestamp,
    /// Transmit timestamp (T3).
    pub transmit: Timestamp,
}

impl Repr {
    /// A client request (LI 0, VN 4, mode 3) whose transmit timestamp is `transmit`,
    /// everything else zero.
    pub fn client(transmit: Timestamp) -> Repr {
        Repr {
            leap: 0,
            version: 4,
            mode: Mode::Client,
            stratum: 0,
            poll: 0,
            precision: 0,
            root_delay: 0,
            root_dispersion: 0,
            reference_id: [0; 4],
            reference: Timestamp(0),
            origin: Timestamp(0),
            receive: Timestamp(0),
            transmit,
        }
    }

    /// Reads the header of `packet`: [`Error::Truncated`] below 48 bytes,
    /// [`Error::UnsupportedVersion`] for a version other than 1 to 4. What follows the header
    /// is tolerated.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if !(1..=4).contains(&packet.version()) {
            return Err(Error::UnsupportedVersion);
        }
        Ok(Repr {
            leap: packet.leap(),
            version: packet.version(),
            mode: packet.mode(),
            stratum: packet.stratum(),
            poll: packet.poll(),
            precision: packet.precision(),
            root_delay: packet.root_delay(),
            root_dispersion: packet.root_dispersion(),
            reference_id: packet.reference_id(),
            reference: packet.reference(),
            origin: packet.origin(),
            receive: packet.receive(),
            transmit: packet.transmit(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into the first 48 bytes of `packet` (panics on a shorter buffer).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_flags(self.leap, self.version, self.mode);
        packet.set_stratum(self.stratum);
        packet.set_poll(self.poll);
        packet.set_precision(self.precision);
        packet.set_root_delay(self.root_delay);
        packet.set_root_dispersion(self.root_dispersion);
        packet.set_reference_id(self.reference_id);
        packet.set_reference(self.reference);
        packet.set_origin(self.origin);
        packet.set_receive(self.receive);
        packet.set_transmit(self.transmit);
    }
}

#[cfg(test)]
mod tests;
