//! `latlab gen --protocol`: the protocol a run speaks, made from its flags (the files they
//! name read here), each mistake one line that names its flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use latlab_io::udp::UdpSocket;
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
#[allow(dead_code)] // the file-reading protocols (dns, template) call it
pub(crate) fn read_flag_file(flag: &str, path: &PathBuf) -> Result<Vec<u8>, CommandError> {
    std::fs::read(path).map_err(|e| CommandError::Usage(format!("{flag} {}: {e}", path.display())))
}

/// The protocol `args` describe: `None` for latlab's own probes (`latlab`, and `echo`: any
/// RFC 862 echo server sends latlab's probe back as it went, and its header matches it).
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
        "latlab" | "echo" => Ok(None),
        // dns: see protocols/dns
        "memcached" => Ok(Some(std::sync::Arc::new(memcached(args)?))),

        "stun" => Ok(Some(std::sync::Arc::new(
            latlab_probe::protocol::stun::Stun,
        ))),

        // ntp: see protocols/ntp

        // quake3: see protocols/quake3

        // template: see protocols/template
        other => bad(format!("--protocol {other} is not built in this latlab")),
    }
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
            keys: Some(3),
            ..ProtocolArgs::default()
        };
        assert_eq!(
            error(misplaced),
            "--keys is a flag of --protocol memcached, not of --protocol echo"
        );
        assert!(build(&ProtocolArgs::latlab()).unwrap().is_none());
    }
}
