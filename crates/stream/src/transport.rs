//! The transports `latlab stream` drives, behind one trait.
//!
//! A [`TransportSpec`] is what a user names (`tcp:cc=cubic,thin`, `kcp:mode=normal`,
//! `quic:datagrams`…); [`TransportSpec::open_sender`] and [`TransportSpec::open_receiver`] make
//! an [`Endpoint`] of it. The command only ever talks to an `Endpoint`: hand it messages, poll
//! it, read what it put on the wire. Adding a transport is one module with one `Endpoint`
//! implementation, one variant here and one arm in each `open_*` (latlab's own transport,
//! `crates/transport`, goes in this way).

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::str::FromStr;
use std::time::{Duration, Instant};

use super::driver::Driver;
use super::wire::CountingSocket;
use super::{enet, quic, side, tcp};

pub use super::endpoint::Endpoint;
pub use super::tcp::{rto_min_out_of_range, TcpOptions};

/// How long a `latlab` sender waits for its handshake to end (a lost packet's timer starts at
/// 1 s and doubles).
const LATLAB_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A transport and its options, as a user names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportSpec {
    /// Plain UDP datagrams, no recovery: the baseline.
    Udp,
    /// TCP with `TCP_NODELAY`, messages framed on the byte stream.
    Tcp(TcpOptions),
    /// ENet 1.3 (`rusty_enet`), one channel.
    Enet {
        /// Reliable (ENet's reliable packets) or unreliable-sequenced.
        reliable: bool,
    },
    /// KCP (`kcp`) over UDP.
    Kcp {
        /// KCP's "fast" mode (nodelay 1, interval 10, resend 2, nc 1) or its defaults.
        fast: bool,
    },
    /// latlab's own transport (`latlab-transport`), its reliable-ordered channel, recovering
    /// losses by the policy named.
    Latlab {
        /// The loss recovery policy (`thin`, `rack:rdb=600`, …).
        recovery: latlab_transport::Recovery,
        /// Every message is sent as urgent (`,urgent` after the policy): twice, the copy
        /// `dup-spacing` after the first unless acknowledged by then (the policy's
        /// `dup-urgent`, on by default).
        urgent: bool,
    },
    /// QUIC (`quinn-proto`, rustls with ring).
    Quic {
        /// Unreliable datagrams with retransmission by the application, instead of one
        /// bidirectional stream.
        datagrams: bool,
    },
}

/// What says, in one line, why a transport is refused here.
pub type Refusal = fn() -> String;

/// Transports named for the comparison that latlab cannot run here, each with what says why
/// (`sctp`'s asks this kernel, [`sctp_refusal`]).
pub const UNAVAILABLE: &[(&str, Refusal)] = &[("sctp", sctp_refusal), ("udt", udt_refusal)];

/// Why `sctp` is refused here: what this kernel answered [`latlab_io::sctp::probe`].
pub fn sctp_refusal() -> String {
    sctp_refusal_for(&latlab_io::sctp::probe())
}

/// Why `sctp` is refused, given what the kernel answered to the probe.
fn sctp_refusal_for(probe: &io::Result<()>) -> String {
    use latlab_io::sctp::{errno_name, means_absent, PROBE_CALL};
    match probe {
        Ok(()) => format!(
            "sctp is not available: this kernel has SCTP ({PROBE_CALL} succeeds), but latlab has \
             no SCTP transport adapter yet: it takes an Endpoint in lab/src/stream (a module \
             beside tcp.rs, an arm in each open_*, the receiver accepting SCTP on its port) over \
             a one-to-one SCTP socket: one message per sendmsg (SCTP keeps message boundaries, \
             no length prefix), SCTP_NODELAY, and as options unordered delivery (SCTP_UNORDERED \
             in SCTP_DEFAULT_SNDINFO) and PR-SCTP (SCTP_PR_SUPPORTED, SCTP_DEFAULT_PRINFO with \
             SCTP_PR_SCTP_TTL or SCTP_PR_SCTP_RTX), its wire counts from SCTP_GET_ASSOC_STATS"
        ),
        Err(e) => {
            let errno = e.raw_os_error();
            let name = match errno.and_then(errno_name) {
                Some(name) => name.to_string(),
                None => format!("errno {}", errno.unwrap_or(0)),
            };
            let what = if errno.is_some_and(means_absent) {
                "this kernel has no SCTP"
            } else {
                "SCTP sockets cannot be opened here"
            };
            format!("sctp is not available: {what} ({PROBE_CALL} fails with {name}: {e})")
        }
    }
}

/// Why `udt` is refused: no kernel has it, and no crate latlab could drive has it either.
pub fn udt_refusal() -> String {
    "udt is not available: UDT is a user-space protocol over UDP (no kernel has it, so there is \
     nothing to probe) and there is no maintained UDT crate: `udt` binds the C++ UDT4 library, \
     which latlab does not build, and `tokio-udt` is an unfinished alpha on a Tokio runtime, \
     which the stream's poll loop does not run"
        .to_string()
}

/// The transports and their options, for `--help` and errors: every form [`TransportSpec`]'s
/// `FromStr` takes (latlab's keys are `latlab_transport::Recovery`'s, and `urgent`).
pub const TRANSPORTS_HELP: &str = "udp | tcp[:cc=reno|cubic|bbr][,thin][,rto_min=DUR] | \
     enet[:reliable|unreliable] | kcp[:mode=fast|normal] | quic[:stream|datagrams] | \
     latlab[:tcp-like|thin|rack|lean|game[:KEY=VALUE,...]][,urgent]";

impl TransportSpec {
    /// Whether the transport delivers every message (a lost one is then a failure).
    pub fn is_reliable(&self) -> bool {
        match self {
            TransportSpec::Udp => false,
            TransportSpec::Tcp(_) | TransportSpec::Kcp { .. } | TransportSpec::Latlab { .. } => {
                true
            }
            TransportSpec::Enet { reliable } => *reliable,
            // Datagrams are retransmitted by the application until acknowledged.
            TransportSpec::Quic { .. } => true,
        }
    }

    /// Whether the data goes over TCP (a data connection to the listener) rather than UDP.
    pub fn is_tcp(&self) -> bool {
        matches!(self, TransportSpec::Tcp(_))
    }

    /// The sending side, connected to the receiver at `target` (`setup` from the receiver's
    /// answer to the start of the run; `run` the run's id). `tcp` takes the data connection the
    /// command made.
    pub fn open_sender(
        &self,
        target: SocketAddr,
        run: u32,
        setup: &SenderSetup,
    ) -> io::Result<Box<dyn Endpoint>> {
        let timeout = Duration::from_secs(5);
        match self {
            TransportSpec::Tcp(_) => {
                let stream = setup.tcp.as_ref().ok_or_else(|| {
                    io::Error::other("tcp needs its data connection before it can send")
                })?;
                Ok(Box::new(tcp::TcpEndpoint::new(stream.try_clone()?)?))
            }
            TransportSpec::Enet { reliable } => Ok(Box::new(enet::EnetEndpoint::sender(
                target, run, *reliable, timeout,
            )?)),
            _ => {
                let base = Instant::now();
                let certificate = setup.certificate.as_deref();
                let side = side::sender(self, run, target, certificate, base)?;
                let driver = Driver::new(side, CountingSocket::towards(target)?, base);
                // The handshake ends before the first message is due: a lost handshake packet
                // (latlab's timer starts at 1 s and doubles) is the connection's setup time,
                // not the latency of the stream's messages.
                Ok(Box::new(match self {
                    TransportSpec::Latlab { .. } => {
                        driver.connected("latlab", target, LATLAB_HANDSHAKE_TIMEOUT)?
                    }
                    TransportSpec::Quic { .. } => driver.connected("quic", target, timeout)?,
                    _ => driver,
                }))
            }
        }
    }

    /// The receiving side of run `run`: `udp` is the receiver's datagram socket (every
    /// UDP-based transport takes a clone of it), `tcp` the run's data connection for `tcp`.
    pub fn open_receiver(
        &self,
        udp: &UdpSocket,
        tcp: Option<TcpStream>,
        run: u32,
        identity: &quic::Identity,
    ) -> io::Result<Box<dyn Endpoint>> {
        match self {
            TransportSpec::Tcp(_) => {
                let stream = tcp.ok_or_else(|| io::Error::other("no tcp data connection"))?;
                Ok(Box::new(tcp::TcpEndpoint::new(stream)?))
            }
            TransportSpec::Enet { reliable } => Ok(Box::new(enet::EnetEndpoint::receiver(
                udp.try_clone()?,
                run,
                *reliable,
            )?)),
            _ => {
                let base = Instant::now();
                let side = side::receiver(self, run, Some(identity), base)?;
                let socket = CountingSocket::new(udp.try_clone()?)?;
                Ok(Box::new(Driver::new(side, socket, base)))
            }
        }
    }
}

/// What a sender needs besides the target to open its side.
#[derive(Debug, Default)]
pub struct SenderSetup {
    /// QUIC: the receiver's certificate (DER), the only one the sender accepts.
    pub certificate: Option<Vec<u8>>,
    /// TCP: the data connection, its hello already sent.
    pub tcp: Option<TcpStream>,
}

impl fmt::Display for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportSpec::Udp => f.write_str("udp"),
            TransportSpec::Tcp(o) => {
                let mut opts = Vec::new();
                if let Some(cc) = &o.cc {
                    opts.push(format!("cc={cc}"));
                }
                if o.thin {
                    opts.push("thin".to_string());
                }
                if let Some(d) = o.rto_min {
                    opts.push(format!("rto_min={}us", d.as_micros()));
                }
                if opts.is_empty() {
                    f.write_str("tcp")
                } else {
                    write!(f, "tcp:{}", opts.join(","))
                }
            }
            TransportSpec::Enet { reliable: true } => f.write_str("enet"),
            TransportSpec::Enet { reliable: false } => f.write_str("enet:unreliable"),
            TransportSpec::Kcp { fast: true } => f.write_str("kcp:mode=fast"),
            TransportSpec::Kcp { fast: false } => f.write_str("kcp:mode=normal"),
            TransportSpec::Latlab { recovery, urgent } => {
                write!(
                    f,
                    "latlab:{recovery}{}",
                    if *urgent { ",urgent" } else { "" }
                )
            }
            TransportSpec::Quic { datagrams: false } => f.write_str("quic"),
            TransportSpec::Quic { datagrams: true } => f.write_str("quic:datagrams"),
        }
    }
}

impl FromStr for TransportSpec {
    type Err = String;

    /// Parses `udp`, `tcp:cc=cubic,thin,rto_min=10ms`, `enet:unreliable`, `kcp:mode=normal`,
    /// `quic:datagrams`; names a transport this machine lacks with the reason.
    fn from_str(text: &str) -> Result<TransportSpec, String> {
        let (name, opts) = text.split_once(':').unwrap_or((text, ""));
        if let Some((_, why)) = UNAVAILABLE.iter().find(|(n, _)| *n == name) {
            return Err(why());
        }
        if name == "latlab" {
            // The rest is the transport's own policy text, colons and all, but for `urgent`,
            // which is the stream's: how it hands its messages over.
            // `urgent` may follow the policy (`latlab:thin,urgent`, as the transport prints
            // itself when the policy has no keys) or its keys (`latlab:rack:rdb=600,urgent`).
            let (policy, keys) = opts.split_once(':').unwrap_or((opts, ""));
            let mut urgent = false;
            let mut words = |part: &'_ str| -> Vec<String> {
                part.split(',')
                    .filter(|k| !k.is_empty())
                    .filter(|k| {
                        let is = *k == "urgent";
                        urgent |= is;
                        !is
                    })
                    .map(str::to_string)
                    .collect()
            };
            let policy = words(policy).join(",");
            let keys = words(keys);
            let policy = if keys.is_empty() {
                policy
            } else {
                format!("{policy}:{}", keys.join(","))
            };
            let recovery = if policy.is_empty() {
                latlab_transport::Recovery::default()
            } else {
                policy
                    .parse()
                    .map_err(|e: latlab_transport::ParseRecoveryError| {
                        // The policy's own error lists the policies when the policy was wrong.
                        let e = e.to_string();
                        if e.contains("(tcp-like, thin, rack, lean, game)") {
                            format!("latlab: {e}")
                        } else {
                            format!("latlab: {e} (policies: tcp-like, thin, rack, lean, game)")
                        }
                    })?
            };
            return Ok(TransportSpec::Latlab { recovery, urgent });
        }
        let opts: Vec<&str> = opts.split(',').filter(|o| !o.is_empty()).collect();
        let bad = |o: &str| format!("{name}: unknown option {o:?} (transports: {TRANSPORTS_HELP})");
        let spec = match name {
            "udp" => {
                if let Some(o) = opts.first() {
                    return Err(bad(o));
                }
                TransportSpec::Udp
            }
            "tcp" => {
                let mut t = TcpOptions::default();
                for o in opts {
                    match o.split_once('=') {
                        Some(("cc", cc @ ("reno" | "cubic" | "bbr"))) => t.cc = Some(cc.into()),
                        Some(("cc", cc)) => {
                            return Err(format!("tcp: cc={cc}: not one of reno, cubic, bbr"))
                        }
                        Some(("rto_min", text)) => {
                            let d = latlab_lab::units::parse_duration(text)
                                .map_err(|e| format!("tcp: rto_min={text}: {e}"))?;
                            if d.is_zero() || d > latlab_io::tcp::RTO_MIN_MAX {
                                return Err(rto_min_out_of_range(text, None));
                            }
                            t.rto_min = Some(d);
                        }
                        None if o == "thin" => t.thin = true,
                        _ => return Err(bad(o)),
                    }
                }
                TransportSpec::Tcp(t)
            }
            "enet" => match opts.as_slice() {
                [] | ["reliable"] => TransportSpec::Enet { reliable: true },
                ["unreliable"] => TransportSpec::Enet { reliable: false },
                [o, ..] => return Err(bad(o)),
            },
            "kcp" => match opts.as_slice() {
                [] | ["mode=fast"] => TransportSpec::Kcp { fast: true },
                ["mode=normal"] => TransportSpec::Kcp { fast: false },
                [o, ..] => return Err(bad(o)),
            },
            "quic" => match opts.as_slice() {
                [] | ["stream"] => TransportSpec::Quic { datagrams: false },
                ["datagrams"] => TransportSpec::Quic { datagrams: true },
                [o, ..] => return Err(bad(o)),
            },
            _ => {
                return Err(format!(
                    "{name:?} is not a transport (transports: {TRANSPORTS_HELP}; \
                     refused here, with the reason: sctp, udt)"
                ))
            }
        };
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_reads_back_as_it_prints() {
        for text in [
            "udp",
            "tcp",
            "tcp:cc=cubic",
            "tcp:cc=reno,thin,rto_min=10000us",
            "enet",
            "enet:unreliable",
            "kcp:mode=fast",
            "kcp:mode=normal",
            "quic",
            "quic:datagrams",
        ] {
            let spec: TransportSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!(
            "tcp:thin,rto_min=5ms,cc=bbr".parse::<TransportSpec>(),
            Ok(TransportSpec::Tcp(TcpOptions {
                cc: Some("bbr".into()),
                thin: true,
                rto_min: Some(Duration::from_millis(5)),
            }))
        );
        assert_eq!("kcp".parse(), Ok(TransportSpec::Kcp { fast: true }));
        // latlab's policy text keeps its own colons; it prints with every value spelled out and
        // reads back as it prints.
        for text in ["latlab:thin", "latlab:rack", "latlab:tcp-like"] {
            let spec: TransportSpec = text.parse().unwrap();
            assert!(spec.to_string().starts_with(text), "{spec}");
            assert_eq!(spec.to_string().parse::<TransportSpec>(), Ok(spec));
        }
        let rdb: TransportSpec = "latlab:thin:min-rto=120ms,rdb=600".parse().unwrap();
        assert_eq!(rdb.to_string().parse::<TransportSpec>(), Ok(rdb.clone()));
        assert_eq!(
            "latlab".parse::<TransportSpec>(),
            Ok(TransportSpec::Latlab {
                recovery: latlab_transport::Recovery::default(),
                urgent: false,
            })
        );
        // With a policy that has no keys, urgent follows the policy, as it prints itself.
        for text in [
            "latlab:thin,urgent",
            "latlab:tcp-like,urgent",
            "latlab:urgent",
        ] {
            let spec: TransportSpec = text.parse().unwrap();
            assert!(
                matches!(spec, TransportSpec::Latlab { urgent: true, .. }),
                "{text}"
            );
            assert_eq!(spec.to_string().parse::<TransportSpec>(), Ok(spec.clone()));
        }
        let urgent: TransportSpec = "latlab:rack:rdb=600,urgent".parse().unwrap();
        assert!(
            matches!(urgent, TransportSpec::Latlab { urgent: true, recovery } if recovery.rdb_bytes == 600)
        );
        assert!(urgent.to_string().ends_with(",rdb=600,urgent"), "{urgent}");
        assert_eq!(urgent.to_string().parse::<TransportSpec>(), Ok(urgent));
        let err = "latlab:thin:rbd=600".parse::<TransportSpec>().unwrap_err();
        assert!(err.contains("rbd"), "{err}");
    }

    #[test]
    fn a_transport_this_machine_lacks_is_refused_with_the_reason() {
        let err = "udt".parse::<TransportSpec>().unwrap_err();
        assert!(err.contains("no maintained UDT crate"), "{err}");
        assert!(err.contains("user-space protocol over UDP"), "{err}");
        let err = "tcp:cc=vegas".parse::<TransportSpec>().unwrap_err();
        assert_eq!(err, "tcp: cc=vegas: not one of reno, cubic, bbr");
        for (text, value) in [
            ("tcp:rto_min=201ms", "201ms"),
            ("tcp:thin,rto_min=0ms", "0ms"),
        ] {
            assert_eq!(
                text.parse::<TransportSpec>().unwrap_err(),
                format!(
                    "tcp: rto_min={value}: out of range: TCP_RTO_MIN_US takes more than one \
                     kernel tick (1ms at HZ=1000, 4ms at HZ=250, 10ms at HZ=100) and at most 200ms"
                )
            );
        }
        assert!("tcp:rto_min=200ms".parse::<TransportSpec>().is_ok());
        let err = "kcp:mode=turbo".parse::<TransportSpec>().unwrap_err();
        assert!(
            err.starts_with("kcp: unknown option \"mode=turbo\""),
            "{err}"
        );
        let err = "carrier-pigeon".parse::<TransportSpec>().unwrap_err();
        assert!(
            err.starts_with("\"carrier-pigeon\" is not a transport"),
            "{err}"
        );
    }

    #[test]
    fn only_plain_udp_and_unreliable_enet_may_lose_messages() {
        let reliable: Vec<bool> = ["udp", "tcp", "enet", "enet:unreliable", "kcp", "quic"]
            .iter()
            .map(|t| t.parse::<TransportSpec>().unwrap().is_reliable())
            .collect();
        assert_eq!(reliable, [false, true, true, false, true, true]);
    }

    /// Linux's numbers, for the test's own probe and the refusals it builds.
    const IPPROTO_SCTP: i32 = 132;
    const EPROTONOSUPPORT: i32 = 93;
    const EPERM: i32 = 1;

    /// The test's own probe, apart from latlab_io's: a one-to-one SCTP socket over IPv4.
    fn kernel_answer() -> io::Result<()> {
        socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::from(IPPROTO_SCTP)),
        )
        .map(drop)
    }

    #[test]
    fn sctp_is_refused_with_what_this_kernel_answers() {
        let err = "sctp".parse::<TransportSpec>().unwrap_err();
        assert!(
            err.contains("socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)"),
            "{err}"
        );
        match kernel_answer() {
            Err(e) => {
                let errno = e.raw_os_error().expect("socket() fails with an errno");
                let name = latlab_io::sctp::errno_name(errno)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("errno {errno}"));
                assert!(err.contains(&format!("fails with {name}: {e}")), "{err}");
                if errno == EPROTONOSUPPORT {
                    // The kernel was built without SCTP.
                    assert!(err.contains("this kernel has no SCTP"), "{err}");
                }
            }
            Ok(()) => {
                assert!(err.contains("this kernel has SCTP"), "{err}");
                assert!(err.contains("no SCTP transport adapter yet"), "{err}");
            }
        }
        assert_eq!(err.lines().count(), 1, "{err}");
    }

    #[test]
    fn the_sctp_refusal_follows_the_kernel_answer() {
        let absent = io::Error::from_raw_os_error(EPROTONOSUPPORT);
        let line = sctp_refusal_for(&Err(absent));
        assert!(line.contains("this kernel has no SCTP"), "{line}");
        assert!(line.contains("fails with EPROTONOSUPPORT: "), "{line}");
        // Refused by a policy (seccomp, an LSM), not missing: not said to be missing.
        let line = sctp_refusal_for(&Err(io::Error::from_raw_os_error(EPERM)));
        assert!(line.contains("cannot be opened here"), "{line}");
        assert!(line.contains("fails with EPERM: "), "{line}");
        let line = sctp_refusal_for(&Ok(()));
        assert!(line.contains("this kernel has SCTP"), "{line}");
        for needed in ["Endpoint", "one-to-one", "SCTP_UNORDERED", "PR-SCTP"] {
            assert!(line.contains(needed), "{line} lacks {needed}");
        }
    }
}
