//! Which packet I/O a command runs on: the one type behind every `--io` flag of latlab.
//!
//! Each command takes the subset it can run on ([`Io::parse_among`]) and refuses the rest with
//! its own message; the names are those of the command line and the results files.

use std::fmt;
use std::str::FromStr;

/// A packet I/O path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Io {
    /// Kernel UDP sockets. For the game server, one `recvfrom`/`sendto` per datagram, as a
    /// plain kernel-socket server does; for echo and gen, `recvmmsg`/`sendmmsg` batches.
    #[default]
    Socket,
    /// Kernel UDP sockets with `recvmmsg`/`sendmmsg` batches.
    Batched,
    /// AF_PACKET rings beside the kernel stack (whole frames; the emulator).
    Packet,
    /// AF_XDP: frames taken before the kernel stack by an XDP program; a datagram endpoint
    /// handles IPv4 and UDP in user space, a bridge takes every frame.
    Xdp,
    /// An XDP program redirecting every frame to the other interface: frames never leave the
    /// kernel (the forwarder only).
    XdpRedirect,
}

impl Io {
    /// Every I/O path, in the order the command line lists them.
    pub const ALL: [Io; 5] = [
        Io::Socket,
        Io::Batched,
        Io::Packet,
        Io::Xdp,
        Io::XdpRedirect,
    ];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Io::Socket => "socket",
            Io::Batched => "batched",
            Io::Packet => "packet",
            Io::Xdp => "xdp",
            Io::XdpRedirect => "xdp-redirect",
        }
    }

    /// Parses `text` as one of `among`; otherwise the error names `what` and lists `among`:
    /// `unknown server I/O "dpdk": expected socket, batched or xdp`.
    pub fn parse_among(text: &str, among: &[Io], what: &str) -> Result<Io, String> {
        among
            .iter()
            .copied()
            .find(|io| io.name() == text)
            .ok_or_else(|| format!("unknown {what} {text:?}: expected {}", list(among)))
    }
}

/// `a`, `a or b`, `a, b or c`.
fn list(among: &[Io]) -> String {
    let names: Vec<&str> = among.iter().map(|io| io.name()).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

impl FromStr for Io {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Io::parse_among(s, &Io::ALL, "I/O")
    }
}

impl fmt::Display for Io {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_takes_its_subset_and_names_the_rest() {
        let server = [Io::Socket, Io::Batched, Io::Xdp];
        assert_eq!(
            Io::parse_among("batched", &server, "server I/O"),
            Ok(Io::Batched)
        );
        assert_eq!(
            Io::parse_among("dpdk", &server, "server I/O").unwrap_err(),
            "unknown server I/O \"dpdk\": expected socket, batched or xdp"
        );
        assert_eq!(
            Io::parse_among("packet", &server, "server I/O").unwrap_err(),
            "unknown server I/O \"packet\": expected socket, batched or xdp"
        );
        assert_eq!("xdp".parse::<Io>(), Ok(Io::Xdp));
        for io in Io::ALL {
            assert_eq!(io.name().parse::<Io>(), Ok(io));
            assert_eq!(io.to_string(), io.name());
        }
    }
}
