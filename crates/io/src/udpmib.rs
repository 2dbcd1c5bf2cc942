//! A network namespace's UDP counters (the UDP MIB: `/proc/net/snmp`'s `Udp:` lines and
//! `/proc/net/snmp6`'s `Udp6…` lines, summed), read from the namespace the reader was opened
//! in, whichever thread reads them later.
//!
//! As with [`crate::ifstats`], `/proc/thread-self/net/…` belongs to the namespace of the
//! calling thread when the file is opened: [`UdpMib::open`] opens both files for it, and
//! every [`UdpMib::read`] reads them again from the start. The counters are the whole
//! namespace's: every UDP socket in it adds to them.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The drop counters of a namespace's UDP MIB, IPv4 and IPv6 summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// Datagrams received for a port no socket held (`NoPorts`).
    pub no_ports: u64,
    /// Datagrams received and dropped at a socket for any reason (`InErrors`): a full
    /// receive buffer, no memory, a bad checksum, a socket filter. Holds `rcvbuf_errors`.
    pub in_errors: u64,
    /// Of `in_errors`, the datagrams dropped for a full receive buffer (`RcvbufErrors`).
    pub rcvbuf_errors: u64,
    /// Sends refused for a full send buffer or no memory (`SndbufErrors`); a non-blocking
    /// sender that tries again later counts here without losing the datagram.
    pub sndbuf_errors: u64,
}

impl UdpCounters {
    /// What happened between `earlier` and `self` (a counter that went backwards counts
    /// from 0).
    pub fn since(&self, earlier: &UdpCounters) -> UdpCounters {
        let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        UdpCounters {
            no_ports: d(self.no_ports, earlier.no_ports),
            in_errors: d(self.in_errors, earlier.in_errors),
            rcvbuf_errors: d(self.rcvbuf_errors, earlier.rcvbuf_errors),
            sndbuf_errors: d(self.sndbuf_errors, earlier.sndbuf_errors),
        }
    }

    fn add(self, other: UdpCounters) -> UdpCounters {
        UdpCounters {
            no_ports: self.no_ports + other.no_ports,
            in_errors: self.in_errors + other.in_errors,
            rcvbuf_errors: self.rcvbuf_errors + other.rcvbuf_errors,
            sndbuf_errors: self.sndbuf_errors + other.sndbuf_errors,
        }
    }
}

/// A reader of the UDP MIB of the namespace it was opened in.
#[derive(Debug)]
pub struct UdpMib {
    v4: File,
    /// `None` where the kernel has no IPv6.
    v6: Option<File>,
}

const SNMP: &str = "/proc/thread-self/net/snmp";
const SNMP6: &str = "/proc/thread-self/net/snmp6";

impl UdpMib {
    /// Opens the UDP MIB of the calling thread's network namespace.
    pub fn open() -> io::Result<UdpMib> {
        let v4 = File::open(SNMP).map_err(|e| io::Error::new(e.kind(), format!("{SNMP}: {e}")))?;
        let mib = UdpMib {
            v4,
            v6: File::open(SNMP6).ok(),
        };
        mib.read()?;
        Ok(mib)
    }

    /// The namespace's counters now.
    pub fn read(&self) -> io::Result<UdpCounters> {
        let v4 = parse_snmp(&read_whole(&self.v4)?).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{SNMP}: no Udp: lines"))
        })?;
        let v6 = match &self.v6 {
            Some(file) => parse_snmp6(&read_whole(file)?),
            None => UdpCounters::default(),
        };
        Ok(v4.add(v6))
    }
}

fn read_whole(file: &File) -> io::Result<String> {
    let mut text = Vec::with_capacity(8192);
    let mut chunk = [0u8; 4096];
    loop {
        let n = file.read_at(&mut chunk, text.len() as u64)?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// The counters of `/proc/net/snmp`'s two `Udp:` lines (names, then values), if well formed.
fn parse_snmp(text: &str) -> Option<UdpCounters> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let values: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if names.len() != values.len() {
        return None;
    }
    let get = |name: &str| names.iter().position(|n| *n == name).map(|i| values[i]);
    Some(UdpCounters {
        no_ports: get("NoPorts")?,
        in_errors: get("InErrors")?,
        rcvbuf_errors: get("RcvbufErrors")?,
        sndbuf_errors: get("SndbufErrors")?,
    })
}

/// The counters of `/proc/net/snmp6`'s `Udp6…` lines (one name and value a line); a counter
/// missing counts 0.
fn parse_snmp6(text: &str) -> UdpCounters {
    let get = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    };
    UdpCounters {
        no_ports: get("Udp6NoPorts"),
        in_errors: get("Udp6InErrors"),
        rcvbuf_errors: get("Udp6RcvbufErrors"),
        sndbuf_errors: get("Udp6SndbufErrors"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP_TEXT: &str = "\
Ip: Forwarding DefaultTTL
Ip: 1 64
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 10400 3 9 10402 7 2 1 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 50 50 0 50 50 0 0 0
";

    const SNMP6_TEXT: &str = "\
Ip6InReceives                   	12
Udp6InDatagrams                 	5
Udp6NoPorts                     	1
Udp6InErrors                    	4
Udp6OutDatagrams                	5
Udp6RcvbufErrors                	4
Udp6SndbufErrors                	0
UdpLite6NoPorts                 	99
";

    #[test]
    fn the_udp_lines_give_the_drop_counters_by_name() {
        assert_eq!(
            parse_snmp(SNMP_TEXT),
            Some(UdpCounters {
                no_ports: 3,
                in_errors: 9,
                rcvbuf_errors: 7,
                sndbuf_errors: 2,
            })
        );
        assert_eq!(parse_snmp("Udp: NoPorts\nUdp: 1 2\n"), None, "a short line");
        assert_eq!(parse_snmp("Ip: 1\n"), None);
        assert_eq!(
            parse_snmp6(SNMP6_TEXT),
            UdpCounters {
                no_ports: 1,
                in_errors: 4,
                rcvbuf_errors: 4,
                sndbuf_errors: 0,
            }
        );
    }

    #[test]
    fn a_datagram_to_a_port_nobody_holds_counts_in_this_namespace() {
        let mib = UdpMib::open().unwrap();
        let before = mib.read().unwrap();
        // A port just freed: nobody holds it (another test may take it meanwhile, so the
        // count is at least, not exactly, one).
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(b"anyone?", port).unwrap();
        // Loopback delivers it before the send returns, as a rule; a few looks allow for
        // the softirq running later.
        let mut after = mib.read().unwrap();
        for _ in 0..100 {
            if after.since(&before).no_ports >= 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            after = mib.read().unwrap();
        }
        assert!(after.since(&before).no_ports >= 1, "{before:?} {after:?}");
    }
}
