//! Quake III Arena's connectionless ("out-of-band") packets, as ioquake3 and OpenArena speak
//! them: four `0xff` bytes, then text. A query is `getinfo CHALLENGE`; its answer is
//! `infoResponse\n` followed by an info string, `\key\value\key\value…`, whose `challenge`
//! is the query's echoed.
//!
//! ```text
//! ff ff ff ff "getinfo 1a2b3c"
//! ff ff ff ff "infoResponse\n\sv_maxclients\8\clients\0\mapname\aggressor\…\challenge\1a2b3c"
//! ```

use crate::{Error, Result};

/// The four bytes every connectionless packet starts with.
pub const OUT_OF_BAND: [u8; 4] = [0xff; 4];

/// The longest challenge ioquake3 echoes (`SVC_Info` ignores a query with a longer one).
pub const MAX_CHALLENGE_LEN: usize = 128;

/// The command of an info query.
pub const GETINFO: &[u8] = b"getinfo";

/// The command of its answer.
pub const INFO_RESPONSE: &[u8] = b"infoResponse";

/// Bytes of a `getinfo` query carrying `challenge`.
pub const fn getinfo_len(challenge: &[u8]) -> usize {
    OUT_OF_BAND.len() + GETINFO.len() + 1 + challenge.len()
}

/// Writes `getinfo CHALLENGE` at the start of `buf` and returns its length.
/// [`Error::Malformed`] for a challenge the engine would not echo as it went (empty, longer
/// than [`MAX_CHALLENGE_LEN`], or holding anything but printable ASCII other than space,
/// `\`, `;` and `"`); [`Error::Truncated`] when `buf` is too short.
pub fn emit_getinfo(challenge: &[u8], buf: &mut [u8]) -> Result<usize> {
    let echoes = |b: &u8| b.is_ascii_graphic() && !matches!(b, b'\\' | b';' | b'"');
    if challenge.is_empty() || challenge.len() > MAX_CHALLENGE_LEN || !challenge.iter().all(echoes)
    {
        return Err(Error::Malformed);
    }
    let len = getinfo_len(challenge);
    let out = buf.get_mut(..len).ok_or(Error::Truncated)?;
    let (oob, rest) = out.split_at_mut(OUT_OF_BAND.len());
    oob.copy_from_slice(&OUT_OF_BAND);
    let (command, rest) = rest.split_at_mut(GETINFO.len());
    command.copy_from_slice(GETINFO);
    rest[0] = b' ';
    rest[1..].copy_from_slice(challenge);
    Ok(len)
}

/// A connectionless packet: its command (the text up to the first newline or space) and
/// what follows that separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBand<'a> {
    /// `infoResponse`, `statusResponse`, `getinfo`…
    pub command: &'a [u8],
    /// The rest, after the separator.
    pub body: &'a [u8],
}

impl<'a> OutOfBand<'a> {
    /// Reads `payload`: [`Error::Truncated`] below the four marker bytes,
    /// [`Error::BadMagic`] when they are not `0xff` (an in-band game packet).
    pub fn parse(payload: &'a [u8]) -> Result<OutOfBand<'a>> {
        let text = match payload.split_first_chunk::<4>() {
            None => return Err(Error::Truncated),
            Some((marker, _)) if *marker != OUT_OF_BAND => return Err(Error::BadMagic),
            Some((_, text)) => text,
        };
        let end = text
            .iter()
            .position(|b| matches!(b, b'\n' | b' '))
            .unwrap_or(text.len());
        Ok(OutOfBand {
            command: &text[..end],
            body: text.get(end + 1..).unwrap_or(&[]),
        })
    }

    /// The info string of an `infoResponse`: [`Error::OtherProtocol`] for another command,
    /// [`Error::Malformed`] for an info string that is not `\key\value` pairs.
    pub fn info_response(&self) -> Result<Info<'a>> {
        if self.command != INFO_RESPONSE {
            return Err(Error::OtherProtocol);
        }
        Info::parse(self.body)
    }
}

/// An info string, `\key\value\key\value…` (a trailing newline or NUL dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info<'a>(&'a [u8]);

impl<'a> Info<'a> {
    /// Checks `text` is pairs: it starts with `\` (or is empty) and has as many values as
    /// keys, no key empty, no newline inside.
    pub fn parse(text: &'a [u8]) -> Result<Info<'a>> {
        let mut text = text;
        while let Some((last, rest)) = text.split_last() {
            if matches!(last, b'\n' | 0) {
                text = rest;
            } else {
                break;
            }
        }
        let info = Info(text);
        if text.is_empty() {
            return Ok(info);
        }
        if text[0] != b'\\' || text.contains(&b'\n') {
            return Err(Error::Malformed);
        }
        let fields = text[1..].split(|b| *b == b'\\').count();
        if fields % 2 != 0 || info.pairs().any(|(k, _)| k.is_empty()) {
            return Err(Error::Malformed);
        }
        Ok(info)
    }

    /// Its `(key, value)` pairs, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let mut fields = self.0.get(1..).unwrap_or(&[]).split(|b| *b == b'\\');
        let empty = self.0.is_empty();
        std::iter::from_fn(move || {
            if empty {
                return None;
            }
            let key = fields.next()?;
            let value = fields.next()?;
            Some((key, value))
        })
    }

    /// The value of `key` (the first, as the engine reads it), `None` when absent.
    pub fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        self.pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The value of `key` read as a decimal number.
    pub fn number(&self, key: &[u8]) -> Option<u64> {
        std::str::from_utf8(self.get(key)?).ok()?.parse().ok()
    }

    /// The whole info string.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
}

#[cfg(test)]
mod tests;
