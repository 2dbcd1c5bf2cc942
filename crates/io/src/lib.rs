//! latlab-io: the only crate of latlab that talks to the operating system.
//!
//! Everything that needs a system call lives here: UDP sockets with `recvmmsg`/`sendmmsg`
//! batches and kernel software timestamps (`SO_TIMESTAMPING`), AF_PACKET and AF_XDP sockets,
//! busy polling, socket buffer sizes, the clock, CPU pinning, timer slack, network namespaces,
//! whether the kernel has SCTP ([`sctp`]), the ownership locks ([`lock`]) that mark what a live
//! run holds, inherited signal dispositions ([`signal`]), the one rule for a test whose
//! precondition is missing ([`precondition`]: skipped with the reason, failed under CI), and a
//! CPU-wide sampling profiler on the software CPU clock ([`profile`]) for where a forwarder's
//! kernel time goes, and freed heap memory given back to the system ([`mem`]). Every `unsafe`
//! block of the project is in this crate, each with a `// SAFETY:` line saying why it holds.
//!
//! Engines do not use the sockets directly but the two shapes of [`port`]: a datagram port
//! (kernel UDP one datagram per call or in batches, or an AF_XDP endpoint with IPv4/UDP in user
//! space) and a frame port (AF_PACKET, or AF_XDP fed every frame). [`Io`] is the one choice of
//! path behind every `--io` flag.
//!
//! Guarantees:
//! - batch calls never block unless asked to ([`udp::UdpSocket::wait_readable`]); a full socket is
//!   reported as zero datagrams moved, not as an error;
//! - a datagram larger than a batch slot is reported as truncated, never read past its slot;
//! - the timestamp source a socket really delivers is reported ([`udp::TimestampSource`]), so a
//!   result never claims kernel stamps it did not get.
//!
//! ```no_run
//! use latlab_io::udp::{RecvBatch, UdpOptions, UdpSocket};
//! let sock = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpOptions::default())?;
//! let mut batch = RecvBatch::new(32, 2048);
//! let n = sock.recv_batch(&mut batch)?;
//! for pkt in batch.iter().take(n) {
//!     println!("{} bytes from {}", pkt.data.len(), pkt.from);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
#![allow(unsafe_code)]

mod choice;
pub mod clock;
pub mod cpu;
pub mod ethtool;
pub mod iface;
pub mod ifstats;
pub mod lock;
pub mod mem;
pub mod neigh;
pub mod netns;
pub mod packet;
mod poll;
pub mod port;
pub mod precondition;
pub mod profile;
pub mod sctp;
pub mod signal;
mod sockopt;
pub mod tcp;
pub mod tsc;
pub mod udp;
pub mod udpmib;
pub mod xdp;

pub use choice::Io;
