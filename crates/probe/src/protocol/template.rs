//! `gen --protocol template`: every request is the same payload of the user's, with, when a
//! token is asked for, a per-request value written at its place; a reply is matched by that
//! token, read where the reply carries it, or searched for.
//!
//! - **A token of 8 to 16 bytes** holds the whole sequence number, XORed with a 64-bit key made
//!   from the run id (its first 8 bytes, big-endian; the bytes past 8 are more of the run's
//!   key): a reply to another run, or a reply carrying other bytes, names no request of this
//!   run (`wrong id`) ([`Key::Seq`]).
//! - **A token under 8 bytes** holds `seq mod 2^(8·len)` (big-endian); a flow can tell apart
//!   `min(2^(8·len), 65536)` requests at once ([`Protocol::id_space`]), and the reply names
//!   slot `token mod` that ([`Key::Slot`]). A one-byte token reuses its 256 values every 256
//!   requests of a flow: a reply that comes after 256 newer requests of its flow is taken for
//!   the newer one whose token it has (the report counts requests that took a token still
//!   outstanding, `ids_reused`; more flows, or a longer token, give more room). The whole
//!   token is checked against its request's (`another token`).
//! - **Any**: the reply is searched, from its start, for the first place whose 8 to 16 bytes
//!   read as a token of this run (their sequence number below 2^40, and the bytes past 8 the
//!   run's); a short token cannot be told from other bytes, so `any` needs 8 bytes or more.
//! - **No token**: one request in flight per flow, every reply taken for the flow's oldest
//!   unanswered request, in order ([`Key::Oldest`]): the schedule is then open-loop across flows
//!   only (a request due while its flow waits is not sent, counted `busy`).
//!
//! The one outcome is `answered`.

use std::net::SocketAddr;
use std::sync::Arc;

use super::token::splitmix64;
use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// The longest token.
pub const MAX_TOKEN_LEN: usize = 16;

/// Where a reply carries its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyToken {
    /// At this offset, of this length (the request's length).
    At(usize),
    /// Anywhere: searched for.
    Any,
}

/// A fixed payload with an optional per-request token (see the module's doc).
#[derive(Clone, Debug)]
pub struct Template {
    payload: Arc<[u8]>,
    token: Option<(usize, usize)>,
    reply: ReplyToken,
}

/// Why a template's flags do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// An empty payload.
    #[error("the payload is empty")]
    Empty,
    /// A token length outside 1..=16.
    #[error("a token is 1 to 16 bytes, not {0}")]
    TokenLen(usize),
    /// The token does not lie inside the payload.
    #[error("{offset}:{len} lies outside the {payload}-byte payload")]
    Outside {
        /// Its offset.
        offset: usize,
        /// Its length.
        len: usize,
        /// The payload's length.
        payload: usize,
    },
    /// `any` with a token under 8 bytes.
    #[error(
        "any needs a token of 8 bytes or more (a shorter one cannot be told from other bytes)"
    )]
    ShortAny,
}

impl Template {
    /// `payload`, with the token at `token` (offset, length), read back from replies where
    /// `reply` says (`None`: where the request had it).
    pub fn new(
        payload: Vec<u8>,
        token: Option<(usize, usize)>,
        reply: Option<ReplyToken>,
    ) -> Result<Template, TemplateError> {
        if payload.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut reply_at = ReplyToken::At(0);
        if let Some((offset, len)) = token {
            if !(1..=MAX_TOKEN_LEN).contains(&len) {
                return Err(TemplateError::TokenLen(len));
            }
            if offset
                .checked_add(len)
                .is_none_or(|end| end > payload.len())
            {
                return Err(TemplateError::Outside {
                    offset,
                    len,
                    payload: payload.len(),
                });
            }
            reply_at = reply.unwrap_or(ReplyToken::At(offset));
            if reply_at == ReplyToken::Any && len < 8 {
                return Err(TemplateError::ShortAny);
            }
        }
        Ok(Template {
            payload: payload.into(),
            token,
            reply: reply_at,
        })
    }
}

/// The two halves' shared view of the token.
#[derive(Clone, Debug)]
struct Tokens {
    template: Template,
    key: u64,
    /// The bytes past 8 of a long token: more of the run's key.
    tail: [u8; 8],
}

impl Tokens {
    fn new(template: &Template, run_id: u32) -> Tokens {
        let key = splitmix64(u64::from(run_id));
        Tokens {
            template: template.clone(),
            key,
            tail: splitmix64(u64::from(run_id ^ 0x5a5a_5a5a)).to_be_bytes(),
        }
    }

    /// The token of request `seq`, `len` bytes.
    fn token(&self, seq: u64, len: usize, out: &mut [u8]) {
        if len >= 8 {
            out[..8].copy_from_slice(&(seq ^ self.key).to_be_bytes());
            out[8..len].copy_from_slice(&self.tail[..len - 8]);
        } else {
            out[..len].copy_from_slice(&seq.to_be_bytes()[8 - len..]);
        }
    }

    /// The sequence number a long token's bytes hold, if they are this run's.
    fn long_seq(&self, bytes: &[u8]) -> Option<u64> {
        let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
        (bytes[8..] == self.tail[..bytes.len() - 8]).then(|| u64::from_be_bytes(head) ^ self.key)
    }
}

impl Protocol for Template {
    fn name(&self) -> &'static str {
        "template"
    }

    fn max_request_len(&self) -> usize {
        self.payload.len()
    }

    fn id_space(&self) -> Option<u64> {
        match self.token {
            Some((_, len)) if len < 8 => Some((1u64 << (8 * len)).min(1 << 16)),
            _ => None,
        }
    }

    fn one_in_flight(&self) -> bool {
        self.token.is_none()
    }

    fn outcomes(&self) -> &'static [&'static str] {
        &["answered"]
    }

    fn split(&self, run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let tokens = Tokens::new(self, run_id);
        (Box::new(tokens.clone()), Box::new(tokens))
    }
}

impl Requests for Tokens {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        let payload = &self.template.payload;
        buf[..payload.len()].copy_from_slice(payload);
        if let Some((offset, len)) = self.template.token {
            self.token(request.seq, len, &mut buf[offset..offset + len]);
        }
        Written {
            len: payload.len(),
            aux: 0,
        }
    }
}

impl Replies for Tokens {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        let Some((_, len)) = self.template.token else {
            return Ok(Read::Answer(Key::Oldest));
        };
        match self.template.reply {
            ReplyToken::At(offset) => {
                let bytes = payload
                    .get(offset..offset + len)
                    .ok_or("shorter than its token's place")?;
                if len >= 8 {
                    let seq = self.long_seq(bytes).ok_or("another run's token")?;
                    return Ok(Read::Answer(Key::Seq(seq)));
                }
                let mut value = [0u8; 8];
                value[8 - len..].copy_from_slice(bytes);
                let ids = self.template.id_space().unwrap_or(1 << 16);
                Ok(Read::Answer(Key::Slot(u64::from_be_bytes(value) % ids)))
            }
            ReplyToken::Any => payload
                .windows(len)
                .find_map(|w| self.long_seq(w).filter(|seq| *seq < 1 << 40))
                .map(|seq| Read::Answer(Key::Seq(seq)))
                .ok_or("no token in it"),
        }
    }

    fn judge(&mut self, _flow: u32, sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        if let (Some((_, len)), ReplyToken::At(offset)) = (self.template.token, self.template.reply)
        {
            if len < 8 {
                let mut want = [0u8; 8];
                self.token(sent.seq, len, &mut want);
                if payload.get(offset..offset + len) != Some(&want[..len]) {
                    return Err("another token");
                }
            }
        }
        Ok(Verdict {
            outcome: 0,
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests;
