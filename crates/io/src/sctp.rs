//! Whether this kernel speaks SCTP, asked the only way that is sure: open one SCTP socket.
//!
//! [`probe`] calls `socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)` (the one-to-one style, the
//! one a stream transport would use) and closes the socket at once. Where SCTP is a module not
//! yet loaded, the kernel loads it for that call, as it would for any program that opens one.
//! Nothing is bound, connected or sent.

use std::io;

use socket2::{Domain, Protocol, Socket, Type};

/// The call [`probe`] makes, as a message names it.
pub const PROBE_CALL: &str = "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)";

/// Opens and closes one one-to-one SCTP socket: `Ok(())` when this kernel made it, else the
/// error it returned (EPROTONOSUPPORT on a kernel built without SCTP).
pub fn probe() -> io::Result<()> {
    Socket::new(
        Domain::IPV4,
        Type::STREAM,
        Some(Protocol::from(libc::IPPROTO_SCTP)),
    )
    .map(drop)
}

/// The symbolic name of an errno value that `socket(2)` returns (`EPROTONOSUPPORT`, …);
/// `None` for one it does not.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ENOBUFS => "ENOBUFS",
        libc::ENOMEM => "ENOMEM",
        _ => return None,
    })
}

/// Whether `errno`, from [`probe`], says the kernel has no SCTP at all (rather than that this
/// process may not, or could not now, open a socket).
pub fn means_absent(errno: i32) -> bool {
    matches!(
        errno,
        libc::EPROTONOSUPPORT | libc::ESOCKTNOSUPPORT | libc::EAFNOSUPPORT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names_are_the_c_names() {
        assert_eq!(errno_name(libc::EPROTONOSUPPORT), Some("EPROTONOSUPPORT"));
        assert_eq!(errno_name(libc::EACCES), Some("EACCES"));
        assert_eq!(errno_name(libc::ENOENT), None);
        assert!(means_absent(libc::EPROTONOSUPPORT) && !means_absent(libc::EPERM));
    }
}
