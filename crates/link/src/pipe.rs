//! The pipe: a [`Link`] that holds the frames it delivers until they are due.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::{Conditions, ConfigError, Fate, Link, LinkConfig, LinkCounters};

/// Most frames a pipe holds when its configuration sets no [`LinkConfig::limit_frames`]; a
/// delivered frame (or copy) that finds this many held is dropped and counted in
/// [`Pipe::dropped_no_buffer`].
pub const MAX_HELD_WITHOUT_LIMIT: usize = 65_536;

/// Idle buffers a pipe keeps for reuse once its queue has drained; the rest are freed, so a
/// burst does not keep its peak memory forever.
pub const RETAINED_BUFFERS: usize = 256;

/// One direction of an emulated link with its frames: the [`Link`] model decides each
/// frame's fate and departure time, the pipe holds a copy of the frame (in a buffer of its
/// own, reused from a pool) and hands it out when due. Sans-IO: it reads no clock; the same
/// configuration, seed and calls give the same departures, live or in virtual time.
///
/// Call order, for an engine or a simulation:
///
/// 1. [`Pipe::new`] once, with the configuration and the start time (the schedule's time 0).
/// 2. For every frame received, in arrival order: [`Pipe::handle_arrival`]`(now, frame)`. The
///    pipe copies the frame (and a duplicate, if the link makes one) or drops it; either way
///    the frame is counted once in [`Pipe::counters`].
/// 3. [`Pipe::poll_departure`]`(now)` until it returns `None`: each [`Departure`] lends the
///    bytes of the next frame due (corrupted if the link said so) with its intended departure
///    time; send them, then drop the `Departure` to give the buffer back. Frames come out in
///    departure order (arrival order for equal times): in arrival order unless the link
///    reorders; a duplicate is a departure of its own.
/// 4. [`Pipe::poll_timeout`] for when to come back: the next departure time, `None` if the
///    pipe is empty.
/// 5. At any time, [`Pipe::handle_config`]`(now, config)` changes the conditions of the
///    running pipe: held frames keep their departure times, new arrivals get the new ones.
///
/// `now` must not go backwards between calls of one kind; an arrival stamped before the last
/// `poll_departure` (a stamp taken by the kernel before the engine looked) is fine.
///
/// Guarantees: the link's (every frame counted once by its fate; order kept unless reordering
/// is asked for), and memory bounded by the limits: the pipe holds exactly the frames the link
/// counts as queued, at most [`LinkConfig::limit_frames`] (or [`MAX_HELD_WITHOUT_LIMIT`]) of
/// them and at most [`LinkConfig::limit_bytes`] bytes. Once the queue drains, at most
/// [`RETAINED_BUFFERS`] idle buffers are kept.
///
/// ```
/// use latlab_link::{LinkConfig, Pipe};
///
/// let mut pipe = Pipe::new(LinkConfig { delay_ns: 1_000, ..LinkConfig::default() }, 0).unwrap();
/// pipe.handle_arrival(0, &[7; 64]);
/// assert_eq!(pipe.poll_timeout(), Some(1_000));
/// assert!(pipe.poll_departure(999).is_none());
/// let departure = pipe.poll_departure(1_000).unwrap();
/// assert_eq!((departure.frame(), departure.departure_ns()), (&[7; 64][..], 1_000));
/// drop(departure); // the buffer goes back to the pool
/// assert_eq!(pipe.poll_timeout(), None);
/// ```
#[derive(Debug)]
pub struct Pipe {
    /// The model: fates, departure times, counters, queue occupancy.
    link: Link,
    /// The frames held, earliest departure first; `len() == link.queued_frames()`.
    queue: BinaryHeap<Held>,
    /// Idle buffers, reused before new ones are made.
    pool: Vec<Vec<u8>>,
    /// Arrival order of held frames, to keep it among equal departure times.
    seq: u64,
    /// Delivered frames (or copies) dropped because [`MAX_HELD_WITHOUT_LIMIT`] were held.
    dropped_no_buffer: u64,
}

/// A frame waiting for its departure.
#[derive(Debug)]
struct Held {
    departure_ns: u64,
    seq: u64,
    bytes: Vec<u8>,
}

impl Held {
    fn key(&self) -> (u64, u64) {
        (self.departure_ns, self.seq)
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that the max-heap gives the earliest departure (then the earliest
    /// arrival) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The next frame due, lent by [`Pipe::poll_departure`]. The frame has left the queue (its
/// room counts as free); dropping the `Departure` gives its buffer back to the pipe.
#[derive(Debug)]
pub struct Departure<'a> {
    bytes: Vec<u8>,
    departure_ns: u64,
    pool: &'a mut Vec<Vec<u8>>,
}

impl Departure<'_> {
    /// The frame's bytes, as they arrived except for a bit flipped if the link corrupted it.
    pub fn frame(&self) -> &[u8] {
        &self.bytes
    }

    /// When the link meant the frame to leave, in ns on the clock of `now`.
    pub fn departure_ns(&self) -> u64 {
        self.departure_ns
    }
}

impl Drop for Departure<'_> {
    fn drop(&mut self) {
        self.pool.push(std::mem::take(&mut self.bytes));
    }
}

impl Pipe {
    /// A pipe with `config` (checked with [`LinkConfig::validate`]), whose schedule starts at
    /// `start_ns`. It holds no buffer until frames arrive.
    pub fn new(config: LinkConfig, start_ns: u64) -> Result<Pipe, ConfigError> {
        Ok(Pipe {
            link: Link::new(config, start_ns)?,
            queue: BinaryHeap::new(),
            pool: Vec::new(),
            seq: 0,
            dropped_no_buffer: 0,
        })
    }

    /// A frame arrived at `now`: the link decides its fate; a delivered frame is copied into a
    /// buffer of the pipe, with its duplicate if any, to leave at its departure time. Returns
    /// the fate (the frame's bytes are the pipe's business from here on).
    pub fn handle_arrival(&mut self, now: u64, frame: &[u8]) -> Fate {
        let fate = self.link.handle_arrival(now, frame.len());
        if let Fate::Deliver {
            departure_ns,
            duplicate_departure_ns,
            corrupt_bit,
            ..
        } = fate
        {
            self.hold(now, departure_ns, frame, corrupt_bit);
            if let Some(duplicate_ns) = duplicate_departure_ns {
                self.hold(now, duplicate_ns, frame, None);
            }
        }
        debug_assert_eq!(self.queue.len(), self.link.queued_frames());
        fate
    }

    /// The next frame whose departure time is `≤ now`, if any. Drop the [`Departure`] once its
    /// bytes are sent (or copied); until then the pipe is borrowed.
    pub fn poll_departure(&mut self, now: u64) -> Option<Departure<'_>> {
        if self.queue.peek().is_none_or(|next| next.departure_ns > now) {
            if self.queue.is_empty() {
                self.trim();
            }
            return None;
        }
        // The peek above saw a frame.
        let held = self.queue.pop()?;
        self.link.handle_departure(now, held.bytes.len());
        Some(Departure {
            bytes: held.bytes,
            departure_ns: held.departure_ns,
            pool: &mut self.pool,
        })
    }

    /// The departure time of the next frame, `None` if the pipe holds none.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.queue.peek().map(|next| next.departure_ns)
    }

    /// Changes the conditions at `now` without losing held frames: they keep their departure
    /// times; frames arriving from now on get the new conditions, and the new limits apply
    /// to them. See [`Link::handle_config`] for what carries over. On error nothing changes.
    pub fn handle_config(&mut self, now: u64, config: LinkConfig) -> Result<(), ConfigError> {
        self.link.handle_config(now, config)
    }

    /// Every frame's fate so far, by cause.
    pub fn counters(&self) -> &LinkCounters {
        self.link.counters()
    }

    /// Delivered frames (or copies) dropped because the pipe already held
    /// [`MAX_HELD_WITHOUT_LIMIT`] frames (only without [`LinkConfig::limit_frames`]). The
    /// link counted them as delivered.
    pub fn dropped_no_buffer(&self) -> u64 {
        self.dropped_no_buffer
    }

    /// Frames held (duplicates included).
    pub fn queued_frames(&self) -> usize {
        self.queue.len()
    }

    /// Bytes of the frames held.
    pub fn queued_bytes(&self) -> usize {
        self.link.queued_bytes()
    }

    /// Idle buffers kept for reuse.
    pub fn idle_buffers(&self) -> usize {
        self.pool.len()
    }

    /// The conditions in force at the last arrival.
    pub fn conditions(&self) -> &Conditions {
        self.link.conditions()
    }

    /// The configuration in force.
    pub fn config(&self) -> &LinkConfig {
        self.link.config()
    }

    /// Copies `frame` into a buffer to leave at `departure_ns`, flipping `corrupt_bit`.
    fn hold(&mut self, now: u64, departure_ns: u64, frame: &[u8], corrupt_bit: Option<usize>) {
        if self.link.config().limit_frames.is_none() && self.queue.len() >= MAX_HELD_WITHOUT_LIMIT {
            // The link counted the frame as queued: it leaves unsent.
            self.dropped_no_buffer += 1;
            self.link.handle_departure(now, frame.len());
            return;
        }
        let mut bytes = self.pool.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(frame);
        if let Some(bit) = corrupt_bit {
            // The link draws the bit below len · 8.
            if let Some(byte) = bytes.get_mut(bit / 8) {
                *byte ^= 1 << (bit % 8);
            }
        }
        self.seq += 1;
        self.queue.push(Held {
            departure_ns,
            seq: self.seq,
            bytes,
        });
    }

    /// Frees what a drained queue no longer needs beyond [`RETAINED_BUFFERS`].
    fn trim(&mut self) {
        if self.pool.len() > RETAINED_BUFFERS {
            self.pool.truncate(RETAINED_BUFFERS);
            self.pool.shrink_to(RETAINED_BUFFERS);
            self.queue.shrink_to(RETAINED_BUFFERS);
        }
    }
}

#[cfg(test)]
mod tests;
