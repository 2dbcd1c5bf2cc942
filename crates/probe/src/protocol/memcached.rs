//! `--protocol memcached`: `get` and `set` over memcached's UDP protocol.
//!
//! Each request is one datagram whose request ID is the low 16 bits of its sequence number
//! (the ledger holds a flow's whole ID space: [`Key::Slot`]). Keys are `key:0` … `key:N-1`.
//! A measured request is a `set` with probability `set_ratio`, else a `get`; which one and
//! which key are drawn from a hash of the run id, the flow and the sequence number (the same
//! run asks the same things) and kept in the ledger's `aux` (bit 31: a `set`; the rest: the
//! key's index). Warm-up requests are `set`s of the keys in order over the flows (requests go
//! round-robin over them), so a warm-up of at least `keys` requests fills every key.
//!
//! A reply of several datagrams is put back together per (flow, request ID) in any order,
//! duplicates ignored; until it is whole its datagrams read as [`Read::Partial`]. Memory is
//! bounded: at most [`MAX_DATAGRAMS`] datagrams and [`MAX_REPLY_BYTES`] bytes a reply, at most
//! [`MAX_PENDING`] replies being put together. One that never completes is dropped when a
//! newer one needs its room or once its flow has gone [`PENDING_AGE`] request IDs past it,
//! and counted as malformed `incomplete reply` (on the next datagram that would have read as
//! partial; replies still incomplete when the run ends are not counted).

use std::net::SocketAddr;

use latlab_wire::memcached::{self as wire, Frame, Reply};

use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// Most datagrams a reply may have (a 64 KiB value is 48 of memcached's 1400-byte ones).
pub const MAX_DATAGRAMS: u16 = 64;
/// Most bytes a reply may have, frame headers left out.
pub const MAX_REPLY_BYTES: usize = 128 * 1024;
/// Most replies being put together at once, over all flows.
pub const MAX_PENDING: usize = 64;
/// Request IDs a flow may go past an incomplete reply before it is dropped.
pub const PENDING_AGE: u16 = 1024;

/// The outcomes, in [`Verdict::outcome`]'s order.
pub const OUTCOMES: &[&str] = &["hit", "miss", "stored", "not stored", "error"];

const SET: u32 = 1 << 31;

/// A memcached load: `keys` keys, a share `set_ratio` of `set`s of `value_size` bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Memcached {
    /// Keys `key:0` … `key:{keys-1}` (1 to 2^31 − 1).
    pub keys: u32,
    /// The share of measured requests that are `set` (0 to 1).
    pub set_ratio: f64,
    /// Bytes of every value set.
    pub value_size: usize,
}

/// Writes `key:{index}` into `buf`: the key's bytes.
pub fn key(index: u32, buf: &mut [u8; 16]) -> &[u8] {
    buf[..4].copy_from_slice(b"key:");
    let mut digits = [0u8; 10];
    let (mut n, mut i) = (index, digits.len());
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    buf[4..4 + len].copy_from_slice(&digits[i..]);
    &buf[..4 + len]
}

/// The key index of `key:{index}` written as [`key`] writes it, else `None`.
fn key_index(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(b"key:")?;
    if digits.is_empty() || digits.len() > 10 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

impl Memcached {
    /// Bytes of the longest request: a `set` of the longest key.
    pub fn request_len(&self) -> usize {
        let mut k = [0u8; 16];
        wire::set_len(
            key(self.keys.saturating_sub(1), &mut k).len(),
            0,
            self.value_size,
        )
    }
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Protocol for Memcached {
    fn name(&self) -> &'static str {
        "memcached"
    }

    fn max_request_len(&self) -> usize {
        self.request_len()
    }

    fn id_space(&self) -> Option<u64> {
        Some(1 << 16)
    }

    fn outcomes(&self) -> &'static [&'static str] {
        OUTCOMES
    }

    fn split(&self, run_id: u32, locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let threshold = if self.set_ratio >= 1.0 {
            u64::MAX
        } else {
            (self.set_ratio.max(0.0) * 2f64.powi(64)) as u64
        };
        let requests = MemcachedRequests {
            keys: self.keys.clamp(1, SET - 1),
            threshold,
            all_sets: self.set_ratio >= 1.0,
            flows: locals.len().max(1) as u64,
            run: mix(u64::from(run_id)),
            value: (0..self.value_size)
                .map(|i| b'a' + (i % 26) as u8)
                .collect(),
        };
        (Box::new(requests), Box::new(MemcachedReplies::default()))
    }
}

struct MemcachedRequests {
    keys: u32,
    threshold: u64,
    all_sets: bool,
    flows: u64,
    run: u64,
    value: Vec<u8>,
}

impl MemcachedRequests {
    /// Whether request `r` is a `set`, and of which key.
    fn pick(&self, r: Request) -> (bool, u32) {
        let keys = u64::from(self.keys);
        if r.warmup {
            let n = r
                .seq
                .wrapping_mul(self.flows)
                .wrapping_add(u64::from(r.flow));
            return (true, (n % keys) as u32);
        }
        let h = mix(self.run ^ mix(r.seq ^ (u64::from(r.flow) << 48)));
        let set = self.all_sets || h < self.threshold;
        let index = ((u128::from(mix(h)) * u128::from(keys)) >> 64) as u32;
        (set, index)
    }
}

impl Requests for MemcachedRequests {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        let (set, index) = self.pick(request);
        let id = request.seq as u16;
        let mut k = [0u8; 16];
        let key = key(index, &mut k);
        let written = if set {
            wire::emit_set(id, key, 0, &self.value, buf)
        } else {
            wire::emit_get(id, key, buf)
        };
        let aux = index | if set { SET } else { 0 };
        // The buffer holds max_request_len bytes: a set of the longest key always fits.
        let len = written.unwrap_or(0);
        Written { len, aux }
    }
}

/// A reply being put together.
#[derive(Debug)]
struct Pending {
    flow: u32,
    id: u16,
    total: u16,
    /// Which sequence numbers came (bit per datagram).
    got: u64,
    parts: Vec<Vec<u8>>,
    bytes: usize,
    born: u64,
}

/// What a whole reply said, read once it was whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// A `VALUE` of the key with this index (`None`: a key latlab does not write).
    Value(Option<u32>),
    End,
    Stored,
    NotStored,
    Error,
}

#[derive(Debug, Default)]
struct MemcachedReplies {
    pending: Vec<Pending>,
    /// Recently completed replies (flow, request ID): later datagrams of them are duplicates.
    done: std::collections::VecDeque<(u32, u16)>,
    /// Incomplete replies dropped and not yet counted.
    owed: u64,
    born: u64,
    /// The reply `read` just read whole: flow, request ID and what it said.
    last: Option<(u32, u16, Said)>,
}

fn said(text: &[u8]) -> Result<Said, Cause> {
    Ok(match wire::parse_reply(text).map_err(wire::Error::name)? {
        Reply::Value { key, .. } => Said::Value(key_index(key)),
        Reply::End => Said::End,
        Reply::Stored => Said::Stored,
        Reply::NotStored | Reply::Exists | Reply::NotFound => Said::NotStored,
        Reply::Error | Reply::ClientError(_) | Reply::ServerError(_) => Said::Error,
    })
}

impl MemcachedReplies {
    /// A datagram that leaves its reply incomplete: partial, or an owed drop counted.
    fn partial(&mut self) -> Result<Read, Cause> {
        if self.owed > 0 {
            self.owed -= 1;
            return Err("incomplete reply");
        }
        Ok(Read::Partial)
    }

    /// Drops the replies of `flow` that it has gone [`PENDING_AGE`] IDs past, and the oldest
    /// one when there is no room for another.
    fn evict(&mut self, flow: u32, id: u16) {
        let before = self.pending.len();
        // Behind by more than half the ID space is ahead: a reply overtaken by an older one.
        self.pending.retain(|p| {
            let behind = id.wrapping_sub(p.id);
            p.flow != flow || behind <= PENDING_AGE || behind > u16::MAX / 2
        });
        if self.pending.len() >= MAX_PENDING {
            if let Some(oldest) = (0..self.pending.len()).min_by_key(|&i| self.pending[i].born) {
                self.pending.swap_remove(oldest);
            }
        }
        self.owed += (before - self.pending.len()) as u64;
    }

    fn whole(&mut self, flow: u32, id: u16, said: Said) -> Read {
        self.last = Some((flow, id, said));
        Read::Answer(Key::Slot(u64::from(id)))
    }
}

impl Replies for MemcachedReplies {
    fn read(&mut self, flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        self.last = None;
        let (frame, text) = Frame::parse(payload).map_err(wire::Error::name)?;
        let id = frame.request_id;
        if frame.total == 1 {
            let s = said(text)?;
            return Ok(self.whole(flow, id, s));
        }
        if frame.total > MAX_DATAGRAMS {
            return Err("too many datagrams");
        }
        if self.done.contains(&(flow, id)) {
            return Err("datagram of a whole reply");
        }
        let at = match self
            .pending
            .iter()
            .position(|p| p.flow == flow && p.id == id)
        {
            Some(at) => at,
            None => {
                self.evict(flow, id);
                self.born += 1;
                self.pending.push(Pending {
                    flow,
                    id,
                    total: frame.total,
                    got: 0,
                    parts: vec![Vec::new(); usize::from(frame.total)],
                    bytes: 0,
                    born: self.born,
                });
                self.pending.len() - 1
            }
        };
        let p = &mut self.pending[at];
        if p.total != frame.total {
            return Err("total changed");
        }
        let bit = 1u64 << frame.sequence;
        if p.got & bit != 0 {
            return self.partial();
        }
        if p.bytes + text.len() > MAX_REPLY_BYTES {
            self.pending.swap_remove(at);
            return Err("reply too long");
        }
        p.got |= bit;
        p.bytes += text.len();
        p.parts[usize::from(frame.sequence)] = text.to_vec();
        if p.got.count_ones() < u32::from(p.total) {
            return self.partial();
        }
        let p = self.pending.swap_remove(at);
        if self.done.len() >= 16 {
            self.done.pop_front();
        }
        self.done.push_back((flow, id));
        let s = said(&p.parts.concat())?;
        Ok(self.whole(flow, id, s))
    }

    fn judge(&mut self, flow: u32, sent: &Sent, _payload: &[u8]) -> Result<Verdict, Cause> {
        let Some((f, id, said)) = self.last.take() else {
            return Err("no reply read");
        };
        if f != flow || id != sent.seq as u16 {
            return Err("no reply read");
        }
        let set = sent.aux & SET != 0;
        let index = sent.aux & !SET;
        let outcome = match (said, set) {
            (Said::Value(k), false) if k == Some(index) => 0,
            (Said::Value(_), false) => return Err("another key"),
            (Said::End, false) => 1,
            (Said::Stored, true) => 2,
            (Said::NotStored, true) => 3,
            (Said::Error, _) => 4,
            (Said::Value(_) | Said::End, true) => return Err("value for a set"),
            (Said::Stored | Said::NotStored, false) => return Err("stored for a get"),
        };
        Ok(Verdict {
            outcome,
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests;
