//! `gen --protocol dns`: each request is a DNS query (RFC 1035) of the run's list, taken in
//! turn, and each answer is matched back to its query by ID, question and flow.
//!
//! - **ID**: request `seq` of a flow has ID `seq & 0xffff`; the ledger holds a flow's whole
//!   ID space (65,536 slots, slot == ID), so an answer's ID is its request's slot
//!   ([`Key::Slot`]). A flow with more than 65,536 queries outstanding reuses IDs, which the
//!   report counts (`ids_reused`); more flows give more IDs.
//! - **Query**: request `seq` asks query `seq % queries` of the list; that index is the
//!   request's `aux`.
//! - **Judging**: the answer must have QR set, and its question must be the one sent: the name
//!   compared without ASCII case (RFC 4343), the type and class IN (else the mismatch cause
//!   `another question`). Its outcome is its RCODE: `NOERROR`, `NXDOMAIN`, `SERVFAIL`,
//!   `REFUSED`, or `other`; an answer with TC set is outcome `truncated` whatever its RCODE
//!   (the answer did not fit, a real client would ask again over TCP; it is still the
//!   server's answer and its latency is measured).
//! - **Source**: each flow is its own socket (source port); an answer from another port comes
//!   in on no flow's socket of the target, and is counted as from another address. An answer
//!   to flow A's query that reaches flow B's socket is judged against B's ledger.

use std::net::SocketAddr;

use latlab_wire::dns::{self, Name};

use super::{Cause, Key, Protocol, Read, Replies, Requests, Sent, Verdict, Written};

/// One query of the list: a name and a type, class IN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// QNAME.
    pub name: Name,
    /// QTYPE.
    pub qtype: u16,
}

/// Why a text is no query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The name is no DNS name.
    #[error("{0}")]
    Name(dns::Error),
    /// The type is neither a known name nor `TYPEnnn`.
    #[error("unknown type {0:?} (A, AAAA, MX, TXT… or TYPEnnn)")]
    UnknownType(String),
    /// A data-file line that is not `name type`.
    #[error("not `name type`")]
    Fields,
}

impl Query {
    /// `name[/TYPE]`, the type A when left out (`a.lab.test/AAAA`, `example.org`).
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let (name, qtype) = match text.rsplit_once('/') {
            Some((name, qtype)) => (name, qtype),
            None => (text, "A"),
        };
        Query::new(name, qtype)
    }

    fn new(name: &str, qtype: &str) -> Result<Query, QueryError> {
        let qtype =
            dns::type_from_name(qtype).ok_or_else(|| QueryError::UnknownType(qtype.to_string()))?;
        let name = Name::from_text(name).map_err(QueryError::Name)?;
        Ok(Query { name, qtype })
    }

    /// Reads a dnsperf data file: `name type` per line; blank lines and lines starting with
    /// `;` or `#` are skipped. A bad line is an error naming it: `line 3: "…": unknown type`.
    pub fn parse_file(text: &str) -> Result<Vec<Query>, String> {
        let mut queries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            let parsed = match fields[..] {
                [name, qtype] => Query::new(name, qtype),
                _ => Err(QueryError::Fields),
            };
            match parsed {
                Ok(q) => queries.push(q),
                Err(e) => return Err(format!("line {}: {trimmed:?}: {e}", i + 1)),
            }
        }
        Ok(queries)
    }
}

impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.name, dns::type_name(self.qtype))
    }
}

/// The outcomes, in [`Verdict::outcome`]'s order.
const OUTCOMES: [&str; 6] = [
    "NOERROR",
    "NXDOMAIN",
    "SERVFAIL",
    "REFUSED",
    "other",
    "truncated",
];

/// DNS queries over UDP (see the module's doc).
#[derive(Clone, Debug)]
pub struct Dns {
    queries: std::sync::Arc<[Query]>,
    edns: Option<u16>,
}

impl Dns {
    /// Queries `queries` in turn, each with an OPT record advertising `edns` when set; `None`
    /// for an empty list.
    pub fn new(queries: Vec<Query>, edns: Option<u16>) -> Option<Dns> {
        (!queries.is_empty()).then(|| Dns {
            queries: queries.into(),
            edns,
        })
    }

    /// The queries, in the order they are sent.
    pub fn queries(&self) -> &[Query] {
        &self.queries
    }

    fn query(&self, index: usize, id: u16) -> dns::Query<'_> {
        let q = &self.queries[index];
        dns::Query {
            id,
            name: &q.name,
            qtype: q.qtype,
            edns: self.edns,
        }
    }
}

impl Protocol for Dns {
    fn name(&self) -> &'static str {
        "dns"
    }

    fn max_request_len(&self) -> usize {
        (0..self.queries.len())
            .map(|i| self.query(i, 0).buffer_len())
            .max()
            .unwrap_or(dns::HEADER_LEN)
    }

    fn id_space(&self) -> Option<u64> {
        Some(1 << 16)
    }

    fn outcomes(&self) -> &'static [&'static str] {
        &OUTCOMES
    }

    fn split(&self, _run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        (Box::new(self.clone()), Box::new(self.clone()))
    }
}

impl Requests for Dns {
    fn write(&mut self, request: super::Request, buf: &mut [u8]) -> Written {
        let index = (request.seq % self.queries.len() as u64) as usize;
        let len = self.query(index, request.seq as u16).emit(buf);
        Written {
            len,
            aux: index as u32,
        }
    }
}

impl Replies for Dns {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        let response = dns::Response::parse(payload).map_err(dns::Error::cause)?;
        Ok(Read::Answer(Key::Slot(u64::from(response.header.id))))
    }

    fn judge(&mut self, _flow: u32, sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        let response = dns::Response::parse(payload).map_err(dns::Error::cause)?;
        let header = response.header;
        if !header.qr {
            return Err("not a response (QR clear)");
        }
        let asked = self
            .queries
            .get(sent.aux as usize)
            .ok_or("another question")?;
        let same = response.question.is_some_and(|q| {
            q.name.eq_ignore_case(&asked.name)
                && q.qtype == asked.qtype
                && q.qclass == dns::CLASS_IN
        });
        if !same {
            return Err("another question");
        }
        let outcome = if header.tc {
            5
        } else {
            match header.rcode {
                dns::RCODE_NOERROR => 0,
                dns::RCODE_NXDOMAIN => 1,
                dns::RCODE_SERVFAIL => 2,
                dns::RCODE_REFUSED => 3,
                _ => 4,
            }
        };
        Ok(Verdict {
            outcome,
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests;
