//! The control connection between `stream send` and `stream recv`, and the receiver's tally.
//!
//! Every TCP connection to the receiver's listener starts with an 8-byte hello: `LLSTCTRL`
//! (a control connection) or `LLSTDATA` followed by the run's id (big-endian `u32`; the data
//! connection of a `tcp` run). On a control connection each side then writes frames: a 4-byte
//! big-endian length (at most [`MAX_CONTROL`]) and a JSON [`ToReceiver`] or [`ToSender`]. The
//! sender starts a run ([`Start`]), the receiver answers ([`ToSender::Ready`] or
//! [`ToSender::Refused`]), and at the end the sender says how many it sent
//! ([`ToReceiver::End`]) and the receiver hands back its measurements ([`Results`]: the
//! latency histogram serialized as HdrHistogram's V2 format, and its counters). Control bytes
//! are never counted as the transport's.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latlab_stats::hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use latlab_stats::LatencyHistogram;
use serde::{Deserialize, Serialize};

use super::message;
use super::wire::WireCounts;

/// The hello of a control connection.
pub const HELLO_CONTROL: [u8; 8] = *b"LLSTCTRL";
/// The hello of a `tcp` run's data connection (followed by the run's id).
pub const HELLO_DATA: [u8; 8] = *b"LLSTDATA";
/// The largest control frame.
pub const MAX_CONTROL: usize = 1 << 20;

/// What the sender says on the control connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToReceiver {
    /// Start a run.
    Start(Start),
    /// The run is over: `sent` messages went out (sequence numbers `0..sent`). The receiver
    /// waits at most `grace_ms` for the missing ones, then answers with [`Results`].
    End {
        /// Messages sent.
        sent: u64,
        /// How long to wait for messages still on their way, milliseconds.
        grace_ms: u64,
    },
}

/// The start of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// The sender's latlab version.
    pub version: String,
    /// The transport, as [`super::TransportSpec`] prints it; must be the receiver's.
    pub transport: String,
    /// The run's id, in every message.
    pub run: u32,
    /// Bytes per message.
    pub size: usize,
    /// The most messages the run will send.
    pub messages: u64,
    /// How long the sender will send, milliseconds (the receiver gives up on a run that goes
    /// on a minute longer).
    pub duration_ms: u64,
}

/// What the receiver says on the control connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToSender {
    /// The receiver is ready for the run's data.
    Ready {
        /// QUIC: the receiver's certificate (DER, hex) for the sender to pin.
        certificate_hex: Option<String>,
    },
    /// The receiver will not run it, and why.
    Refused {
        /// One line.
        reason: String,
    },
    /// The run's measurements.
    Results(Results),
}

/// What the receiver measured in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// One-way latency of each message delivered (first copy), HdrHistogram V2, hex.
    pub histogram_hex: String,
    /// Distinct messages of the run delivered.
    pub delivered: u64,
    /// Copies of messages already delivered.
    pub duplicated: u64,
    /// Messages delivered after one with a higher sequence number.
    pub reordered: u64,
    /// Deliveries that were not messages of this run: not a message, another run's, or a
    /// sequence number the run never sent.
    pub malformed: u64,
    /// Datagrams or bytes the transport itself dropped as not its own.
    pub foreign: u64,
    /// What the receiver's side of the transport sent (acknowledgements: the reverse
    /// direction).
    pub wire: WireCounts,
}

/// Writes one control frame.
pub fn write_frame<T: Serialize>(stream: &mut TcpStream, value: &T) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame)
}

/// Reads control frames off a stream, whole, blocking or not.
#[derive(Debug, Default)]
pub struct ControlReader {
    buf: Vec<u8>,
}

impl ControlReader {
    /// A reader with nothing read yet.
    pub fn new() -> ControlReader {
        ControlReader::default()
    }

    /// The next frame if one is whole in what was read so far.
    fn take<T: for<'de> Deserialize<'de>>(&mut self) -> io::Result<Option<T>> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if len > MAX_CONTROL {
            return Err(invalid(format!(
                "a control frame of {len} bytes (at most {MAX_CONTROL})"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let value = serde_json::from_slice(&self.buf[4..4 + len])
            .map_err(|e| invalid(format!("a control frame that is not latlab's: {e}")));
        self.buf.drain(..4 + len);
        value.map(Some)
    }

    /// Reads until a whole frame has arrived or `timeout` passes (an error then).
    pub fn read<T: for<'de> Deserialize<'de>>(
        &mut self,
        stream: &mut TcpStream,
        timeout: Duration,
    ) -> io::Result<T> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(v) = self.take()? {
                return Ok(v);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no answer on the control connection within {}",
                        latlab_lab::units::format_duration(timeout)
                    ),
                ));
            }
            stream.set_read_timeout(Some(left))?;
            self.fill(stream)?;
        }
    }

    /// Reads what has arrived without waiting; the next frame if one is whole.
    pub fn try_read<T: for<'de> Deserialize<'de>>(
        &mut self,
        stream: &mut TcpStream,
    ) -> io::Result<Option<T>> {
        if let Some(v) = self.take()? {
            return Ok(Some(v));
        }
        stream.set_nonblocking(true)?;
        let got = self.fill(stream);
        stream.set_nonblocking(false)?;
        match got {
            Ok(()) => self.take(),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn fill(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the control connection was closed",
                    ))
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if self.buf.len() > MAX_CONTROL + 4 {
                        return Err(invalid("more control bytes than a frame holds".into()));
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(io::Error::new(io::ErrorKind::WouldBlock, e))
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Reads a connection's hello: `Ok(None)` for a control connection, `Ok(Some(run))` for a
/// data connection.
pub fn read_hello(stream: &mut TcpStream, timeout: Duration) -> io::Result<Option<u32>> {
    stream.set_read_timeout(Some(timeout))?;
    let mut hello = [0u8; 8];
    stream.read_exact(&mut hello)?;
    match hello {
        HELLO_CONTROL => Ok(None),
        HELLO_DATA => {
            let mut run = [0u8; 4];
            stream.read_exact(&mut run)?;
            Ok(Some(u32::from_be_bytes(run)))
        }
        _ => Err(invalid("a connection that is not latlab stream's".into())),
    }
}

/// Bytes as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex back to bytes; `None` for anything that is not even-length hex.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A histogram as HdrHistogram's V2 bytes, hex.
pub fn histogram_hex(h: &LatencyHistogram) -> io::Result<String> {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h.as_hdr(), &mut bytes)
        .map_err(|e| io::Error::other(format!("serializing a histogram: {e:?}")))?;
    Ok(to_hex(&bytes))
}

/// A histogram back from [`histogram_hex`].
pub fn histogram_from_hex(text: &str) -> io::Result<LatencyHistogram> {
    let bytes = from_hex(text).ok_or_else(|| invalid("a histogram that is not hex".into()))?;
    let h: latlab_stats::hdrhistogram::Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| invalid(format!("a histogram that does not read back: {e:?}")))?;
    Ok(LatencyHistogram::from_hdr(h))
}

/// The receiver's count of one run: which messages came, how late, and what else came.
#[derive(Debug)]
pub struct Tally {
    run: u32,
    messages: u64,
    seen: Vec<u64>,
    highest: Option<u64>,
    /// One-way latency of each first copy.
    pub latency: LatencyHistogram,
    /// The counts so far (`histogram_hex` and `wire` left empty).
    pub counts: Results,
}

impl Tally {
    /// A tally of run `run`, whose sequence numbers are below `messages`.
    pub fn new(run: u32, messages: u64) -> Tally {
        Tally {
            run,
            messages,
            seen: vec![0; messages.div_ceil(64) as usize],
            highest: None,
            latency: LatencyHistogram::new(),
            counts: Results::default(),
        }
    }

    /// Counts one delivery at `now_ns` (`CLOCK_REALTIME`).
    pub fn deliver(&mut self, bytes: &[u8], now_ns: u64) {
        let m = match message::parse(bytes) {
            Ok(m) if m.run == self.run && m.seq < self.messages => m,
            _ => {
                self.counts.malformed += 1;
                return;
            }
        };
        let (word, bit) = ((m.seq / 64) as usize, 1u64 << (m.seq % 64));
        if self.seen[word] & bit != 0 {
            self.counts.duplicated += 1;
            return;
        }
        self.seen[word] |= bit;
        self.counts.delivered += 1;
        if self.highest.is_some_and(|h| h > m.seq) {
            self.counts.reordered += 1;
        }
        self.highest = self.highest.max(Some(m.seq));
        self.latency.record(now_ns.saturating_sub(m.sent_ns));
    }

    /// How many of the first `sent` messages have been delivered.
    pub fn delivered_of(&self, sent: u64) -> u64 {
        let sent = sent.min(self.messages);
        let full = (sent / 64) as usize;
        let mut n: u64 = self.seen[..full]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum();
        if sent % 64 != 0 {
            n += u64::from((self.seen[full] & ((1u64 << (sent % 64)) - 1)).count_ones());
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(run: u32, seq: u64, sent_ns: u64) -> Vec<u8> {
        let mut b = vec![0u8; 40];
        message::emit(&message::Message { run, seq, sent_ns }, &mut b);
        b
    }

    #[test]
    fn the_tally_counts_each_message_once_and_everything_else_as_malformed() {
        let mut t = Tally::new(7, 100);
        t.deliver(&message(7, 0, 1_000), 11_000);
        t.deliver(&message(7, 2, 2_000), 32_000);
        t.deliver(&message(7, 1, 1_500), 40_000);
        t.deliver(&message(7, 2, 2_000), 50_000);
        t.deliver(&message(8, 3, 2_000), 50_000);
        t.deliver(&message(7, 100, 2_000), 50_000);
        t.deliver(b"garbage", 50_000);
        assert_eq!(t.counts.delivered, 3);
        assert_eq!(t.counts.duplicated, 1);
        assert_eq!(t.counts.reordered, 1);
        assert_eq!(t.counts.malformed, 3);
        assert_eq!(t.latency.len(), 3);
        assert_eq!(
            t.latency.max(),
            38_527,
            "38.5 µs within 3 significant digits"
        );
        assert_eq!(t.delivered_of(2), 2);
        assert_eq!(t.delivered_of(100), 3);
    }

    #[test]
    fn a_histogram_goes_over_the_control_connection_and_comes_back_the_same() {
        let mut h = LatencyHistogram::new();
        for v in [10_000u64, 20_000, 20_000, 5_000_000] {
            h.record(v);
        }
        let back = histogram_from_hex(&histogram_hex(&h).unwrap()).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_rank(2), h.value_at_rank(2));
        assert!(histogram_from_hex("zz").is_err());
        assert!(histogram_from_hex("0011").is_err());
        assert_eq!(from_hex("0aff"), Some(vec![10, 255]));
        assert_eq!(from_hex("abc"), None);
    }

    #[test]
    fn control_frames_round_trip_and_oversized_ones_are_refused() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut b, _) = listener.accept().unwrap();
        let end = ToReceiver::End {
            sent: 5,
            grace_ms: 100,
        };
        write_frame(&mut a, &end).unwrap();
        let mut r = ControlReader::new();
        assert_eq!(
            r.read::<ToReceiver>(&mut b, Duration::from_secs(1))
                .unwrap(),
            end
        );
        assert!(r.try_read::<ToReceiver>(&mut b).unwrap().is_none());
        a.write_all(&u32::MAX.to_be_bytes()).unwrap();
        let err = r
            .read::<ToReceiver>(&mut b, Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
