//! `--protocol stun`: STUN Binding requests (RFC 8489), no attributes.
//!
//! The 96-bit transaction ID is 32 bits of the run (a hash of the run id) and the request's
//! 64-bit sequence number XORed with a mask drawn from the run id ([`Key::Seq`]): a response
//! to another run reads as `another run`, not as one of this run's requests. A success
//! response's mapped address (XOR-MAPPED-ADDRESS, else MAPPED-ADDRESS) is compared with the
//! local address of the flow's socket: `mapped ok` when they are the same, `mapped mismatch`
//! when not (a NAT on the path, or a server that answers wrongly). A socket bound to the
//! unspecified address (0.0.0.0, ::) does not know which address its datagrams leave from,
//! so then only the port is compared: bind gen to the client's address (`--bind`) to have
//! the address checked too.

use std::net::SocketAddr;

use latlab_wire::stun::{self as wire, Message, Response};

use super::token::splitmix64;
use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// The outcomes, in [`Verdict::outcome`]'s order.
pub const OUTCOMES: &[&str] = &[
    "mapped ok",
    "mapped mismatch",
    "no mapped address",
    "error response",
];

/// STUN Binding requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stun;

/// The run's part of a transaction ID, and the mask over its sequence number.
#[derive(Clone, Copy, Debug)]
struct Ids {
    tag: [u8; 4],
    mask: u64,
}

impl Ids {
    fn new(run_id: u32) -> Ids {
        let h = splitmix64(u64::from(run_id));
        Ids {
            tag: ((h >> 32) as u32).to_be_bytes(),
            mask: splitmix64(h ^ 0x5354_554e),
        }
    }

    fn id(&self, seq: u64) -> [u8; 12] {
        let mut id = [0u8; 12];
        id[..4].copy_from_slice(&self.tag);
        id[4..].copy_from_slice(&(seq ^ self.mask).to_be_bytes());
        id
    }

    fn seq(&self, id: &[u8; 12]) -> Option<u64> {
        if id[..4] != self.tag {
            return None;
        }
        let mut s = [0u8; 8];
        s.copy_from_slice(&id[4..]);
        Some(u64::from_be_bytes(s) ^ self.mask)
    }
}

impl Protocol for Stun {
    fn name(&self) -> &'static str {
        "stun"
    }

    fn max_request_len(&self) -> usize {
        wire::HEADER_LEN
    }

    fn outcomes(&self) -> &'static [&'static str] {
        OUTCOMES
    }

    fn split(&self, run_id: u32, locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let ids = Ids::new(run_id);
        let replies = StunReplies {
            ids,
            locals: locals.to_vec(),
            last: None,
        };
        (Box::new(StunRequests { ids }), Box::new(replies))
    }
}

struct StunRequests {
    ids: Ids,
}

impl Requests for StunRequests {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        let len = wire::emit_binding_request(&self.ids.id(request.seq), buf).unwrap_or(0);
        Written { len, aux: 0 }
    }
}

/// What the last response read said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Mapped(SocketAddr),
    NoAddress,
    Error,
}

struct StunReplies {
    ids: Ids,
    locals: Vec<SocketAddr>,
    last: Option<(u64, Said)>,
}

/// Whether `mapped` is `local` (only its port when `local`'s address is unspecified).
pub fn maps_to(mapped: SocketAddr, local: SocketAddr) -> bool {
    if local.ip().is_unspecified() {
        mapped.port() == local.port()
    } else {
        mapped == local
    }
}

impl Replies for StunReplies {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        self.last = None;
        let message = Message::parse(payload).map_err(wire::Error::name)?;
        let said = match message.binding_response().map_err(wire::Error::name)? {
            Response::Success {
                mapped: Some(a), ..
            } => Said::Mapped(a),
            Response::Success { mapped: None, .. } => Said::NoAddress,
            Response::Error { .. } => Said::Error,
        };
        let seq = self.ids.seq(&message.id).ok_or("another run")?;
        self.last = Some((seq, said));
        Ok(Read::Answer(Key::Seq(seq)))
    }

    fn judge(&mut self, flow: u32, sent: &Sent, _payload: &[u8]) -> Result<Verdict, Cause> {
        let Some((seq, said)) = self.last.take().filter(|(seq, _)| *seq == sent.seq) else {
            return Err("no reply read");
        };
        debug_assert_eq!(seq, sent.seq);
        let local = self.locals.get(flow as usize).ok_or("unknown socket")?;
        let outcome = match said {
            Said::Mapped(a) if maps_to(a, *local) => 0,
            Said::Mapped(_) => 1,
            Said::NoAddress => 2,
            Said::Error => 3,
        };
        Ok(Verdict {
            outcome,
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(seq: u64) -> Sent {
        Sent {
            seq,
            intended_ns: 0,
            actual_ns: 0,
            aux: 0,
        }
    }

    /// The halves for two flows, bound to 198.18.0.1:40000 and 0.0.0.0:40001.
    fn halves(run_id: u32) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let locals = [
            "198.18.0.1:40000".parse().unwrap(),
            "0.0.0.0:40001".parse().unwrap(),
        ];
        Stun.split(run_id, &locals)
    }

    /// The request of `seq` and a success response to it mapping `mapped`.
    fn exchange(requests: &mut dyn Requests, seq: u64, mapped: &str) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let request = Request {
            flow: 0,
            seq,
            warmup: false,
        };
        let w = requests.write(request, &mut buf);
        assert_eq!(w.len, 20);
        let m = Message::parse(&buf[..20]).unwrap();
        assert_eq!(m.kind, wire::BINDING_REQUEST);
        let mut reply = [0u8; 64];
        let n = wire::emit_binding_success(&m.id, mapped.parse().unwrap(), &mut reply).unwrap();
        reply[..n].to_vec()
    }

    fn outcome(replies: &mut dyn Replies, flow: u32, seq: u64, reply: &[u8]) -> &'static str {
        assert_eq!(replies.read(flow, reply), Ok(Read::Answer(Key::Seq(seq))));
        OUTCOMES[replies.judge(flow, &sent(seq), reply).unwrap().outcome]
    }

    #[test]
    fn the_mapped_address_is_checked_against_the_flows_socket() {
        let (mut requests, mut replies) = halves(9);
        let seq = u64::MAX - 3;
        let ok = exchange(&mut *requests, seq, "198.18.0.1:40000");
        assert_eq!(outcome(&mut *replies, 0, seq, &ok), "mapped ok");
        let nat = exchange(&mut *requests, 5, "203.0.113.9:40000");
        assert_eq!(outcome(&mut *replies, 0, 5, &nat), "mapped mismatch");
        // Flow 1's socket is bound to 0.0.0.0: the port alone is compared.
        let port_only = exchange(&mut *requests, 6, "203.0.113.9:40001");
        assert_eq!(outcome(&mut *replies, 1, 6, &port_only), "mapped ok");
        let other_port = exchange(&mut *requests, 7, "198.18.0.1:40002");
        assert_eq!(outcome(&mut *replies, 1, 7, &other_port), "mapped mismatch");
    }

    #[test]
    fn error_responses_and_responses_without_an_address_are_outcomes_of_their_own() {
        let (mut requests, mut replies) = halves(9);
        let mut reply = exchange(&mut *requests, 3, "198.18.0.1:40000");
        reply.truncate(20);
        reply[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(outcome(&mut *replies, 0, 3, &reply), "no mapped address");
        reply[0..4].copy_from_slice(&[0x01, 0x11, 0, 8]);
        reply.extend([0, 9, 0, 4, 0, 0, 4, 0]);
        assert_eq!(outcome(&mut *replies, 0, 3, &reply), "error response");
    }

    #[test]
    fn another_runs_responses_and_what_is_not_a_response_are_counted_by_cause() {
        let (mut requests, _) = halves(9);
        let (_, mut other_run) = halves(10);
        let reply = exchange(&mut *requests, 3, "198.18.0.1:40000");
        assert_eq!(other_run.read(0, &reply), Err("another run"));
        assert_eq!(other_run.read(0, &reply[..19]), Err("short header"));
        let mut buf = [0u8; 20];
        requests.write(
            Request {
                flow: 0,
                seq: 1,
                warmup: false,
            },
            &mut buf,
        );
        assert_eq!(other_run.read(0, &buf), Err("not a binding response"));
    }
}
