//! DNS over UDP (RFC 1035), as much as a load generator needs: a query is emitted (ID, RD set,
//! one question of class IN, optionally an EDNS0 OPT record advertising a UDP payload size,
//! RFC 6891), and a response is read as far as its header and its first question.
//!
//! Header layout (all integers big-endian):
//!
//! | offset | size | field                                            |
//! |-------:|-----:|--------------------------------------------------|
//! | 0      | 2    | ID                                               |
//! | 2      | 2    | QR, opcode (4 bits), AA, TC, RD, RA, Z (3), RCODE (4) |
//! | 4      | 2    | QDCOUNT                                          |
//! | 6      | 2    | ANCOUNT                                          |
//! | 8      | 2    | NSCOUNT                                          |
//! | 10     | 2    | ARCOUNT                                          |
//! | 12..   |      | questions: QNAME, QTYPE (2), QCLASS (2); then records |
//!
//! Names are read with their compression pointers followed safely: every pointer must point
//! before itself ([`Error::PointerForward`]) and before where the previous pointer of the
//! same name landed ([`Error::PointerLoop`]), so reading always ends, after at most as many
//! jumps as the message has bytes. A label over 63 bytes, a name over 255 bytes and a name
//! cut short by the end of the datagram are their own errors. Nothing here allocates: a name
//! is copied, uncompressed, into a fixed 255-byte [`Name`].
//!
//! ```
//! use latlab_wire::dns::{self, Name, Query};
//!
//! let name = Name::from_text("a.lab.test.")?;
//! let query = Query { id: 0x1234, name: &name, qtype: dns::TYPE_A, edns: Some(1232) };
//! let mut buf = [0u8; 512];
//! let len = query.emit(&mut buf);
//! assert_eq!(len, query.buffer_len());
//! // A server that echoes the question back with QR set is a response to it.
//! buf[2] |= 0x80;
//! let response = dns::Response::parse(&buf[..len])?;
//! assert_eq!(response.header.id, 0x1234);
//! assert!(response.question.unwrap().name.eq_ignore_case(&Name::from_text("A.LAB.test")?));
//! # Ok::<(), dns::Error>(())
//! ```

use core::fmt;

/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 12;
/// The longest label.
pub const MAX_LABEL_LEN: usize = 63;
/// The longest name on the wire, length bytes and the root's zero included.
pub const MAX_NAME_LEN: usize = 255;
/// Class IN.
pub const CLASS_IN: u16 = 1;
/// Type A.
pub const TYPE_A: u16 = 1;
/// The OPT pseudo-record's type (RFC 6891).
pub const TYPE_OPT: u16 = 41;
/// Bytes of an OPT record without options: root name, type, class, TTL, RDLENGTH.
pub const OPT_LEN: usize = 11;

/// Why bytes are no DNS response, or a text no name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// Shorter than the 12-byte header.
    Truncated,
    /// A name runs past the end of the datagram.
    TruncatedName,
    /// The question's type or class runs past the end of the datagram.
    TruncatedQuestion,
    /// A label length byte over 63 (`0x40`–`0xBF`: the reserved label types), or a label of
    /// a text name longer than 63 bytes.
    LabelTooLong,
    /// A name over 255 bytes once its pointers are followed.
    NameTooLong,
    /// A compression pointer to itself or past itself (forward, or past the datagram).
    PointerForward,
    /// A compression pointer to where this name already went (or past it): a loop.
    PointerLoop,
    /// A text name with an empty label (`a..b`), or a label that is not plain ASCII.
    BadText,
}

impl Error {
    /// The name it is counted under.
    pub fn cause(self) -> &'static str {
        match self {
            Error::Truncated => "shorter than a dns header",
            Error::TruncatedName => "truncated name",
            Error::TruncatedQuestion => "truncated question",
            Error::LabelTooLong => "label over 63",
            Error::NameTooLong => "name over 255",
            Error::PointerForward => "compression pointer forward",
            Error::PointerLoop => "compression loop",
            Error::BadText => "bad name text",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.cause())
    }
}

impl std::error::Error for Error {}

/// A domain name in its uncompressed wire form (length-prefixed labels, ending in the root's
/// zero byte).
///
/// Invariant: `bytes[..len]` is a well-formed name of at most [`MAX_NAME_LEN`] bytes.
#[derive(Clone, Copy)]
pub struct Name {
    bytes: [u8; MAX_NAME_LEN],
    len: u8,
}

impl Name {
    /// The root name.
    pub const ROOT: Name = Name {
        bytes: [0; MAX_NAME_LEN],
        len: 1,
    };

    /// The name `text` spells (`a.lab.test`, the final dot optional; `.` is the root). No
    /// escapes: each label is printable ASCII other than `.` and space.
    pub fn from_text(text: &str) -> Result<Name, Error> {
        let mut name = Name::ROOT;
        let trimmed = text.strip_suffix('.').unwrap_or(text);
        if trimmed.is_empty() {
            return if text.is_empty() {
                Err(Error::BadText)
            } else {
                Ok(name)
            };
        }
        let mut at = 0usize;
        for label in trimmed.split('.') {
            let b = label.as_bytes();
            if b.is_empty() || !b.iter().all(|c| c.is_ascii_graphic()) {
                return Err(Error::BadText);
            }
            if b.len() > MAX_LABEL_LEN {
                return Err(Error::LabelTooLong);
            }
            if at + 1 + b.len() + 1 > MAX_NAME_LEN {
                return Err(Error::NameTooLong);
            }
            name.bytes[at] = b.len() as u8;
            name.bytes[at + 1..at + 1 + b.len()].copy_from_slice(b);
            at += 1 + b.len();
        }
        name.bytes[at] = 0;
        name.len = (at + 1) as u8;
        Ok(name)
    }

    /// Its wire form.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Whether it is `other`, ASCII letters compared without case (RFC 4343).
    pub fn eq_ignore_case(&self, other: &Name) -> bool {
        self.as_bytes().eq_ignore_ascii_case(other.as_bytes())
    }

    /// Reads the name at `at` in `message`, following compression pointers: the name and
    /// the offset just past it where it starts (past its first pointer, if any).
    pub fn read(message: &[u8], at: usize) -> Result<(Name, usize), Error> {
        let mut name = Name::ROOT;
        let mut out = 0usize;
        let mut pos = at;
        // Where the name continues in the message once read: set at the first pointer.
        let mut end = None;
        // Where the last pointer landed: the next must land before it.
        let mut landed = at;
        loop {
            let Some(&len) = message.get(pos) else {
                return Err(Error::TruncatedName);
            };
            match len >> 6 {
                0b11 => {
                    let Some(&low) = message.get(pos + 1) else {
                        return Err(Error::TruncatedName);
                    };
                    let target = usize::from(u16::from_be_bytes([len & 0x3f, low]));
                    if target >= pos {
                        return Err(Error::PointerForward);
                    }
                    if end.is_some() && target >= landed {
                        return Err(Error::PointerLoop);
                    }
                    end.get_or_insert(pos + 2);
                    landed = target;
                    pos = target;
                }
                0b00 => {
                    let len = usize::from(len);
                    if out + 1 + len > MAX_NAME_LEN {
                        return Err(Error::NameTooLong);
                    }
                    let Some(label) = message.get(pos..pos + 1 + len) else {
                        return Err(Error::TruncatedName);
                    };
                    name.bytes[out..out + 1 + len].copy_from_slice(label);
                    out += 1 + len;
                    pos += 1 + len;
                    if len == 0 {
                        name.len = out as u8;
                        return Ok((name, end.unwrap_or(pos)));
                    }
                }
                _ => return Err(Error::LabelTooLong),
            }
        }
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Name {}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl fmt::Display for Name {
    /// Dotted, with the final dot; bytes outside printable ASCII (and `.`, `\`) as `\DDD`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.as_bytes();
        if b.len() == 1 {
            return f.write_str(".");
        }
        let mut at = 0;
        while at < b.len() && b[at] != 0 {
            let len = usize::from(b[at]);
            for &c in &b[at + 1..at + 1 + len] {
                if c.is_ascii_graphic() && c != b'.' && c != b'\\' {
                    write!(f, "{}", c as char)?;
                } else {
                    write!(f, "\\{c:03}")?;
                }
            }
            f.write_str(".")?;
            at += 1 + len;
        }
        Ok(())
    }
}

/// The types known by name, with their codes (RFC 1035, 3596, 2782, 3403, 4034, 9460, 8659;
/// ANY is RFC 1035's `*`).
const TYPES: [(&str, u16); 16] = [
    ("A", 1),
    ("NS", 2),
    ("CNAME", 5),
    ("SOA", 6),
    ("PTR", 12),
    ("MX", 15),
    ("TXT", 16),
    ("AAAA", 28),
    ("SRV", 33),
    ("NAPTR", 35),
    ("DS", 43),
    ("DNSKEY", 48),
    ("SVCB", 64),
    ("HTTPS", 65),
    ("ANY", 255),
    ("CAA", 257),
];

/// The code of type `name` (`AAAA`, any case; `TYPE65` for any code, RFC 3597).
pub fn type_from_name(name: &str) -> Option<u16> {
    if let Some((_, code)) = TYPES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
        return Some(*code);
    }
    let digits = name
        .get(..4)
        .filter(|p| p.eq_ignore_ascii_case("TYPE"))
        .map(|_| &name[4..])?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The name of type `code` (`TYPE1234` for one without a name).
pub fn type_name(code: u16) -> TypeName {
    TypeName(code)
}

/// A type's name, as [`type_name`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeName(pub u16);

impl fmt::Display for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match TYPES.iter().find(|(_, c)| *c == self.0) {
            Some((n, _)) => f.write_str(n),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}

/// RCODE 0: no error.
pub const RCODE_NOERROR: u8 = 0;
/// RCODE 2: the server failed.
pub const RCODE_SERVFAIL: u8 = 2;
/// RCODE 3: the name does not exist.
pub const RCODE_NXDOMAIN: u8 = 3;
/// RCODE 5: the server refused.
pub const RCODE_REFUSED: u8 = 5;

/// A query: one question of class IN, recursion desired.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// Its ID.
    pub id: u16,
    /// QNAME.
    pub name: &'a Name,
    /// QTYPE.
    pub qtype: u16,
    /// An OPT record advertising this UDP payload size, when set.
    pub edns: Option<u16>,
}

impl Query<'_> {
    /// Bytes [`emit`](Query::emit) writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.name.as_bytes().len() + 4 + if self.edns.is_some() { OPT_LEN } else { 0 }
    }

    /// Writes the query at the start of `buf`; returns its length.
    ///
    /// # Panics
    /// When `buf` is shorter than [`buffer_len`](Query::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf[0..2].copy_from_slice(&self.id.to_be_bytes());
        buf[2..4].copy_from_slice(&0x0100u16.to_be_bytes()); // RD
        buf[4..6].copy_from_slice(&1u16.to_be_bytes());
        buf[6..10].fill(0);
        let arcount = u16::from(self.edns.is_some());
        buf[10..12].copy_from_slice(&arcount.to_be_bytes());
        let name = self.name.as_bytes();
        let mut at = HEADER_LEN;
        buf[at..at + name.len()].copy_from_slice(name);
        at += name.len();
        buf[at..at + 2].copy_from_slice(&self.qtype.to_be_bytes());
        buf[at + 2..at + 4].copy_from_slice(&CLASS_IN.to_be_bytes());
        at += 4;
        if let Some(size) = self.edns {
            buf[at] = 0; // root
            buf[at + 1..at + 3].copy_from_slice(&TYPE_OPT.to_be_bytes());
            buf[at + 3..at + 5].copy_from_slice(&size.to_be_bytes());
            buf[at + 5..at + 11].fill(0); // extended RCODE, version, flags, RDLENGTH
        }
        len
    }
}

/// A message's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// ID.
    pub id: u16,
    /// QR: a response.
    pub qr: bool,
    /// OPCODE (0..=15).
    pub opcode: u8,
    /// AA: authoritative answer.
    pub aa: bool,
    /// TC: truncated (the answer did not fit the datagram).
    pub tc: bool,
    /// RD: recursion desired.
    pub rd: bool,
    /// RA: recursion available.
    pub ra: bool,
    /// RCODE (0..=15; the OPT record's extended bits are not read).
    pub rcode: u8,
    /// QDCOUNT.
    pub qdcount: u16,
    /// ANCOUNT.
    pub ancount: u16,
    /// NSCOUNT.
    pub nscount: u16,
    /// ARCOUNT.
    pub arcount: u16,
}

impl Header {
    /// The header at the start of `message`.
    pub fn parse(message: &[u8]) -> Result<Header, Error> {
        let Some(h) = message.get(..HEADER_LEN) else {
            return Err(Error::Truncated);
        };
        let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let flags = word(2);
        Ok(Header {
            id: word(0),
            qr: flags & 0x8000 != 0,
            opcode: ((flags >> 11) & 0xf) as u8,
            aa: flags & 0x0400 != 0,
            tc: flags & 0x0200 != 0,
            rd: flags & 0x0100 != 0,
            ra: flags & 0x0080 != 0,
            rcode: (flags & 0xf) as u8,
            qdcount: word(4),
            ancount: word(6),
            nscount: word(8),
            arcount: word(10),
        })
    }
}

/// A question: QNAME, QTYPE, QCLASS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Question {
    /// QNAME, pointers followed.
    pub name: Name,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// A response as far as it is read: its header and its first question (`None` when QDCOUNT
/// is 0, as in some FORMERR answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The header.
    pub header: Header,
    /// The first question.
    pub question: Option<Question>,
}

impl Response {
    /// Reads `message`'s header and first question; any bytes give `Ok` or an [`Error`].
    pub fn parse(message: &[u8]) -> Result<Response, Error> {
        let header = Header::parse(message)?;
        if header.qdcount == 0 {
            return Ok(Response {
                header,
                question: None,
            });
        }
        let (name, at) = Name::read(message, HEADER_LEN)?;
        let Some(rest) = message.get(at..at + 4) else {
            return Err(Error::TruncatedQuestion);
        };
        let question = Question {
            name,
            qtype: u16::from_be_bytes([rest[0], rest[1]]),
            qclass: u16::from_be_bytes([rest[2], rest[3]]),
        };
        Ok(Response {
            header,
            question: Some(question),
        })
    }
}

#[cfg(test)]
mod tests;
