//! A recorded fate applied to a frame instead of the model's decision (a replay,
//! [`crate::fates`]).

use super::Link;
use crate::fates::Recorded;
use crate::Fate;

impl Link {
    /// A frame of `len` bytes arrived at `now` and is given the `recorded` fate, not the
    /// model's: dropped for the same cause, or delivered `transit_ns` after `now` (after the
    /// frames before it, unless it was reordered: the order a pipe keeps), duplicated, with
    /// the same bit flipped if the frame is long enough (else not corrupted: the returned
    /// fate says so). It is counted as [`Link::handle_arrival`] counts; the model's random
    /// stream and loss state do not move. A delivery the queue has no room for (a replay on
    /// a link with lower limits) is dropped for that limit.
    pub fn handle_recorded(&mut self, now: u64, len: usize, recorded: Recorded) -> Fate {
        self.counters.arrived += 1;
        self.enter_phase_at(now);
        let fate = match recorded {
            Recorded::Drop(cause) => Fate::Drop(cause),
            Recorded::Deliver {
                transit_ns,
                duplicate_transit_ns,
                corrupt_bit,
                reordered,
            } => match self.admit(len) {
                Err(cause) => Fate::Drop(cause),
                Ok(()) => {
                    let departure_ns = match reordered {
                        true => now.saturating_add(transit_ns),
                        false => self.in_order(now.saturating_add(transit_ns)),
                    };
                    let duplicate_departure_ns = duplicate_transit_ns
                        .filter(|_| self.admit(len).is_ok())
                        .map(|t| self.in_order(now.saturating_add(t)));
                    let corrupt_bit = corrupt_bit
                        .and_then(|bit| usize::try_from(bit).ok())
                        .filter(|&bit| bit < len.saturating_mul(8));
                    Fate::Deliver {
                        departure_ns,
                        duplicate_departure_ns,
                        corrupt_bit,
                        reordered,
                    }
                }
            },
        };
        self.count(&fate);
        fate
    }

    /// `due`, or the last in-order departure if that is later; becomes the last.
    fn in_order(&mut self, due: u64) -> u64 {
        let departure = due.max(self.last_departure_ns);
        self.last_departure_ns = departure;
        departure
    }
}
