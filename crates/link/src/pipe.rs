//! The pipe: a [`Link`] that holds the frames it delivers until they are due.

use crate::fates::Recorded;
use crate::{Conditions, ConfigError, Fate, Link, LinkConfig, LinkCounters};

mod bottleneck;
mod flows;
mod pool;
mod queue;
mod slot;

use bottleneck::Bottleneck;
pub use flows::FlowPipes;
use pool::{IdleLists, Pool};
use queue::DelayQueue;
use slot::SlotClock;

/// Most frames a pipe holds when its configuration sets no [`LinkConfig::limit_frames`]; a
/// delivered frame (or copy) that finds this many held is dropped and counted in
/// [`Pipe::dropped_no_buffer`].
pub const MAX_HELD_WITHOUT_LIMIT: usize = 65_536;

/// Idle buffers a pipe keeps for reuse above the most frames it held in the last window
/// ([`MEMORY_WINDOW_NS`]); the rest are freed, so a burst does not keep its peak memory
/// forever.
pub const RETAINED_BUFFERS: usize = 256;

/// How long a pipe remembers the most frames it held: at the end of each window it keeps the
/// buffers that window needed at its peak (plus [`RETAINED_BUFFERS`] idle ones) and frees the
/// rest, so its memory follows its queue down within two windows of the queue shrinking.
pub const MEMORY_WINDOW_NS: u64 = 1_000_000_000;

/// One direction of an emulated link with its frames: the [`Link`] model decides each
/// frame's fate and departure time, the pipe holds a copy of the frame (in a buffer of its
/// own sized to the frame: the next power of two from 64 bytes, reused from a pool) and hands
/// it out when due. Sans-IO: it reads no clock; the same configuration, seed and calls give
/// the same departures, live or in virtual time.
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
///    reorders (or FQ-CoDel serves flows in turn: in order within each flow); a duplicate is
///    a departure of its own.
/// 4. [`Pipe::poll_timeout`] for when to come back: the next departure time, `None` if the
///    pipe is empty.
/// 5. At any time, [`Pipe::handle_config`]`(now, config)` changes the conditions of the
///    running pipe: held frames keep their departure times, new arrivals get the new ones
///    (slots, [`LinkConfig::slot`], apply to the frames held as to new ones: they gate the
///    head of the queue).
///
/// `now` must not go backwards between calls of one kind; an arrival stamped before the last
/// `poll_departure` (a stamp taken by the kernel before the engine looked) is fine.
///
/// Guarantees: the link's (every frame counted once by its fate; order kept unless reordering
/// is asked for), and memory bounded by the limits: the pipe holds exactly the frames the link
/// counts as queued, at most [`LinkConfig::limit_frames`] (or [`MAX_HELD_WITHOUT_LIMIT`]) of
/// them and at most [`LinkConfig::limit_bytes`] bytes. Memory follows the bytes held, not
/// the limit: a frame's buffer is less than twice its length (at least 64 bytes), plus 48
/// bytes of queue entry and index ([`Pipe::held_bytes`] tells the total). Memory follows the
/// queue down as well: at the end of each [`MEMORY_WINDOW_NS`] the pipe frees the buffers
/// beyond what the window needed at its peak plus [`RETAINED_BUFFERS`] idle ones, and the
/// queue's room beyond as many entries ([`Pipe::releases`] counts the times it did).
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
    /// The frames held as `(departure, arrival order, buffer)`, earliest departure first (then
    /// earliest arrival): a FIFO for frames in order, a heap for those that pass others;
    /// `len() == link.queued_frames()`.
    queue: DelayQueue,
    /// Every buffer made, held or idle, each sized to the frames of its class; a buffer's
    /// length is its frame's.
    pool: Pool,
    /// Arrival order of held frames, to keep it among equal departure times.
    seq: u64,
    /// Delivered frames (or copies) dropped because [`MAX_HELD_WITHOUT_LIMIT`] were held.
    dropped_no_buffer: u64,
    /// Times the pipe freed idle buffers ([`Pipe::releases`]).
    releases: u64,
    /// The queue discipline's queue and the sojourn times, once a discipline other than tail
    /// drop was configured (`None` on the default path).
    bottleneck: Option<Box<Bottleneck>>,
    /// The slots' state with [`LinkConfig::slot`]: frames due leave at slot instants.
    slot: Option<SlotClock>,
}

/// The next frame due, lent by [`Pipe::poll_departure`]. The frame has left the queue (its
/// room counts as free); dropping the `Departure` gives its buffer back to the pipe.
#[derive(Debug)]
pub struct Departure<'a> {
    frame: &'a [u8],
    departure_ns: u64,
    /// Which pipe of a [`FlowPipes`] it left (0 for a pipe alone).
    flow: usize,
    buffer: usize,
    capacity: usize,
    idle: &'a mut IdleLists,
}

impl Departure<'_> {
    /// The frame's bytes, as they arrived except for a bit flipped if the link corrupted it.
    #[inline]
    pub fn frame(&self) -> &[u8] {
        self.frame
    }

    /// When the link meant the frame to leave, in ns on the clock of `now`.
    #[inline]
    pub fn departure_ns(&self) -> u64 {
        self.departure_ns
    }

    /// Which pipe of a [`FlowPipes`] the frame left: the index of its rule, or the number of
    /// rules for the default pipe (the order of [`FlowPipes::flows`]). 0 from a [`Pipe`]
    /// alone.
    #[inline]
    pub fn flow(&self) -> usize {
        self.flow
    }
}

impl Drop for Departure<'_> {
    #[inline]
    fn drop(&mut self) {
        self.idle.give_back(self.buffer, self.capacity);
    }
}

impl Pipe {
    /// A pipe with `config` (checked with [`LinkConfig::validate`]), whose schedule starts at
    /// `start_ns`. It holds no buffer until frames arrive.
    pub fn new(config: LinkConfig, start_ns: u64) -> Result<Pipe, ConfigError> {
        let mut pipe = Pipe {
            link: Link::new(config, start_ns)?,
            queue: DelayQueue::default(),
            pool: Pool::default(),
            seq: 0,
            dropped_no_buffer: 0,
            releases: 0,
            bottleneck: None,
            slot: None,
        };
        pipe.reconfigure_slot(start_ns);
        pipe.reconfigure_bottleneck(start_ns);
        Ok(pipe)
    }

    /// A frame arrived at `now`: the link decides its fate; a delivered frame is copied into a
    /// buffer of the pipe, with its duplicate if any, to leave at its departure time. Returns
    /// the fate (the frame's bytes are the pipe's business from here on).
    #[inline]
    pub fn handle_arrival(&mut self, now: u64, frame: &[u8]) -> Fate {
        if self.bottleneck.as_ref().is_some_and(|b| b.is_active()) {
            return self.arrive_at_bottleneck(now, frame);
        }
        let fate = self.link.handle_arrival(now, frame.len());
        self.hold_fate(now, frame, fate)
    }

    /// A frame arrived at `now` and takes the `recorded` fate, not the model's (a replay; see
    /// [`Link::handle_recorded`]): held or dropped as [`Pipe::handle_arrival`] would. A pipe
    /// with a queue discipline or a delivery trace holds the frame for its recorded transit
    /// without passing it through the bottleneck (the transit includes it).
    #[inline]
    pub fn handle_recorded(&mut self, now: u64, frame: &[u8], recorded: Recorded) -> Fate {
        let fate = self.link.handle_recorded(now, frame.len(), recorded);
        self.hold_fate(now, frame, fate)
    }

    /// Holds `frame` (and its copy) as `fate` says, and returns the fate.
    #[inline]
    fn hold_fate(&mut self, now: u64, frame: &[u8], fate: Fate) -> Fate {
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
        debug_assert_eq!(self.queued_frames(), self.link.queued_frames());
        fate
    }

    /// The next frame whose departure time is `≤ now`, if any. Drop the [`Departure`] once its
    /// bytes are sent (or copied); until then the pipe is borrowed.
    #[inline]
    pub fn poll_departure(&mut self, now: u64) -> Option<Departure<'_>> {
        if self.bottleneck.is_some() {
            self.serve_bottleneck(now);
        }
        let Some((due_ns, _, buffer)) = self.queue.peek() else {
            self.follow_queue(now);
            return None;
        };
        let departure_ns = self.release_at(due_ns);
        if departure_ns > now {
            self.follow_queue(now);
            return None;
        }
        self.queue.pop();
        let bytes = &self.pool.buffers[buffer];
        let frame = &bytes[..];
        if let Some(slot) = &mut self.slot {
            slot.release(due_ns, frame.len());
        }
        self.link.handle_departure(now, frame.len());
        Some(Departure {
            frame,
            departure_ns,
            flow: 0,
            buffer,
            capacity: bytes.capacity(),
            idle: &mut self.pool.idle,
        })
    }

    /// When to come back: the departure time of the next frame (with slots, the opening of
    /// the slot it leaves in), or with a queue discipline the end of the frame on the wire if
    /// that is earlier (the discipline then picks the next frame); `None` if the pipe holds
    /// none.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        let departure = self
            .queue
            .peek()
            .map(|(due_ns, _, _)| self.release_at(due_ns));
        match &self.bottleneck {
            None => departure,
            Some(bottleneck) => match (departure, bottleneck.next_service()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// Changes the conditions at `now` without losing held frames: they keep their departure
    /// times; frames arriving from now on get the new conditions, and the new limits apply
    /// to them. See [`Link::handle_config`] for what carries over. A queue discipline keeps its
    /// state when only its parameters change; frames waiting in a discipline that is replaced
    /// are sent in their order at the rate, as tail drop would. On error nothing changes.
    pub fn handle_config(&mut self, now: u64, config: LinkConfig) -> Result<(), ConfigError> {
        // What the wire took before `now` it took at the old rate, under the old discipline.
        if self.bottleneck.is_some() {
            self.serve_bottleneck(now);
        }
        self.link.handle_config(now, config)?;
        self.reconfigure_slot(now);
        self.reconfigure_bottleneck(now);
        Ok(())
    }

    /// Begins `event` at `now`, on top of the conditions (see [`Link::begin_event`]).
    pub fn begin_event(&mut self, now: u64, event: crate::Event) {
        self.link.begin_event(now, event);
    }

    /// Ends the events in force at `now` (see [`Link::release_events`]).
    pub fn release_events(&mut self, now: u64) -> usize {
        self.link.release_events(now)
    }

    /// The link's events, scheduled and begun, with their times.
    pub fn events(&self) -> &[crate::EventRecord] {
        self.link.events()
    }

    /// Starts, keeps or stops the slots for the configuration in force at `now`: a new or
    /// changed slot setting opens its first slot at `now` (NetEm's), the same one goes on.
    fn reconfigure_slot(&mut self, now: u64) {
        let config = self.link.config();
        match (&config.slot, &self.slot) {
            (None, _) => self.slot = None,
            (Some(slot), Some(clock)) if clock.slot() == slot => {}
            (Some(slot), _) => self.slot = Some(SlotClock::new(slot.clone(), config.seed, now)),
        }
    }

    /// When a frame due at `due_ns` at the head of the delay queue leaves: then, or with
    /// slots at the opening of its slot.
    #[inline]
    fn release_at(&self, due_ns: u64) -> u64 {
        match &self.slot {
            None => due_ns,
            Some(slot) => slot.release_at(due_ns),
        }
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

    /// Frames held (duplicates included), in the delay queue and at the bottleneck.
    pub fn queued_frames(&self) -> usize {
        self.queue.len() + self.bottleneck.as_ref().map_or(0, |b| b.len())
    }

    /// Bytes of the frames held.
    pub fn queued_bytes(&self) -> usize {
        self.link.queued_bytes()
    }

    /// Idle buffers kept for reuse.
    pub fn idle_buffers(&self) -> usize {
        self.pool.idle_buffers()
    }

    /// Times the pipe freed idle buffers it no longer needed (see [`MEMORY_WINDOW_NS`]): an
    /// engine that sees it grow may ask its allocator to give the freed memory back to the
    /// system.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// Bytes of memory the pipe holds for frames: the buffers of the frames queued and of the
    /// idle ones, and the slots of its queue and pool, and of a queue discipline's queues
    /// (the allocator's own overhead aside; a discipline's sojourn histogram is not counted).
    /// It follows the bytes queued, never [`LinkConfig::limit_frames`] times a frame size.
    pub fn held_bytes(&self) -> usize {
        self.pool.held_bytes()
            + self.queue.capacity() * std::mem::size_of::<queue::Entry>()
            + self.bottleneck.as_ref().map_or(0, |b| b.held_bytes())
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
    #[inline]
    fn hold(&mut self, now: u64, departure_ns: u64, frame: &[u8], corrupt_bit: Option<usize>) {
        if self.link.config().limit_frames.is_none() && self.queue.len() >= MAX_HELD_WITHOUT_LIMIT {
            // The link counted the frame as queued: it leaves unsent.
            self.dropped_no_buffer += 1;
            self.link.handle_departure(now, frame.len());
            return;
        }
        let buffer = self.pool.hold(frame);
        if let Some(bit) = corrupt_bit {
            // The link draws the bit below len · 8.
            if let Some(byte) = self.pool.buffers[buffer].get_mut(bit / 8) {
                *byte ^= 1 << (bit % 8);
            }
        }
        self.seq += 1;
        self.queue.push((departure_ns, self.seq, buffer));
    }

    /// At the end of a [`MEMORY_WINDOW_NS`] (checked at every poll that finds nothing due):
    /// frees the idle buffers beyond what the window needed at its peak plus
    /// [`RETAINED_BUFFERS`], and the delay queue's room beyond as many entries. Between two
    /// windows' ends it costs a comparison.
    #[inline]
    fn follow_queue(&mut self, now: u64) {
        let Some(peak) = self.pool.roll_window(now, MEMORY_WINDOW_NS) else {
            return;
        };
        let keep = peak.saturating_add(RETAINED_BUFFERS);
        if self.pool.release_above(keep) > 0 {
            self.releases += 1;
        }
        if self.queue.capacity() > 2 * keep.max(self.queue.len()) {
            self.queue.shrink_to(keep.max(self.queue.len()));
        }
    }

    /// The order of the next frame due: its departure time (slotted) and its arrival order.
    #[inline]
    fn next_due(&self) -> Option<(u64, u64)> {
        self.queue
            .peek()
            .map(|(at, seq, _)| (self.release_at(at), seq))
    }
}

#[cfg(test)]
mod tests;
