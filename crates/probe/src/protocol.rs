//! Requests to servers latlab did not write: a [`Protocol`] turns each due probe into a request
//! of its own protocol (a DNS query, a memcached `get`, a STUN Binding request…) and each
//! reply back into the request it answers, so the open-loop schedule, the latency from the
//! intended send time and every results file work against any UDP server.
//!
//! A reply carries none of latlab's stamps, so the send side writes what the receive side
//! needs into a shared [`Ledger`]: per flow and request slot, the request's sequence number,
//! its intended and actual send times and the protocol's `aux` (which query, which key). The
//! receive side's [`ProtocolMeter`] reads the reply's token ([`Key`]), finds its request in
//! the ledger, lets the protocol judge the reply against it ([`Replies::judge`]) and records
//! the latency, counting every reply that is not an answer by cause.
//!
//! Each side has its own state: [`Protocol::split`] makes a [`Requests`] for the send half
//! and a [`Replies`] for the receive half (memcached's reassembly of multi-datagram replies
//! lives there); the two threads of a split generator share only the ledger.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

pub mod dns;
pub mod echo;
mod ledger;
pub mod memcached;
mod meter;
pub mod ntp;
pub mod quake3;
pub mod stun;
mod summary;
pub mod template;
pub mod token;

pub use ledger::{Ledger, Sent};
pub use meter::{ProtocolMeter, ProtocolReport, ProtocolResponse};
pub use summary::ProtocolSummary;

/// One request as the send half hands it to the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The flow (source port) it leaves from.
    pub flow: u32,
    /// Its sequence number within the flow.
    pub seq: u64,
    /// Due in the warm-up: memcached fills its keys then.
    pub warmup: bool,
}

/// What [`Requests::write`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes of the request at the start of the buffer.
    pub len: usize,
    /// What the receive side needs to judge the reply (the query's index, the key's index
    /// and whether it was a `set`…), kept in the ledger beside the request.
    pub aux: u32,
}

/// Which request a reply says it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A slot of the flow's ledger (a 16-bit DNS or memcached ID is the slot itself): the
    /// request is whichever the ledger holds there. A slot beyond the ledger (`u64::MAX`)
    /// names no request: a wrong id.
    Slot(u64),
    /// A whole sequence number (carried in a STUN transaction ID, an NTP origin timestamp, a
    /// challenge): it must be the one the ledger holds in its slot.
    Seq(u64),
    /// The flow's oldest unanswered request (a template without a token: one request in
    /// flight per flow, replies taken in order).
    Oldest,
}

/// A reply read by [`Replies::read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// It claims to answer the request `key` names.
    Answer(Key),
    /// One datagram of a reply that is not whole yet (memcached's multi-datagram replies).
    Partial,
}

/// What a reply said, once matched to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Index into [`Protocol::outcomes`] (NOERROR, a `get` hit…).
    pub outcome: usize,
    /// The server's own time between receiving the request and sending the reply, when the
    /// reply says it (NTP's T3 − T2): reported apart from the path's round trip.
    pub server_ns: Option<u64>,
}

/// Why a datagram is not an answer to a request of this run. Each is counted in
/// [`ProtocolReport::malformed`] under its name.
pub type Cause = &'static str;

/// Builds the two halves of a protocol run.
pub trait Protocol: fmt::Debug + Send + Sync {
    /// Its name on the command line (`dns`, `memcached`…).
    fn name(&self) -> &'static str;
    /// Bytes of the longest request it writes (the ports' send slots are made for it).
    fn max_request_len(&self) -> usize;
    /// Distinct tokens one flow has (`Some(65536)` for a 16-bit ID): the requests of a flow
    /// that can be told apart at once. `None`: the token holds a whole sequence number.
    fn id_space(&self) -> Option<u64> {
        None
    }
    /// One request in flight per flow (a template without a token): the schedule is then
    /// open-loop across flows only, a request due while its flow waits is not sent and is
    /// counted as `busy`.
    fn one_in_flight(&self) -> bool {
        false
    }
    /// The names of its outcome counters, in [`Verdict::outcome`]'s order.
    fn outcomes(&self) -> &'static [&'static str];
    /// The send and receive halves, for a run of `flows` flows whose sockets have the local
    /// addresses `locals` (STUN checks XOR-MAPPED-ADDRESS against them) and whose run id is
    /// `run_id` (tokens that hold a sequence number mix it in, so a reply to another run is
    /// not taken for one of this run).
    fn split(&self, run_id: u32, locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>);
    /// A line for the report on what the server's own limits do to this run at `pps` per
    /// source address (`quake3`: the engine's per-address rate limit), `None` when nothing.
    fn limit_note(&self, _pps_per_address: f64) -> Option<String> {
        None
    }
}

/// The send half: writes requests.
pub trait Requests: Send {
    /// Writes request `request` at the start of `buf` (at least
    /// [`Protocol::max_request_len`] bytes).
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written;
}

/// The receive half: reads replies and judges them against their requests.
pub trait Replies: Send {
    /// Reads one datagram that arrived on `flow`'s socket: which request it says it answers,
    /// or why it is not a reply (a [`Cause`], counted).
    fn read(&mut self, flow: u32, payload: &[u8]) -> Result<Read, Cause>;
    /// Judges the reply [`read`](Replies::read) just read against the request the ledger
    /// holds for it (its sequence number and `aux`): the outcome, or why it does not answer
    /// that request (another question, another key: counted as a `mismatch` by cause).
    fn judge(&mut self, flow: u32, sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause>;
}

/// A protocol shared by a run's two halves and its report.
pub type SharedProtocol = Arc<dyn Protocol>;

#[cfg(test)]
mod tests;
