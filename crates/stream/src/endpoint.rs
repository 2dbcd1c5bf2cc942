//! The one trait every transport of `latlab stream` implements, below the modules that
//! implement it and [`super::transport`], which names them.

use std::io;
use std::time::Duration;

use super::wire::WireCounts;

/// One side of a transport's connection, as the stream command drives it.
///
/// Call order: [`send`](Endpoint::send) whenever a message is due (it never blocks: what the
/// transport cannot take yet waits inside it, in order), and [`poll`](Endpoint::poll) in
/// between, which does the I/O and the transport's timers and hands over every message that
/// arrived whole.
pub trait Endpoint: Send {
    /// Hands one message to the transport.
    fn send(&mut self, message: &[u8]) -> io::Result<()>;
    /// Waits at most `wait` for the network, runs the transport's timers, sends what is due and
    /// passes each message delivered to the application to `deliver`.
    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()>;
    /// What this side put on the wire so far.
    fn wire(&mut self) -> WireCounts;
    /// Datagrams or bytes from the network this side dropped because they were not its
    /// transport's (garbage, another run's), counted and ignored.
    fn foreign(&self) -> u64;
    /// Ends the connection politely, as far as that takes no more than a moment.
    fn close(&mut self);
}
