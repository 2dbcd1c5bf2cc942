//! What a user chooses: the channels, the loss recovery policy and the timers.

use std::fmt;
use std::str::FromStr;

pub use latlab_wire::transport::ChannelKind;

/// One channel of a connection. Both ends must configure the same channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Delivery semantics.
    pub kind: ChannelKind,
    /// For [`ChannelKind::Deadline`]: how long (ns) after `send` a message may still be
    /// delivered; after that the sender drops it. Ignored by the other kinds.
    pub deadline_ns: u64,
}

impl ChannelConfig {
    /// A channel of `kind` (deadline channels get 100 ms).
    pub const fn new(kind: ChannelKind) -> ChannelConfig {
        ChannelConfig {
            kind,
            deadline_ns: 100_000_000,
        }
    }

    /// A deadline channel whose messages live `deadline_ns`.
    pub const fn deadline(deadline_ns: u64) -> ChannelConfig {
        ChannelConfig {
            kind: ChannelKind::Deadline,
            deadline_ns,
        }
    }
}

/// The rule that declares a packet lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossRule {
    /// TCP: exponential RTO backoff, fast retransmit after `dupacks` later packets are acked.
    TcpLike,
    /// Thin streams: linear timeouts while fewer than `thin_packets` are in flight, fast
    /// retransmit on the first later packet acked (a SACK gap).
    Thin,
    /// RACK: a packet is lost once a packet sent after it was acked and
    /// `now > sent + srtt + reo_wnd`.
    Rack,
}

/// How the receiver tells the sender what arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// Selective ACKs, at once while the sender has few packets in flight or a gap opens.
    Ack,
    /// Bytes only on loss: the receiver learns each channel's tick and sends a NACK for a
    /// message late by the copy spacing and a margin; a cumulative ACK every
    /// [`Recovery::ack_every_ns`] (RTT, buffers, congestion); a repeated datagram never forces
    /// an ACK.
    Nack,
}

/// When every reliable message is sent twice (a blind copy [`Recovery::duplicate_spacing_ns`]
/// after the first, unless acknowledged by then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copies {
    /// Never (only urgent messages, by `dup-urgent`).
    Off,
    /// Always.
    On,
    /// While the connection has seen a packet lost among its last
    /// [`COPIES_AUTO_PACKETS`] (so from the start, until the path proves clean).
    Auto,
}

/// When a blind copy of a whole message carries it XORed with the message before it
/// (`connection/xor.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XorCopies {
    /// Never: a copy is the message.
    Off,
    /// Always (while the message before is held unacknowledged).
    On,
    /// Where the XOR is a third chance that arrives before a NACK's repair could: while the
    /// channel's interval plus the copy spacing is shorter than the SRTT plus the NACK margin
    /// (plus the spacing without `nack-early`).
    Auto,
}

/// Packets without a loss after which [`Copies::Auto`] stops copying.
pub const COPIES_AUTO_PACKETS: u64 = 1000;

/// A loss recovery policy: a rule and its knobs. Parsed from text:
/// `NAME[:KEY=VALUE,...]` with NAME `tcp-like`, `thin`, `rack`, `lean` or `game` and keys
/// `min-rto` (duration), `dupacks` (count), `rdb` (bytes, 0 = off), `reo-wnd` (duration),
/// `thin-packets` (count), `dup-urgent` (on/off), `dup-spacing` (duration), `wire`
/// (`classic` or `compact`), `feedback` (`ack` or `nack`), `ack-every` (duration),
/// `nack-margin` (duration), `nack-early` (on/off), `copies` (`off`, `on`, `auto`), `tlp`
/// (on/off), `xor` (`off`, `on`, `auto`). Durations take
/// `ns`, `us`, `ms` or `s`. `lean` is `rack` with the compact wire format, NACK feedback,
/// blind copies 20 ms apart while loss is seen, and tail-loss probes; `game` is `lean` with the
/// copies 15 ms apart, a 5 ms NACK margin, early NACKs and XOR copies where they come before a
/// NACK's repair ([`Recovery::game`]).
///
/// ```
/// use latlab_transport::{LossRule, Recovery};
/// let r: Recovery = "thin:min-rto=50ms,rdb=600".parse().unwrap();
/// assert_eq!((r.rule, r.min_rto_ns, r.rdb_bytes), (LossRule::Thin, 50_000_000, 600));
/// let e = "thin:rbd=600".parse::<Recovery>().unwrap_err();
/// assert_eq!(e.to_string(), "recovery policy: unknown key `rbd`");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// Which rule declares packets lost.
    pub rule: LossRule,
    /// Lower bound of the retransmission timeout (ns). Defaults: 200 ms (`tcp-like`, `rack`),
    /// 200 ms (`thin`; lower it with `min-rto`).
    pub min_rto_ns: u64,
    /// Later packets acked before a packet counts as lost (`tcp-like` 3, `thin` 1; unused by
    /// `rack`).
    pub dupacks: u64,
    /// Redundant data bundling: unacknowledged message bytes that may ride along in a new
    /// packet (0 = off).
    pub rdb_bytes: usize,
    /// RACK's reordering window (ns); 0 means a quarter of the smoothed RTT.
    pub reo_wnd_ns: u64,
    /// Below this many packets in flight a stream is thin: its timeouts are linear (`thin`),
    /// its ACKs asked for at once, and the congestion window never holds it.
    pub thin_packets: usize,
    /// Send urgent messages twice (see [`crate::Endpoint::send_urgent`] and deadline channels).
    pub duplicate_urgent: bool,
    /// Time between the two copies of an urgent message (ns).
    pub duplicate_spacing_ns: u64,
    /// Ask for version 2's compact wire format in the handshake (a client) or accept it (a
    /// server); a client falls back to version 1 after three unanswered `Hello`s.
    pub compact: bool,
    /// How the receiver reports what arrived.
    pub feedback: Feedback,
    /// [`Feedback::Nack`]: longest a cumulative ACK waits (ns).
    pub ack_every_ns: u64,
    /// [`Feedback::Nack`]: how late past its expected arrival (and its copy's) a message is
    /// NACKed (ns).
    pub nack_margin_ns: u64,
    /// [`Feedback::Nack`] with copies: the first NACK goes once the message's first copy is
    /// late by the margin, without waiting for its blind copy, and draws one repair (with no
    /// blind copy of its own); the NACK a copy spacing later, sent only while both copies are
    /// missing, draws the second. A NACKed fragment then goes again unless it went twice
    /// within the last half SRTT (instead of once).
    pub nack_early: bool,
    /// Blind copies of every reliable message.
    pub copies: Copies,
    /// Tail-loss probe: a thin stream's timeout is SRTT + 4·RTTVAR (at least 1 ms), without
    /// the `min-rto` floor.
    pub tlp: bool,
    /// Whether a blind copy of a whole message carries it XORed with the message before it on
    /// its channel (while the sender still holds that one unacknowledged): 3 bytes more, and a
    /// third chance for the older message, which a receiver that has the newer recovers.
    pub xor: XorCopies,
}

impl Recovery {
    /// The defaults of a rule.
    pub const fn new(rule: LossRule) -> Recovery {
        Recovery {
            rule,
            min_rto_ns: 200_000_000,
            dupacks: match rule {
                LossRule::TcpLike => 3,
                _ => 1,
            },
            rdb_bytes: 0,
            reo_wnd_ns: 0,
            thin_packets: 4,
            duplicate_urgent: true,
            duplicate_spacing_ns: 5_000_000,
            compact: false,
            feedback: Feedback::Ack,
            ack_every_ns: 1_000_000_000,
            nack_margin_ns: 10_000_000,
            nack_early: false,
            copies: Copies::Off,
            tlp: false,
            xor: XorCopies::Off,
        }
    }

    /// `lean`: RACK with the compact format, NACK feedback, a blind copy 20 ms behind every
    /// message while loss is seen, and tail-loss probes.
    pub const fn lean() -> Recovery {
        Recovery {
            compact: true,
            feedback: Feedback::Nack,
            copies: Copies::Auto,
            duplicate_spacing_ns: 20_000_000,
            tlp: true,
            ..Recovery::new(LossRule::Rack)
        }
    }

    /// `game`: `lean` with the blind copy 15 ms behind, a NACK once the first copy is 5 ms late
    /// without waiting for the copy (`nack-early`), and XOR copies where they come before a
    /// NACK's repair (`xor=auto`: at intervals shorter than the RTT). Without the XOR copies
    /// it held the transport target (half the lowest p99.9 and maximum of any peer at 1.45×
    /// ENet's bytes, RTT and interval 100 ms, 2.5 % random and bursty loss;
    /// `bench/results/transport-long-2026-11-27.md`); at a 50 ms interval the XOR copies take
    /// its p99.9 from 105 to 65 ms in virtual time (`bench/results/transport-xor-2026-11-28.md`).
    pub const fn game() -> Recovery {
        Recovery {
            duplicate_spacing_ns: 15_000_000,
            nack_margin_ns: 5_000_000,
            nack_early: true,
            xor: XorCopies::Auto,
            ..Recovery::lean()
        }
    }
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery::new(LossRule::Thin)
    }
}

/// Why a recovery policy did not parse; the message names the part at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRecoveryError {
    /// The name before `:` is not a policy.
    #[error("recovery policy: unknown policy `{0}` (tcp-like, thin, rack, lean, game)")]
    UnknownPolicy(String),
    /// A key this policy does not have.
    #[error("recovery policy: unknown key `{0}`")]
    UnknownKey(String),
    /// A `key=value` whose value does not parse.
    #[error("recovery policy: bad value `{value}` for `{key}`")]
    BadValue {
        /// The key.
        key: String,
        /// Its value.
        value: String,
    },
}

fn duration_ns(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let number: u64 = text[..split].parse().ok()?;
    let unit = match &text[split..] {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

impl FromStr for Recovery {
    type Err = ParseRecoveryError;

    fn from_str(text: &str) -> Result<Recovery, ParseRecoveryError> {
        let (name, options) = text.split_once(':').unwrap_or((text, ""));
        let mut recovery = match name {
            "tcp-like" => Recovery::new(LossRule::TcpLike),
            "thin" => Recovery::new(LossRule::Thin),
            "rack" => Recovery::new(LossRule::Rack),
            "lean" => Recovery::lean(),
            "game" => Recovery::game(),
            other => return Err(ParseRecoveryError::UnknownPolicy(other.to_string())),
        };
        for option in options.split(',').filter(|o| !o.is_empty()) {
            let (key, value) = option.split_once('=').unwrap_or((option, ""));
            let bad = || ParseRecoveryError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
            };
            let count = || value.parse::<u64>().map_err(|_| bad());
            let on_off = || match value {
                "on" => Ok(true),
                "off" => Ok(false),
                _ => Err(bad()),
            };
            match key {
                "wire" => {
                    recovery.compact = match value {
                        "compact" => true,
                        "classic" => false,
                        _ => return Err(bad()),
                    }
                }
                "feedback" => {
                    recovery.feedback = match value {
                        "ack" => Feedback::Ack,
                        "nack" => Feedback::Nack,
                        _ => return Err(bad()),
                    }
                }
                "copies" => {
                    recovery.copies = match value {
                        "off" => Copies::Off,
                        "on" => Copies::On,
                        "auto" => Copies::Auto,
                        _ => return Err(bad()),
                    }
                }
                "tlp" => recovery.tlp = on_off()?,
                "xor" => {
                    recovery.xor = match value {
                        "off" => XorCopies::Off,
                        "on" => XorCopies::On,
                        "auto" => XorCopies::Auto,
                        _ => return Err(bad()),
                    }
                }
                "nack-early" => recovery.nack_early = on_off()?,
                "ack-every" => {
                    recovery.ack_every_ns = duration_ns(value).filter(|&d| d > 0).ok_or_else(bad)?
                }
                "nack-margin" => recovery.nack_margin_ns = duration_ns(value).ok_or_else(bad)?,
                "min-rto" => recovery.min_rto_ns = duration_ns(value).ok_or_else(bad)?,
                "reo-wnd" => recovery.reo_wnd_ns = duration_ns(value).ok_or_else(bad)?,
                "dup-spacing" => {
                    recovery.duplicate_spacing_ns = duration_ns(value).ok_or_else(bad)?
                }
                "dupacks" => {
                    recovery.dupacks = count().and_then(|n| (n > 0).then_some(n).ok_or_else(bad))?
                }
                "rdb" => recovery.rdb_bytes = usize::try_from(count()?).map_err(|_| bad())?,
                "thin-packets" => {
                    recovery.thin_packets = usize::try_from(count()?).map_err(|_| bad())?
                }
                "dup-urgent" => recovery.duplicate_urgent = on_off()?,
                other => return Err(ParseRecoveryError::UnknownKey(other.to_string())),
            }
        }
        Ok(recovery)
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.rule {
            LossRule::TcpLike => "tcp-like",
            LossRule::Thin => "thin",
            LossRule::Rack => "rack",
        };
        write!(f, "{name}:min-rto={}us", self.min_rto_ns / 1_000)?;
        if self.rule != LossRule::Rack {
            write!(f, ",dupacks={}", self.dupacks)?;
        }
        if self.rdb_bytes > 0 {
            write!(f, ",rdb={}", self.rdb_bytes)?;
        }
        // The other knobs where they differ from the rule's defaults, so that two policies
        // that differ never print alike.
        let defaults = Recovery::new(self.rule);
        if self.reo_wnd_ns != defaults.reo_wnd_ns {
            write!(f, ",reo-wnd={}us", self.reo_wnd_ns / 1_000)?;
        }
        if self.thin_packets != defaults.thin_packets {
            write!(f, ",thin-packets={}", self.thin_packets)?;
        }
        if self.duplicate_urgent != defaults.duplicate_urgent {
            let on = if self.duplicate_urgent { "on" } else { "off" };
            write!(f, ",dup-urgent={on}")?;
        }
        if self.duplicate_spacing_ns != defaults.duplicate_spacing_ns {
            write!(f, ",dup-spacing={}us", self.duplicate_spacing_ns / 1_000)?;
        }
        if self.compact != defaults.compact {
            write!(f, ",wire=compact")?;
        }
        if self.feedback != defaults.feedback {
            write!(f, ",feedback=nack")?;
        }
        if self.ack_every_ns != defaults.ack_every_ns {
            write!(f, ",ack-every={}us", self.ack_every_ns / 1_000)?;
        }
        if self.nack_margin_ns != defaults.nack_margin_ns {
            write!(f, ",nack-margin={}us", self.nack_margin_ns / 1_000)?;
        }
        if self.nack_early != defaults.nack_early {
            write!(
                f,
                ",nack-early={}",
                if self.nack_early { "on" } else { "off" }
            )?;
        }
        if self.copies != defaults.copies {
            let copies = match self.copies {
                Copies::Off => "off",
                Copies::On => "on",
                Copies::Auto => "auto",
            };
            write!(f, ",copies={copies}")?;
        }
        if self.tlp != defaults.tlp {
            write!(f, ",tlp={}", if self.tlp { "on" } else { "off" })?;
        }
        if self.xor != defaults.xor {
            let xor = match self.xor {
                XorCopies::Off => "off",
                XorCopies::On => "on",
                XorCopies::Auto => "auto",
            };
            write!(f, ",xor={xor}")?;
        }
        Ok(())
    }
}

/// An endpoint's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Whether this endpoint answers `Hello`s (a server).
    pub accept_connections: bool,
    /// The channels, by id (index). At most 256.
    pub channels: Vec<ChannelConfig>,
    /// Loss recovery policy.
    pub recovery: Recovery,
    /// Largest UDP payload sent (bytes), ≥ 200.
    pub mtu: usize,
    /// A connection that hears nothing for this long (ns) is closed.
    pub idle_timeout_ns: u64,
    /// A connection that sent nothing ack-eliciting for this long (ns) sends a PING.
    pub keep_alive_ns: u64,
    /// Longest an ACK is delayed when the sender did not ask for it at once (ns).
    pub max_ack_delay_ns: u64,
    /// Length of a cookie epoch (ns); a cookie is good in its epoch and the next.
    pub cookie_epoch_ns: u64,
    /// Longest message `send` accepts (bytes).
    pub max_message_len: usize,
    /// Bytes of incomplete messages a connection holds for reassembly (room for a whole
    /// message is set aside at its first fragment; a message that finds no room waits for
    /// its fragments to come again). One message larger than this is still taken when no
    /// other is being reassembled.
    pub max_reassembly_bytes: usize,
    /// Bytes of unacknowledged messages a connection holds before `send` refuses more.
    pub max_send_buffer_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            accept_connections: false,
            channels: vec![
                ChannelConfig::new(ChannelKind::ReliableOrdered),
                ChannelConfig::new(ChannelKind::ReliableUnordered),
                ChannelConfig::new(ChannelKind::Unreliable),
                ChannelConfig::new(ChannelKind::Sequenced),
                ChannelConfig::deadline(100_000_000),
            ],
            recovery: Recovery::default(),
            mtu: 1200,
            idle_timeout_ns: 10_000_000_000,
            keep_alive_ns: 1_000_000_000,
            max_ack_delay_ns: 25_000_000,
            cookie_epoch_ns: 10_000_000_000,
            max_message_len: 1 << 20,
            max_reassembly_bytes: 4 << 20,
            max_send_buffer_bytes: 16 << 20,
        }
    }
}

impl Config {
    /// The default configuration of a server (accepts connections).
    pub fn server() -> Config {
        Config {
            accept_connections: true,
            ..Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_by_name_with_their_defaults() {
        let tcp: Recovery = "tcp-like".parse().unwrap();
        assert_eq!(
            (tcp.rule, tcp.min_rto_ns, tcp.dupacks),
            (LossRule::TcpLike, 200_000_000, 3)
        );
        let thin: Recovery = "thin".parse().unwrap();
        assert_eq!((thin.dupacks, thin.rdb_bytes, thin.thin_packets), (1, 0, 4));
        let rack: Recovery = "rack:reo-wnd=5ms,rdb=1200,dup-urgent=off".parse().unwrap();
        assert_eq!(rack.reo_wnd_ns, 5_000_000);
        assert_eq!(rack.rdb_bytes, 1200);
        assert!(!rack.duplicate_urgent);
        let tuned: Recovery = "tcp-like:dupacks=2,min-rto=1s,thin-packets=2"
            .parse()
            .unwrap();
        assert_eq!(
            (tuned.dupacks, tuned.min_rto_ns, tuned.thin_packets),
            (2, 1_000_000_000, 2)
        );
    }

    #[test]
    fn parse_errors_name_the_part_at_fault() {
        let error = |text: &str| text.parse::<Recovery>().unwrap_err().to_string();
        assert_eq!(
            error("quic"),
            "recovery policy: unknown policy `quic` (tcp-like, thin, rack, lean, game)"
        );
        assert_eq!(error("thin:rbd=600"), "recovery policy: unknown key `rbd`");
        assert_eq!(
            error("thin:min-rto=50"),
            "recovery policy: bad value `50` for `min-rto`"
        );
        assert_eq!(
            error("tcp-like:dupacks=0"),
            "recovery policy: bad value `0` for `dupacks`"
        );
        assert_eq!(error("thin:rdb"), "recovery policy: bad value `` for `rdb`");
        assert_eq!(
            error("thin:dup-urgent=yes"),
            "recovery policy: bad value `yes` for `dup-urgent`"
        );
    }

    #[test]
    fn display_parses_back() {
        for text in [
            "tcp-like",
            "thin:min-rto=50ms,rdb=600",
            "rack:rdb=300",
            "rack:reo-wnd=3ms,thin-packets=2",
            "thin:dup-urgent=off",
            "rack:rdb=600,dup-spacing=20ms",
            "lean",
            "lean:copies=on,ack-every=500ms,nack-margin=5ms",
            "lean:dup-spacing=10ms,nack-early=on",
            "game",
            "game:xor=on",
            "rack:wire=compact,tlp=on",
        ] {
            let recovery: Recovery = text.parse().unwrap();
            let again: Recovery = recovery.to_string().parse().unwrap();
            assert_eq!(again, recovery, "{text} printed as {recovery}");
        }
        let game: Recovery = "game".parse().unwrap();
        let spelled: Recovery = "lean:dup-spacing=15ms,nack-margin=5ms,nack-early=on,xor=auto"
            .parse()
            .unwrap();
        assert_eq!(game, spelled);
        // Policies that differ never print alike (a study keys its points by the text).
        let a: Recovery = "rack:rdb=600".parse().unwrap();
        let b: Recovery = "rack:rdb=600,dup-spacing=20ms".parse().unwrap();
        assert_ne!(a.to_string(), b.to_string());
    }
}
