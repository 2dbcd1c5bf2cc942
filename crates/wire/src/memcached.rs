//! memcached's UDP protocol (`protocol.txt`, "UDP protocol"): every datagram starts with an
//! 8-byte frame header (request ID, sequence number, total datagrams, reserved 0), then the
//! text protocol. A request is one datagram; a reply may be several (memcached 1.6 sends at
//! most 1400 bytes a datagram, header included), which the reader reassembles by request ID
//! and sequence number.
//!
//! What is here: the frame header, `get <key>\r\n` and `set <key> <flags> 0 <n>\r\n<data>\r\n`
//! requests, and the replies to them ([`Reply`]). Parsing takes any bytes and returns an
//! [`Error`] naming what is wrong; it never panics.

use core::fmt;

/// Bytes of the frame header.
pub const FRAME_LEN: usize = 8;

/// The longest key memcached takes.
pub const MAX_KEY_LEN: usize = 250;

/// The largest UDP payload over IPv4 (65535 − 20 − 8): a request is one datagram, and
/// memcached reads a whole datagram into its UDP buffer (64 KiB), so this is the limit.
pub const MAX_REQUEST_LEN: usize = 65_507;

/// Why bytes are not a memcached datagram or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// Shorter than the 8-byte frame header.
    ShortFrame,
    /// The frame says its reply has 0 datagrams.
    ZeroTotal,
    /// The frame's sequence number is not below its total.
    SequencePastTotal,
    /// The frame's reserved field is not 0.
    ReservedNotZero,
    /// The reply has no `\r\n` ending its first line.
    NoLineEnd,
    /// The first line is no reply memcached sends to `get` or `set`.
    UnknownReply,
    /// A `VALUE` line without key, flags and byte count (or with more than a CAS after them).
    BadValueLine,
    /// A `VALUE` line whose flags are not a 32-bit decimal number.
    BadFlags,
    /// A `VALUE` line whose byte count is not a decimal number.
    BadByteCount,
    /// A `VALUE` line whose CAS is not a 64-bit decimal number.
    BadCas,
    /// The data after a `VALUE` line is shorter than its byte count.
    ShortData,
    /// The byte count disagrees with the data: no `\r\n` right after that many bytes.
    DataNotTerminated,
    /// A `VALUE` block not followed by `END\r\n`.
    NoEnd,
    /// Bytes after the end of the reply.
    TrailingBytes,
    /// The request does not fit in the buffer, or a key is empty, too long or holds a space or
    /// control byte.
    BadRequest,
}

impl Error {
    /// A short lowercase name for counting.
    pub fn name(self) -> &'static str {
        match self {
            Error::ShortFrame => "short frame",
            Error::ZeroTotal => "zero datagrams",
            Error::SequencePastTotal => "sequence past total",
            Error::ReservedNotZero => "reserved not zero",
            Error::NoLineEnd => "no line end",
            Error::UnknownReply => "unknown reply",
            Error::BadValueLine => "bad value line",
            Error::BadFlags => "bad flags",
            Error::BadByteCount => "bad byte count",
            Error::BadCas => "bad cas",
            Error::ShortData => "short data",
            Error::DataNotTerminated => "byte count disagrees",
            Error::NoEnd => "no end",
            Error::TrailingBytes => "trailing bytes",
            Error::BadRequest => "bad request",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Error {}

/// The frame header of one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Chosen by the client, echoed in every datagram of the reply.
    pub request_id: u16,
    /// This datagram's place in its reply, from 0.
    pub sequence: u16,
    /// Datagrams in the reply (1 for a request).
    pub total: u16,
}

impl Frame {
    /// Reads the frame header of `datagram`: the header and the text after it.
    pub fn parse(datagram: &[u8]) -> Result<(Frame, &[u8]), Error> {
        let Some((head, rest)) = datagram.split_first_chunk::<FRAME_LEN>() else {
            return Err(Error::ShortFrame);
        };
        let field = |i: usize| u16::from_be_bytes([head[i], head[i + 1]]);
        let frame = Frame {
            request_id: field(0),
            sequence: field(2),
            total: field(4),
        };
        if field(6) != 0 {
            return Err(Error::ReservedNotZero);
        }
        if frame.total == 0 {
            return Err(Error::ZeroTotal);
        }
        if frame.sequence >= frame.total {
            return Err(Error::SequencePastTotal);
        }
        Ok((frame, rest))
    }

    /// Writes the header at the start of `buf` (at least [`FRAME_LEN`] bytes).
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), Error> {
        let head = buf.get_mut(..FRAME_LEN).ok_or(Error::BadRequest)?;
        head[0..2].copy_from_slice(&self.request_id.to_be_bytes());
        head[2..4].copy_from_slice(&self.sequence.to_be_bytes());
        head[4..6].copy_from_slice(&self.total.to_be_bytes());
        head[6..8].fill(0);
        Ok(())
    }
}

fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(Error::BadRequest);
    }
    Ok(())
}

/// Appends `parts` to `buf` from `at`: the new end.
fn put(buf: &mut [u8], at: usize, parts: &[&[u8]]) -> Result<usize, Error> {
    let mut at = at;
    for part in parts {
        let end = at + part.len();
        buf.get_mut(at..end)
            .ok_or(Error::BadRequest)?
            .copy_from_slice(part);
        at = end;
    }
    Ok(at)
}

/// Decimal digits of `n`, into `digits`: the slice that holds them.
fn decimal(n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[i..];
        }
    }
}

/// Writes the datagram `get <key>\r\n` with request ID `request_id` into `buf`: its length.
pub fn emit_get(request_id: u16, key: &[u8], buf: &mut [u8]) -> Result<usize, Error> {
    check_key(key)?;
    frame(request_id).emit(buf)?;
    put(buf, FRAME_LEN, &[b"get ", key, b"\r\n"])
}

/// Writes the datagram `set <key> <flags> 0 <len>\r\n<data>\r\n` (no expiry) with request ID
/// `request_id` into `buf`: its length.
pub fn emit_set(
    request_id: u16,
    key: &[u8],
    flags: u32,
    data: &[u8],
    buf: &mut [u8],
) -> Result<usize, Error> {
    check_key(key)?;
    frame(request_id).emit(buf)?;
    let (mut f, mut n) = ([0u8; 20], [0u8; 20]);
    let flags = decimal(u64::from(flags), &mut f);
    let len = decimal(data.len() as u64, &mut n);
    put(
        buf,
        FRAME_LEN,
        &[
            b"set ", key, b" ", flags, b" 0 ", len, b"\r\n", data, b"\r\n",
        ],
    )
}

/// Bytes of the datagram [`emit_set`] writes for a key of `key_len` bytes, flags `flags` and
/// `data_len` bytes of data.
pub fn set_len(key_len: usize, flags: u32, data_len: usize) -> usize {
    let (mut f, mut n) = ([0u8; 20], [0u8; 20]);
    FRAME_LEN
        + b"set ".len()
        + key_len
        + 1
        + decimal(u64::from(flags), &mut f).len()
        + b" 0 ".len()
        + decimal(data_len as u64, &mut n).len()
        + 2
        + data_len
        + 2
}

fn frame(request_id: u16) -> Frame {
    Frame {
        request_id,
        sequence: 0,
        total: 1,
    }
}

/// A reply to `get` or `set` (the text after the frame header, reassembled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\nEND\r\n`: a `get` hit.
    Value {
        /// The item's key.
        key: &'a [u8],
        /// Its flags.
        flags: u32,
        /// Its data.
        data: &'a [u8],
        /// Its CAS (replies to `gets`).
        cas: Option<u64>,
    },
    /// `END\r\n`: a `get` miss.
    End,
    /// `STORED\r\n`.
    Stored,
    /// `NOT_STORED\r\n`.
    NotStored,
    /// `EXISTS\r\n`.
    Exists,
    /// `NOT_FOUND\r\n`.
    NotFound,
    /// `ERROR\r\n`: a command memcached does not know.
    Error,
    /// `CLIENT_ERROR <message>\r\n`.
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <message>\r\n`.
    ServerError(&'a [u8]),
}

/// The first line of `text` (without its `\r\n`) and what follows it.
fn line(text: &[u8]) -> Result<(&[u8], &[u8]), Error> {
    let end = text
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(Error::NoLineEnd)?;
    Ok((&text[..end], &text[end + 2..]))
}

fn number(field: &[u8], error: Error) -> Result<u64, Error> {
    if field.is_empty() || field.len() > 20 || !field.iter().all(u8::is_ascii_digit) {
        return Err(error);
    }
    field.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(error)
    })
}

/// Reads one reply to `get` or `set`: `text` must hold it all and nothing after it.
pub fn parse_reply(text: &[u8]) -> Result<Reply<'_>, Error> {
    let (first, rest) = line(text)?;
    let whole = |reply: Reply<'static>| {
        if rest.is_empty() {
            Ok(reply)
        } else {
            Err(Error::TrailingBytes)
        }
    };
    let message = |prefix: &[u8]| first.strip_prefix(prefix).filter(|_| rest.is_empty());
    match first {
        b"END" => return whole(Reply::End),
        b"STORED" => return whole(Reply::Stored),
        b"NOT_STORED" => return whole(Reply::NotStored),
        b"EXISTS" => return whole(Reply::Exists),
        b"NOT_FOUND" => return whole(Reply::NotFound),
        b"ERROR" => return whole(Reply::Error),
        _ => {}
    }
    if first.starts_with(b"CLIENT_ERROR") || first.starts_with(b"SERVER_ERROR") {
        let client = first.starts_with(b"CLIENT_ERROR");
        let text = message(if client {
            b"CLIENT_ERROR"
        } else {
            b"SERVER_ERROR"
        })
        .ok_or(Error::TrailingBytes)?;
        let text = text.strip_prefix(b" ").unwrap_or(text);
        return Ok(if client {
            Reply::ClientError(text)
        } else {
            Reply::ServerError(text)
        });
    }
    let Some(fields) = first.strip_prefix(b"VALUE ") else {
        return Err(Error::UnknownReply);
    };
    let mut fields = fields.split(|&b| b == b' ');
    let (Some(key), Some(flags), Some(bytes)) = (fields.next(), fields.next(), fields.next())
    else {
        return Err(Error::BadValueLine);
    };
    if key.is_empty() {
        return Err(Error::BadValueLine);
    }
    let cas = fields
        .next()
        .map(|c| number(c, Error::BadCas))
        .transpose()?;
    if fields.next().is_some() {
        return Err(Error::BadValueLine);
    }
    let flags = u32::try_from(number(flags, Error::BadFlags)?).map_err(|_| Error::BadFlags)?;
    let bytes = number(bytes, Error::BadByteCount)?;
    let bytes = usize::try_from(bytes).map_err(|_| Error::BadByteCount)?;
    if rest.len() < bytes {
        return Err(Error::ShortData);
    }
    let (data, after) = rest.split_at(bytes);
    let Some(after) = after.strip_prefix(b"\r\n") else {
        return Err(Error::DataNotTerminated);
    };
    match after {
        b"END\r\n" => Ok(Reply::Value {
            key,
            flags,
            data,
            cas,
        }),
        _ if after.starts_with(b"END\r\n") => Err(Error::TrailingBytes),
        _ => Err(Error::NoEnd),
    }
}

#[cfg(test)]
mod tests;
