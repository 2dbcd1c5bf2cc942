//! Streams of a capture and the Table 1 columns of each direction.

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::Serialize;

use super::capture::{CapturedPacket, Protocol};

/// One UDP or TCP conversation: both directions of a 5-tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// 1, 2, … in the order of the streams' first packets.
    pub number: usize,
    /// UDP or TCP.
    pub protocol: Protocol,
    /// The sender of the stream's first packet.
    pub a: SocketAddr,
    /// The other end.
    pub b: SocketAddr,
    /// Packets a → b, then b → a: (capture time ns, payload bytes, wire bytes).
    pub directions: [Vec<(u64, usize, usize)>; 2],
}

impl Stream {
    /// Packets in both directions.
    pub fn packets(&self) -> usize {
        self.directions[0].len() + self.directions[1].len()
    }
}

/// The streams of `packets`, numbered by their first packet. TCP segments without payload
/// (acknowledgements) carry no game data and are left out, as in the paper's table.
pub fn streams(packets: &[CapturedPacket]) -> Vec<Stream> {
    let mut index: HashMap<(Protocol, SocketAddr, SocketAddr), usize> = HashMap::new();
    let mut out: Vec<Stream> = Vec::new();
    for p in packets {
        if p.protocol == Protocol::Tcp && p.payload_len == 0 {
            continue;
        }
        let key = if p.src <= p.dst {
            (p.protocol, p.src, p.dst)
        } else {
            (p.protocol, p.dst, p.src)
        };
        let i = *index.entry(key).or_insert_with(|| {
            out.push(Stream {
                number: out.len() + 1,
                protocol: p.protocol,
                a: p.src,
                b: p.dst,
                directions: [Vec::new(), Vec::new()],
            });
            out.len() - 1
        });
        let stream = &mut out[i];
        let dir = usize::from(p.src != stream.a);
        stream.directions[dir].push((p.ts_ns, p.payload_len, p.wire_len));
    }
    out
}

/// The Table 1 columns of one direction of a stream. Gaps are between consecutive packets in
/// capture order (a time that goes backwards gives a gap of 0); percentiles are nearest-rank.
/// Fields that need two packets are `None` with one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirectionStats {
    /// Stream number.
    pub stream: usize,
    /// `udp` or `tcp`.
    pub protocol: Protocol,
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Packets (TCP: segments with payload).
    pub packets: usize,
    /// Payload bytes: average.
    pub size_avg: f64,
    /// Smallest payload.
    pub size_min: usize,
    /// Largest payload.
    pub size_max: usize,
    /// Interarrival, ms: average.
    pub gap_avg_ms: Option<f64>,
    /// Median.
    pub gap_median_ms: Option<f64>,
    /// Smallest.
    pub gap_min_ms: Option<f64>,
    /// Largest.
    pub gap_max_ms: Option<f64>,
    /// 1st percentile.
    pub gap_p1_ms: Option<f64>,
    /// 99th percentile.
    pub gap_p99_ms: Option<f64>,
    /// Packets per second: (packets − 1) over the time from the first to the last.
    pub pps: Option<f64>,
    /// Bits per second on the wire (frame lengths as captured, link header included) over the
    /// same time.
    pub bps: Option<f64>,
}

/// The gaps of one direction, ns.
pub fn gaps(packets: &[(u64, usize, usize)]) -> Vec<u64> {
    packets
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0))
        .collect()
}

fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl DirectionStats {
    /// The statistics of direction `dir` (0: a → b, 1: b → a) of `stream`, or `None` when it
    /// has no packet.
    pub fn of(stream: &Stream, dir: usize) -> Option<DirectionStats> {
        let packets = &stream.directions[dir];
        let n = packets.len();
        if n == 0 {
            return None;
        }
        let (from, to) = if dir == 0 {
            (stream.a, stream.b)
        } else {
            (stream.b, stream.a)
        };
        let sizes = packets.iter().map(|p| p.1);
        let mut g = gaps(packets);
        g.sort_unstable();
        let ms = |ns: u64| ns as f64 / 1e6;
        // Summed wide: a capture whose clock runs back and forth (a corrupted or merged file)
        // has gaps near u64::MAX that would overflow a u64 sum.
        let span_ns: u128 = g.iter().map(|&gap| u128::from(gap)).sum();
        let (gap_avg, median, min, max, p1, p99) = if g.is_empty() {
            (None, None, None, None, None, None)
        } else {
            (
                Some(span_ns as f64 / g.len() as f64 / 1e6),
                Some(ms(nearest_rank(&g, 0.5))),
                Some(ms(g[0])),
                Some(ms(g[g.len() - 1])),
                Some(ms(nearest_rank(&g, 0.01))),
                Some(ms(nearest_rank(&g, 0.99))),
            )
        };
        let span_s = span_ns as f64 / 1e9;
        let wire_bits: u128 = packets.iter().skip(1).map(|p| p.2 as u128 * 8).sum();
        Some(DirectionStats {
            stream: stream.number,
            protocol: stream.protocol,
            from: from.to_string(),
            to: to.to_string(),
            packets: n,
            size_avg: sizes.clone().sum::<usize>() as f64 / n as f64,
            size_min: sizes.clone().min().unwrap_or(0),
            size_max: sizes.max().unwrap_or(0),
            gap_avg_ms: gap_avg,
            gap_median_ms: median,
            gap_min_ms: min,
            gap_max_ms: max,
            gap_p1_ms: p1,
            gap_p99_ms: p99,
            pps: (span_s > 0.0).then(|| (n - 1) as f64 / span_s),
            bps: (span_s > 0.0).then(|| wire_bits as f64 / span_s),
        })
    }
}
