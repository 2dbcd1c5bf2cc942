//! Frames as a wire would carry them, from what a sending kernel hands over with its offloads
//! on.
//!
//! A Linux sender on a veth (or any device that advertises checksum and segmentation offload)
//! leaves the TCP/UDP checksum for "the hardware" to finish (the checksum field holds only the
//! pseudo-header's sum) and hands over TCP segments of up to 64 KiB, to be cut to the MSS by
//! the device. A kernel that receives such a frame knows it from the socket buffer's metadata;
//! a layer-2 bridge in user space gets the same metadata as a `virtio_net_hdr`
//! ([`Offload::from_virtio`], AF_PACKET's `PACKET_VNET_HDR`), or nothing at all (AF_XDP). This
//! module does in software what the device would have done:
//!
//! - [`Finisher::finish`]: a frame with its [`Offload`] (and the 802.1Q tag AF_PACKET took
//!   out of band, [`VlanTag`]) becomes the frames a NIC would have sent: the tag back in
//!   place, the checksum finished, a super-frame cut into segments of `gso_size` payload bytes
//!   (TCP over IPv4 and IPv6: sequence numbers, IPv4 ids, lengths and both checksums
//!   rewritten, FIN and PSH only on the last segment, CWR only on the first; UDP GSO: one
//!   datagram per segment);
//! - [`finish_unfinished_checksum`]: for frames without metadata, a TCP/UDP checksum that holds
//!   exactly the pseudo-header's sum (what an offloading sender leaves) is finished; any other
//!   checksum, right or wrong, is left as it is, since a bridge forwards what it is given.
//!
//! Guarantees: nothing here panics on any input bytes or metadata; a frame this module cannot
//! make sense of is refused with an [`Error`] (the caller counts it), never emitted half-done.
//! Checksums use [`crate::checksum`].

use crate::checksum;
use crate::{Error, Result};

/// Bytes of a `virtio_net_hdr` (without the `num_buffers` field of the mergeable variant).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum from `csum_start` on is to be finished.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_*` values of `gso_type`.
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q customer tag.
pub const TPID_8021Q: u16 = 0x8100;
/// 802.1ad service tag (the outer tag of QinQ).
pub const TPID_8021AD: u16 = 0x88a8;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
/// The shortest TCP header (data offset 5).
const TCP_HEADER_MIN: usize = 20;

/// How a super-frame is to be cut into wire frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segmentation {
    /// TCP over IPv4 (`VIRTIO_NET_HDR_GSO_TCPV4`).
    Tcp4,
    /// TCP over IPv6 (`VIRTIO_NET_HDR_GSO_TCPV6`).
    Tcp6,
    /// UDP GSO (`VIRTIO_NET_HDR_GSO_UDP_L4`): one datagram per segment, IPv4 or IPv6.
    Udp,
}

/// What a sending kernel left for the device to do with one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    /// The checksum to finish: the sum runs from `start` (bytes from the start of the frame,
    /// without the out-of-band VLAN tag) to the end and goes at `start + offset`.
    pub checksum: Option<ChecksumAt>,
    /// How to segment, and the payload bytes per segment (at least 1).
    pub segmentation: Option<(Segmentation, u16)>,
}

/// Where an unfinished checksum starts and where its field is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChecksumAt {
    /// First byte summed (the transport header), from the start of the frame.
    pub start: u16,
    /// The checksum field, from `start`.
    pub offset: u16,
}

/// An 802.1Q/802.1ad tag to put back after the MAC addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    /// [`TPID_8021Q`] or [`TPID_8021AD`].
    pub tpid: u16,
    /// Priority, DEI and VLAN id.
    pub tci: u16,
}

impl Offload {
    /// Nothing to do: the frame is as a wire carries it.
    pub fn is_none(&self) -> bool {
        self.checksum.is_none() && self.segmentation.is_none()
    }

    /// Reads a little-endian `virtio_net_hdr` (what AF_PACKET writes with `PACKET_VNET_HDR` on
    /// a little-endian host). `Truncated` for fewer than [`VNET_HDR_LEN`] bytes, `Malformed`
    /// for a segmentation type this module cannot do (UFO, unknown types) or a zero
    /// `gso_size`.
    pub fn from_virtio(hdr: &[u8]) -> Result<Offload> {
        let hdr = hdr.get(..VNET_HDR_LEN).ok_or(Error::Truncated)?;
        let le = |at: usize| u16::from_le_bytes([hdr[at], hdr[at + 1]]);
        let (flags, gso_type, gso_size) = (hdr[0], hdr[1], le(4));
        let checksum = (flags & F_NEEDS_CSUM != 0).then(|| ChecksumAt {
            start: le(6),
            offset: le(8),
        });
        let kind = match gso_type & !GSO_ECN {
            GSO_NONE => None,
            GSO_TCPV4 => Some(Segmentation::Tcp4),
            GSO_TCPV6 => Some(Segmentation::Tcp6),
            GSO_UDP_L4 => Some(Segmentation::Udp),
            GSO_UDP => return Err(Error::Malformed),
            _ => return Err(Error::Malformed),
        };
        let segmentation = match kind {
            Some(_) if gso_size == 0 => return Err(Error::Malformed),
            Some(kind) => Some((kind, gso_size)),
            None => None,
        };
        Ok(Offload {
            checksum,
            segmentation,
        })
    }
}

/// Turns frames with offload metadata into wire frames, reusing its two buffers (no allocation
/// per frame once they have grown to the largest frame seen).
#[derive(Debug, Default)]
pub struct Finisher {
    whole: Vec<u8>,
    segment: Vec<u8>,
}

/// What [`Finisher::finish`] did to a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// Wire frames handed to `emit`.
    pub frames: usize,
    /// A VLAN tag was put back.
    pub tagged: bool,
    /// A checksum was finished (in each segment, if segmented).
    pub checksummed: bool,
    /// The frame was a super-frame cut into `frames` segments.
    pub segmented: bool,
}

impl Finisher {
    /// A finisher with empty buffers.
    pub fn new() -> Finisher {
        Finisher::default()
    }

    /// Hands `emit` the wire frames that `frame` (from its Ethernet header on, with `tag`
    /// taken out of band, and `offload` left to do) becomes; says what was done. Nothing is
    /// emitted on `Err`: the metadata does not fit the frame (offsets outside it, a transport
    /// header that is not where it says, a segmentation type that does not match the
    /// EtherType).
    pub fn finish(
        &mut self,
        frame: &[u8],
        tag: Option<VlanTag>,
        offload: Offload,
        mut emit: impl FnMut(&[u8]),
    ) -> Result<Finished> {
        if frame.len() < ETH_HLEN {
            return Err(Error::Truncated);
        }
        let shift = if tag.is_some() { 4 } else { 0 };
        self.whole.clear();
        self.whole.extend_from_slice(&frame[..12]);
        if let Some(tag) = tag {
            self.whole.extend_from_slice(&tag.tpid.to_be_bytes());
            self.whole.extend_from_slice(&tag.tci.to_be_bytes());
        }
        self.whole.extend_from_slice(&frame[12..]);
        let mut done = Finished {
            frames: 1,
            tagged: tag.is_some(),
            ..Finished::default()
        };
        if let Some((kind, size)) = offload.segmentation {
            let start = offload.checksum.ok_or(Error::Malformed)?.start as usize + shift;
            done.frames = segment(&self.whole, &mut self.segment, kind, size, start, emit)?;
            done.checksummed = true;
            done.segmented = done.frames > 1;
            return Ok(done);
        }
        if let Some(at) = offload.checksum {
            let start = at.start as usize + shift;
            let field = start
                .checked_add(at.offset as usize)
                .ok_or(Error::BadLength)?;
            if start < ETH_HLEN || field + 2 > self.whole.len() {
                return Err(Error::BadLength);
            }
            let sum = checksum::data(&self.whole[start..]);
            // A UDP checksum of 0 means "none": its field (6 bytes in) takes 0xffff instead.
            let value = match !sum {
                0 if at.offset == 6 => 0xffff,
                v => v,
            };
            self.whole[field..field + 2].copy_from_slice(&value.to_be_bytes());
            done.checksummed = true;
        }
        emit(&self.whole);
        Ok(done)
    }
}

/// Where the network header starts (after the Ethernet header and any in-band VLAN tags), and
/// its EtherType.
fn network_header(frame: &[u8]) -> Result<(usize, u16)> {
    let mut at = 12;
    loop {
        let ethertype = be16(frame, at)?;
        if ethertype == TPID_8021Q || ethertype == TPID_8021AD {
            at += 4;
            continue;
        }
        return Ok((at + 2, ethertype));
    }
}

fn be16(bytes: &[u8], at: usize) -> Result<u16> {
    let b = bytes.get(at..at + 2).ok_or(Error::Truncated)?;
    Ok(u16::from_be_bytes([b[0], b[1]]))
}

/// Writes `value` at `at`; `Truncated` (and nothing written) when the two bytes are not all
/// inside `bytes`. Every offset here comes from metadata or a header, so none is trusted.
fn put16(bytes: &mut [u8], at: usize, value: u16) -> Result<()> {
    let end = at.checked_add(2).ok_or(Error::BadLength)?;
    bytes
        .get_mut(at..end)
        .ok_or(Error::Truncated)?
        .copy_from_slice(&value.to_be_bytes());
    Ok(())
}

/// The pseudo-header sum of a transport segment of `len` bytes and protocol `proto` inside the
/// IP packet at `l3` (IPv4 or IPv6, by `ethertype`).
fn pseudo_header(frame: &[u8], l3: usize, ethertype: u16, proto: u8, len: usize) -> Result<u16> {
    match ethertype {
        ETHERTYPE_IPV4 => {
            let addrs = frame.get(l3 + 12..l3 + 20).ok_or(Error::Truncated)?;
            let len = u16::try_from(len).map_err(|_| Error::BadLength)?;
            Ok(checksum::combine(&[
                checksum::data(addrs),
                u16::from(proto),
                len,
            ]))
        }
        ETHERTYPE_IPV6 => {
            let addrs = frame.get(l3 + 8..l3 + 40).ok_or(Error::Truncated)?;
            let len = u32::try_from(len).map_err(|_| Error::BadLength)?;
            Ok(checksum::combine(&[
                checksum::data(addrs),
                u16::from(proto),
                (len >> 16) as u16,
                len as u16,
            ]))
        }
        _ => Err(Error::OtherProtocol),
    }
}

/// Cuts the super-frame `whole` (transport header at `l4`) into segments of `size` payload
/// bytes, each built in `buf` and handed to `emit`; returns how many.
fn segment(
    whole: &[u8],
    buf: &mut Vec<u8>,
    kind: Segmentation,
    size: u16,
    l4: usize,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize> {
    let (l3, ethertype) = network_header(whole)?;
    let (proto, header_len, header_min) = match kind {
        Segmentation::Tcp4 | Segmentation::Tcp6 => {
            let offset = whole.get(l4 + 12).ok_or(Error::Truncated)?;
            (PROTO_TCP, usize::from(offset >> 4) * 4, TCP_HEADER_MIN)
        }
        Segmentation::Udp => (PROTO_UDP, 8, 8),
    };
    match (kind, ethertype) {
        (Segmentation::Tcp4, ETHERTYPE_IPV4)
        | (Segmentation::Tcp6, ETHERTYPE_IPV6)
        | (Segmentation::Udp, ETHERTYPE_IPV4 | ETHERTYPE_IPV6) => {}
        _ => return Err(Error::OtherProtocol),
    }
    let v4 = ethertype == ETHERTYPE_IPV4;
    let l3_min = if v4 { 20 } else { 40 };
    let headers = l4 + header_len;
    // The TCP header's own data offset, not only the metadata, must leave room for the
    // fields rewritten below (flags at 13, the checksum at 16..18): a data offset under 5
    // words is refused, as a receiver would.
    if header_len < header_min || l4 < l3 + l3_min || headers > whole.len() {
        return Err(Error::BadLength);
    }
    if v4 {
        let ihl = usize::from(whole[l3] & 0xf) * 4;
        if whole[l3] >> 4 != 4 || ihl < 20 || l3 + ihl > l4 {
            return Err(Error::Malformed);
        }
    }
    let payload = &whole[headers..];
    // The largest segment (the first) must have lengths its headers can carry; checked before
    // anything is emitted, so an `Err` never follows emitted segments.
    let largest = headers + payload.len().min(usize::from(size));
    let ip_len_field = if v4 { largest - l3 } else { largest - l3 - 40 };
    if u16::try_from(ip_len_field).is_err() || u16::try_from(largest - l4).is_err() {
        return Err(Error::BadLength);
    }
    let chunks = payload.chunks(usize::from(size));
    let count = chunks.len().max(1);
    let seq = u32::from(be16(whole, l4 + 4)?) << 16 | u32::from(be16(whole, l4 + 6)?);
    let ip_id = if v4 { be16(whole, l3 + 4)? } else { 0 };
    // A super-frame without payload still leaves as one frame.
    let pieces = chunks.chain(payload.is_empty().then_some(payload));
    for (i, chunk) in pieces.enumerate() {
        buf.clear();
        buf.extend_from_slice(&whole[..headers]);
        buf.extend_from_slice(chunk);
        let ip_len = buf.len() - l3;
        if v4 {
            put16(
                buf,
                l3 + 2,
                u16::try_from(ip_len).map_err(|_| Error::BadLength)?,
            )?;
            put16(buf, l3 + 4, ip_id.wrapping_add(i as u16))?;
            put16(buf, l3 + 10, 0)?;
            let ihl = usize::from(buf[l3] & 0xf) * 4;
            let sum = checksum::internet(buf.get(l3..l3 + ihl).ok_or(Error::Truncated)?);
            put16(buf, l3 + 10, sum)?;
        } else {
            let len = ip_len.checked_sub(40).ok_or(Error::BadLength)?;
            put16(
                buf,
                l3 + 4,
                u16::try_from(len).map_err(|_| Error::BadLength)?,
            )?;
        }
        let l4_len = buf.len() - l4;
        let check_at = match proto {
            PROTO_TCP => {
                let seq = seq.wrapping_add((i as u32).wrapping_mul(u32::from(size)));
                put16(buf, l4 + 4, (seq >> 16) as u16)?;
                put16(buf, l4 + 6, seq as u16)?;
                let flags = buf.get_mut(l4 + 13).ok_or(Error::Truncated)?;
                if i + 1 < count {
                    *flags &= !(0x01 | 0x08); // FIN, PSH: the last segment's
                }
                if i > 0 {
                    *flags &= !0x80; // CWR: the first segment's
                }
                l4 + 16
            }
            _ => {
                put16(
                    buf,
                    l4 + 4,
                    u16::try_from(l4_len).map_err(|_| Error::BadLength)?,
                )?;
                l4 + 6
            }
        };
        put16(buf, check_at, 0)?;
        let pseudo = pseudo_header(buf, l3, ethertype, proto, l4_len)?;
        let sum = !checksum::combine(&[pseudo, checksum::data(&buf[l4..])]);
        let sum = if sum == 0 && proto == PROTO_UDP {
            0xffff
        } else {
            sum
        };
        put16(buf, check_at, sum)?;
        emit(buf);
    }
    Ok(count)
}

/// What [`finish_unfinished_checksum`] found in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumState {
    /// Not TCP or UDP over unfragmented IPv4/IPv6 (without extension headers): left alone.
    NotTransport,
    /// The checksum verifies (or a UDP-over-IPv4 datagram carries none): left alone.
    Valid,
    /// The checksum field held the pseudo-header's sum, as an offloading sender leaves it: now
    /// finished.
    Finished,
    /// The checksum is wrong in another way (a damaged frame): left as it is.
    Wrong,
    /// The IP header says the packet is longer than the frame: a super-frame cut short, or a
    /// damaged frame. Left as it is.
    LongerThanFrame,
}

/// Finishes, in place, a TCP or UDP checksum that an offloading sender left holding only the
/// pseudo-header's sum; for frames that come without metadata (AF_XDP). A checksum that is
/// wrong in any other way is left as it is (1 in 65536 damaged frames could look unfinished
/// and be "repaired"; a bridge cannot tell them apart).
pub fn finish_unfinished_checksum(frame: &mut [u8]) -> ChecksumState {
    match transport_checksum(frame) {
        Ok(Unfinished {
            l4,
            l4_len,
            check_at,
            pseudo,
            udp,
        }) => {
            frame[check_at..check_at + 2].copy_from_slice(&[0, 0]);
            let sum = !checksum::combine(&[pseudo, checksum::data(&frame[l4..l4 + l4_len])]);
            let sum = if sum == 0 && udp { 0xffff } else { sum };
            frame[check_at..check_at + 2].copy_from_slice(&sum.to_be_bytes());
            ChecksumState::Finished
        }
        Err(state) => state,
    }
}

/// What [`finish_unfinished_checksum`] would do to `frame`, without changing it:
/// [`ChecksumState::Finished`] when it would finish the checksum.
pub fn check_transport_checksum(frame: &[u8]) -> ChecksumState {
    match transport_checksum(frame) {
        Ok(_) => ChecksumState::Finished,
        Err(state) => state,
    }
}

/// Where an unfinished checksum lies, found by [`transport_checksum`].
struct Unfinished {
    l4: usize,
    l4_len: usize,
    check_at: usize,
    pseudo: u16,
    udp: bool,
}

/// The unfinished transport checksum of `frame`, or the state of a frame that has none.
fn transport_checksum(frame: &[u8]) -> core::result::Result<Unfinished, ChecksumState> {
    let Ok((l3, ethertype)) = network_header(frame) else {
        return Err(ChecksumState::NotTransport);
    };
    let (l4, proto, l4_len) = match ethertype {
        ETHERTYPE_IPV4 => {
            let h = frame.get(l3..l3 + 20).ok_or(ChecksumState::NotTransport)?;
            let ihl = usize::from(h[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
            if h[0] >> 4 != 4 || ihl < 20 || total < ihl || fragment {
                return Err(ChecksumState::NotTransport);
            }
            if l3 + total > frame.len() {
                return Err(ChecksumState::LongerThanFrame);
            }
            (l3 + ihl, h[9], total - ihl)
        }
        ETHERTYPE_IPV6 => {
            let h = frame.get(l3..l3 + 40).ok_or(ChecksumState::NotTransport)?;
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if l3 + 40 + len > frame.len() {
                return Err(ChecksumState::LongerThanFrame);
            }
            (l3 + 40, h[6], len)
        }
        _ => return Err(ChecksumState::NotTransport),
    };
    let check_at = match proto {
        PROTO_TCP if l4_len >= 20 => l4 + 16,
        PROTO_UDP if l4_len >= 8 => l4 + 6,
        _ => return Err(ChecksumState::NotTransport),
    };
    let udp = proto == PROTO_UDP;
    let field = u16::from_be_bytes([frame[check_at], frame[check_at + 1]]);
    if udp && field == 0 && ethertype == ETHERTYPE_IPV4 {
        return Err(ChecksumState::Valid);
    }
    let pseudo = pseudo_header(frame, l3, ethertype, proto, l4_len)
        .map_err(|_| ChecksumState::NotTransport)?;
    let segment = &frame[l4..l4 + l4_len];
    if checksum::combine(&[pseudo, checksum::data(segment)]) == 0xffff {
        return Err(ChecksumState::Valid);
    }
    if field != pseudo && !(field == 0 && pseudo == 0xffff) {
        return Err(ChecksumState::Wrong);
    }
    Ok(Unfinished {
        l4,
        l4_len,
        check_at,
        pseudo,
        udp,
    })
}

#[cfg(test)]
mod tests;
