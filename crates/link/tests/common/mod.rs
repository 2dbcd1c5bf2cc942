//! Frames the link's virtual-time tests send: Ethernet + IPv4 + UDP with a TOS byte (its low
//! bits the ECN field) and a number of the test's own in the payload.

use latlab_wire::checksum;

/// An Ethernet + IPv4 + UDP frame of `len` bytes (at least 50) from port `sport`, with TOS
/// `tos` and `number` (an arrival time, a sequence number) in the payload (bytes 42..50).
pub(crate) fn frame(len: usize, sport: u16, tos: u8, number: u64) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend([0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    f.extend([0x45, tos]);
    f.extend(ip_len.to_be_bytes());
    f.extend([0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(sport.to_be_bytes());
    f.extend([0x69, 0x87]);
    f.extend((ip_len - 20).to_be_bytes());
    f.extend([0, 0]);
    f.extend(number.to_be_bytes());
    f.resize(len, 0);
    let sum = checksum::internet(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

/// The number [`frame`] wrote.
pub(crate) fn number_of(frame: &[u8]) -> u64 {
    // Every frame the tests send has bytes 42..50.
    u64::from_be_bytes(frame[42..50].try_into().unwrap())
}

/// The UDP source port.
pub(crate) fn sport_of(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[34], frame[35]])
}
