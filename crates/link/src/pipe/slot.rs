//! The pipe's slot clock ([`crate::slot`]): when the frame at the head of the delay queue may
//! leave, and the slot's budget.
//!
//! The gap to the next slot is drawn in advance, so that the release time of the head frame
//! is known without drawing ([`SlotClock::release_at`] takes `&self`, for `poll_timeout`); it
//! is spent, and the next one drawn, when a frame leaves.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{dist, Slot, SlotGap};

/// Mixed into the link's seed for the slots' own random stream, so that slotting does not
/// change the link's other draws (loss, jitter) and the same seed gives the same slots.
const SLOT_SEED: u64 = 0x5107_7ed0_91a5_c3b1;

#[derive(Debug)]
pub(super) struct SlotClock {
    /// The configuration (its gap is set: checked by the link's validation).
    slot: Slot,
    /// When the current slot opens (NetEm's `slot_next`).
    next_ns: u64,
    /// Frames the current slot may still let out.
    frames_left: u64,
    /// Bytes the current slot may still let out before it closes.
    bytes_left: u64,
    /// The gap to the slot after the current one, drawn in advance.
    gap_ns: u64,
    rng: SmallRng,
}

impl SlotClock {
    /// Slots of `slot`, the first opening at `now` (NetEm's `get_slot`), drawn from `seed`.
    pub(super) fn new(slot: Slot, seed: u64, now: u64) -> SlotClock {
        let mut clock = SlotClock {
            frames_left: slot.frames.unwrap_or(u64::MAX),
            bytes_left: slot.bytes.unwrap_or(u64::MAX),
            slot,
            next_ns: now,
            gap_ns: 0,
            rng: SmallRng::seed_from_u64(seed ^ SLOT_SEED),
        };
        clock.gap_ns = clock.draw_gap();
        clock
    }

    /// The configuration.
    pub(super) fn slot(&self) -> &Slot {
        &self.slot
    }

    /// When a frame due at `due_ns` at the head of the queue leaves: at the current slot's
    /// opening if it is due by then, else (the slot passed idle) one gap after it is due.
    #[inline]
    pub(super) fn release_at(&self, due_ns: u64) -> u64 {
        if due_ns <= self.next_ns {
            self.next_ns
        } else {
            due_ns.saturating_add(self.gap_ns)
        }
    }

    /// A frame of `len` bytes due at `due_ns` left, at [`SlotClock::release_at`]`(due_ns)`:
    /// spends the slot's budget, and opens the next slot one gap after the release once the
    /// budget is spent.
    pub(super) fn release(&mut self, due_ns: u64, len: usize) {
        if due_ns > self.next_ns {
            // The slot passed idle: a new one, from the frame's due time.
            let at = self.release_at(due_ns);
            self.open(at);
        }
        self.frames_left = self.frames_left.saturating_sub(1);
        self.bytes_left = self.bytes_left.saturating_sub(len as u64);
        if self.frames_left == 0 || self.bytes_left == 0 {
            let at = self.next_ns.saturating_add(self.gap_ns);
            self.open(at);
        }
    }

    /// The next slot opens at `at_ns`, with a whole budget; the gap after it is drawn.
    fn open(&mut self, at_ns: u64) {
        self.next_ns = at_ns;
        self.frames_left = self.slot.frames.unwrap_or(u64::MAX);
        self.bytes_left = self.slot.bytes.unwrap_or(u64::MAX);
        self.gap_ns = self.draw_gap();
    }

    /// One gap: uniform in `MIN..MAX` (NetEm's), or `delay + jitter · quantile(u)`, at least 0.
    fn draw_gap(&mut self) -> u64 {
        match &self.slot.gap {
            Some(SlotGap::Uniform { min_ns, max_ns }) if max_ns > min_ns => {
                self.rng.random_range(*min_ns..*max_ns)
            }
            Some(SlotGap::Uniform { min_ns, .. }) => *min_ns,
            Some(SlotGap::Distribution {
                dist,
                delay_ns,
                jitter_ns,
            }) => {
                let u: f64 = self.rng.random();
                let offset = dist::quantile(dist, u) * *jitter_ns as f64;
                // Float to integer casts saturate: a negative gap is 0.
                (*delay_ns as f64 + offset).round() as u64
            }
            // Validation refuses a slot without a gap; none would be no wait.
            None => 0,
        }
    }
}
