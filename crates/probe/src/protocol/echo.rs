//! `--protocol echo`: any RFC 862 UDP echo server. Each request is latlab's probe (its header
//! and `size` bytes in all); the server sends the datagram back as it came, and the header
//! inside names the request. Nothing is stamped into it on the way out (an echo server would
//! not stamp on the way back either): the ledger keeps the send times.

use std::net::SocketAddr;

use latlab_wire::probe;

use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// Requests of `size` bytes (at least the probe header) to an echo server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    size: usize,
}

impl Echo {
    /// Requests of `size` bytes, raised to the probe header's length.
    pub fn new(size: usize) -> Echo {
        Echo {
            size: size.max(probe::HEADER_LEN),
        }
    }
}

impl Protocol for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }

    fn max_request_len(&self) -> usize {
        self.size
    }

    fn outcomes(&self) -> &'static [&'static str] {
        &["echoed"]
    }

    fn split(&self, run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        (
            Box::new(EchoRequests { size: self.size }),
            Box::new(EchoReplies {
                run_id,
                size: self.size,
            }),
        )
    }
}

struct EchoRequests {
    size: usize,
}

impl Requests for EchoRequests {
    /// The sender wrote the probe header already; the rest of the buffer is padding.
    fn write(&mut self, _request: Request, _buf: &mut [u8]) -> Written {
        Written {
            len: self.size,
            aux: 0,
        }
    }
}

struct EchoReplies {
    run_id: u32,
    size: usize,
}

impl Replies for EchoReplies {
    fn read(&mut self, flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        let packet = probe::Packet::new_checked(payload).map_err(|_| "not a probe")?;
        if packet.run_id() != self.run_id || packet.flow() != flow {
            // Another run's probe, or another flow's: no request of this socket.
            return Ok(Read::Answer(Key::Slot(u64::MAX)));
        }
        Ok(Read::Answer(Key::Seq(packet.seq())))
    }

    fn judge(&mut self, _flow: u32, sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        if payload.len() != self.size {
            return Err("another length");
        }
        let packet = probe::Packet::new_checked(payload).map_err(|_| "not a probe")?;
        if packet.intended_send_ns() != sent.intended_ns {
            return Err("header altered");
        }
        Ok(Verdict {
            outcome: 0,
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_its_request_and_anything_else_is_named() {
        let echo = Echo::new(10);
        assert_eq!(echo.max_request_len(), probe::HEADER_LEN);
        let (_, mut replies) = echo.split(7, &[]);
        let mut buf = vec![0u8; probe::HEADER_LEN];
        probe::Repr {
            run_id: 7,
            flow: 0,
            seq: 3,
            intended_send_ns: 1_000,
            actual_send_ns: 0,
            responder: None,
            responder_clock: probe::ResponderClock::NotAsked,
        }
        .emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
        assert_eq!(replies.read(0, &buf), Ok(Read::Answer(Key::Seq(3))));
        assert_eq!(replies.read(1, &buf), Ok(Read::Answer(Key::Slot(u64::MAX))));
        assert_eq!(replies.read(0, &buf[..20]), Err("not a probe"));
        let sent = Sent {
            seq: 3,
            intended_ns: 1_000,
            actual_ns: 1_010,
            aux: 0,
        };
        assert_eq!(replies.judge(0, &sent, &buf).unwrap().outcome, 0);
        let moved = Sent {
            intended_ns: 999,
            ..sent
        };
        assert_eq!(replies.judge(0, &moved, &buf), Err("header altered"));
        assert_eq!(replies.judge(0, &sent, &buf[..50]), Err("another length"));
    }
}
