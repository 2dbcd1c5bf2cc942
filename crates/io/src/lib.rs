//! latlab-io: the only crate of latlab that talks to the operating system.
//!
//! Everything that needs a system call lives here: UDP sockets with `recvmmsg`/`sendmmsg`
//! batches and kernel software timestamps (`SO_TIMESTAMPING`), busy polling, socket buffer
//! sizes, the clock, CPU pinning, timer slack and network namespaces. Every `unsafe` block of
//! the project is in this crate, each with a `// SAFETY:` line saying why it holds.
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
mod iface;
pub mod neigh;
pub mod netns;
pub mod packet;
mod poll;
pub mod port;
mod sockopt;
pub mod tsc;
pub mod udp;
pub mod xdp;

pub use choice::Io;
