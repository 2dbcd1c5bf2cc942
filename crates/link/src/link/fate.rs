//! What a link decides for each frame ([`Fate`], [`DropCause`]) and what it counts
//! ([`LinkCounters`]).

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::Link;
#[cfg(doc)]
use crate::{LinkConfig, MIN_FRAME};

/// What becomes of a frame that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The frame is dropped; it takes no room in the queue.
    Drop(DropCause),
    /// The frame is sent at `departure_ns`; it takes room in the queue until the engine calls
    /// [`Link::handle_departure`] for it (and once more for its duplicate, if any).
    Deliver {
        /// When to send the frame, in nanoseconds on the clock of `now`. Never before the
        /// arrival; without reordering, never before the previous frame's departure. With a
        /// queue discipline ([`LinkConfig::aqm`]), unless reordered, it is the arrival: when
        /// the frame joins the bottleneck queue, which a [`crate::Pipe`] serves.
        departure_ns: u64,
        /// When to send a second copy, if the frame is duplicated: the copy goes through
        /// delay and rate as the next frame would, so it departs after the original, unless
        /// the original was reordered.
        duplicate_departure_ns: Option<u64>,
        /// The bit to flip in the original (not in the duplicate), if the frame is corrupted:
        /// bit `i % 8` (from the least significant) of byte `i / 8`; always `< len · 8`.
        corrupt_bit: Option<usize>,
        /// The frame was reordered: it is sent at once, ahead of the delayed frames.
        reordered: bool,
    },
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DropCause {
    /// The loss model lost it.
    Loss,
    /// The queue already held [`LinkConfig::limit_frames`] frames.
    QueueFrames,
    /// The frame would have taken the queue above [`LinkConfig::limit_bytes`].
    QueueBytes,
    /// Shorter than [`MIN_FRAME`] bytes, and [`LinkConfig::drop_runts`] is set.
    Runt,
    /// Longer than [`LinkConfig::max_frame`] bytes.
    Oversized,
    /// An outage was in force ([`crate::Event::Outage`], a flap's down time): the link was
    /// down.
    Outage,
}

/// Every frame's fate by cause. `arrived = delivered + dropped_*` (all six); duplicated,
/// corrupted and reordered count delivered frames that were also so treated. With a queue
/// discipline, delivered frames (and copies) may still be dropped at the bottleneck
/// (`aqm_drop`, `aqm_overflow`): the frames sent are `delivered + duplicated − aqm_drop −
/// aqm_overflow` (less any a pipe had no buffer for). Read back from
/// JSON, a counter a file lacks (one written before it was counted) reads as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkCounters {
    /// Frames that arrived, whatever their fate.
    pub arrived: u64,
    /// Frames delivered (not counting duplicates).
    pub delivered: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Delivered frames with a bit flipped.
    pub corrupted: u64,
    /// Delivered frames sent ahead of the queue.
    pub reordered: u64,
    /// Frames the loss model dropped.
    pub dropped_loss: u64,
    /// Frames dropped because the queue held its limit of frames.
    pub dropped_queue_frames: u64,
    /// Frames dropped because the queue would have gone over its limit of bytes.
    pub dropped_queue_bytes: u64,
    /// Runts dropped.
    pub dropped_runt: u64,
    /// Oversized frames dropped.
    pub dropped_oversized: u64,
    /// Frames dropped while an outage was in force (the link down).
    pub dropped_outage: u64,
    /// Frames (or copies) the queue discipline dropped after they were delivered to the
    /// bottleneck queue: CoDel's and FQ-CoDel's drops at dequeue, PIE's at enqueue (see
    /// [`crate::Aqm`]). Counted in `delivered` (or `duplicated`) too: they arrived whole.
    pub aqm_drop: u64,
    /// Frames the queue discipline marked CE instead of dropping them (ECN); they were sent.
    pub aqm_mark: u64,
    /// Frames FQ-CoDel dropped from the head of its fattest queue to make room for an
    /// arrival when the limits were reached (an overflow of the bottleneck queue, besides
    /// the arrivals the limits drop, `dropped_queue_*`). Counted in `delivered` too.
    pub aqm_overflow: u64,
    /// DualPI2's L4S queue: the frames it marked CE (counted in `aqm_mark` too).
    pub aqm_l4s_mark: u64,
    /// DualPI2's L4S queue: the frames it dropped, in overload only (in `aqm_drop` too).
    pub aqm_l4s_drop: u64,
    /// DualPI2's classic queue: the frames it marked CE, with ECN (in `aqm_mark` too).
    pub aqm_classic_mark: u64,
    /// DualPI2's classic queue: the frames it dropped (in `aqm_drop` too).
    pub aqm_classic_drop: u64,
}

impl std::ops::AddAssign for LinkCounters {
    /// Adds every counter of `other` (the counts of two links together, as
    /// [`crate::FlowPipes::counters`] sums its pipes').
    fn add_assign(&mut self, other: LinkCounters) {
        let LinkCounters {
            arrived,
            delivered,
            duplicated,
            corrupted,
            reordered,
            dropped_loss,
            dropped_queue_frames,
            dropped_queue_bytes,
            dropped_runt,
            dropped_oversized,
            dropped_outage,
            aqm_drop,
            aqm_mark,
            aqm_overflow,
            aqm_l4s_mark,
            aqm_l4s_drop,
            aqm_classic_mark,
            aqm_classic_drop,
        } = other;
        self.arrived += arrived;
        self.delivered += delivered;
        self.duplicated += duplicated;
        self.corrupted += corrupted;
        self.reordered += reordered;
        self.dropped_loss += dropped_loss;
        self.dropped_queue_frames += dropped_queue_frames;
        self.dropped_queue_bytes += dropped_queue_bytes;
        self.dropped_runt += dropped_runt;
        self.dropped_oversized += dropped_oversized;
        self.dropped_outage += dropped_outage;
        self.aqm_drop += aqm_drop;
        self.aqm_mark += aqm_mark;
        self.aqm_overflow += aqm_overflow;
        self.aqm_l4s_mark += aqm_l4s_mark;
        self.aqm_l4s_drop += aqm_l4s_drop;
        self.aqm_classic_mark += aqm_classic_mark;
        self.aqm_classic_drop += aqm_classic_drop;
    }
}

impl LinkCounters {
    /// All drops at arrival, whatever the cause (the queue discipline's later drops,
    /// `aqm_drop` and `aqm_overflow`, are not among them).
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_queue_frames
            + self.dropped_queue_bytes
            + self.dropped_runt
            + self.dropped_oversized
            + self.dropped_outage
    }

    /// Counts one drop under its cause.
    pub(super) fn count_drop(&mut self, cause: DropCause) {
        let counter = match cause {
            DropCause::Loss => &mut self.dropped_loss,
            DropCause::QueueFrames => &mut self.dropped_queue_frames,
            DropCause::QueueBytes => &mut self.dropped_queue_bytes,
            DropCause::Runt => &mut self.dropped_runt,
            DropCause::Oversized => &mut self.dropped_oversized,
            DropCause::Outage => &mut self.dropped_outage,
        };
        *counter += 1;
    }
}
