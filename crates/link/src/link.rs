//! The link: each frame's fate, the queue's occupancy, the counters.

use latlab_stats::LatencyHistogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::delay_trace::DelayCurve;
use crate::{dist, ConfigError, Event, EventRecord, Events, LinkConfig, LossModel, MIN_FRAME};

mod fate;
mod recorded;
pub use fate::{DropCause, Fate, LinkCounters};

/// The conditions in force: the configuration's, or those of the schedule entry in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditions {
    /// Base one-way delay in nanoseconds (with a delay trace, the trace's at the last frame).
    pub delay_ns: u64,
    /// The loss model.
    pub loss: LossModel,
    /// Rate limit in bits per second, `None` for none.
    pub rate_bps: Option<u64>,
}

/// One direction of an emulated link: decides each arriving frame's fate and keeps the count
/// of frames and bytes between arrival and departure.
///
/// Call order, for an engine:
///
/// 1. [`Link::new`] once, with the configuration and the start time (the schedule's time 0).
/// 2. For every frame received, in arrival order: [`Link::handle_arrival`]`(now, len)`. On
///    [`Fate::Drop`], discard the frame. On [`Fate::Deliver`], flip `corrupt_bit` if any,
///    hold the frame until `departure_ns`, and a copy until `duplicate_departure_ns` if any.
/// 3. When a held frame or copy is sent (or discarded, e.g. on shutdown):
///    [`Link::handle_departure`]`(now, len)`, once for each, so its room in the queue is freed.
/// 4. At any time: [`Link::counters`], [`Link::queued_frames`], [`Link::queued_bytes`],
///    [`Link::conditions`].
///
/// `now` must not go backwards between calls. The link never reads a clock and holds no
/// frames; the engine is the queue, the link its bookkeeping.
#[derive(Debug)]
pub struct Link {
    /// The checked configuration.
    config: LinkConfig,
    /// `now` of the schedule's time 0.
    start_ns: u64,
    /// The configuration's conditions followed by one per schedule entry, each resolved
    /// against the one before (`-` kept), with the time it starts; sorted by time.
    phases: Vec<(u64, Conditions)>,
    /// Index in `phases` of the conditions in force; 0 before the first schedule entry.
    phase: usize,
    /// The conditions in force (a copy of `phases[phase].1`).
    conditions: Conditions,
    /// All randomness.
    rng: SmallRng,
    /// The state of the loss model's Markov chain.
    loss_state: LossState,
    /// The last uniform variate of the delay, for its correlation.
    last_uniform: f64,
    /// Frames delayed since the last reordered one (NetEm's `counter`).
    since_reorder: u32,
    /// The departure time of the last frame that went through delay and rate.
    last_departure_ns: u64,
    /// Remainder of `bits · 10⁹ / rate` carried to the next frame, so that rounding to whole
    /// nanoseconds does not drift from the rate; `< rate`.
    rate_carry: u128,
    /// Frames delivered and not yet departed; `≤ limit_frames` if set.
    queued_frames: usize,
    /// Bytes of those frames; `≤ limit_bytes` if set.
    queued_bytes: usize,
    /// Fates so far.
    counters: LinkCounters,
    /// The delay trace's curve, when one is in force, and the instant of its time 0 (the
    /// link's start, or the change that brought this trace in).
    delay_curve: Option<(DelayCurve, u64)>,
    /// The sojourn time at the queue the rate builds (from a frame joining it to its
    /// transmission starting) of every frame sent, in ns, once a rate (or a queue discipline,
    /// which records here too) has been in force: tail drop's queue reports it as the
    /// disciplines do. `None` while no configuration had a queue.
    sojourn: Option<LatencyHistogram>,
    /// The events of this direction: the schedule's and those begun while it runs.
    events: Events,
    /// The delay the spikes in force at the last arrival add, ns.
    spike_ns: u64,
}

/// Whether `config` makes a queue: a rate (its own or a schedule entry's) or a bottleneck.
fn has_queue(config: &LinkConfig, phases: &[(u64, Conditions)]) -> bool {
    config.has_bottleneck() || phases.iter().any(|(_, c)| c.rate_bps.is_some())
}

/// Where a loss model's Markov chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LossState {
    /// Gilbert-Elliott good state; also the (unused) state of the stateless models.
    Good,
    /// Gilbert-Elliott bad state.
    Bad,
    /// 4-state model, state 1: frame received in a gap.
    ReceivedInGap,
    /// 4-state model, state 2: frame received in a burst.
    ReceivedInBurst,
    /// 4-state model, state 3: frame lost in a burst.
    LostInBurst,
    /// 4-state model, state 4: isolated loss.
    LostInGap,
}

impl LossState {
    /// The state a loss model starts in: the good one.
    fn initial(model: &LossModel) -> LossState {
        match model {
            LossModel::FourState { .. } => LossState::ReceivedInGap,
            _ => LossState::Good,
        }
    }
}

impl Link {
    /// A link with `config` (checked with [`LinkConfig::validate`]), whose schedule starts at
    /// `start_ns`.
    pub fn new(config: LinkConfig, start_ns: u64) -> Result<Link, ConfigError> {
        config.validate()?;
        let phases = phases(&config);
        let base = phases[0].1;
        let mut rng = SmallRng::seed_from_u64(config.seed);
        let last_uniform = rng.random();
        let sojourn = has_queue(&config, &phases).then(LatencyHistogram::new);
        let mut events = Events::default();
        events.schedule(start_ns, scheduled_events(&config));
        Ok(Link {
            delay_curve: curve(&config).map(|c| (c, start_ns)),
            sojourn,
            events,
            spike_ns: 0,
            start_ns,
            loss_state: LossState::initial(&base.loss),
            phases,
            phase: 0,
            conditions: base,
            rng,
            last_uniform,
            since_reorder: 0,
            last_departure_ns: 0,
            rate_carry: 0,
            queued_frames: 0,
            queued_bytes: 0,
            counters: LinkCounters::default(),
            config,
        })
    }

    /// Changes the conditions of a running link at `now`; on error nothing changes.
    ///
    /// What is kept: the counters, the frames and bytes queued (frames delivered before keep
    /// their departure times, which the engine holds), and the departure time of the last
    /// frame, so that without reordering frames stay in order: a new frame never departs
    /// before the frames already queued, even when the new delay is shorter. The random
    /// stream goes on (it restarts from the new seed only if [`LinkConfig::seed`] changed),
    /// and so does the loss model's Markov chain if the loss model is unchanged.
    ///
    /// What changes from now on: every knob, including the limits (frames already queued
    /// above a lowered limit stay; arrivals are dropped until the queue is under it). A
    /// schedule in `config` starts at `now`, and so does a delay trace other than the one in
    /// force (the same trace goes on).
    pub fn handle_config(&mut self, now: u64, config: LinkConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let phases = phases(&config);
        let base = phases[0].1;
        if base.loss != self.conditions.loss {
            self.loss_state = LossState::initial(&base.loss);
        }
        if base.rate_bps != self.conditions.rate_bps {
            self.rate_carry = 0;
        }
        if config.seed != self.config.seed {
            self.rng = SmallRng::seed_from_u64(config.seed);
            self.last_uniform = self.rng.random();
        }
        if config.reorder.is_none() {
            self.since_reorder = 0;
        }
        // A new trace starts its time 0 now; the same one goes on where it is.
        if config.delay_trace != self.config.delay_trace {
            self.delay_curve = curve(&config).map(|c| (c, now));
        }
        if has_queue(&config, &phases) && self.sojourn.is_none() {
            self.sojourn = Some(LatencyHistogram::new());
        }
        self.start_ns = now;
        self.phases = phases;
        self.phase = 0;
        self.conditions = base;
        self.events.schedule(now, scheduled_events(&config));
        self.config = config;
        Ok(())
    }

    /// Begins `event` at `now`, on top of the conditions (and of other events in force).
    pub fn begin_event(&mut self, now: u64, event: Event) {
        self.events.begin(now, event);
    }

    /// Ends every event in force at `now` (the cable put back, a spike cut short); the
    /// schedule's events not yet due stay. How many were ended.
    pub fn release_events(&mut self, now: u64) -> usize {
        self.events.release(now)
    }

    /// Every event placed on this link, scheduled or begun, with its times.
    pub fn events(&self) -> &[EventRecord] {
        self.events.records()
    }

    /// A frame of `len` bytes arrived at `now`: its fate. Delivered frames (and duplicates)
    /// occupy the queue until [`Link::handle_departure`].
    ///
    /// In order: the schedule entry in force at `now` is applied; oversized frames and (if
    /// configured) runts are dropped; the loss model is asked; the queue limits are checked
    /// (tail drop); then duplication, corruption, reordering, and the departure time:
    /// `max(now + delay + jitter, previous departure) + (len + overhead)·8 / rate`.
    pub fn handle_arrival(&mut self, now: u64, len: usize) -> Fate {
        self.counters.arrived += 1;
        self.enter_phase_at(now);
        let effect = self.events.effect(now);
        self.spike_ns = effect.extra_delay_ns;
        let fate = if effect.down {
            Fate::Drop(DropCause::Outage)
        } else {
            self.decide(now, len)
        };
        self.count(&fate);
        fate
    }

    /// Counts `fate` under its cause.
    fn count(&mut self, fate: &Fate) {
        match *fate {
            Fate::Drop(cause) => self.counters.count_drop(cause),
            Fate::Deliver {
                duplicate_departure_ns,
                corrupt_bit,
                reordered,
                ..
            } => {
                self.counters.delivered += 1;
                self.counters.duplicated += u64::from(duplicate_departure_ns.is_some());
                self.counters.corrupted += u64::from(corrupt_bit.is_some());
                self.counters.reordered += u64::from(reordered);
            }
        }
    }

    /// The engine released (sent or discarded) a frame of `len` bytes that was delivered:
    /// call once per delivered frame and once per duplicate. `now` is taken for the verb set;
    /// the model does not need it.
    #[inline]
    pub fn handle_departure(&mut self, now: u64, len: usize) {
        let _ = now;
        debug_assert!(
            self.queued_frames > 0 && self.queued_bytes >= len,
            "handle_departure without a matching delivered frame"
        );
        self.queued_frames = self.queued_frames.saturating_sub(1);
        self.queued_bytes = self.queued_bytes.saturating_sub(len);
    }

    /// Every frame's fate so far, by cause.
    pub fn counters(&self) -> &LinkCounters {
        &self.counters
    }

    /// The counters, for the pipe to count what its queue discipline does.
    pub(crate) fn counters_mut(&mut self) -> &mut LinkCounters {
        &mut self.counters
    }

    /// Whether a frame of `len` bytes arriving now would find the queue at a limit.
    pub(crate) fn would_overflow(&self, len: usize) -> bool {
        self.config
            .limit_frames
            .is_some_and(|limit| self.queued_frames >= limit)
            || self
                .config
                .limit_bytes
                .is_some_and(|limit| self.queued_bytes.saturating_add(len) > limit)
    }

    /// Frames delivered (and duplicates) not yet departed.
    pub fn queued_frames(&self) -> usize {
        self.queued_frames
    }

    /// Bytes of the frames delivered (and duplicates) not yet departed, without overhead.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// The conditions in force at the last arrival (the configuration's before any).
    pub fn conditions(&self) -> &Conditions {
        &self.conditions
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The fate of one frame, without counting it.
    fn decide(&mut self, now: u64, len: usize) -> Fate {
        if len > self.config.max_frame {
            return Fate::Drop(DropCause::Oversized);
        }
        if len < MIN_FRAME && self.config.drop_runts {
            return Fate::Drop(DropCause::Runt);
        }
        if self.loss_event() {
            return Fate::Drop(DropCause::Loss);
        }
        if let Err(cause) = self.admit(len) {
            return Fate::Drop(cause);
        }
        let duplicate = self.chance(self.config.duplicate);
        let corrupt_bit = match self.chance(self.config.corrupt) {
            true if len > 0 => Some(self.rng.random_range(0..len.saturating_mul(8))),
            _ => None,
        };
        let reordered = self.reorder_event();
        if self.config.has_bottleneck() {
            // The bottleneck comes first: the pipe's queue discipline serves the frame (and
            // its copy) from `now`, then the delay applies.
            let duplicate = duplicate && self.admit(len).is_ok();
            return Fate::Deliver {
                departure_ns: now,
                duplicate_departure_ns: duplicate.then_some(now),
                corrupt_bit,
                reordered,
            };
        }
        let departure_ns = if reordered {
            now
        } else {
            self.departure_after_delay(now, len)
        };
        // The copy needs room too; a copy that does not fit is simply not made.
        let duplicate_departure_ns =
            (duplicate && self.admit(len).is_ok()).then(|| self.departure_after_delay(now, len));
        Fate::Deliver {
            departure_ns,
            duplicate_departure_ns,
            corrupt_bit,
            reordered,
        }
    }

    /// Applies the schedule entry in force at `now`.
    fn enter_phase_at(&mut self, now: u64) {
        if self.phases.len() == 1 {
            return;
        }
        let elapsed = now.saturating_sub(self.start_ns);
        // phases[0] starts at 0 and always qualifies, so the count is at least 1.
        let phase = self.phases.partition_point(|&(at_ns, _)| at_ns <= elapsed) - 1;
        if phase == self.phase {
            return;
        }
        let next = self.phases[phase].1;
        if next.loss != self.conditions.loss {
            self.loss_state = LossState::initial(&next.loss);
        }
        if next.rate_bps != self.conditions.rate_bps {
            self.rate_carry = 0;
        }
        self.phase = phase;
        self.conditions = next;
    }

    /// True with probability `p` (never for 0, always for 1).
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    /// Whether the loss model loses the next frame; moves its Markov chain (NetEm's
    /// `loss_event`, `loss_gilb_ell`, `loss_4state`).
    fn loss_event(&mut self) -> bool {
        match self.conditions.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => self.chance(p),
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                // As NetEm: the state the frame meets sets its loss probability; the chain
                // moves with the first draw, the loss is decided by the second.
                let (leave, loss, other) = match self.loss_state {
                    LossState::Bad => (r, one_minus_h, LossState::Good),
                    _ => (p, one_minus_k, LossState::Bad),
                };
                if self.chance(leave) {
                    self.loss_state = other;
                }
                self.chance(loss)
            }
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                let u: f64 = self.rng.random();
                self.loss_state = match self.loss_state {
                    LossState::LostInBurst if u < p32 => LossState::ReceivedInBurst,
                    LossState::LostInBurst if u < p32 + p31 => LossState::ReceivedInGap,
                    LossState::LostInBurst => LossState::LostInBurst,
                    LossState::ReceivedInBurst if u < p23 => LossState::LostInBurst,
                    LossState::ReceivedInBurst => LossState::ReceivedInBurst,
                    LossState::LostInGap => LossState::ReceivedInGap,
                    _ if u < p14 => LossState::LostInGap,
                    _ if u < p14 + p13 => LossState::LostInBurst,
                    _ => LossState::ReceivedInGap,
                };
                matches!(
                    self.loss_state,
                    LossState::LostInBurst | LossState::LostInGap
                )
            }
        }
    }

    /// Takes room in the queue for a frame of `len` bytes, or says which limit is full.
    fn admit(&mut self, len: usize) -> Result<(), DropCause> {
        if self
            .config
            .limit_frames
            .is_some_and(|limit| self.queued_frames >= limit)
        {
            return Err(DropCause::QueueFrames);
        }
        if self
            .config
            .limit_bytes
            .is_some_and(|limit| self.queued_bytes.saturating_add(len) > limit)
        {
            return Err(DropCause::QueueBytes);
        }
        self.queued_frames += 1;
        self.queued_bytes += len;
        Ok(())
    }

    /// Whether this frame is sent at once (NetEm: once `gap − 1` frames were delayed since the
    /// last reordered one, with the reorder probability).
    fn reorder_event(&mut self) -> bool {
        let Some(reorder) = self.config.reorder else {
            return false;
        };
        let gap = reorder.gap.unwrap_or(1);
        let reordered =
            self.since_reorder.saturating_add(1) >= gap && self.chance(reorder.probability);
        self.since_reorder = if reordered {
            0
        } else {
            self.since_reorder.saturating_add(1)
        };
        reordered
    }

    /// The departure of a frame that goes through delay and rate, in order.
    fn departure_after_delay(&mut self, now: u64, len: usize) -> u64 {
        let due = now.saturating_add(self.sample_delay_ns(now));
        let start = due.max(self.last_departure_ns);
        if self.conditions.rate_bps.is_some() {
            // Delay, then rate (NetEm's order): the frame joins the rate's queue when due and
            // waits there for the frames before it.
            self.record_sojourn(start - due);
        }
        let departure = start.saturating_add(self.transmission_ns(len));
        debug_assert!(departure >= self.last_departure_ns);
        self.last_departure_ns = departure;
        departure
    }

    /// Records one frame's sojourn at the queue (ns).
    pub(crate) fn record_sojourn(&mut self, ns: u64) {
        self.sojourn
            .get_or_insert_with(LatencyHistogram::new)
            .record(ns);
    }

    /// The sojourn times at the queue of the frames sent (ns), once a rate or a queue
    /// discipline has been in force; `None` on a link that never had a queue.
    pub fn sojourn(&self) -> Option<&LatencyHistogram> {
        self.sojourn.as_ref()
    }

    /// The departure of a frame whose transmission at the bottleneck ended at `done_ns`
    /// (a queue discipline's order: rate, then delay), in order.
    pub(crate) fn departure_after_bottleneck(&mut self, done_ns: u64) -> u64 {
        let departure = done_ns
            .saturating_add(self.sample_delay_ns(done_ns))
            .max(self.last_departure_ns);
        self.last_departure_ns = departure;
        departure
    }

    /// The base delay at `at_ns` (the trace's, with a delay trace: kept in the conditions)
    /// plus a spike in force and a jitter sample, never below 0.
    fn sample_delay_ns(&mut self, at_ns: u64) -> u64 {
        if let Some((curve, start_ns)) = &self.delay_curve {
            self.conditions.delay_ns = curve.delay_at(at_ns.saturating_sub(*start_ns));
        }
        // A spike in force at the last arrival adds to the delay (behind a bottleneck, at the
        // frame's service: the arrivals' clock is the one events follow).
        let delay_ns = self.conditions.delay_ns.saturating_add(self.spike_ns);
        if self.config.jitter_ns == 0 {
            return delay_ns;
        }
        let fresh: f64 = self.rng.random();
        let rho = self.config.correlation;
        // NetEm's get_crandom: (1 − ρ)·fresh + ρ·last. Both in [0, 1), so the mix is too.
        let u = ((1.0 - rho) * fresh + rho * self.last_uniform).min(1.0 - f64::EPSILON);
        self.last_uniform = u;
        let offset = dist::quantile(&self.config.jitter_dist, u) * self.config.jitter_ns as f64;
        // Float to integer casts saturate: a negative total is 0, a huge one u64::MAX.
        (delay_ns as f64 + offset).round() as u64
    }

    /// Time on the wire of `len` bytes plus overhead at the rate in force; 0 without a rate.
    pub(crate) fn transmission_ns(&mut self, len: usize) -> u64 {
        let Some(rate_bps) = self.conditions.rate_bps else {
            return 0;
        };
        let rate = u128::from(rate_bps);
        let bits = (len as u128 + u128::from(self.config.overhead_bytes)) * 8;
        let numerator = bits * 1_000_000_000 + self.rate_carry;
        self.rate_carry = numerator % rate;
        u64::try_from(numerator / rate).unwrap_or(u64::MAX)
    }
}

/// The events of the configuration's schedule, with their times since its start.
fn scheduled_events(config: &LinkConfig) -> &[(u64, Event)] {
    config.schedule.as_ref().map_or(&[][..], |s| s.events())
}

/// The curve of the configuration's delay trace, if it has one (validated: it makes one).
fn curve(config: &LinkConfig) -> Option<DelayCurve> {
    config.delay_trace.as_ref().and_then(|t| t.curve().ok())
}

/// The configuration's conditions followed by one per schedule entry, each resolved against
/// the one before (`-` kept), with the time it starts; sorted by time, the first at 0.
fn phases(config: &LinkConfig) -> Vec<(u64, Conditions)> {
    let base = Conditions {
        delay_ns: config.delay_ns,
        loss: config.loss,
        rate_bps: config.rate_bps,
    };
    let mut phases = vec![(0, base)];
    let entries = config.schedule.as_ref().map_or(&[][..], |s| s.entries());
    for entry in entries {
        let mut next = phases.last().map_or(base, |&(_, conditions)| conditions);
        if let Some(delay_ns) = entry.delay_ns {
            next.delay_ns = delay_ns;
        }
        if let Some(p) = entry.loss {
            next.loss = if p == 0.0 {
                LossModel::None
            } else {
                LossModel::Bernoulli { p }
            };
        }
        if let Some(rate_bps) = entry.rate_bps {
            next.rate_bps = Some(rate_bps);
        }
        phases.push((entry.at_ns, next));
    }
    phases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JitterDist, Reorder, Schedule};

    const MS: u64 = 1_000_000;

    fn link(config: LinkConfig) -> Link {
        Link::new(config, 0).expect("test configurations are valid")
    }

    fn departure(fate: Fate) -> u64 {
        match fate {
            Fate::Deliver { departure_ns, .. } => departure_ns,
            Fate::Drop(cause) => panic!("expected delivery, got a drop: {cause:?}"),
        }
    }

    #[test]
    fn an_unimpaired_link_delivers_at_once() {
        let mut link = link(LinkConfig::default());
        assert_eq!(
            link.handle_arrival(5, 64),
            Fate::Deliver {
                departure_ns: 5,
                duplicate_departure_ns: None,
                corrupt_bit: None,
                reordered: false
            }
        );
    }

    #[test]
    fn rate_spaces_frames_arriving_together_by_their_wire_time() {
        let mut link = link(LinkConfig {
            rate_bps: Some(1_000_000_000),
            ..LinkConfig::default()
        });
        let departures: Vec<u64> = (0..10)
            .map(|_| departure(link.handle_arrival(0, 1500)))
            .collect();
        let wire_ns = (1500 + 24) * 8;
        for (i, departure) in departures.iter().enumerate() {
            assert_eq!(*departure, (i as u64 + 1) * wire_ns);
        }
    }

    #[test]
    fn the_overhead_is_configurable() {
        let mut link = link(LinkConfig {
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 0,
            ..LinkConfig::default()
        });
        assert_eq!(departure(link.handle_arrival(0, 1500)), 12_000);
        assert_eq!(departure(link.handle_arrival(0, 1500)), 24_000);
    }

    #[test]
    fn rate_comes_after_the_delay_and_an_idle_link_starts_afresh() {
        let mut link = link(LinkConfig {
            delay_ns: 10 * MS,
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 0,
            ..LinkConfig::default()
        });
        assert_eq!(departure(link.handle_arrival(0, 1500)), 10 * MS + 12_000);
        // 1 ms later the link is idle again: only the delay and one wire time.
        assert_eq!(departure(link.handle_arrival(MS, 1500)), 11 * MS + 12_000);
    }

    #[test]
    fn slow_rates_do_not_drift_from_rounding() {
        // 1 byte + 0 overhead at 3 bit/s: 8/3 s each; 3 frames take exactly 8 s.
        let mut link = link(LinkConfig {
            rate_bps: Some(3),
            overhead_bytes: 0,
            drop_runts: false,
            ..LinkConfig::default()
        });
        let last = (0..3).map(|_| departure(link.handle_arrival(0, 1))).last();
        assert_eq!(last, Some(8_000_000_000));
    }

    #[test]
    fn the_frame_limit_drops_at_the_tail_and_departures_free_room() {
        let mut link = link(LinkConfig {
            delay_ns: MS,
            limit_frames: Some(3),
            ..LinkConfig::default()
        });
        for _ in 0..3 {
            departure(link.handle_arrival(0, 100));
        }
        assert_eq!(
            link.handle_arrival(0, 100),
            Fate::Drop(DropCause::QueueFrames)
        );
        assert_eq!(link.queued_frames(), 3);
        link.handle_departure(MS, 100);
        departure(link.handle_arrival(MS, 100));
        assert_eq!(link.counters().dropped_queue_frames, 1);
        assert_eq!(link.counters().delivered, 4);
    }

    #[test]
    fn the_byte_limit_drops_at_the_tail_and_departures_free_room() {
        let mut link = link(LinkConfig {
            delay_ns: MS,
            limit_bytes: Some(3000),
            ..LinkConfig::default()
        });
        departure(link.handle_arrival(0, 1500));
        departure(link.handle_arrival(0, 1000));
        assert_eq!(
            link.handle_arrival(0, 1000),
            Fate::Drop(DropCause::QueueBytes)
        );
        // A smaller frame still fits.
        departure(link.handle_arrival(0, 500));
        assert_eq!(link.queued_bytes(), 3000);
        link.handle_departure(MS, 1500);
        departure(link.handle_arrival(MS, 1000));
        assert_eq!(link.counters().dropped_queue_bytes, 1);
        assert_eq!(link.queued_bytes(), 2500);
    }

    #[test]
    fn runts_and_oversized_frames_are_counted_and_dropped() {
        let mut link = link(LinkConfig {
            max_frame: 1518,
            ..LinkConfig::default()
        });
        assert_eq!(link.handle_arrival(0, 13), Fate::Drop(DropCause::Runt));
        assert_eq!(link.handle_arrival(0, 0), Fate::Drop(DropCause::Runt));
        assert_eq!(
            link.handle_arrival(0, 1519),
            Fate::Drop(DropCause::Oversized)
        );
        departure(link.handle_arrival(0, 14));
        departure(link.handle_arrival(0, 1518));
        let counters = link.counters();
        assert_eq!(
            (
                counters.dropped_runt,
                counters.dropped_oversized,
                counters.delivered
            ),
            (2, 1, 2)
        );
        assert_eq!(counters.arrived, counters.delivered + counters.dropped());
    }

    #[test]
    fn runts_can_be_forwarded() {
        let mut link = link(LinkConfig {
            drop_runts: false,
            corrupt: 1.0,
            ..LinkConfig::default()
        });
        // An empty frame has no bit to flip.
        assert_eq!(
            link.handle_arrival(0, 0),
            Fate::Deliver {
                departure_ns: 0,
                duplicate_departure_ns: None,
                corrupt_bit: None,
                reordered: false
            }
        );
        assert!(matches!(
            link.handle_arrival(0, 1),
            Fate::Deliver {
                corrupt_bit: Some(0..=7),
                ..
            }
        ));
    }

    #[test]
    fn a_duplicate_departs_after_its_original_and_takes_room() {
        let mut link = link(LinkConfig {
            delay_ns: MS,
            rate_bps: Some(1_000_000_000),
            overhead_bytes: 0,
            duplicate: 1.0,
            limit_frames: Some(3),
            ..LinkConfig::default()
        });
        assert_eq!(
            link.handle_arrival(0, 1500),
            Fate::Deliver {
                departure_ns: MS + 12_000,
                duplicate_departure_ns: Some(MS + 24_000),
                corrupt_bit: None,
                reordered: false
            }
        );
        // Room for the second original but not its copy.
        assert!(matches!(
            link.handle_arrival(0, 1500),
            Fate::Deliver {
                duplicate_departure_ns: None,
                ..
            }
        ));
        assert_eq!(link.queued_frames(), 3);
        assert_eq!(link.counters().duplicated, 1);
    }

    #[test]
    fn reorder_with_a_gap_sends_every_nth_frame_at_once() {
        let mut link = link(LinkConfig {
            delay_ns: 10 * MS,
            reorder: Some(Reorder {
                probability: 1.0,
                gap: Some(5),
            }),
            limit_frames: None,
            ..LinkConfig::default()
        });
        for i in 1..=20u64 {
            let now = i * 1000;
            match link.handle_arrival(now, 100) {
                Fate::Deliver {
                    departure_ns,
                    reordered,
                    ..
                } => {
                    assert_eq!(reordered, i % 5 == 0, "frame {i}");
                    let expected = if reordered { now } else { now + 10 * MS };
                    assert_eq!(departure_ns, expected, "frame {i}");
                }
                Fate::Drop(cause) => panic!("frame {i} dropped: {cause:?}"),
            }
        }
        assert_eq!(link.counters().reordered, 4);
    }

    #[test]
    fn a_schedule_changes_delay_loss_and_rate_at_its_times() {
        let schedule = Schedule::parse(
            "# TIME DELAY LOSS RATE\n\
             1s 10ms 0% 100mbit\n\
             5s 50ms 100% -\n\
             10s - 0% 10mbit\n",
        )
        .unwrap();
        // Schedule times count from the link's start, here 1 s on the engine's clock.
        let start = 1_000 * MS;
        let config = LinkConfig {
            delay_ns: MS,
            schedule: Some(schedule),
            limit_frames: None,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, start).unwrap();
        let wire_100m = 1524 * 8 * 10; // ns at 100 Mbit/s
                                       // Before the first line: the configuration's 1 ms and no rate.
        assert_eq!(
            departure(link.handle_arrival(start + 500 * MS, 1500)),
            start + 501 * MS
        );
        let at = start + 2_000 * MS;
        assert_eq!(
            departure(link.handle_arrival(at, 1500)),
            at + 10 * MS + wire_100m
        );
        assert_eq!(
            link.handle_arrival(start + 5_000 * MS, 1500),
            Fate::Drop(DropCause::Loss)
        );
        assert_eq!(
            link.handle_arrival(start + 9_999 * MS, 1500),
            Fate::Drop(DropCause::Loss)
        );
        let at = start + 10_000 * MS;
        assert_eq!(
            departure(link.handle_arrival(at, 1500)),
            at + 50 * MS + 10 * wire_100m
        );
        assert_eq!(
            link.conditions(),
            &Conditions {
                delay_ns: 50 * MS,
                loss: LossModel::None,
                rate_bps: Some(10_000_000)
            }
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_fates() {
        let config = LinkConfig {
            delay_ns: 5 * MS,
            jitter_ns: 2 * MS,
            jitter_dist: JitterDist::ParetoNormal,
            correlation: 0.25,
            loss: LossModel::GilbertElliott {
                p: 0.05,
                r: 0.3,
                one_minus_h: 0.9,
                one_minus_k: 0.01,
            },
            duplicate: 0.05,
            corrupt: 0.05,
            reorder: Some(Reorder {
                probability: 0.1,
                gap: None,
            }),
            seed: 42,
            limit_frames: None,
            ..LinkConfig::default()
        };
        let run = |config: LinkConfig| {
            let mut link = Link::new(config, 0).unwrap();
            (0..1000u64)
                .map(|i| link.handle_arrival(i * 100_000, 64 + i as usize % 1400))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(config.clone()), run(config.clone()));
        assert_ne!(run(config.clone()), run(LinkConfig { seed: 43, ..config }));
    }

    #[test]
    fn an_invalid_configuration_is_refused() {
        let error = Link::new(
            LinkConfig {
                loss: LossModel::Bernoulli { p: 1.2 },
                ..LinkConfig::default()
            },
            0,
        )
        .unwrap_err();
        assert_eq!(error.to_string(), "loss: 120% is above 100%");
    }
}
