//! The flags of `--protocol`, one struct that `latlab gen` and `latlab study game-server`
//! both flatten into their own, so both take the same protocols with the same flags.

use std::path::PathBuf;

use latlab_lab::command::CommandError;
use latlab_lab::protocols::ProtocolArgs;
use latlab_lab::units::parse_bytes;

#[derive(Debug, Default, clap::Args)]
pub(crate) struct ProtocolFlags {
    /// What to send: latlab (latlab's probes, for latlab echo); echo (any RFC 862 UDP echo
    /// server); dns, memcached (its UDP protocol), stun (RFC 8489 Binding), ntp (NTPv4
    /// client mode), quake3 (getinfo, Quake III engines); template (your own request:
    /// --payload, --token). Each request is matched to its reply by the protocol's own ID
    /// [default: latlab].
    #[arg(long, value_name = "NAME", value_parser = crate::values::protocol())]
    pub(crate) protocol: Option<String>,
    /// dns: a query NAME[/TYPE] (repeatable; TYPE A when left out), sent in turn.
    #[arg(long = "query", value_name = "NAME[/TYPE]")]
    queries: Vec<String>,
    /// dns: the queries of a dnsperf data file (`name type` per line, `;` comments).
    #[arg(long = "queries", value_name = "FILE")]
    queries_file: Option<PathBuf>,
    /// dns: add an EDNS0 OPT record advertising this UDP payload size (1232).
    #[arg(long, value_name = "BYTES")]
    edns: Option<u16>,
    /// memcached: keys key:0 … key:N-1, requested in turn [default: 1000].
    #[arg(long, value_name = "N")]
    keys: Option<u32>,
    /// memcached: the share of requests that are `set` (0.1, 10%) [default: 0.1].
    #[arg(long, value_name = "RATIO")]
    set_ratio: Option<String>,
    /// memcached: bytes of each value set [default: 100].
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    value_size: Option<usize>,
    /// template: the request, as hex (0a1b2c…).
    #[arg(long, value_name = "HEX", conflicts_with = "payload_file")]
    payload: Option<String>,
    /// template: the request, the bytes of FILE.
    #[arg(long, value_name = "FILE")]
    payload_file: Option<PathBuf>,
    /// template: the field latlab fills per request (OFFSET:LEN, bytes) and finds in the
    /// reply. Without it: one request in flight per flow, replies taken in order.
    #[arg(long, value_name = "OFFSET:LEN")]
    token: Option<String>,
    /// template: where the reply carries the token (OFFSET:LEN), or `any` (searched for)
    /// [default: where the request had it].
    #[arg(long, value_name = "OFFSET:LEN")]
    reply_token: Option<String>,
}

impl ProtocolFlags {
    /// The `--protocol` name, `latlab` when not given.
    pub(crate) fn name(&self) -> &str {
        self.protocol.as_deref().unwrap_or("latlab")
    }

    /// The protocol's own flags given (`--protocol` left out), each with its value as typed,
    /// in the order `--help` lists them.
    fn given(&self) -> Vec<(&'static str, String)> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let mut given: Vec<(&'static str, String)> = self
            .queries
            .iter()
            .map(|q| ("--query", q.clone()))
            .collect();
        let rest = [
            ("--queries", path(&self.queries_file)),
            ("--edns", self.edns.map(|e| e.to_string())),
            ("--keys", self.keys.map(|k| k.to_string())),
            ("--set-ratio", self.set_ratio.clone()),
            ("--value-size", self.value_size.map(|v| v.to_string())),
            ("--payload", self.payload.clone()),
            ("--payload-file", path(&self.payload_file)),
            ("--token", self.token.clone()),
            ("--reply-token", self.reply_token.clone()),
        ];
        given.extend(rest.into_iter().filter_map(|(flag, v)| Some((flag, v?))));
        given
    }

    /// The first flag given, by its name, if any was (`--protocol` included).
    pub(crate) fn first_given(&self) -> Option<&'static str> {
        match self.protocol {
            Some(_) => Some("--protocol"),
            None => self.given().first().map(|(flag, _)| *flag),
        }
    }

    /// The protocol's own flags given (`--protocol` left out), as they would be typed:
    /// `--query a.example/AAAA --edns 1232`; empty when none was.
    pub(crate) fn given_text(&self) -> String {
        self.given()
            .iter()
            .map(|(flag, value)| format!("{flag} {value}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// What the flags say, checked; `size` is the bytes of an echo request (gen's `--size`).
    pub(crate) fn args(self, size: usize) -> Result<ProtocolArgs, CommandError> {
        let set_ratio = self
            .set_ratio
            .as_deref()
            .map(|t| latlab_lab::units::parse_share("--set-ratio", t).map_err(CommandError::Usage))
            .transpose()?;
        Ok(ProtocolArgs {
            name: self.protocol.unwrap_or_else(|| "latlab".into()),
            size,
            queries: self.queries,
            queries_file: self.queries_file,
            edns: self.edns,
            keys: self.keys,
            set_ratio,
            value_size: self.value_size,
            payload: self.payload,
            payload_file: self.payload_file,
            token: self.token,
            reply_token: self.reply_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Both {
        #[command(flatten)]
        flags: ProtocolFlags,
    }

    fn parse(args: &[&str]) -> ProtocolFlags {
        Both::try_parse_from(std::iter::once("latlab").chain(args.iter().copied()))
            .unwrap()
            .flags
    }

    #[test]
    fn the_flags_given_are_named_and_written_back_as_typed() {
        let none = parse(&[]);
        assert_eq!(none.name(), "latlab");
        assert_eq!(none.first_given(), None);
        assert_eq!(none.given_text(), "");
        let dns = parse(&[
            "--protocol",
            "dns",
            "--query",
            "a.example/AAAA",
            "--edns",
            "1232",
        ]);
        assert_eq!(dns.name(), "dns");
        assert_eq!(dns.first_given(), Some("--protocol"));
        assert_eq!(dns.given_text(), "--query a.example/AAAA --edns 1232");
        let keys = parse(&["--keys", "3", "--set-ratio", "10%"]);
        assert_eq!(keys.first_given(), Some("--keys"));
        let args = keys.args(64).unwrap();
        assert_eq!((args.name.as_str(), args.keys), ("latlab", Some(3)));
        assert_eq!(args.set_ratio, Some(0.1));
        let bad = parse(&["--set-ratio", "lots"]).args(64).unwrap_err();
        assert!(bad.to_string().contains("--set-ratio"), "{bad}");
    }
}
