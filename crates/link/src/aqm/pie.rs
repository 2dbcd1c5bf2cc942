//! PIE, RFC 8033: a drop probability updated every `tupdate` from the queue delay's distance
//! to the target and its trend (section 4.2, with the scaling of section 5.2's pseudo-code
//! and its 2% cap above 10%), decaying when the queue is idle, a burst allowance (section
//! 4.4), and the de-randomised drop at enqueue (section 5.1, `drop_early`). The queue delay is
//! read from timestamps (section 5.2's alternative to the departure rate): the sojourn time of
//! the last frame that left, 0 once the queue is empty. The periodic update runs in virtual
//! time: each call first catches up on the updates due by its `now`.

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{Aqm, Held};

/// With ECN, frames are marked rather than dropped while the probability is at most this
/// (RFC 8033 section 5.1, `mark_ecnth`).
const MARK_ECN_THRESHOLD: f64 = 0.1;
/// `MEAN_PKTSIZE` of the pseudo-code: below two of these queued, PIE never drops.
const MEAN_PKTSIZE: usize = 1500;

/// PIE's controller: the drop probability and what steers it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pie {
    /// `QDELAY_REF`, in seconds.
    target_s: f64,
    /// `T_UPDATE`, ns.
    tupdate_ns: u64,
    alpha: f64,
    beta: f64,
    /// `MAX_BURST`, ns.
    max_burst_ns: u64,
    /// `drop_prob_`, 0..=1.
    drop_prob: f64,
    /// `qdelay_old_`, in seconds.
    qdelay_old_s: f64,
    /// `burst_allowance_`, ns.
    burst_allowance_ns: u64,
    /// `accu_prob_` (de-randomisation).
    accu_prob: f64,
    /// When the next update is due.
    next_update_ns: u64,
}

impl Pie {
    pub(crate) fn new(aqm: &Aqm) -> Pie {
        let mut pie = Pie {
            target_s: 0.0,
            tupdate_ns: 0,
            alpha: 0.0,
            beta: 0.0,
            max_burst_ns: 0,
            drop_prob: 0.0,
            qdelay_old_s: 0.0,
            burst_allowance_ns: aqm.max_burst_ns,
            accu_prob: 0.0,
            next_update_ns: aqm.tupdate(),
        };
        pie.set_params(aqm);
        pie
    }

    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.target_s = aqm.target() as f64 / 1e9;
        self.tupdate_ns = aqm.tupdate();
        self.alpha = aqm.alpha();
        self.beta = aqm.beta();
        self.max_burst_ns = aqm.max_burst_ns;
    }

    /// The drop probability.
    pub(crate) fn drop_probability(&self) -> f64 {
        self.drop_prob
    }

    /// Runs every update due by `now`, with the queue delay `qdelay_ns` at each (the state
    /// does not change between events).
    #[inline]
    pub(crate) fn catch_up(&mut self, now: u64, qdelay_ns: u64) {
        let mut runs = 0;
        while self.next_update_ns <= now {
            self.update(qdelay_ns);
            self.next_update_ns += self.tupdate_ns;
            runs += 1;
            // Idle for long: the state has settled (the probability decays to 0 in far fewer
            // updates); skip to the period in force.
            if runs == 10_000 && self.next_update_ns <= now {
                let behind = (now - self.next_update_ns) / self.tupdate_ns + 1;
                self.next_update_ns += behind * self.tupdate_ns;
            }
        }
    }

    /// `calculate_drop_prob()` of RFC 8033 section 5.2, with the burst allowance of 4.4.
    pub(crate) fn update(&mut self, qdelay_ns: u64) {
        let qdelay = qdelay_ns as f64 / 1e9;
        let mut p =
            self.alpha * (qdelay - self.target_s) + self.beta * (qdelay - self.qdelay_old_s);
        let scale = match self.drop_prob {
            d if d < 0.000_001 => 2048.0,
            d if d < 0.000_01 => 512.0,
            d if d < 0.000_1 => 128.0,
            d if d < 0.001 => 32.0,
            d if d < 0.01 => 8.0,
            d if d < 0.1 => 2.0,
            _ => 1.0,
        };
        p /= scale;
        if self.drop_prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        self.drop_prob += p;
        let idle = qdelay < self.target_s / 2.0 && self.qdelay_old_s < self.target_s / 2.0;
        if idle {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        self.burst_allowance_ns = self.burst_allowance_ns.saturating_sub(self.tupdate_ns);
        if self.drop_prob == 0.0 && idle {
            self.burst_allowance_ns = self.max_burst_ns;
        }
        self.qdelay_old_s = qdelay;
    }

    /// `drop_early()` of section 5.1 with the burst allowance of `enqueue()`: whether to drop
    /// (or mark) an arriving frame, with `queue_bytes` queued; `u` a fresh uniform draw.
    pub(crate) fn drop_early(&mut self, queue_bytes: usize, u: f64) -> bool {
        if self.burst_allowance_ns > 0 {
            return false;
        }
        if (self.qdelay_old_s < self.target_s / 2.0 && self.drop_prob < 0.2)
            || queue_bytes <= 2 * MEAN_PKTSIZE
        {
            return false;
        }
        if self.drop_prob == 0.0 {
            self.accu_prob = 0.0;
        }
        self.accu_prob += self.drop_prob;
        if self.accu_prob < 0.85 {
            return false;
        }
        if self.accu_prob >= 8.5 {
            // The pseudo-code leaves the sum as it is here; Linux's `pie_qdisc_enqueue`
            // clears it on every drop, as the random drop below does.
            self.accu_prob = 0.0;
            return true;
        }
        if u < self.drop_prob {
            self.accu_prob = 0.0;
            return true;
        }
        false
    }
}

/// One FIFO with PIE (`aqm=pie`).
#[derive(Debug)]
pub(crate) struct PieFifo {
    queue: VecDeque<Held>,
    bytes: usize,
    /// The sojourn time of the last frame that left.
    last_sojourn_ns: u64,
    ecn: bool,
    pie: Pie,
    rng: SmallRng,
}

impl PieFifo {
    pub(crate) fn new(aqm: &Aqm, seed: u64) -> PieFifo {
        PieFifo {
            queue: VecDeque::new(),
            bytes: 0,
            last_sojourn_ns: 0,
            ecn: aqm.ecn,
            pie: Pie::new(aqm),
            rng: SmallRng::seed_from_u64(seed ^ 0x7069_6500_7069_6500),
        }
    }

    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.ecn = aqm.ecn;
        self.pie.set_params(aqm);
    }

    /// The queue delay PIE reads: the last departure's sojourn, 0 when empty.
    #[inline]
    fn qdelay_ns(&self) -> u64 {
        if self.queue.is_empty() {
            0
        } else {
            self.last_sojourn_ns
        }
    }

    /// Queues `held` at `now`, or hands it back to be dropped; with ECN an ECN-capable frame
    /// is marked instead while the probability is at most 10%.
    #[inline]
    pub(crate) fn enqueue(&mut self, now: u64, mut held: Held) -> Result<(), Held> {
        self.pie.catch_up(now, self.qdelay_ns());
        let u = self.rng.random::<f64>();
        if self.pie.drop_early(self.bytes, u) {
            if self.ecn && held.ect && self.pie.drop_prob <= MARK_ECN_THRESHOLD {
                held.mark = true;
            } else {
                return Err(held);
            }
        }
        self.bytes += held.len as usize;
        self.queue.push_back(held);
        Ok(())
    }

    #[inline]
    pub(crate) fn dequeue(&mut self, now: u64) -> Option<Held> {
        self.pie.catch_up(now, self.qdelay_ns());
        let held = self.queue.pop_front()?;
        self.bytes -= held.len as usize;
        self.last_sojourn_ns = now.saturating_sub(held.enqueue_ns);
        Some(held)
    }

    pub(crate) fn drain(&mut self) -> Vec<Held> {
        self.bytes = 0;
        self.queue.drain(..).collect()
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Entries the FIFO has room for.
    pub(crate) fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    pub(crate) fn drop_probability(&self) -> f64 {
        self.pie.drop_probability()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// RFC 8033's defaults: target 15 ms, tupdate 15 ms, α 0.125, β 1.25, burst 150 ms.
    fn pie() -> Pie {
        Pie::new(&Aqm {
            discipline: super::super::Discipline::Pie,
            ..Aqm::default()
        })
    }

    #[test]
    fn the_probability_follows_section_5_2_step_by_step() {
        let mut pie = pie();
        // A queue delay of 30 ms from the start. First update: 0.125·(0.030 − 0.015) +
        // 1.25·(0.030 − 0) = 0.039375, scaled by 1/2048 as the probability is below 10⁻⁶.
        pie.update(30 * MS);
        let p1 = 0.039_375 / 2048.0;
        assert!(
            (pie.drop_probability() - p1).abs() < 1e-15,
            "{}",
            pie.drop_probability()
        );
        // Second: no trend, 0.125·0.015 = 0.001875, scaled by 1/128 (p1 ≈ 1.9·10⁻⁵).
        pie.update(30 * MS);
        let p2 = p1 + 0.001_875 / 128.0;
        assert!((pie.drop_probability() - p2).abs() < 1e-15);
        // It keeps rising while the delay stays above the target, through the scales.
        let mut last = p2;
        for _ in 0..200 {
            pie.update(30 * MS);
            assert!(pie.drop_probability() > last);
            last = pie.drop_probability();
        }
        // Above 10% each step adds 0.001875, under the 2% cap; a jump in delay is capped.
        assert!(last > 0.1, "{last}");
        pie.update(130 * MS); // 0.125·0.115 + 1.25·0.1 = 0.139 → capped to 0.02
        assert!((pie.drop_probability() - (last + 0.02)).abs() < 1e-12);
        // Below half the target now and at the last update: the step (−α·target/2 … here
        // −0.125·0.015, unscaled above 10%), then a 2% decay.
        pie.drop_prob = 0.5;
        pie.qdelay_old_s = 0.0;
        pie.update(0);
        assert!((pie.drop_probability() - (0.5 - 0.001_875) * 0.98).abs() < 1e-15);
        // Between 1% and 10% the step is halved.
        pie.drop_prob = 0.05;
        pie.update(0);
        assert!((pie.drop_probability() - (0.05 - 0.001_875 / 2.0) * 0.98).abs() < 1e-15);
    }

    #[test]
    fn the_burst_allowance_holds_off_drops_then_is_restored_when_idle() {
        let mut pie = pie();
        // 150 ms of allowance is 10 updates of 15 ms: after 9, no arrival is dropped even
        // with the accumulated probability far above 8.5.
        for _ in 0..9 {
            pie.update(40 * MS);
        }
        assert_eq!(pie.burst_allowance_ns, 15 * MS);
        pie.accu_prob = 100.0;
        assert!(!pie.drop_early(100_000, 0.0));
        pie.update(40 * MS);
        assert_eq!(pie.burst_allowance_ns, 0);
        assert!(pie.drop_early(100_000, 0.0));
        // Idle until the probability is 0: the allowance comes back, and nothing is dropped.
        for _ in 0..2_000 {
            pie.update(0);
        }
        assert_eq!(pie.drop_probability(), 0.0);
        assert_eq!(pie.burst_allowance_ns, 150 * MS);
        pie.accu_prob = 100.0;
        assert!(!pie.drop_early(100_000, 0.0));
    }

    #[test]
    fn derandomisation_drops_no_frame_before_the_accumulated_probability_reaches_0_85() {
        let mut pie = pie();
        pie.burst_allowance_ns = 0;
        pie.qdelay_old_s = 0.030;
        pie.drop_prob = 0.1;
        // Eight arrivals accumulate 0.8: none dropped, whatever the draw.
        for _ in 0..8 {
            assert!(!pie.drop_early(100_000, 0.0));
        }
        // The ninth (0.9 ≥ 0.85) drops if the draw is under the probability.
        assert!(!pie.drop_early(100_000, 0.5));
        assert!(pie.drop_early(100_000, 0.05));
        // Two mean packets or fewer queued: never.
        pie.accu_prob = 5.0;
        assert!(!pie.drop_early(3_000, 0.0));
    }
}
