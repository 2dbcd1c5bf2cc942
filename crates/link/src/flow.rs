//! Per-flow rules: which frames a rule takes ([`FlowMatch`], read from text such as
//! `proto=udp dport=27015`) and the link they take instead of the default ([`FlowRule`],
//! [`Flows`]). [`crate::FlowPipes`] runs them: the default pipe plus one pipe per rule, the
//! first matching rule taking the frame, as NetEm qdiscs behind `tc` filters.
//!
//! Match keys, space-separated, every one given must hold:
//!
//! | key | matches |
//! |---|---|
//! | `ether=ipv4\|ipv6\|arp\|0xNNNN` | the EtherType, behind any 802.1Q / 802.1ad tags |
//! | `proto=udp\|tcp\|icmp\|icmpv6\|sctp\|N` | the IP protocol (`icmp`: ICMP over IPv4 and ICMPv6 over IPv6; `N` the number as it is) |
//! | `src=PREFIX`, `dst=PREFIX` | the source, destination address: `10.0.0.0/8`, `fd00::/16`, or a plain address |
//! | `sport=N[-M]`, `dport=N[-M]` | the source, destination port (or a range, both ends in) |
//! | `port=N[-M]` | either port |
//!
//! A frame that is not IP (or too short for its IP header) never matches a key other than
//! `ether`. IPv6 extension headers are not walked ([`latlab_wire::flow`]): a packet with
//! them matches `proto=` on its first extension header's number and no port key. Text that
//! can never match anything (`ether=arp proto=udp`, an IPv6 `src` with an IPv4 `dst`, ports
//! of ICMP) is refused, naming the key.

use std::fmt;
use std::net::IpAddr;

use latlab_wire::flow::{
    has_ports, protocol, FlowKey, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
};

use crate::{ConfigError, LinkConfig};

/// The match keys, as they are written before `=`.
pub const MATCH_KEYS: [&str; 7] = ["ether", "proto", "src", "dst", "sport", "dport", "port"];

/// Which frames a rule takes: every key given must hold ([`FlowMatch::matches`]). Read from
/// text with [`FlowMatch::parse`]; its `Display` gives the text back in a fixed key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowMatch {
    ether: Option<u16>,
    proto: Option<Protocol>,
    src: Option<Prefix>,
    dst: Option<Prefix>,
    sport: Option<Ports>,
    dport: Option<Ports>,
    port: Option<Ports>,
}

/// The `proto=` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// ICMP of the packet's own family: 1 over IPv4, 58 over IPv6.
    Icmp,
    /// This protocol number, whatever the family.
    Number(u8),
}

/// An address prefix; `addr` has no bit set beyond `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// A range of ports, `first..=last`, `first <= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ports {
    first: u16,
    last: u16,
}

/// A rule: the frames `matcher` takes go through a link of their own with `config`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRule {
    /// Which frames.
    pub matcher: FlowMatch,
    /// Their link.
    pub config: LinkConfig,
}

/// A direction's links: the rules, tried in order, and the default link for the frames no
/// rule takes. A [`LinkConfig`] alone is a direction without rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flows {
    /// The link of every frame no rule takes.
    pub default: LinkConfig,
    /// The rules; the first that matches a frame takes it.
    pub rules: Vec<FlowRule>,
}

impl From<LinkConfig> for Flows {
    fn from(default: LinkConfig) -> Flows {
        Flows {
            default,
            rules: Vec::new(),
        }
    }
}

impl FlowMatch {
    /// Reads space-separated `key=value` tokens (see the module's table). `flag` names the
    /// option read, for errors, which name it and the token at fault: `--flow dport=abc: ...`.
    /// At least one key is needed, each at most once.
    pub fn parse(flag: &str, text: &str) -> Result<FlowMatch, ConfigError> {
        let mut m = FlowMatch::default();
        let mut tokens = text.split_whitespace().peekable();
        if tokens.peek().is_none() {
            return Err(invalid(
                flag,
                &format!(
                    "no match key: expected one or more of {}",
                    MATCH_KEYS.map(|k| format!("{k}=")).join(" ")
                ),
            ));
        }
        for token in tokens {
            let at_fault = |reason: &str| invalid(&format!("{flag} {token}"), reason);
            let Some((key, value)) = token.split_once('=') else {
                return Err(at_fault("not key=value"));
            };
            let taken = match key {
                "ether" => set(&mut m.ether, ethertype(value)),
                "proto" => set(&mut m.proto, protocol_of(value)),
                "src" => set(&mut m.src, prefix(value)),
                "dst" => set(&mut m.dst, prefix(value)),
                "sport" => set(&mut m.sport, ports(value)),
                "dport" => set(&mut m.dport, ports(value)),
                "port" => set(&mut m.port, ports(value)),
                _ => Err(format!(
                    "unknown match key: expected one of {}",
                    MATCH_KEYS.join(", ")
                )),
            };
            taken.map_err(|reason| at_fault(&reason))?;
        }
        m.check_can_match()
            .map_err(|(key, reason)| invalid(&format!("{flag} {key}"), &reason))?;
        Ok(m)
    }

    /// Whether a frame with `key` ([`FlowKey::read`]) is one of this rule's.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        if self.ether.is_some() && key.ethertype != self.ether {
            return false;
        }
        if !self.needs_ip() {
            return true;
        }
        let Some(ip) = key.ip else {
            return false;
        };
        let proto = match self.proto {
            None => true,
            Some(Protocol::Number(n)) => ip.protocol == n,
            Some(Protocol::Icmp) => {
                ip.protocol
                    == if ip.src.is_ipv4() {
                        protocol::ICMP
                    } else {
                        protocol::ICMPV6
                    }
            }
        };
        let in_prefix = |p: Option<Prefix>, addr: IpAddr| p.is_none_or(|p| p.contains(addr));
        if !(proto && in_prefix(self.src, ip.src) && in_prefix(self.dst, ip.dst)) {
            return false;
        }
        if self.sport.is_none() && self.dport.is_none() && self.port.is_none() {
            return true;
        }
        let Some((sport, dport)) = ip.ports else {
            return false;
        };
        let within = |r: Option<Ports>, port: u16| r.is_none_or(|r| r.contains(port));
        within(self.sport, sport)
            && within(self.dport, dport)
            && self
                .port
                .is_none_or(|r| r.contains(sport) || r.contains(dport))
    }

    /// Whether a key other than `ether` is given.
    fn needs_ip(&self) -> bool {
        self.proto.is_some()
            || self.src.is_some()
            || self.dst.is_some()
            || self.sport.is_some()
            || self.dport.is_some()
            || self.port.is_some()
    }

    /// `Err((key=value, why))` when no frame can match: IP keys with a non-IP EtherType,
    /// addresses of two families, ports of a protocol without them.
    fn check_can_match(&self) -> Result<(), (String, String)> {
        let family = |p: &Option<Prefix>| p.map(|p| if p.addr.is_ipv4() { 4 } else { 6 });
        let ether_family = match self.ether {
            None => None,
            Some(ETHERTYPE_IPV4) => Some(4),
            Some(ETHERTYPE_IPV6) => Some(6),
            Some(_) => {
                if self.needs_ip() {
                    return Err((
                        self.key_text("ether"),
                        "is not IP, and the other keys match IP packets only".into(),
                    ));
                }
                None
            }
        };
        let mut seen: Option<(u8, String)> = ether_family.map(|f| (f, self.key_text("ether")));
        for key in ["src", "dst"] {
            let prefix = if key == "src" { &self.src } else { &self.dst };
            let Some(f) = family(prefix) else { continue };
            match &seen {
                Some((g, other)) if *g != f => {
                    return Err((
                        self.key_text(key),
                        format!("is IPv{f} and {other} is IPv{g}: no packet is both"),
                    ))
                }
                _ => seen = Some((f, self.key_text(key))),
            }
        }
        let port_key = ["sport", "dport", "port"]
            .into_iter()
            .find(|k| self.ports_of(k).is_some());
        if let (Some(key), Some(proto)) = (port_key, self.proto) {
            let without = match proto {
                Protocol::Icmp => true,
                Protocol::Number(n) => !has_ports(n),
            };
            if without {
                return Err((
                    self.key_text(key),
                    format!(
                        "{} has no ports (ports are those of tcp, udp, sctp, dccp, udplite)",
                        self.key_text("proto")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn ports_of(&self, key: &str) -> Option<Ports> {
        match key {
            "sport" => self.sport,
            "dport" => self.dport,
            _ => self.port,
        }
    }

    /// `key=value` of one key, as [`Display`](fmt::Display) writes it (empty if not given).
    fn key_text(&self, key: &str) -> String {
        let value = match key {
            "ether" => self.ether.map(|e| EtherName(e).to_string()),
            "proto" => self.proto.map(|p| p.to_string()),
            "src" => self.src.map(|p| p.to_string()),
            "dst" => self.dst.map(|p| p.to_string()),
            _ => self.ports_of(key).map(|p| p.to_string()),
        };
        value.map_or(String::new(), |v| format!("{key}={v}"))
    }
}

impl fmt::Display for FlowMatch {
    /// The keys given, in the order of [`MATCH_KEYS`]: `proto=udp dport=27015`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let given: Vec<String> = MATCH_KEYS
            .iter()
            .map(|k| self.key_text(k))
            .filter(|t| !t.is_empty())
            .collect();
        f.write_str(&given.join(" "))
    }
}

/// Sets `slot` to the value read, once.
fn set<T>(slot: &mut Option<T>, value: Result<T, String>) -> Result<(), String> {
    if slot.is_some() {
        return Err("given twice (every key at most once per rule)".into());
    }
    *slot = Some(value?);
    Ok(())
}

fn invalid(option: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        option: option.to_string(),
        reason: reason.to_string(),
    }
}

/// The EtherTypes `ether=` takes by name (or a number in hex, `0x88cc`).
pub const ETHER_NAMES: [&str; 3] = ["ipv4", "ipv6", "arp"];
/// The protocols `proto=` takes by name (or a number 0-255).
pub const PROTOCOL_NAMES: [&str; 7] = ["udp", "tcp", "icmp", "icmpv6", "sctp", "dccp", "udplite"];

fn ethertype(value: &str) -> Result<u16, String> {
    match value.to_ascii_lowercase().as_str() {
        "ipv4" | "ip" => Ok(ETHERTYPE_IPV4),
        "ipv6" => Ok(ETHERTYPE_IPV6),
        "arp" => Ok(ETHERTYPE_ARP),
        v => v
            .strip_prefix("0x")
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            .ok_or_else(|| {
                format!(
                    "expected {} or a number in hex (0x88cc)",
                    ETHER_NAMES.join(", ")
                )
            }),
    }
}

fn protocol_of(value: &str) -> Result<Protocol, String> {
    Ok(match value.to_ascii_lowercase().as_str() {
        "icmp" => Protocol::Icmp,
        "tcp" => Protocol::Number(protocol::TCP),
        "udp" => Protocol::Number(protocol::UDP),
        "icmpv6" | "icmp6" => Protocol::Number(protocol::ICMPV6),
        "sctp" => Protocol::Number(protocol::SCTP),
        "dccp" => Protocol::Number(protocol::DCCP),
        "udplite" => Protocol::Number(protocol::UDPLITE),
        v => Protocol::Number(
            v.parse()
                .map_err(|_| format!("expected {} or a number 0-255", PROTOCOL_NAMES.join(", ")))?,
        ),
    })
}

fn prefix(value: &str) -> Result<Prefix, String> {
    const EXPECTED: &str = "expected an address or a prefix (10.0.0.0/8, fd00::/16, 10.0.0.2)";
    let (addr, len) = match value.split_once('/') {
        Some((addr, len)) => (addr, Some(len)),
        None => (value, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| EXPECTED.to_string())?;
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => bits,
        Some(len) => match len.parse::<u8>() {
            Ok(len) if len <= bits => len,
            _ => return Err(format!("the prefix length must be 0 to {bits}")),
        },
    };
    Ok(Prefix {
        addr: masked(addr, len),
        len,
    })
}

fn ports(value: &str) -> Result<Ports, String> {
    const EXPECTED: &str = "expected a port or a range of ports (27015, 27000-27100)";
    let port = |text: &str| text.parse::<u16>().map_err(|_| EXPECTED.to_string());
    let (first, last) = match value.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => (port(value)?, port(value)?),
    };
    if first > last {
        return Err(format!("the range {first}-{last} runs backwards"));
    }
    Ok(Ports { first, last })
}

/// `addr` with every bit past the first `len` cleared.
fn masked(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

impl Prefix {
    fn contains(self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4() && masked(addr, self.len) == self.addr
    }
}

impl Ports {
    fn contains(self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Protocol::Icmp => f.write_str("icmp"),
            Protocol::Number(protocol::TCP) => f.write_str("tcp"),
            Protocol::Number(protocol::UDP) => f.write_str("udp"),
            Protocol::Number(protocol::ICMPV6) => f.write_str("icmpv6"),
            Protocol::Number(protocol::SCTP) => f.write_str("sctp"),
            Protocol::Number(protocol::DCCP) => f.write_str("dccp"),
            Protocol::Number(protocol::UDPLITE) => f.write_str("udplite"),
            Protocol::Number(n) => write!(f, "{n}"),
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == bits {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

impl fmt::Display for Ports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// An EtherType as `ether=` takes it.
struct EtherName(u16);

impl fmt::Display for EtherName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ETHERTYPE_IPV4 => f.write_str("ipv4"),
            ETHERTYPE_IPV6 => f.write_str("ipv6"),
            ETHERTYPE_ARP => f.write_str("arp"),
            other => write!(f, "0x{other:04x}"),
        }
    }
}

#[cfg(test)]
pub(crate) mod frames;
#[cfg(test)]
mod tests;
