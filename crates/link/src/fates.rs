//! Fate files: every frame's fate, recorded so that a new run of the same traffic can be given
//! the same fates ([`replay`]) and two runs compared ([`summary`]).
//!
//! # Flows and positions
//!
//! A frame is named by its direction, its flow and its position in that flow. A flow is a
//! frame's 5-tuple ([`latlab_wire::flow::FlowKey`]); flows are numbered per direction in order
//! of first appearance *within their class*: the EtherType and, for IP, the protocol
//! ([`FlowId`]: `ipv4/udp#0` is the first UDP-over-IPv4 5-tuple seen in that direction).
//! Frames that are not IP are one flow per EtherType (`arp`). So the ephemeral ports of a new
//! run, or ARP and ICMPv6 frames that interleave differently, do not shift the positions of
//! the frames of the traffic that matters. The position is the frame's index in its flow, from
//! 0.
//!
//! # Format (version 1)
//!
//! Little-endian where fixed; `varint` is unsigned LEB128 (7 bits a byte, low first, at most
//! 10 bytes); `string` is a varint length and that many bytes of UTF-8.
//!
//! ```text
//! header:  magic  "LATFATES" (8 bytes)
//!          version u8 = 1
//!          directions varint, then per direction:
//!              name string            (a_to_b, b_to_a)
//!              rules varint, then per rule its text string (the --flow matchers: the
//!                                     direction's pipes, which decide a frame's pipe)
//! records, each starting with a tag byte:
//!   1 frame: direction u8, flow (ethertype varint, protocol varint: 0 none, else p + 1,
//!            number varint), position varint, arrival varint (ns since the run's start),
//!            length varint (bytes), outcome u8:
//!              0 delivered: flags u8 (1 duplicated, 2 corrupted, 4 reordered),
//!                           transit varint (departure − arrival, ns),
//!                           [duplicate's transit varint], [corrupted bit varint]
//!              1 loss, 2 queue frames, 3 queue bytes, 4 runt, 5 oversized, 6 outage:
//!              dropped
//! trailer: tag 255, frames varint (the frame records before it),
//!          unqueued varint (frames whose record the recorder could not queue: not in the file)
//! ```
//!
//! Nothing follows the trailer. A file without it (cut short) is refused, as is one whose
//! frame count disagrees; every error names the byte offset and the field
//! ([`FormatError`]).

use std::fmt;
use std::io::{self, Write};

use latlab_wire::flow::FlowKey;

use crate::DropCause;

mod read;
pub mod replay;
pub mod summary;

/// The first 8 bytes of every fate file.
pub const MAGIC: [u8; 8] = *b"LATFATES";

/// The version this code writes and reads.
pub const VERSION: u8 = 1;

/// The tag of a frame record.
const TAG_FRAME: u8 = 1;
/// The tag of the trailer.
const TAG_END: u8 = 255;

/// A flow of one direction: its class (EtherType and IP protocol) and its number among the
/// 5-tuples of that class, in order of first appearance (0 for a non-IP class, which is one
/// flow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    /// The EtherType behind any VLAN tags; 0 for a frame too short to carry one.
    pub ethertype: u16,
    /// The IP protocol (or IPv6 Next Header), `None` for a frame that is not IP.
    pub protocol: Option<u8>,
    /// The 5-tuple's number in its class.
    pub number: u32,
}

impl FlowId {
    /// The class of `key` (its number still 0).
    pub fn class_of(key: &FlowKey) -> FlowId {
        FlowId {
            ethertype: key.ethertype.unwrap_or(0),
            protocol: key.ip.map(|ip| ip.protocol),
            number: 0,
        }
    }
}

impl fmt::Display for FlowId {
    /// `ipv4/udp#0`, `ipv6/icmpv6#1`, `ipv6/hopopt#0` (IPv6 with a hop-by-hop header: MLD),
    /// `arp`, `ether 0x88cc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ether = match self.ethertype {
            0x0800 => "ipv4".to_string(),
            0x86dd => "ipv6".to_string(),
            0x0806 => "arp".to_string(),
            0 => "runt".to_string(),
            other => format!("ether 0x{other:04x}"),
        };
        match self.protocol {
            None => write!(f, "{ether}"),
            Some(p) => {
                let proto = match p {
                    0 => "hopopt".to_string(),
                    1 => "icmp".to_string(),
                    6 => "tcp".to_string(),
                    17 => "udp".to_string(),
                    58 => "icmpv6".to_string(),
                    other => format!("proto {other}"),
                };
                write!(f, "{ether}/{proto}#{}", self.number)
            }
        }
    }
}

/// What a recorded frame's fate was, as a replay applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Dropped at arrival, for this cause.
    Drop(DropCause),
    /// Delivered this long after its arrival.
    Deliver {
        /// Departure − arrival, ns.
        transit_ns: u64,
        /// The duplicate's departure − arrival, ns, if the frame was duplicated.
        duplicate_transit_ns: Option<u64>,
        /// The bit flipped, if the frame was corrupted (see [`crate::Fate::Deliver`]).
        corrupt_bit: Option<u64>,
        /// Sent ahead of the queue.
        reordered: bool,
    },
}

impl Recorded {
    /// The recorded form of `fate`, for a frame that arrived at `now`.
    pub fn of(fate: &crate::Fate, now: u64) -> Recorded {
        match *fate {
            crate::Fate::Drop(cause) => Recorded::Drop(cause),
            crate::Fate::Deliver {
                departure_ns,
                duplicate_departure_ns,
                corrupt_bit,
                reordered,
            } => Recorded::Deliver {
                transit_ns: departure_ns.saturating_sub(now),
                duplicate_transit_ns: duplicate_departure_ns.map(|d| d.saturating_sub(now)),
                corrupt_bit: corrupt_bit.map(|b| b as u64),
                reordered,
            },
        }
    }

    /// The same fate for a comparison: the drop cause, or delivered with its duplicate and
    /// corrupted bit (the transit times left out).
    pub fn class(&self) -> Recorded {
        match *self {
            Recorded::Drop(cause) => Recorded::Drop(cause),
            Recorded::Deliver {
                duplicate_transit_ns,
                corrupt_bit,
                reordered,
                ..
            } => Recorded::Deliver {
                transit_ns: 0,
                duplicate_transit_ns: duplicate_transit_ns.map(|_| 0),
                corrupt_bit,
                reordered,
            },
        }
    }
}

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorded::Drop(cause) => write!(f, "dropped ({})", cause_name(*cause)),
            Recorded::Deliver {
                duplicate_transit_ns,
                corrupt_bit,
                reordered,
                ..
            } => {
                write!(f, "delivered")?;
                if duplicate_transit_ns.is_some() {
                    write!(f, ", duplicated")?;
                }
                if let Some(bit) = corrupt_bit {
                    write!(f, ", bit {bit} flipped")?;
                }
                if *reordered {
                    write!(f, ", reordered")?;
                }
                Ok(())
            }
        }
    }
}

/// The name of a drop cause in summaries, as `--json` spells its counter (`loss`, …).
pub fn cause_name(cause: DropCause) -> &'static str {
    match cause {
        DropCause::Loss => "loss",
        DropCause::QueueFrames => "queue_frames",
        DropCause::QueueBytes => "queue_bytes",
        DropCause::Runt => "runt",
        DropCause::Oversized => "oversized",
        DropCause::Outage => "outage",
    }
}

fn cause_code(cause: DropCause) -> u8 {
    match cause {
        DropCause::Loss => 1,
        DropCause::QueueFrames => 2,
        DropCause::QueueBytes => 3,
        DropCause::Runt => 4,
        DropCause::Oversized => 5,
        DropCause::Outage => 6,
    }
}

/// One frame's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRecord {
    /// Index of its direction in [`Header::directions`].
    pub direction: u8,
    /// Its flow.
    pub flow: FlowId,
    /// Its index in the flow, from 0.
    pub position: u64,
    /// When it arrived, ns since the run's start.
    pub arrival_ns: u64,
    /// Its length, bytes.
    pub len: u32,
    /// Its fate.
    pub fate: Recorded,
}

/// One direction as a fate file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectionHeader {
    /// Its name (`a_to_b`).
    pub name: String,
    /// The texts of its per-flow rules, in order (empty without rules).
    pub rules: Vec<String>,
}

/// What a fate file says of the run before its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The directions, in the order of the records' direction numbers.
    pub directions: Vec<DirectionHeader>,
}

impl Header {
    /// Why a run with `self` cannot take the fates of a file with `recorded`, naming the
    /// field (`directions[1].name`), or `None` if it can.
    pub fn mismatch(&self, recorded: &Header) -> Option<String> {
        if self.directions.len() != recorded.directions.len() {
            return Some(format!(
                "directions: the file has {}, this run {}",
                recorded.directions.len(),
                self.directions.len()
            ));
        }
        for (i, (ours, theirs)) in self.directions.iter().zip(&recorded.directions).enumerate() {
            if ours.name != theirs.name {
                return Some(format!(
                    "directions[{i}].name: the file has {:?}, this run {:?}",
                    theirs.name, ours.name
                ));
            }
            if ours.rules != theirs.rules {
                return Some(format!(
                    "directions[{i}].rules ({}): the file has [{}], this run [{}] (another flow layout)",
                    ours.name,
                    theirs.rules.join("; "),
                    ours.rules.join("; ")
                ));
            }
        }
        None
    }
}

/// A whole fate file, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FateFile {
    /// Its header.
    pub header: Header,
    /// Every frame record, in the order written (arrival order per direction).
    pub frames: Vec<FrameRecord>,
    /// Frames whose record the recorder could not queue (not in [`FateFile::frames`]).
    pub unqueued: u64,
}

/// Why bytes are not a fate file: where, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {field}: {problem}")]
pub struct FormatError {
    /// Offset of the first byte of the field at fault.
    pub offset: usize,
    /// The field (`magic`, `version`, `record 17 flow`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Writes a fate file: the header at [`FateWriter::new`], then frames, then the trailer at
/// [`FateWriter::finish`].
#[derive(Debug)]
pub struct FateWriter<W: Write> {
    out: W,
    frames: u64,
    buf: Vec<u8>,
}

impl<W: Write> FateWriter<W> {
    /// Writes `header` to `out`.
    pub fn new(mut out: W, header: &Header) -> io::Result<FateWriter<W>> {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&MAGIC);
        buf.push(VERSION);
        put_varint(&mut buf, header.directions.len() as u64);
        for d in &header.directions {
            put_string(&mut buf, &d.name);
            put_varint(&mut buf, d.rules.len() as u64);
            for rule in &d.rules {
                put_string(&mut buf, rule);
            }
        }
        out.write_all(&buf)?;
        buf.clear();
        Ok(FateWriter {
            out,
            frames: 0,
            buf,
        })
    }

    /// Writes one frame's record.
    pub fn frame(&mut self, r: &FrameRecord) -> io::Result<()> {
        self.buf.clear();
        encode_frame(&mut self.buf, r);
        self.frames += 1;
        self.out.write_all(&self.buf)
    }

    /// Writes the trailer, with `unqueued` frames not recorded, and returns the writer and
    /// how many frames were written.
    pub fn finish(mut self, unqueued: u64) -> io::Result<(W, u64)> {
        self.buf.clear();
        self.buf.push(TAG_END);
        put_varint(&mut self.buf, self.frames);
        put_varint(&mut self.buf, unqueued);
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok((self.out, self.frames))
    }
}

fn encode_frame(buf: &mut Vec<u8>, r: &FrameRecord) {
    buf.push(TAG_FRAME);
    buf.push(r.direction);
    put_varint(buf, u64::from(r.flow.ethertype));
    put_varint(buf, r.flow.protocol.map_or(0, |p| u64::from(p) + 1));
    put_varint(buf, u64::from(r.flow.number));
    put_varint(buf, r.position);
    put_varint(buf, r.arrival_ns);
    put_varint(buf, u64::from(r.len));
    match r.fate {
        Recorded::Drop(cause) => buf.push(cause_code(cause)),
        Recorded::Deliver {
            transit_ns,
            duplicate_transit_ns,
            corrupt_bit,
            reordered,
        } => {
            buf.push(0);
            let flags = u8::from(duplicate_transit_ns.is_some())
                | u8::from(corrupt_bit.is_some()) << 1
                | u8::from(reordered) << 2;
            buf.push(flags);
            put_varint(buf, transit_ns);
            if let Some(d) = duplicate_transit_ns {
                put_varint(buf, d);
            }
            if let Some(bit) = corrupt_bit {
                put_varint(buf, bit);
            }
        }
    }
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf.push(byte);
            return;
        }
        buf.push(byte | 0x80);
    }
}

fn put_string(buf: &mut Vec<u8>, s: &str) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests;
