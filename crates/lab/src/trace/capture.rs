//! Reading a capture: pcap or pcapng (through `pcap-file` 2), each frame decoded down to its
//! UDP or TCP 5-tuple, payload length and time.
//!
//! Link types: Ethernet (with up to two VLAN tags), Linux cooked (SLL and SLL2) and raw IP
//! (`RAW`, `IPV4`, `IPV6`); any other is refused with its number. Every length is checked
//! before it is used: a frame that is not IPv4/IPv6 carrying UDP or TCP, an IP fragment or a
//! header cut short is counted as skipped, never a panic; a file whose records break off or
//! do not parse ends with the byte offset where the bad record starts.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::PcapError;

/// UDP or TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
}

impl Protocol {
    /// `udp` or `tcp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Tcp => "tcp",
        }
    }
}

/// One UDP datagram or TCP segment of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapturedPacket {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// UDP or TCP.
    pub protocol: Protocol,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Transport payload bytes, from the IP and UDP length fields (so a capture cut short by
    /// its snap length still gives the sizes that were sent).
    pub payload_len: usize,
    /// The frame's length on the wire (its original length, link header included).
    pub wire_len: usize,
}

/// What a capture holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// UDP datagrams and TCP segments, in file order.
    pub packets: Vec<CapturedPacket>,
    /// Frames in the file.
    pub frames: u64,
    /// Frames left out: not IPv4/IPv6 carrying UDP or TCP, IP fragments, headers cut short,
    /// pcapng simple packets (they have no time).
    pub skipped: u64,
}

/// Why a capture could not be read; `offset` is the byte of the file where reading broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Neither the pcap nor the pcapng magic number at the start.
    #[error("not a pcap or pcapng file (it starts with {0:02x?})")]
    NotACapture(Vec<u8>),
    /// A record starting at `offset` is cut short or does not parse.
    #[error("broken at byte {offset}: {reason}")]
    Broken {
        /// Where the record that broke starts.
        offset: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A link type latlab does not decode.
    #[error(
        "link type {0} is not supported: latlab reads Ethernet (1), Linux cooked (113, 276) \
         and raw IP (101, 228, 229) captures"
    )]
    LinkType(u32),
}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];

/// Decodes a whole capture file held in memory.
pub fn parse_capture(bytes: &[u8]) -> Result<Capture, ParseError> {
    match bytes.get(..4) {
        Some(m) if m == PCAPNG_MAGIC => parse_pcapng(bytes),
        Some(m) if PCAP_MAGICS.iter().any(|p| p == m) => parse_pcap(bytes),
        _ => Err(ParseError::NotACapture(
            bytes[..bytes.len().min(4)].to_vec(),
        )),
    }
}

fn broken(bytes: &[u8], rest: &[u8], e: PcapError) -> ParseError {
    let reason = match e {
        PcapError::IncompleteBuffer => "the record is cut short (truncated file)".to_string(),
        other => other.to_string(),
    };
    ParseError::Broken {
        offset: bytes.len() - rest.len(),
        reason,
    }
}

fn check_link(linktype: u32) -> Result<(), ParseError> {
    match linktype {
        LINK_ETHERNET | LINK_SLL | LINK_SLL2 | LINK_RAW | LINK_IPV4 | LINK_IPV6 => Ok(()),
        other => Err(ParseError::LinkType(other)),
    }
}

fn parse_pcap(bytes: &[u8]) -> Result<Capture, ParseError> {
    let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| broken(bytes, bytes, e))?;
    let linktype = u32::from(parser.header().datalink);
    check_link(linktype)?;
    let mut capture = Capture::default();
    while !rest.is_empty() {
        let (next, packet) = parser
            .next_packet(rest)
            .map_err(|e| broken(bytes, rest, e))?;
        let ts_ns = u64::try_from(packet.timestamp.as_nanos()).unwrap_or(u64::MAX);
        capture.add(linktype, ts_ns, &packet.data, packet.orig_len as usize);
        rest = next;
    }
    Ok(capture)
}

fn parse_pcapng(bytes: &[u8]) -> Result<Capture, ParseError> {
    let (mut rest, mut parser) = PcapNgParser::new(bytes).map_err(|e| broken(bytes, bytes, e))?;
    let mut capture = Capture::default();
    while !rest.is_empty() {
        let (next, block) = parser
            .next_block(rest)
            .map_err(|e| broken(bytes, rest, e))?;
        match block {
            Block::EnhancedPacket(epb) => {
                let Some(iface) = parser.packet_interface(&epb) else {
                    return Err(ParseError::Broken {
                        offset: bytes.len() - rest.len(),
                        reason: format!(
                            "a packet of interface {} before that interface's description",
                            epb.interface_id
                        ),
                    });
                };
                let linktype = u32::from(iface.linktype);
                check_link(linktype)?;
                let resolution = iface
                    .options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
                        _ => None,
                    })
                    .unwrap_or(6);
                // pcap-file 2 hands the raw 64-bit count over as nanoseconds; its unit is
                // the interface's if_tsresol (microseconds when absent).
                let ts_ns = ticks_to_ns(epb.timestamp.as_nanos(), resolution);
                capture.add(linktype, ts_ns, &epb.data, epb.original_len as usize);
            }
            Block::SimplePacket(_) | Block::Packet(_) => {
                capture.frames += 1;
                capture.skipped += 1;
            }
            _ => {}
        }
        rest = next;
    }
    Ok(capture)
}

/// A pcapng time count in units of `if_tsresol` (10^-r s, or 2^-r s with the top bit set),
/// in ns, saturating.
fn ticks_to_ns(ticks: u128, resolution: u8) -> u64 {
    let exponent = u32::from(resolution & 0x7f);
    let ns = if resolution & 0x80 == 0 {
        if exponent <= 9 {
            ticks.saturating_mul(10u128.pow(9 - exponent))
        } else {
            ticks / 10u128.saturating_pow(exponent - 9)
        }
    } else {
        let scaled = ticks.saturating_mul(1_000_000_000);
        if exponent >= 128 {
            0
        } else {
            scaled >> exponent
        }
    };
    u64::try_from(ns).unwrap_or(u64::MAX)
}

const LINK_ETHERNET: u32 = 1;
const LINK_RAW: u32 = 101;
const LINK_SLL: u32 = 113;
const LINK_IPV4: u32 = 228;
const LINK_IPV6: u32 = 229;
const LINK_SLL2: u32 = 276;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: [u16; 2] = [0x8100, 0x88a8];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

impl Capture {
    fn add(&mut self, linktype: u32, ts_ns: u64, frame: &[u8], wire_len: usize) {
        self.frames += 1;
        match decode(linktype, frame) {
            Some((protocol, src, dst, payload_len)) => self.packets.push(CapturedPacket {
                ts_ns,
                protocol,
                src,
                dst,
                payload_len,
                wire_len,
            }),
            None => self.skipped += 1,
        }
    }
}

/// The IP packet inside a frame of `linktype`.
fn ip_of(linktype: u32, frame: &[u8]) -> Option<&[u8]> {
    let (ethertype, offset) = match linktype {
        LINK_ETHERNET => {
            let mut at = 12;
            let mut ethertype = be16(frame, at)?;
            for _ in 0..2 {
                if ETHERTYPE_VLAN.contains(&ethertype) {
                    at += 4;
                    ethertype = be16(frame, at)?;
                }
            }
            (Some(ethertype), at + 2)
        }
        LINK_SLL => (Some(be16(frame, 14)?), 16),
        LINK_SLL2 => (Some(be16(frame, 0)?), 20),
        _ => (None, 0),
    };
    match ethertype {
        None | Some(ETHERTYPE_IPV4) | Some(ETHERTYPE_IPV6) => frame.get(offset..),
        Some(_) => None,
    }
}

/// The 5-tuple and payload length of a frame, or `None` when it is not a whole UDP/TCP header
/// over IPv4 or IPv6.
fn decode(linktype: u32, frame: &[u8]) -> Option<(Protocol, SocketAddr, SocketAddr, usize)> {
    let ip = ip_of(linktype, frame)?;
    let (proto, src, dst, transport, transport_len) = match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            let total = usize::from(be16(ip, 2)?);
            let fragment = be16(ip, 6)?;
            // A fragment (offset > 0, or more fragments) does not carry a whole datagram.
            if ihl < 20 || total < ihl || fragment & 0x3fff != 0 {
                return None;
            }
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (
                *ip.get(9)?,
                IpAddr::from(Ipv4Addr::from(src)),
                IpAddr::from(Ipv4Addr::from(dst)),
                ip.get(ihl..)?,
                total - ihl,
            )
        }
        6 => {
            let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            let mut next = *ip.get(6)?;
            let mut at = 40;
            let mut len = usize::from(be16(ip, 4)?);
            // Hop-by-hop, routing and destination options are stepped over; a fragment
            // header means a piece of a datagram.
            while matches!(next, 0 | 43 | 60) {
                let ext = (usize::from(*ip.get(at + 1)?) + 1) * 8;
                next = *ip.get(at)?;
                at += ext;
                len = len.checked_sub(ext)?;
            }
            (
                next,
                IpAddr::from(Ipv6Addr::from(src)),
                IpAddr::from(Ipv6Addr::from(dst)),
                ip.get(at..)?,
                len,
            )
        }
        _ => return None,
    };
    let sport = be16(transport, 0)?;
    let dport = be16(transport, 2)?;
    let (protocol, payload_len) = match proto {
        17 => {
            let udp_len = usize::from(be16(transport, 4)?);
            (Protocol::Udp, udp_len.checked_sub(8)?)
        }
        6 => {
            let offset = usize::from(*transport.get(12)? >> 4) * 4;
            if offset < 20 {
                return None;
            }
            (Protocol::Tcp, transport_len.checked_sub(offset)?)
        }
        _ => return None,
    };
    Some((
        protocol,
        SocketAddr::new(src, sport),
        SocketAddr::new(dst, dport),
        payload_len,
    ))
}
