//! The departures tap: a copy of every frame the emulator sends, with its arrival, intended
//! and actual departure times, handed to another thread (a capture file writer) through a
//! lock-free single-producer single-consumer ring (`rtrb`).
//!
//! The frame path never waits for the reader: a frame that finds the ring full is not copied
//! and is counted ([`TapRecord`]s lost: [`super::EmulatorReport::tap_full`]). Each copy holds
//! at most [`TAP_SNAP`] bytes of the frame (with its whole length). Memory is the ring's,
//! fixed when it is made, plus one arrival stamp per frame the link holds.

use std::collections::{BTreeMap, VecDeque};

use latlab_link::Fate;
use rtrb::{Consumer, Producer, RingBuffer};

use super::LinkDirection;

/// Most bytes of a frame a [`TapRecord`] keeps.
pub const TAP_SNAP: usize = 2048;

/// One frame sent, as the tap saw it leave.
#[derive(Clone, Debug)]
pub struct TapRecord {
    /// The direction it travelled: [`LinkDirection::AToB`] left on interface B.
    pub direction: LinkDirection,
    /// When it arrived on the other interface (the port's receive stamp), ns.
    pub arrival_ns: u64,
    /// When the link meant it to leave, ns.
    pub intended_ns: u64,
    /// When it was queued on the interface, ns.
    pub departure_ns: u64,
    /// Its whole length, bytes.
    pub len: u32,
    /// Bytes kept: `min(len, TAP_SNAP)`.
    pub kept: u16,
    /// The first `kept` bytes of the frame.
    pub data: [u8; TAP_SNAP],
}

impl TapRecord {
    /// The bytes kept of the frame.
    pub fn frame(&self) -> &[u8] {
        &self.data[..usize::from(self.kept)]
    }
}

/// A ring of `frames` records: the producer for [`super::EmulatorControl::set_tap`], the
/// consumer for the thread that writes them out.
pub fn tap_ring(frames: usize) -> (Producer<TapRecord>, Consumer<TapRecord>) {
    RingBuffer::new(frames.max(16))
}

/// The engine's end of the tap: the ring, and per direction the arrival stamps of the frames
/// the link holds, by departure time (frames with the same departure time leave in arrival
/// order, so a queue per time gives each its own stamp back).
pub(crate) struct Tap {
    ring: Producer<TapRecord>,
    arrivals: [BTreeMap<u64, VecDeque<u64>>; 2],
    /// Frames the ring had no room for.
    pub(crate) full: u64,
}

impl Tap {
    pub(crate) fn new(ring: Producer<TapRecord>) -> Tap {
        Tap {
            ring,
            arrivals: [BTreeMap::new(), BTreeMap::new()],
            full: 0,
        }
    }

    /// A frame arrived at `rx_ns` with `fate`; `no_buffer` of its copies (0, 1 or 2, the
    /// duplicate first) found no buffer in the pipe and will never leave.
    pub(crate) fn arrived(&mut self, d: usize, rx_ns: u64, fate: &Fate, no_buffer: u64) {
        let Fate::Deliver {
            departure_ns,
            duplicate_departure_ns,
            ..
        } = *fate
        else {
            return;
        };
        let held = [Some(departure_ns), duplicate_departure_ns];
        let copies = held.iter().flatten().count() as u64;
        // The pipe holds the original first: when copies are refused, the last ones are.
        for at in held
            .into_iter()
            .flatten()
            .take(copies.saturating_sub(no_buffer) as usize)
        {
            self.arrivals[d].entry(at).or_default().push_back(rx_ns);
        }
    }

    /// A frame meant to leave at `intended_ns` left at `departure_ns`: its record into the
    /// ring, or counted if the ring is full.
    pub(crate) fn departed(&mut self, d: usize, frame: &[u8], intended_ns: u64, departure_ns: u64) {
        let arrival_ns = self.arrival(d, intended_ns);
        self.record(d, frame, arrival_ns, intended_ns, departure_ns);
    }

    /// A frame meant to leave at `intended_ns` did not (the port refused it): forgets it.
    pub(crate) fn refused(&mut self, d: usize, intended_ns: u64) {
        self.arrival(d, intended_ns);
    }

    /// The arrival stamp of the next frame due at `intended_ns` (the intended time itself if
    /// none was noted, which does not happen).
    fn arrival(&mut self, d: usize, intended_ns: u64) -> u64 {
        let map = &mut self.arrivals[d];
        let Some(queue) = map.get_mut(&intended_ns) else {
            return intended_ns;
        };
        let arrival = queue.pop_front().unwrap_or(intended_ns);
        if queue.is_empty() {
            map.remove(&intended_ns);
        }
        arrival
    }

    fn record(&mut self, d: usize, frame: &[u8], arrival_ns: u64, intended_ns: u64, at: u64) {
        if self.ring.is_full() {
            self.full += 1;
            return;
        }
        let kept = frame.len().min(TAP_SNAP);
        let mut record = TapRecord {
            direction: LinkDirection::BOTH[d],
            arrival_ns,
            intended_ns,
            departure_ns: at,
            len: frame.len() as u32,
            kept: kept as u16,
            data: [0; TAP_SNAP],
        };
        record.data[..kept].copy_from_slice(&frame[..kept]);
        if self.ring.push(record).is_err() {
            self.full += 1;
        }
    }
}
