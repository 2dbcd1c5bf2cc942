//! DualPI2, RFC 9332: the dual-queue coupled AQM of L4S (appendix A.1's DualPI2, with the
//! overload handling of section 4.2.3).
//!
//! - **Classifier** (RFC 9331 section 5.1): a frame whose ECN field is ECT(1) or CE joins the
//!   L4S queue, IPv4 and IPv6 alike (behind VLAN tags); ECT(0), not-ECT and frames that are
//!   not IP join the classic queue.
//! - **Base PI controller**: every `tupdate` (caught up in virtual time at each call, as PIE's)
//!   `p' += α·(q − target) + β·(q − q_prev)`, `p'` kept in 0..=1, `q` the longer of the
//!   two queues' head waits at that instant (0 when both are empty), as appendix A.1 reads
//!   it: an unresponsive L4S load then raises `p'` too, which is what lets the overload rule
//!   below act on it, while a responsive L4S queue stays near its step, far under the
//!   classic target, and does not change what the classic queue is steered to.
//! - **Classic queue**: dropped with `p_C = p'²` at dequeue (a uniform draw from the seed);
//!   an ECT(0) frame is marked CE instead when `ecn` is on.
//! - **L4S queue**: marked with `p_L = max(p'_L, p_CL)`: the native step `p'_L` (1 when the
//!   frame waited at least `step`, else 0) and the coupled `p_CL = min(k·p', 1)`, `k` the
//!   coupling factor; the marks follow appendix A.1's `recur()`, a deterministic
//!   accumulator, so no draw is needed. L4S frames are always marked, never dropped, with or
//!   without `ecn`, unless overloaded.
//! - **Overload** (section 4.2.3): once the coupled probability saturates (`p_CL` reaches
//!   `p_Lmax = min(k·√p_Cmax, 1)`, that is `p_C` reaches `p_Cmax = min(1/k², 1)`: with
//!   `k = 2`, `p'` at 50%, `p_C` at 25%), marking alone can no longer hold an unresponsive
//!   L4S load: both queues drop with `p_C`, ECN-capable or not (overload disables ECN in the
//!   classic queue); the L4S frames not dropped are still marked as above.
//! - **Scheduler**: a time-shifted FIFO (section 4.2.2 names it as one of the two it
//!   recommends): the head that waited longest is served, the L4S head's wait counted as
//!   `tshift = 2·target` (30 ms by default) longer. L4S is served first while the classic
//!   queue holds its target, and the classic queue's head never waits more than `tshift`
//!   longer than the L4S head, so neither starves the other. (The other choice, weighted
//!   round robin with a conditional priority, needs a weight; this one needs no new knob.)

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{Aqm, Discard, Held};

/// [`Held::queue`] of a frame in the classic queue.
pub(crate) const CLASSIC: u32 = 0;
/// [`Held::queue`] of a frame in the L4S queue.
pub(crate) const L4S: u32 = 1;

/// Which queue `frame` belongs to: [`L4S`] for ECT(1) and CE (RFC 9331's identifier), else
/// [`CLASSIC`]. Never panics.
#[inline]
pub(crate) fn classify(frame: &[u8]) -> u32 {
    match latlab_wire::ecn::read(frame) {
        latlab_wire::ecn::Ecn::Ect1 | latlab_wire::ecn::Ecn::Ce => L4S,
        _ => CLASSIC,
    }
}

/// The PI2 controller and its coupling: `p'` and what steers it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pi2 {
    /// The classic queue's target, seconds.
    target_s: f64,
    /// `Tupdate`, ns.
    tupdate_ns: u64,
    /// The integral gain α, Hz: appendix A.1's update adds `α·(q − target)` every
    /// `Tupdate` (its α of `0.1·Tupdate/RTT_max²` holds the period already; Linux's
    /// `sch_dualpi2` does the same).
    alpha: f64,
    /// The proportional gain β, Hz: `β·(q − q_prev)` every update.
    beta: f64,
    /// The coupling factor `k`.
    k: f64,
    /// `p'`, 0..=1.
    p: f64,
    /// The queue delay at the last update, seconds.
    prev_qdelay_s: f64,
    /// When the next update is due.
    next_update_ns: u64,
}

impl Pi2 {
    pub(crate) fn new(aqm: &Aqm) -> Pi2 {
        let mut pi = Pi2 {
            target_s: 0.0,
            tupdate_ns: 1,
            alpha: 0.0,
            beta: 0.0,
            k: 2.0,
            p: 0.0,
            prev_qdelay_s: 0.0,
            next_update_ns: aqm.tupdate(),
        };
        pi.set_params(aqm);
        pi
    }

    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.target_s = aqm.target() as f64 / 1e9;
        self.tupdate_ns = aqm.tupdate().max(1);
        self.alpha = aqm.alpha();
        self.beta = aqm.beta();
        self.k = aqm.coupling;
    }

    /// One update with the queue delay `qdelay_ns` (appendix A.1,
    /// `dualpi2_update`).
    pub(crate) fn update(&mut self, qdelay_ns: u64) {
        let qdelay = qdelay_ns as f64 / 1e9;
        self.p += self.alpha * (qdelay - self.target_s) + self.beta * (qdelay - self.prev_qdelay_s);
        self.p = self.p.clamp(0.0, 1.0);
        self.prev_qdelay_s = qdelay;
    }

    /// `n` updates (at least one) with both queues empty: what `n` calls of
    /// [`Pi2::update`]`(0)` give, at once. Each lowers `p'` (the first by the trend too), so
    /// clamping once at the end is clamping at each.
    pub(crate) fn idle_updates(&mut self, n: u64) {
        let fall = self.alpha * self.target_s * n as f64 + self.beta * self.prev_qdelay_s;
        self.p = (self.p - fall).clamp(0.0, 1.0);
        self.prev_qdelay_s = 0.0;
    }

    /// `p'`.
    pub(crate) fn base(&self) -> f64 {
        self.p
    }

    /// The classic queue's drop (or mark) probability, `p'²`.
    pub(crate) fn classic(&self) -> f64 {
        self.p * self.p
    }

    /// The L4S queue's coupled marking probability, `min(k·p', 1)`.
    pub(crate) fn coupled(&self) -> f64 {
        (self.k * self.p).min(1.0)
    }

    /// Whether the classic probability reached `p_Cmax = min(1/k², 1)`: overload.
    pub(crate) fn overloaded(&self) -> bool {
        self.classic() >= (1.0 / (self.k * self.k)).min(1.0)
    }
}

/// The two queues with their controller (`aqm=dualpi2`).
#[derive(Debug)]
pub(crate) struct DualPi2 {
    l4s: VecDeque<Held>,
    classic: VecDeque<Held>,
    pi: Pi2,
    /// The L4S step threshold, ns.
    step_ns: u64,
    /// The scheduler's time shift in the L4S queue's favour, ns.
    tshift_ns: u64,
    ecn: bool,
    /// `recur()`'s accumulator for the L4S marks.
    l4s_count: f64,
    rng: SmallRng,
}

impl DualPi2 {
    pub(crate) fn new(aqm: &Aqm, seed: u64) -> DualPi2 {
        let mut dual = DualPi2 {
            l4s: VecDeque::new(),
            classic: VecDeque::new(),
            pi: Pi2::new(aqm),
            step_ns: 0,
            tshift_ns: 0,
            ecn: false,
            l4s_count: 0.0,
            rng: SmallRng::seed_from_u64(seed ^ 0x6475_616c_7069_3200),
        };
        dual.set_params(aqm);
        dual
    }

    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.pi.set_params(aqm);
        self.step_ns = aqm.step_ns;
        self.tshift_ns = aqm.target().saturating_mul(2);
        self.ecn = aqm.ecn;
    }

    /// The queue delay the controller reads at `at`: the longer of the two heads' waits, 0
    /// when both queues are empty.
    fn qdelay(&self, at: u64) -> u64 {
        let wait = |q: &VecDeque<Held>| q.front().map_or(0, |h| at.saturating_sub(h.enqueue_ns));
        wait(&self.classic).max(wait(&self.l4s))
    }

    /// Runs every update due by `now`, each with the queue delay at its own instant (the
    /// queues do not change between calls, but their heads' waits grow).
    fn catch_up(&mut self, now: u64) {
        if self.pi.next_update_ns > now {
            return;
        }
        if self.len() == 0 {
            // Idle: every update due reads a delay of 0, so p' only falls; all of them at once.
            let due = (now - self.pi.next_update_ns) / self.pi.tupdate_ns + 1;
            self.pi.idle_updates(due);
            self.pi.next_update_ns += due * self.pi.tupdate_ns;
            return;
        }
        while self.pi.next_update_ns <= now {
            let at = self.pi.next_update_ns;
            self.pi.update(self.qdelay(at));
            self.pi.next_update_ns += self.pi.tupdate_ns;
        }
    }

    /// Queues `held` in the queue [`Held::queue`] names.
    #[inline]
    pub(crate) fn enqueue(&mut self, now: u64, held: Held) {
        self.catch_up(now);
        if held.queue == L4S {
            self.l4s.push_back(held);
        } else {
            self.classic.push_back(held);
        }
    }

    /// Whether the scheduler serves the L4S queue next (time-shifted FIFO).
    fn serves_l4s(&self) -> bool {
        match (self.l4s.front(), self.classic.front()) {
            (Some(l), Some(c)) => l.enqueue_ns <= c.enqueue_ns.saturating_add(self.tshift_ns),
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// `recur(lq, likelihood)` of appendix A.1: true about once per `1/likelihood` calls.
    fn recur(&mut self, likelihood: f64) -> bool {
        self.l4s_count += likelihood;
        if self.l4s_count > 1.0 {
            self.l4s_count -= 1.0;
            return true;
        }
        false
    }

    /// The next frame to send at `now`, marked as the queues' AQMs decide; the frames they
    /// drop on the way are pushed on `discarded`.
    #[inline]
    pub(crate) fn dequeue(
        &mut self,
        now: u64,
        discarded: &mut Vec<(Held, Discard)>,
    ) -> Option<Held> {
        self.catch_up(now);
        loop {
            let l4s = self.serves_l4s();
            let mut held = if l4s {
                self.l4s.pop_front()?
            } else {
                self.classic.pop_front()?
            };
            let overloaded = self.pi.overloaded();
            if overloaded && self.rng.random::<f64>() < self.pi.classic() {
                discarded.push((held, Discard::Aqm));
                continue;
            }
            if l4s {
                // p_L = max(step, p_CL): at the step every frame is marked.
                let stepped = now.saturating_sub(held.enqueue_ns) >= self.step_ns;
                held.mark = stepped || self.recur(self.pi.coupled());
                return Some(held);
            }
            if !overloaded && self.rng.random::<f64>() < self.pi.classic() {
                if self.ecn && held.ect {
                    held.mark = true;
                } else {
                    discarded.push((held, Discard::Aqm));
                    continue;
                }
            }
            return Some(held);
        }
    }

    pub(crate) fn drain(&mut self) -> Vec<Held> {
        let mut all: Vec<Held> = self.l4s.drain(..).collect();
        all.extend(self.classic.drain(..));
        all
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.l4s.len() + self.classic.len()
    }

    /// Entries the two queues have room for.
    pub(crate) fn capacity(&self) -> usize {
        self.l4s.capacity() + self.classic.capacity()
    }

    /// `p'` now.
    pub(crate) fn base_probability(&self) -> f64 {
        self.pi.base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn aqm() -> Aqm {
        Aqm {
            discipline: super::super::Discipline::DualPi2,
            ..Aqm::default()
        }
    }

    fn held(seq: u64, enqueue_ns: u64, queue: u32, ect: bool) -> Held {
        Held {
            enqueue_ns,
            seq,
            buffer: seq as usize,
            len: 1000,
            queue,
            ect,
            mark: false,
        }
    }

    #[test]
    fn the_pi_controller_follows_appendix_a_step_by_step() {
        let mut pi = Pi2::new(&aqm());
        // α = 0.16, β = 3.2 (per update, as appendix A.1 adds them). 35 ms from 0:
        // 0.16·0.02 + 3.2·0.035.
        pi.update(35 * MS);
        let p1 = 0.16 * 0.020 + 3.2 * 0.035;
        assert!((pi.base() - p1).abs() < 1e-12, "{}", pi.base());
        // No trend: only the integral term.
        pi.update(35 * MS);
        let p2 = p1 + 0.16 * 0.020;
        assert!((pi.base() - p2).abs() < 1e-12);
        assert!((pi.classic() - p2 * p2).abs() < 1e-15);
        assert!((pi.coupled() - 2.0 * p2).abs() < 1e-15);
        // Below the target p' falls, never below 0.
        for _ in 0..1000 {
            pi.update(0);
        }
        assert_eq!(pi.base(), 0.0);
        // Overload where p_C reaches 1/k² = 25%: p' = 0.5, where k·p' = 1.
        pi.p = 0.499;
        assert!(!pi.overloaded());
        pi.p = 0.5;
        assert!(pi.overloaded() && pi.coupled() == 1.0);
    }

    #[test]
    fn idle_updates_at_once_are_the_updates_one_by_one() {
        for (start, prev_ms, n) in [
            (0.9, 40, 1),
            (0.9, 40, 7),
            (0.3, 0, 5_000),
            (1.0, 20, 30_000),
        ] {
            let mut one_by_one = Pi2::new(&aqm());
            (one_by_one.p, one_by_one.prev_qdelay_s) = (start, prev_ms as f64 / 1e3);
            let mut at_once = one_by_one.clone();
            for _ in 0..n {
                one_by_one.update(0);
            }
            at_once.idle_updates(n);
            assert!(
                (one_by_one.p - at_once.p).abs() < 1e-9,
                "{n}: {one_by_one:?} {at_once:?}"
            );
            assert_eq!(at_once.prev_qdelay_s, 0.0);
        }
        // A queue idle for an hour at p' = 1 decays to 0 in one call, and the next update is
        // the one after now.
        let mut q = DualPi2::new(&aqm(), 1);
        q.pi.p = 1.0;
        let hour = 3_600 * 1_000 * MS;
        q.catch_up(hour);
        assert_eq!(q.base_probability(), 0.0);
        assert!(q.pi.next_update_ns > hour && q.pi.next_update_ns <= hour + 16 * MS);
        assert_eq!(q.pi.next_update_ns % (16 * MS), 0);
    }

    #[test]
    fn classic_frames_drop_at_p_squared_and_l4s_frames_mark_at_k_times_p() {
        // p' held at 0.3 (no update due): classic frames dropped with 0.09, L4S frames (under
        // the step) marked with k·0.3, for k = 2 and 3.
        for k in [2.0, 3.0] {
            let mut q = DualPi2::new(
                &Aqm {
                    coupling: k,
                    ..aqm()
                },
                7,
            );
            (q.pi.p, q.pi.next_update_ns) = (0.3, u64::MAX);
            let n = 10_000;
            for seq in 0..n {
                q.enqueue(0, held(seq, 0, CLASSIC, false));
            }
            let mut discarded = Vec::new();
            let mut sent = 0;
            while let Some(h) = q.dequeue(0, &mut discarded) {
                assert!(
                    !h.mark,
                    "without ECN a classic frame is dropped, never marked"
                );
                sent += 1;
            }
            let dropped = discarded.len() as u64;
            assert_eq!(sent + dropped, n);
            // 900 expected, the standard deviation 29.
            assert!((800..=1000).contains(&dropped), "k {k}: {dropped} dropped");
            let mut marked = 0u64;
            for seq in 0..n {
                q.enqueue(0, held(seq, 0, L4S, true));
                marked += u64::from(q.dequeue(0, &mut discarded).unwrap().mark);
            }
            // recur() is exact: k·p'·n marks, give or take the one the accumulator holds.
            let expected = (k * 0.3 * n as f64) as u64;
            assert!(marked.abs_diff(expected) <= 1, "k {k}: {marked} marked");
            assert_eq!(discarded.len() as u64, dropped, "no L4S frame dropped");
        }
    }

    #[test]
    fn the_time_shifted_fifo_favours_l4s_by_twice_the_target() {
        let mut q = DualPi2::new(&aqm(), 1);
        // A classic frame at 0, L4S frames at 10, 30 and 31 ms: tshift is 30 ms.
        q.enqueue(0, held(1, 0, CLASSIC, false));
        q.enqueue(10 * MS, held(2, 10 * MS, L4S, true));
        q.enqueue(30 * MS, held(3, 30 * MS, L4S, true));
        q.enqueue(31 * MS, held(4, 31 * MS, L4S, true));
        let mut discarded = Vec::new();
        let order: Vec<u64> = (0..4)
            .map(|_| q.dequeue(31 * MS, &mut discarded).unwrap().seq)
            .collect();
        // 10 ms and 30 ms are within 30 ms of the classic head; 31 ms is not.
        assert_eq!(order, [2, 3, 1, 4]);
        assert!(discarded.is_empty());
    }

    #[test]
    fn l4s_frames_are_marked_at_the_step_and_classic_ones_only_with_p_c() {
        let mut q = DualPi2::new(&aqm(), 1);
        let mut discarded = Vec::new();
        // p' = 0: an L4S frame that waited under 1 ms goes unmarked, every one at 1 ms or
        // more is marked.
        q.enqueue(0, held(1, 0, L4S, true));
        assert!(!q.dequeue(MS - 1, &mut discarded).unwrap().mark);
        for seq in 2..5 {
            q.enqueue(MS, held(seq, MS, L4S, true));
            assert!(q.dequeue(2 * MS + seq, &mut discarded).unwrap().mark);
        }
        // Nor does p' = 0 touch classic frames (before the first update, at 16 ms).
        q.enqueue(MS, held(5, MS, CLASSIC, true));
        let classic = q.dequeue(15 * MS, &mut discarded).unwrap();
        assert!(!classic.mark && discarded.is_empty());
        // A coupled probability of 0.25 marks one L4S frame in four (recur() first passes 1
        // at the fifth), none dropped.
        q.pi.p = 0.125;
        q.l4s_count = 0.0;
        let mut marks = 0;
        for i in 0..400 {
            q.enqueue(10 * MS, held(10 + i, 10 * MS, L4S, true));
            marks += u32::from(q.dequeue(10 * MS, &mut discarded).unwrap().mark);
        }
        assert_eq!((marks, discarded.len()), (99, 0));
    }
}
