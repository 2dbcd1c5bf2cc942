//! `latlab gen --protocol`: the protocol a run speaks, made from its flags (the files they
//! name read here), each mistake one line that names its flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use latlab_io::udp::UdpSocket;
use latlab_probe::protocol::dns::{Dns, Query};
use latlab_probe::protocol::template::{ReplyToken, Template, TemplateError};
use latlab_probe::protocol::{Request, SharedProtocol};
use latlab_wire::probe;

use crate::command::CommandError;
use crate::error::MeasureError;

/// The protocols `--protocol` takes, in the order `--help` lists them.
pub const NAMES: [&str; 8] = [
    "latlab",
    "echo",
    "dns",
    "memcached",
    "stun",
    "ntp",
    "quake3",
    "template",
];

/// What `latlab gen`'s protocol flags say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProtocolArgs {
    /// `--protocol`: one of [`NAMES`].
    pub name: String,
    /// `--size` (echo): bytes of each request, at least the probe header.
    pub size: usize,
    /// `--query NAME[/TYPE]` (dns), repeatable.
    pub queries: Vec<String>,
    /// `--queries FILE` (dns): dnsperf's data file, `name type` per line.
    pub queries_file: Option<PathBuf>,
    /// `--edns SIZE` (dns): an OPT record advertising this UDP payload size.
    pub edns: Option<u16>,
    /// `--keys N` (memcached).
    pub keys: Option<u32>,
    /// `--set-ratio F` (memcached): the share of requests that are `set`.
    pub set_ratio: Option<f64>,
    /// `--value-size BYTES` (memcached).
    pub value_size: Option<usize>,
    /// `--payload HEX` (template).
    pub payload: Option<String>,
    /// `--payload-file FILE` (template).
    pub payload_file: Option<PathBuf>,
    /// `--token OFFSET:LEN` (template).
    pub token: Option<String>,
    /// `--reply-token OFFSET:LEN` or `any` (template).
    pub reply_token: Option<String>,
}

impl ProtocolArgs {
    /// latlab's own probes, no protocol flag given.
    pub fn latlab() -> ProtocolArgs {
        ProtocolArgs {
            name: "latlab".into(),
            ..ProtocolArgs::default()
        }
    }

    /// The flags given that `name` does not take, with the protocol that takes each.
    fn misplaced(&self) -> Option<(&'static str, &'static str)> {
        let given = [
            ("--query", "dns", !self.queries.is_empty()),
            ("--queries", "dns", self.queries_file.is_some()),
            ("--edns", "dns", self.edns.is_some()),
            ("--keys", "memcached", self.keys.is_some()),
            ("--set-ratio", "memcached", self.set_ratio.is_some()),
            ("--value-size", "memcached", self.value_size.is_some()),
            ("--payload", "template", self.payload.is_some()),
            ("--payload-file", "template", self.payload_file.is_some()),
            ("--token", "template", self.token.is_some()),
            ("--reply-token", "template", self.reply_token.is_some()),
        ];
        given
            .into_iter()
            .find(|(_, owner, set)| *set && *owner != self.name)
            .map(|(flag, owner, _)| (flag, owner))
    }
}

/// Reads a file a protocol flag names, the error naming the flag.
pub(crate) fn read_flag_file(flag: &str, path: &PathBuf) -> Result<Vec<u8>, CommandError> {
    std::fs::read(path).map_err(|e| CommandError::Usage(format!("{flag} {}: {e}", path.display())))
}

/// The protocol `args` describe: `None` for latlab's own probes (`latlab`); `echo` sends
/// latlab's probe to any RFC 862 echo server, which sends it back as it went.
pub fn build(args: &ProtocolArgs) -> Result<Option<SharedProtocol>, CommandError> {
    let bad = |text: String| Err(CommandError::Usage(text));
    if !NAMES.contains(&args.name.as_str()) {
        return bad(format!(
            "--protocol {:?} is not a protocol: {}",
            args.name,
            NAMES.join(", ")
        ));
    }
    if let Some((flag, owner)) = args.misplaced() {
        return bad(format!(
            "{flag} is a flag of --protocol {owner}, not of --protocol {}",
            args.name
        ));
    }
    match args.name.as_str() {
        "latlab" => Ok(None),
        "echo" => Ok(Some(Arc::new(latlab_probe::protocol::echo::Echo::new(
            args.size,
        )))),
        "dns" => Ok(Some(Arc::new(dns(args)?))),

        "ntp" => Ok(Some(std::sync::Arc::new(latlab_probe::protocol::ntp::Ntp))),
        "memcached" => Ok(Some(std::sync::Arc::new(memcached(args)?))),

        "stun" => Ok(Some(std::sync::Arc::new(
            latlab_probe::protocol::stun::Stun,
        ))),

        "quake3" => Ok(Some(std::sync::Arc::new(
            latlab_probe::protocol::quake3::Quake3,
        ))),

        "template" => Ok(Some(Arc::new(template(args)?))),
        // NAMES, checked above, holds these arms and no other.
        other => bad(format!("--protocol {other} is not a protocol")),
    }
}

/// The flows a run of `protocol` at `pps` needs so that no ID is taken again while its
/// request may still be answered: each flow (source port) has the protocol's ID space, and a
/// request is waited for up to `grace` (a DNS run at 1M queries a second with a 500 ms grace
/// needs 8 source ports of 65,536 IDs each). `flows` when it is enough, or for a protocol
/// whose tokens hold a whole sequence number.
pub fn flows_needed(protocol: &SharedProtocol, pps: f64, grace: Duration, flows: u32) -> u32 {
    let Some(ids) = protocol.id_space() else {
        return flows;
    };
    let in_flight = pps * grace.as_secs_f64().max(1e-3);
    let needed = (in_flight / ids as f64).ceil().min(f64::from(u32::MAX)) as u32;
    flows.max(needed)
}

/// `--protocol dns`: the `--query` flags, then the `--queries` file's lines, in turn.
fn dns(args: &ProtocolArgs) -> Result<Dns, CommandError> {
    let usage = |text: String| CommandError::Usage(text);
    let mut queries = Vec::new();
    for text in &args.queries {
        queries.push(Query::parse(text).map_err(|e| usage(format!("--query {text:?}: {e}")))?);
    }
    if let Some(path) = &args.queries_file {
        let bytes = read_flag_file("--queries", path)?;
        let text = String::from_utf8_lossy(&bytes);
        let read = Query::parse_file(&text)
            .map_err(|e| usage(format!("--queries {} {e}", path.display())))?;
        if read.is_empty() {
            return Err(usage(format!(
                "--queries {}: no query in it",
                path.display()
            )));
        }
        queries.extend(read);
    }
    if let Some(size) = args.edns.filter(|s| *s < 512) {
        return Err(usage(format!(
            "--edns {size}: below 512, the size every DNS server takes (RFC 6891)"
        )));
    }
    Dns::new(queries, args.edns).ok_or_else(|| {
        usage("--protocol dns needs a query: --query NAME[/TYPE] or --queries FILE".into())
    })
}

/// `--protocol template`: the payload (`--payload HEX`, whitespace between digits allowed, or
/// `--payload-file FILE`'s bytes), `--token OFFSET:LEN`, `--reply-token OFFSET:LEN|any`.
fn template(args: &ProtocolArgs) -> Result<Template, CommandError> {
    let usage = |text: String| CommandError::Usage(text);
    let payload = match (&args.payload, &args.payload_file) {
        (Some(hex), _) => parse_hex(hex).map_err(|e| usage(format!("--payload {hex:?}: {e}")))?,
        (None, Some(path)) => read_flag_file("--payload-file", path)?,
        (None, None) => {
            return Err(usage(
                "--protocol template needs a payload: --payload HEX or --payload-file FILE".into(),
            ))
        }
    };
    let token = args
        .token
        .as_deref()
        .map(|t| parse_place(t).ok_or_else(|| usage(format!("--token {t:?}: not OFFSET:LEN"))))
        .transpose()?;
    let reply = match (&args.reply_token, token) {
        (None, _) => None,
        (Some(r), None) => return Err(usage(format!("--reply-token {r} needs --token"))),
        (Some(r), Some(_)) if r == "any" => Some(ReplyToken::Any),
        (Some(r), Some((_, len))) => match parse_place(r) {
            Some((offset, l)) if l == len => Some(ReplyToken::At(offset)),
            Some(_) => {
                return Err(usage(format!(
                    "--reply-token {r}: its LEN must be --token's ({len})"
                )))
            }
            None => return Err(usage(format!("--reply-token {r:?}: not OFFSET:LEN or any"))),
        },
    };
    let token_text = args.token.as_deref().unwrap_or_default();
    Template::new(payload, token, reply).map_err(|e| match e {
        TemplateError::ShortAny => usage(format!("--reply-token {e}")),
        TemplateError::Empty => usage("--payload: the payload is empty".into()),
        TemplateError::Outside { .. } => usage(format!("--token {e}")),
        TemplateError::TokenLen(_) => usage(format!("--token {token_text}: {e}")),
    })
}

/// `OFFSET:LEN`.
fn parse_place(text: &str) -> Option<(usize, usize)> {
    let (offset, len) = text.split_once(':')?;
    Some((offset.parse().ok()?, len.parse().ok()?))
}

/// Hex digits, whitespace between them ignored: an even number of them.
fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 == 1 {
        return Err(format!("{} hex digits, an odd number", digits.len()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("{:?} is not a hex byte", String::from_utf8_lossy(pair)))
        })
        .collect()
}

/// `--protocol memcached`'s load, its flags checked: `--keys` from 1 (default 1000),
/// `--set-ratio` (default 0.1), `--value-size` (default 100) no larger than one request
/// datagram holds (memcached takes a request in one UDP datagram, at most 65,507 bytes).
fn memcached(
    args: &ProtocolArgs,
) -> Result<latlab_probe::protocol::memcached::Memcached, CommandError> {
    let bad = |text: String| Err(CommandError::Usage(text));
    let keys = args.keys.unwrap_or(1000);
    if keys == 0 || keys >= 1 << 31 {
        return bad(format!("--keys {keys}: from 1 to 2147483647 keys"));
    }
    let m = latlab_probe::protocol::memcached::Memcached {
        keys,
        set_ratio: args.set_ratio.unwrap_or(0.1),
        value_size: args.value_size.unwrap_or(100),
    };
    if !(0.0..=1.0).contains(&m.set_ratio) {
        return bad(format!("--set-ratio {}: a share from 0 to 1", m.set_ratio));
    }
    let len = m.request_len();
    if len > latlab_wire::memcached::MAX_REQUEST_LEN {
        let most = m.value_size - (len - latlab_wire::memcached::MAX_REQUEST_LEN);
        return bad(format!(
            "--value-size {}: a set of key:{} is {len} bytes, more than the {} of one UDP \
             datagram, memcached's whole request (at most --value-size {most} with --keys {keys})",
            m.value_size,
            keys - 1,
            latlab_wire::memcached::MAX_REQUEST_LEN,
        ));
    }
    Ok(m)
}

/// Refuses a memcached run whose warm-up cannot fill its keys: the warm-up's requests are
/// `set`s of the keys in order, and `warmup` at `pps` must send at least `--keys` of them
/// for the measured `get`s to find them. A `--warmup 0` is taken as asked: a cold cache.
pub fn check_warmup(args: &ProtocolArgs, warmup: Duration, pps: f64) -> Result<(), CommandError> {
    if args.name != "memcached" || warmup.is_zero() {
        return Ok(());
    }
    let keys = args.keys.unwrap_or(1000);
    let sets = (warmup.as_secs_f64() * pps).floor();
    if sets >= f64::from(keys) {
        return Ok(());
    }
    let needed = Duration::from_secs_f64((f64::from(keys) / pps).max(0.001));
    Err(CommandError::Usage(format!(
        "--warmup {} at {} sends {sets} memcached sets, fewer than --keys {keys}: the \
         warm-up fills the keys (--warmup {} or more; --warmup 0 measures a cold cache)",
        crate::units::format_duration(warmup),
        crate::units::format_rate(pps),
        crate::units::format_duration(needed.max(Duration::from_millis(1))),
    )))
}

/// Sends one request of `protocol` a tenth of a second apart from `socket` and waits up to
/// `timeout` for any datagram from `target`, so that a run against nothing fails at once with
/// the reason instead of reporting every request unanswered. (What came back is not judged:
/// a server that answers with an error is there.)
pub fn check_answers(
    socket: &UdpSocket,
    target: SocketAddr,
    protocol: &SharedProtocol,
    timeout: Duration,
) -> Result<(), MeasureError> {
    let unreachable = |reason: String| MeasureError::Unreachable { target, reason };
    let local = socket
        .local_addr()
        .map_err(|e| unreachable(e.to_string()))?;
    let (mut requests, _) = protocol.split(0x6368_6563, &[local]);
    let mut buf = vec![0u8; protocol.max_request_len().max(probe::HEADER_LEN)];
    let mut rx = vec![0u8; 65_536];
    let deadline = latlab_io::clock::now_ns() + timeout.as_nanos() as u64;
    for seq in 0.. {
        let now = latlab_io::clock::now_ns();
        if now >= deadline {
            return Err(unreachable(format!(
                "no answer to {seq} {} requests within {}: is the server running there? \
                 (--no-check skips this check)",
                protocol.name(),
                crate::units::format_duration(timeout)
            )));
        }
        let request = Request {
            flow: 0,
            seq,
            warmup: true,
        };
        let written = requests.write(request, &mut buf);
        if let Err(e) = socket.send_one(&buf[..written.len], Some(target)) {
            return Err(unreachable(refusal(&e)));
        }
        let wait = Duration::from_nanos((deadline - now).min(100_000_000));
        if !socket
            .wait_readable(Some(wait))
            .map_err(|e| unreachable(e.to_string()))?
        {
            continue;
        }
        loop {
            match socket.recv_from_one(&mut rx) {
                Ok((_, from)) if from == target => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(unreachable(refusal(&e))),
            }
        }
    }
    unreachable!("the loop returns at the deadline")
}

fn refusal(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        "port unreachable: nothing listens there".into()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(args: ProtocolArgs) -> String {
        build(&args).unwrap_err().to_string()
    }

    fn memcached(keys: Option<u32>, value_size: Option<usize>) -> ProtocolArgs {
        ProtocolArgs {
            name: "memcached".into(),
            keys,
            value_size,
            ..ProtocolArgs::default()
        }
    }

    #[test]
    fn memcached_refuses_a_value_no_request_datagram_holds_and_a_warm_up_too_short() {
        assert!(build(&memcached(None, Some(65_474))).unwrap().is_some());
        assert_eq!(
            error(memcached(None, Some(65_475))),
            "--value-size 65475: a set of key:999 is 65508 bytes, more than the 65507 of one \
             UDP datagram, memcached's whole request (at most --value-size 65474 with --keys 1000)"
        );
        assert_eq!(
            error(memcached(Some(0), None)),
            "--keys 0: from 1 to 2147483647 keys"
        );
        let ms = Duration::from_millis;
        let check = |args: &ProtocolArgs, warmup, pps| check_warmup(args, warmup, pps);
        assert!(check(&memcached(None, None), ms(1000), 1000.0).is_ok());
        assert!(
            check(&memcached(None, None), ms(0), 1000.0).is_ok(),
            "a cold cache, asked"
        );
        assert!(check(&memcached(Some(50), None), ms(100), 1000.0).is_ok());
        let short = check(&memcached(None, None), ms(100), 1000.0).unwrap_err();
        assert_eq!(
            short.to_string(),
            "--warmup 100ms at 1000 pps sends 100 memcached sets, fewer than --keys 1000: the \
             warm-up fills the keys (--warmup 1s or more; --warmup 0 measures a cold cache)"
        );
        assert!(check(&ProtocolArgs::latlab(), ms(1), 1.0).is_ok());
    }

    #[test]
    fn an_unknown_protocol_and_a_misplaced_flag_are_named() {
        let unknown = ProtocolArgs {
            name: "gopher".into(),
            ..ProtocolArgs::default()
        };
        assert!(error(unknown).starts_with("--protocol \"gopher\" is not a protocol: latlab, echo"));
        let misplaced = ProtocolArgs {
            name: "echo".into(),
            size: 64,
            keys: Some(3),
            ..ProtocolArgs::default()
        };
        assert_eq!(
            error(misplaced),
            "--keys is a flag of --protocol memcached, not of --protocol echo"
        );
        assert!(build(&ProtocolArgs::latlab()).unwrap().is_none());
    }

    #[derive(Debug)]
    struct Ids(Option<u64>);

    impl latlab_probe::protocol::Protocol for Ids {
        fn name(&self) -> &'static str {
            "ids"
        }
        fn max_request_len(&self) -> usize {
            1
        }
        fn id_space(&self) -> Option<u64> {
            self.0
        }
        fn outcomes(&self) -> &'static [&'static str] {
            &[]
        }
        fn split(
            &self,
            _: u32,
            _: &[SocketAddr],
        ) -> (
            Box<dyn latlab_probe::protocol::Requests>,
            Box<dyn latlab_probe::protocol::Replies>,
        ) {
            unreachable!("not run")
        }
    }

    #[test]
    fn more_requests_in_flight_than_ids_take_more_source_ports() {
        let dns: SharedProtocol = std::sync::Arc::new(Ids(Some(65_536)));
        let grace = Duration::from_millis(500);
        assert_eq!(flows_needed(&dns, 100_000.0, grace, 1), 1);
        assert_eq!(flows_needed(&dns, 1_000_000.0, grace, 1), 8);
        assert_eq!(flows_needed(&dns, 1_000_000.0, grace, 12), 12);
        let whole: SharedProtocol = std::sync::Arc::new(Ids(None));
        assert_eq!(flows_needed(&whole, 1e9, grace, 3), 3);
    }
}
