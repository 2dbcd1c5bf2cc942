//! Queue disciplines at the link's bottleneck, the queue that the rate limit builds: tail drop
//! (the frame and byte limits alone, the default), CoDel (RFC 8289), FQ-CoDel (RFC 8290),
//! PIE (RFC 8033) and DualPI2 (RFC 9332, the L4S dual-queue coupled AQM), each optionally
//! marking ECN-capable frames CE instead of dropping them (RFC 3168; DualPI2 always marks its
//! L4S queue's frames, RFC 9331).
//!
//! With a discipline other than [`Discipline::Tail`], a pipe's frames go through the link in
//! this order: the loss model and the other arrival fates, then the bottleneck queue served at
//! the rate (the discipline decides at enqueue for PIE, at dequeue for CoDel and FQ-CoDel, on
//! the sojourn time `dequeue − enqueue`; at dequeue for DualPI2 too), then the delay and jitter. Tail drop keeps NetEm's
//! order (delay, then rate). A queue only builds where a rate limits the link, so a discipline
//! other than tail needs a rate ([`LinkConfig::rate_bps`] or a schedule entry that sets one):
//! without one it would never act, and [`LinkConfig::validate`] refuses it.
//!
//! `target` is one knob for CoDel, FQ-CoDel, PIE and DualPI2 (the delay each steers the
//! (classic) queue to), left unset for the discipline's RFC default: 5 ms for CoDel and
//! FQ-CoDel, 15 ms for PIE and DualPI2. `tupdate`, `alpha` and `beta` are PIE's and DualPI2's
//! (the same PI controller's knobs), each left unset for its discipline's default. The other
//! parameters belong to one discipline each and are kept, unused, under another.

use crate::config::invalid;
use crate::{format_duration_ns, ConfigError, LinkConfig};

pub(crate) mod codel;
pub(crate) mod dualpi2;
pub(crate) mod fq;
pub(crate) mod pie;

/// CoDel's and FQ-CoDel's default target (RFC 8289 section 4.4, RFC 8290 section 4.1): 5 ms.
pub const CODEL_TARGET_NS: u64 = 5_000_000;
/// PIE's default target, `QDELAY_REF` (RFC 8033 section 5): 15 ms.
pub const PIE_TARGET_NS: u64 = 15_000_000;
/// DualPI2's default target for its classic queue (RFC 9332 appendix A.1): 15 ms.
pub const DUALPI2_TARGET_NS: u64 = 15_000_000;
/// PIE's defaults (RFC 8033 section 5): `T_UPDATE` 15 ms, α 0.125 Hz, β 1.25 Hz.
pub const PIE_TUPDATE_NS: u64 = 15_000_000;
/// PIE's default α, Hz.
pub const PIE_ALPHA: f64 = 0.125;
/// PIE's default β, Hz.
pub const PIE_BETA: f64 = 1.25;
/// DualPI2's defaults: `Tupdate` 16 ms, α 0.16 Hz, β 3.2 Hz, those of Linux's `sch_dualpi2`
/// (RFC 9332's reference implementation; appendix A.1 derives α and β from `Tupdate` and a
/// worst-case round trip of about 100 ms).
pub const DUALPI2_TUPDATE_NS: u64 = 16_000_000;
/// DualPI2's default α, Hz.
pub const DUALPI2_ALPHA: f64 = 0.16;
/// DualPI2's default β, Hz.
pub const DUALPI2_BETA: f64 = 3.2;

/// Which discipline serves the bottleneck (`aqm=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Discipline {
    /// Tail drop at the frame and byte limits (`aqm=tail`), NetEm's queue; the default.
    #[default]
    Tail,
    /// CoDel, RFC 8289 (`aqm=codel`): drops at dequeue once the sojourn time stayed above the
    /// target for an interval, then at `interval / √count` spacing.
    Codel,
    /// FQ-CoDel, RFC 8290 (`aqm=fq_codel`): flows hashed on their 5-tuple into queues served
    /// by deficit round robin (new flows first), CoDel on each; on overflow the head of the
    /// queue with the most bytes is dropped.
    FqCodel,
    /// PIE, RFC 8033 (`aqm=pie`): drops at enqueue with a probability steered every `tupdate`
    /// by the queue delay's distance from the target and its trend.
    Pie,
    /// DualPI2, RFC 9332 (`aqm=dualpi2`): ECT(1) and CE frames in an L4S queue marked at a
    /// shallow step and by the coupled probability `k·p'`, the rest in a classic queue
    /// dropped (or, with ECN, marked) with `p'²`, `p'` from a PI controller on the queue
    /// delay; a time-shifted FIFO between the two.
    DualPi2,
}

impl Discipline {
    /// Every discipline's name, as `aqm=` takes it.
    pub const NAMES: [&'static str; 5] = ["tail", "codel", "fq_codel", "pie", "dualpi2"];

    /// Its name, as `aqm=` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Discipline::Tail => "tail",
            Discipline::Codel => "codel",
            Discipline::FqCodel => "fq_codel",
            Discipline::Pie => "pie",
            Discipline::DualPi2 => "dualpi2",
        }
    }

    /// The discipline named `name` (one of [`Discipline::NAMES`]).
    pub fn from_name(name: &str) -> Option<Discipline> {
        match name {
            "tail" => Some(Discipline::Tail),
            "codel" => Some(Discipline::Codel),
            "fq_codel" => Some(Discipline::FqCodel),
            "pie" => Some(Discipline::Pie),
            "dualpi2" => Some(Discipline::DualPi2),
            _ => None,
        }
    }
}

/// The bottleneck's discipline and its parameters. [`Aqm::default`] is tail drop with the
/// RFCs' defaults for the others' parameters, ECN off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aqm {
    /// The discipline (`aqm=`).
    pub discipline: Discipline,
    /// The queue delay to steer to, in ns (`target=`), CoDel's, FQ-CoDel's, PIE's and
    /// DualPI2's (its classic queue's); `None` for the discipline's default
    /// ([`CODEL_TARGET_NS`], [`PIE_TARGET_NS`], [`DUALPI2_TARGET_NS`]). 1 µs..=10 s, and
    /// under CoDel's interval.
    pub target_ns: Option<u64>,
    /// CoDel's and FQ-CoDel's interval in ns (`interval=`), default 100 ms. 1 µs..=100 s.
    pub interval_ns: u64,
    /// FQ-CoDel's number of flow queues (`flows=`), default 1024. 1..=65536.
    pub flows: u32,
    /// FQ-CoDel's quantum in bytes (`quantum=`): what a queue may send per round, default 1514
    /// (one Ethernet MTU). 64..=65536.
    pub quantum: u32,
    /// PIE's and DualPI2's update period in ns (`tupdate=`); `None` for the discipline's
    /// default, 15 ms for PIE, 16 ms for DualPI2 ([`Aqm::tupdate`]). 1 ms..=1 s.
    pub tupdate_ns: Option<u64>,
    /// PIE's and DualPI2's α in Hz (`alpha=`): the weight of the distance from the target;
    /// `None` for the default, 0.125 for PIE, 0.16 for DualPI2 ([`Aqm::alpha`]). 0..=32.
    pub alpha: Option<f64>,
    /// PIE's and DualPI2's β in Hz (`beta=`): the weight of the delay's trend; `None` for the
    /// default, 1.25 for PIE, 3.2 for DualPI2 ([`Aqm::beta`]). 0..=32.
    pub beta: Option<f64>,
    /// PIE's burst allowance in ns (`max_burst=`), default 150 ms. 0..=10 s.
    pub max_burst_ns: u64,
    /// DualPI2's coupling factor `k` (`coupling=`): the L4S queue's coupled marking
    /// probability is `k·p'` while the classic queue's is `p'²`; default 2 (RFC 9332).
    /// 0.5..=16.
    pub coupling: f64,
    /// DualPI2's L4S step threshold in ns (`step=`): an L4S frame that waited this long is
    /// marked; default 1 ms. 1 µs..=1 s.
    pub step_ns: u64,
    /// Mark ECN-capable frames CE instead of dropping them (`ecn`); frames that are not
    /// ECN-capable are still dropped. Overflow of the limits always drops.
    pub ecn: bool,
}

impl Default for Aqm {
    fn default() -> Self {
        Aqm {
            discipline: Discipline::Tail,
            target_ns: None,
            interval_ns: 100_000_000,
            flows: 1024,
            quantum: 1514,
            tupdate_ns: None,
            alpha: None,
            beta: None,
            max_burst_ns: 150_000_000,
            coupling: 2.0,
            step_ns: 1_000_000,
            ecn: false,
        }
    }
}

impl Aqm {
    /// Whether a discipline other than tail drop serves the bottleneck.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.discipline != Discipline::Tail
    }

    /// The target in force: the one given, or the discipline's default.
    pub fn target(&self) -> u64 {
        self.target_ns.unwrap_or(match self.discipline {
            Discipline::Pie => PIE_TARGET_NS,
            Discipline::DualPi2 => DUALPI2_TARGET_NS,
            _ => CODEL_TARGET_NS,
        })
    }

    /// The update period in force (PIE's, DualPI2's), ns: the one given, or the default.
    pub fn tupdate(&self) -> u64 {
        self.tupdate_ns.unwrap_or(match self.discipline {
            Discipline::DualPi2 => DUALPI2_TUPDATE_NS,
            _ => PIE_TUPDATE_NS,
        })
    }

    /// α in force (PIE's, DualPI2's), Hz: the one given, or the default.
    pub fn alpha(&self) -> f64 {
        self.alpha.unwrap_or(match self.discipline {
            Discipline::DualPi2 => DUALPI2_ALPHA,
            _ => PIE_ALPHA,
        })
    }

    /// β in force (PIE's, DualPI2's), Hz: the one given, or the default.
    pub fn beta(&self) -> f64 {
        self.beta.unwrap_or(match self.discipline {
            Discipline::DualPi2 => DUALPI2_BETA,
            _ => PIE_BETA,
        })
    }

    /// Checks the parameters against the rest of `config`; the error names the field
    /// (`aqm`, `aqm_target`, `aqm_interval`, `aqm_flows`, `aqm_quantum`, `aqm_tupdate`,
    /// `aqm_alpha`, `aqm_beta`, `aqm_max_burst`, `aqm_coupling`, `aqm_step`, `ecn`).
    pub(crate) fn check(&self, config: &LinkConfig) -> Result<(), (&'static str, ConfigError)> {
        const US: u64 = 1_000;
        const MS: u64 = 1_000_000;
        const S: u64 = 1_000_000_000;
        let within =
            |field: &'static str, value: u64, low: u64, high: u64, show: fn(u64) -> String| {
                if (low..=high).contains(&value) {
                    Ok(())
                } else {
                    let reason =
                        format!("{} is outside {}..={}", show(value), show(low), show(high));
                    Err((field, invalid(field, &reason)))
                }
            };
        let count = |n: u64| n.to_string();
        let bytes = |n: u64| format!("{n} bytes");
        if let Some(target) = self.target_ns {
            within("aqm_target", target, US, 10 * S, format_duration_ns)?;
        }
        within(
            "aqm_interval",
            self.interval_ns,
            US,
            100 * S,
            format_duration_ns,
        )?;
        within("aqm_flows", u64::from(self.flows), 1, 65_536, count)?;
        within("aqm_quantum", u64::from(self.quantum), 64, 65_536, bytes)?;
        within("aqm_tupdate", self.tupdate(), MS, S, format_duration_ns)?;
        within("aqm_step", self.step_ns, US, S, format_duration_ns)?;
        within(
            "aqm_max_burst",
            self.max_burst_ns,
            0,
            10 * S,
            format_duration_ns,
        )?;
        for (field, value) in [("aqm_alpha", self.alpha()), ("aqm_beta", self.beta())] {
            if !(0.0..=32.0).contains(&value) {
                return Err((
                    field,
                    invalid(field, &format!("{value} is outside 0..=32 (Hz)")),
                ));
            }
        }
        if !(0.5..=16.0).contains(&self.coupling) {
            let reason = format!("{} is outside 0.5..=16", self.coupling);
            return Err(("aqm_coupling", invalid("aqm_coupling", &reason)));
        }
        match self.discipline {
            Discipline::Tail if self.ecn => Err((
                "ecn",
                invalid(
                    "ecn",
                    "needs an aqm of codel, fq_codel, pie or dualpi2 (tail drop never marks)",
                ),
            )),
            Discipline::Tail => Ok(()),
            Discipline::Codel | Discipline::FqCodel if self.target() >= self.interval_ns => Err((
                "aqm_target",
                invalid("aqm_target", "must be below CoDel's interval"),
            )),
            _ => {
                let scheduled = config
                    .schedule
                    .as_ref()
                    .is_some_and(|s| s.entries().iter().any(|entry| entry.rate_bps.is_some()));
                if config.rate_bps.is_none() && !scheduled && config.trace.is_none() {
                    return Err((
                        "aqm",
                        invalid(
                            "aqm",
                            "needs rate_bps or a trace: without a bottleneck no queue builds for \
                             it to manage",
                        ),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// DualPI2's sojourn times, queue by queue (ns), of the frames sent from each; the link's
/// [`crate::Pipe::sojourn`] has them all together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DualSojourn {
    /// The L4S queue's (ECT(1) and CE frames).
    pub l4s: latlab_stats::LatencyHistogram,
    /// The classic queue's (the rest).
    pub classic: latlab_stats::LatencyHistogram,
}

impl DualSojourn {
    /// Adds `other`'s times to these (the pipes of a [`crate::FlowPipes`] together).
    pub fn merge(&mut self, other: &DualSojourn) {
        // Both are histograms of the same precision ([`LatencyHistogram::new`]), which merge.
        let _ = self.l4s.merge(&other.l4s);
        let _ = self.classic.merge(&other.classic);
    }
}

/// A frame waiting at the bottleneck: where its bytes are and what the discipline needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// When it joined the bottleneck queue.
    pub enqueue_ns: u64,
    /// Arrival order in the pipe (kept for the delay queue's ties).
    pub seq: u64,
    /// Its buffer in the pipe's pool.
    pub buffer: usize,
    /// Its length in bytes.
    pub len: u32,
    /// Its flow queue (FQ-CoDel), its queue under DualPI2 ([`dualpi2::L4S`] or
    /// [`dualpi2::CLASSIC`]); 0 otherwise.
    pub queue: u32,
    /// ECN-capable, read once at enqueue when ECN is on.
    pub ect: bool,
    /// The discipline chose to mark it CE rather than drop it.
    pub mark: bool,
}

/// Why a discipline took a frame out of its queue without sending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discard {
    /// The discipline's drop (CoDel at dequeue, PIE at enqueue).
    Aqm,
    /// FQ-CoDel's overflow: the head of the fattest queue, to make room.
    Overflow,
}

/// A discipline's state and queue.
#[derive(Debug)]
pub(crate) enum Queue {
    /// One FIFO with one CoDel.
    Codel(codel::CodelFifo),
    /// Flow queues with CoDel each.
    FqCodel(Box<fq::FqCodel>),
    /// One FIFO with PIE.
    Pie(pie::PieFifo),
    /// DualPI2's L4S and classic queues.
    DualPi2(Box<dualpi2::DualPi2>),
    /// One FIFO and no discipline: tail drop at the limits, for a trace-driven link
    /// (`aqm=tail trace=FILE`), whose frames wait here for a delivery opportunity.
    Fifo(std::collections::VecDeque<Held>),
}

impl Queue {
    /// The queue of `aqm` (an active discipline); `seed` perturbs FQ-CoDel's hash and feeds
    /// PIE's draws.
    pub(crate) fn new(aqm: &Aqm, seed: u64) -> Queue {
        match aqm.discipline {
            Discipline::FqCodel => Queue::FqCodel(Box::new(fq::FqCodel::new(aqm, seed))),
            Discipline::Pie => Queue::Pie(pie::PieFifo::new(aqm, seed)),
            Discipline::DualPi2 => Queue::DualPi2(Box::new(dualpi2::DualPi2::new(aqm, seed))),
            Discipline::Codel => Queue::Codel(codel::CodelFifo::new(aqm)),
            Discipline::Tail => Queue::Fifo(std::collections::VecDeque::new()),
        }
    }

    /// Whether this queue serves `aqm`'s discipline.
    pub(crate) fn serves(&self, aqm: &Aqm) -> bool {
        matches!(
            (self, aqm.discipline),
            (Queue::Codel(_), Discipline::Codel)
                | (Queue::FqCodel(_), Discipline::FqCodel)
                | (Queue::Pie(_), Discipline::Pie)
                | (Queue::DualPi2(_), Discipline::DualPi2)
                | (Queue::Fifo(_), Discipline::Tail)
        )
    }

    /// New parameters for the same discipline; the state carries over.
    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        match self {
            Queue::Codel(q) => q.set_params(aqm),
            Queue::FqCodel(q) => q.set_params(aqm),
            Queue::Pie(q) => q.set_params(aqm),
            Queue::DualPi2(q) => q.set_params(aqm),
            Queue::Fifo(_) => {}
        }
    }

    /// Which flow queue `frame` goes to (FQ-CoDel), or which of DualPI2's queues; 0
    /// otherwise.
    #[inline]
    pub(crate) fn classify(&self, frame: &[u8]) -> u32 {
        match self {
            Queue::FqCodel(q) => q.classify(frame),
            Queue::DualPi2(_) => dualpi2::classify(frame),
            _ => 0,
        }
    }

    /// Whether this is DualPI2's pair of queues ([`Held::queue`] says which).
    #[inline]
    pub(crate) fn is_dual(&self) -> bool {
        matches!(self, Queue::DualPi2(_))
    }

    /// Queues `held` at `now`, or (PIE) drops it, handing it back with the cause; a frame
    /// PIE chose to mark comes back in the queue with [`Held::mark`] set.
    #[inline]
    pub(crate) fn enqueue(&mut self, now: u64, held: Held) -> Result<(), (Held, Discard)> {
        match self {
            Queue::Codel(q) => {
                q.push(held);
                Ok(())
            }
            Queue::FqCodel(q) => {
                q.enqueue(held);
                Ok(())
            }
            Queue::Pie(q) => q.enqueue(now, held).map_err(|held| (held, Discard::Aqm)),
            Queue::DualPi2(q) => {
                q.enqueue(now, held);
                Ok(())
            }
            Queue::Fifo(q) => {
                q.push_back(held);
                Ok(())
            }
        }
    }

    /// The next frame to send at `now`, the discipline's drops on the way pushed on
    /// `discarded`.
    #[inline]
    pub(crate) fn dequeue(
        &mut self,
        now: u64,
        discarded: &mut Vec<(Held, Discard)>,
    ) -> Option<Held> {
        match self {
            Queue::Codel(q) => q.dequeue(now, discarded),
            Queue::FqCodel(q) => q.dequeue(now, discarded),
            Queue::Pie(q) => q.dequeue(now),
            Queue::DualPi2(q) => q.dequeue(now, discarded),
            Queue::Fifo(q) => q.pop_front(),
        }
    }

    /// FQ-CoDel's overflow: takes the head of the queue holding the most bytes, to make room
    /// for an arrival. `None` from the other disciplines (they drop the arrival) or if empty.
    pub(crate) fn drop_from_fattest(&mut self) -> Option<Held> {
        match self {
            Queue::FqCodel(q) => q.drop_from_fattest(),
            _ => None,
        }
    }

    /// Every frame held, in no particular order, leaving the queue empty (a discipline
    /// replaced while frames wait).
    pub(crate) fn drain(&mut self) -> Vec<Held> {
        match self {
            Queue::Codel(q) => q.drain(),
            Queue::FqCodel(q) => q.drain(),
            Queue::Pie(q) => q.drain(),
            Queue::DualPi2(q) => q.drain(),
            Queue::Fifo(q) => q.drain(..).collect(),
        }
    }

    /// Frames waiting.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Queue::Codel(q) => q.len(),
            Queue::FqCodel(q) => q.len(),
            Queue::Pie(q) => q.len(),
            Queue::DualPi2(q) => q.len(),
            Queue::Fifo(q) => q.len(),
        }
    }

    /// Bytes of the queue's own slots (frames' entries and, for FQ-CoDel, its flow queues).
    pub(crate) fn held_bytes(&self) -> usize {
        let entry = std::mem::size_of::<Held>();
        match self {
            Queue::Codel(q) => q.capacity() * entry,
            Queue::FqCodel(q) => q.held_bytes(),
            Queue::Pie(q) => q.capacity() * entry,
            Queue::DualPi2(q) => q.capacity() * entry,
            Queue::Fifo(q) => q.capacity() * entry,
        }
    }

    /// PIE's drop probability now (for tests and the API), DualPI2's base probability `p'`;
    /// `None` for other disciplines.
    pub(crate) fn drop_probability(&self) -> Option<f64> {
        match self {
            Queue::Pie(q) => Some(q.drop_probability()),
            Queue::DualPi2(q) => Some(q.base_probability()),
            _ => None,
        }
    }
}
