//! STUN (RFC 8489): the Binding request latlab sends (no attributes) and the responses to it.
//!
//! A message is a 20-byte header (two zero bits, a 14-bit type, a length that excludes the
//! header and is a multiple of 4, the magic cookie, a 96-bit transaction ID) and attributes,
//! each a type, a length and a value padded to 4 bytes. A Binding success response carries
//! the client's address as the server saw it in XOR-MAPPED-ADDRESS (or, from RFC 3489
//! servers, MAPPED-ADDRESS); an error response carries ERROR-CODE. Attributes this module does
//! not read (SOFTWARE, MESSAGE-INTEGRITY, FINGERPRINT…) are skipped, their lengths checked.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Bytes of the header.
pub const HEADER_LEN: usize = 20;
/// The magic cookie, bytes 4..8 of every RFC 5389/8489 message.
pub const MAGIC_COOKIE: u32 = 0x2112_a442;
/// Binding request.
pub const BINDING_REQUEST: u16 = 0x0001;
/// Binding success response.
pub const BINDING_SUCCESS: u16 = 0x0101;
/// Binding error response.
pub const BINDING_ERROR: u16 = 0x0111;
/// MAPPED-ADDRESS.
pub const MAPPED_ADDRESS: u16 = 0x0001;
/// XOR-MAPPED-ADDRESS.
pub const XOR_MAPPED_ADDRESS: u16 = 0x0020;
/// ERROR-CODE.
pub const ERROR_CODE: u16 = 0x0009;

/// Why bytes are not a STUN response latlab can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// Shorter than the 20-byte header.
    ShortHeader,
    /// The first two bits are not zero: not STUN.
    NotStun,
    /// Bytes 4..8 are not the magic cookie.
    BadCookie,
    /// The length field is not a multiple of 4.
    UnalignedLength,
    /// The length field disagrees with the datagram's size.
    LengthMismatch,
    /// An attribute's header or value runs past the message.
    AttributeOverrun,
    /// An address attribute's family is neither IPv4 (1) nor IPv6 (2).
    BadFamily,
    /// An address attribute's length does not fit its family.
    BadAddressLength,
    /// An ERROR-CODE shorter than 4 bytes, or whose class is not 3 to 6 or number above 99.
    BadErrorCode,
    /// An error response without ERROR-CODE.
    NoErrorCode,
    /// A message that is no Binding response (a request, an indication, another method).
    NotBindingResponse,
    /// The buffer is too small for the request.
    BufferTooSmall,
}

impl Error {
    /// A short lowercase name for counting.
    pub fn name(self) -> &'static str {
        match self {
            Error::ShortHeader => "short header",
            Error::NotStun => "not stun",
            Error::BadCookie => "bad cookie",
            Error::UnalignedLength => "unaligned length",
            Error::LengthMismatch => "length mismatch",
            Error::AttributeOverrun => "attribute overrun",
            Error::BadFamily => "bad family",
            Error::BadAddressLength => "bad address length",
            Error::BadErrorCode => "bad error code",
            Error::NoErrorCode => "no error code",
            Error::NotBindingResponse => "not a binding response",
            Error::BufferTooSmall => "buffer too small",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Error {}

/// Writes a Binding request with transaction ID `id` and no attributes into `buf`: its length
/// ([`HEADER_LEN`]).
pub fn emit_binding_request(id: &[u8; 12], buf: &mut [u8]) -> Result<usize, Error> {
    let head = buf.get_mut(..HEADER_LEN).ok_or(Error::BufferTooSmall)?;
    head[0..2].copy_from_slice(&BINDING_REQUEST.to_be_bytes());
    head[2..4].fill(0);
    head[4..8].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    head[8..20].copy_from_slice(id);
    Ok(HEADER_LEN)
}

/// One message's header and attributes, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message type (class and method).
    pub kind: u16,
    /// The transaction ID.
    pub id: [u8; 12],
    /// The attributes, walked by [`Message::attributes`].
    body: &'a [u8],
}

/// One attribute: its type and its value (padding left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribute<'a> {
    /// Its type.
    pub kind: u16,
    /// Its value.
    pub value: &'a [u8],
}

impl<'a> Message<'a> {
    /// Reads the header of `datagram` and checks that its attributes fill the rest exactly.
    pub fn parse(datagram: &'a [u8]) -> Result<Message<'a>, Error> {
        let Some((head, body)) = datagram.split_first_chunk::<HEADER_LEN>() else {
            return Err(Error::ShortHeader);
        };
        if head[0] & 0xc0 != 0 {
            return Err(Error::NotStun);
        }
        if head[4..8] != MAGIC_COOKIE.to_be_bytes() {
            return Err(Error::BadCookie);
        }
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        if len % 4 != 0 {
            return Err(Error::UnalignedLength);
        }
        if len != body.len() {
            return Err(Error::LengthMismatch);
        }
        let mut id = [0u8; 12];
        id.copy_from_slice(&head[8..20]);
        let message = Message {
            kind: u16::from_be_bytes([head[0], head[1]]),
            id,
            body,
        };
        for a in message.attributes() {
            a?;
        }
        Ok(message)
    }

    /// Its attributes, in order; an error where one runs past the message.
    pub fn attributes(&self) -> impl Iterator<Item = Result<Attribute<'a>, Error>> + 'a {
        let mut rest = self.body;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let Some((head, after)) = rest.split_first_chunk::<4>() else {
                rest = &[];
                return Some(Err(Error::AttributeOverrun));
            };
            let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
            let padded = len.div_ceil(4) * 4;
            if padded > after.len() {
                rest = &[];
                return Some(Err(Error::AttributeOverrun));
            }
            rest = &after[padded..];
            Some(Ok(Attribute {
                kind: u16::from_be_bytes([head[0], head[1]]),
                value: &after[..len],
            }))
        })
    }

    /// What a Binding response says.
    pub fn binding_response(&self) -> Result<Response<'a>, Error> {
        match self.kind {
            BINDING_SUCCESS => {
                let (mut xor, mut plain) = (None, None);
                for a in self.attributes() {
                    let a = a?;
                    match a.kind {
                        XOR_MAPPED_ADDRESS if xor.is_none() => {
                            xor = Some(address(a.value, Some(&self.id))?)
                        }
                        MAPPED_ADDRESS if plain.is_none() => plain = Some(address(a.value, None)?),
                        _ => {}
                    }
                }
                Ok(Response::Success {
                    mapped: xor.or(plain),
                    xor: xor.is_some(),
                })
            }
            BINDING_ERROR => {
                for a in self.attributes() {
                    let a = a?;
                    if a.kind == ERROR_CODE {
                        return error_code(a.value);
                    }
                }
                Err(Error::NoErrorCode)
            }
            _ => Err(Error::NotBindingResponse),
        }
    }
}

/// A Binding response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response<'a> {
    /// A success response: the address the server saw, if it said one.
    Success {
        /// From XOR-MAPPED-ADDRESS, else MAPPED-ADDRESS.
        mapped: Option<SocketAddr>,
        /// It came from XOR-MAPPED-ADDRESS.
        xor: bool,
    },
    /// An error response.
    Error {
        /// The error code (300 to 699).
        code: u16,
        /// Its reason phrase (UTF-8 by the RFC; as sent).
        reason: &'a [u8],
    },
}

/// Reads a (XOR-)MAPPED-ADDRESS value; XORed with the cookie (and `id`, for IPv6) when `id`
/// is given.
fn address(value: &[u8], id: Option<&[u8; 12]>) -> Result<SocketAddr, Error> {
    let [_, family, p0, p1, addr @ ..] = value else {
        return Err(Error::BadAddressLength);
    };
    let mut pad = [0u8; 16];
    pad[..4].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    if let Some(id) = id {
        pad[4..].copy_from_slice(id);
    } else {
        pad = [0; 16];
    }
    let port = u16::from_be_bytes([p0 ^ pad[0], p1 ^ pad[1]]);
    let ip = match (family, addr.len()) {
        (1, 4) => {
            let mut a = [0u8; 4];
            a.iter_mut()
                .zip(addr.iter().zip(&pad))
                .for_each(|(o, (b, p))| *o = b ^ p);
            IpAddr::V4(Ipv4Addr::from(a))
        }
        (2, 16) => {
            let mut a = [0u8; 16];
            a.iter_mut()
                .zip(addr.iter().zip(&pad))
                .for_each(|(o, (b, p))| *o = b ^ p);
            IpAddr::V6(Ipv6Addr::from(a))
        }
        (1 | 2, _) => return Err(Error::BadAddressLength),
        _ => return Err(Error::BadFamily),
    };
    Ok(SocketAddr::new(ip, port))
}

fn error_code(value: &[u8]) -> Result<Response<'_>, Error> {
    let [_, _, class, number, reason @ ..] = value else {
        return Err(Error::BadErrorCode);
    };
    let class = class & 0x07;
    if !(3..=6).contains(&class) || *number > 99 {
        return Err(Error::BadErrorCode);
    }
    Ok(Response::Error {
        code: u16::from(class) * 100 + u16::from(*number),
        reason,
    })
}

/// Writes a Binding success response to `id` with `mapped` in XOR-MAPPED-ADDRESS into `buf`
/// (a test server's answer): its length.
pub fn emit_binding_success(
    id: &[u8; 12],
    mapped: SocketAddr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let addr_len = if mapped.is_ipv4() { 4 } else { 16 };
    let len = HEADER_LEN + 8 + addr_len;
    let out = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    emit_binding_request(id, out)?;
    out[0..2].copy_from_slice(&BINDING_SUCCESS.to_be_bytes());
    out[2..4].copy_from_slice(&((4 + 4 + addr_len) as u16).to_be_bytes());
    out[20..22].copy_from_slice(&XOR_MAPPED_ADDRESS.to_be_bytes());
    out[22..24].copy_from_slice(&((4 + addr_len) as u16).to_be_bytes());
    out[24] = 0;
    out[25] = if mapped.is_ipv4() { 1 } else { 2 };
    let mut pad = [0u8; 16];
    pad[..4].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    pad[4..].copy_from_slice(id);
    let port = mapped.port().to_be_bytes();
    out[26] = port[0] ^ pad[0];
    out[27] = port[1] ^ pad[1];
    let ip: Vec<u8> = match mapped.ip() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    for (i, b) in ip.iter().enumerate() {
        out[28 + i] = b ^ pad[i];
    }
    Ok(len)
}

#[cfg(test)]
mod tests;
