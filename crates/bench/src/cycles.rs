//! Where a forwarder's cycles go: TSC cycles per batch split into the steps of the paper's
//! Table II (receiving, processing, transmitting, buffer management), the timer's own cost
//! subtracted, reported per packet and checked against the whole run's cycles per packet
//! (cycles per second ÷ packets per second).
//!
//! The engine reads the counter around each step and hands the raw differences here with the
//! number of counter reads each difference contains ([`Interval`]); this module only adds,
//! subtracts and divides. Reading the counter costs cycles of its own; [`Calibration`] measures
//! that cost once at start (the engine times loops of back-to-back reads and keeps the
//! fastest), and every interval loses one read's cost per read it contains. A step whose
//! corrected cycles would be negative counts as 0.
//!
//! ```
//! use latlab_bench::cycles::{Calibration, CycleAccount, Interval, Step};
//! let mut account = CycleAccount::new();
//! // One batch of 4 frames: 400 cycles receiving, containing 6 counter reads.
//! account.add(Step::Rx, Interval { cycles: 400, reads: 6 });
//! account.count_forwarded(4);
//! let calibration = Calibration::from_loop_samples(&[25.0, 27.0, 26.0]).unwrap();
//! let report = account.report(&calibration, 500, 2.4e9);
//! assert_eq!(report.per_packet.rx, (400.0 - 6.0 * 25.0) / 4.0);
//! ```

use serde::{Deserialize, Serialize};

/// A step of forwarding one batch, as the paper's Table II splits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Taking frames from the receive ring (descriptors, stamps, the system call if any).
    Rx,
    /// Deciding what to do with each frame (the forwarder's own logic).
    Processing,
    /// Copying frames into the far side's transmit ring and kicking it.
    Tx,
    /// Giving receive buffers back to the kernel (ring slots returned, fill ring refilled).
    Buffers,
}

impl Step {
    /// Every step, in report order.
    pub const ALL: [Step; 4] = [Step::Rx, Step::Processing, Step::Tx, Step::Buffers];

    fn index(self) -> usize {
        self as usize
    }
}

/// Cycles between two counter reads, and how many counter reads happened inside them (the
/// closing read included): each read's cost is subtracted once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Raw counter difference.
    pub cycles: u64,
    /// Counter reads it contains.
    pub reads: u64,
}

/// The cost of one counter read, in cycles, measured at start.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// Cycles one read adds to an interval that contains it; ≥ 0.
    pub read_cycles: f64,
}

impl Calibration {
    /// The fastest of `samples`, each the mean cycles per read of one loop of back-to-back
    /// reads; `None` without a usable sample (empty, negative or not finite). An interruption
    /// or a slowed virtual CPU only adds cycles to a loop, so the fastest loop is the read's
    /// own cost; a median taken while the host slowed the whole calibration would overstate
    /// it and correct every interval of a full-speed run to 0.
    pub fn from_loop_samples(samples: &[f64]) -> Option<Calibration> {
        samples
            .iter()
            .copied()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .min_by(f64::total_cmp)
            .map(|read_cycles| Calibration { read_cycles })
    }

    /// `interval` without the cost of the reads it contains; never below 0.
    pub fn corrected(&self, interval: Interval) -> f64 {
        (interval.cycles as f64 - interval.reads as f64 * self.read_cycles).max(0.0)
    }
}

/// The running sums of one forwarder run.
#[derive(Clone, Debug, Default)]
pub struct CycleAccount {
    steps: [Interval; 4],
    empty_polls: Interval,
    waiting: Interval,
    overhead: Interval,
    forwarded: u64,
    received: u64,
    batches: u64,
}

impl CycleAccount {
    /// Nothing counted yet.
    pub fn new() -> CycleAccount {
        CycleAccount::default()
    }

    /// Adds `interval` to `step`.
    pub fn add(&mut self, step: Step, interval: Interval) {
        let sum = &mut self.steps[step.index()];
        sum.cycles += interval.cycles;
        sum.reads += interval.reads;
    }

    /// Adds a receive call that found no frame (not part of any packet's cost).
    pub fn add_empty_poll(&mut self, interval: Interval) {
        self.empty_polls.cycles += interval.cycles;
        self.empty_polls.reads += interval.reads;
    }

    /// Adds time spent waiting for frames or for the next poll (sleeping or in poll(2)).
    pub fn add_waiting(&mut self, interval: Interval) {
        self.waiting.cycles += interval.cycles;
        self.waiting.reads += interval.reads;
    }

    /// Adds the loop's own time between steps (its counters, the stop flag): with it, the
    /// intervals added cover the whole run.
    pub fn add_overhead(&mut self, interval: Interval) {
        self.overhead.cycles += interval.cycles;
        self.overhead.reads += interval.reads;
    }

    /// Counts one batch of `frames` received frames.
    pub fn count_batch(&mut self, frames: u64) {
        self.batches += 1;
        self.received += frames;
    }

    /// Counts `n` frames forwarded (queued on the far side).
    pub fn count_forwarded(&mut self, n: u64) {
        self.forwarded += n;
    }

    /// The figures of the run: `elapsed_cycles` is the counter's difference over the whole
    /// run (the loop from its first to its last read), `tsc_hz` the counter's frequency.
    pub fn report(
        &self,
        calibration: &Calibration,
        elapsed_cycles: u64,
        tsc_hz: f64,
    ) -> CycleReport {
        let per = |cycles: f64| {
            if self.forwarded == 0 {
                0.0
            } else {
                cycles / self.forwarded as f64
            }
        };
        let step = |s: Step| calibration.corrected(self.steps[s.index()]);
        let per_packet = StepFigures {
            rx: per(step(Step::Rx)),
            processing: per(step(Step::Processing)),
            tx: per(step(Step::Tx)),
            buffers: per(step(Step::Buffers)),
        };
        let all_reads = self.steps.iter().map(|i| i.reads).sum::<u64>()
            + self.empty_polls.reads
            + self.waiting.reads
            + self.overhead.reads;
        let timer_cycles = (all_reads as f64 * calibration.read_cycles).min(elapsed_cycles as f64);
        let steps_total = per_packet.total();
        let measured = per(elapsed_cycles as f64);
        let measured_untimed = per(elapsed_cycles as f64 - timer_cycles);
        let empty_polls = per(calibration.corrected(self.empty_polls));
        let waiting = per(calibration.corrected(self.waiting));
        let overhead = per(calibration.corrected(self.overhead));
        let ratio = |x: f64| {
            if measured_untimed > 0.0 {
                x / measured_untimed
            } else {
                0.0
            }
        };
        let seconds = elapsed_cycles as f64 / tsc_hz;
        CycleReport {
            tsc_hz,
            read_cycles: calibration.read_cycles,
            elapsed_cycles,
            forwarded: self.forwarded,
            received: self.received,
            batches: self.batches,
            mean_batch: if self.batches == 0 {
                0.0
            } else {
                self.received as f64 / self.batches as f64
            },
            packets_per_second: if seconds > 0.0 {
                self.forwarded as f64 / seconds
            } else {
                0.0
            },
            per_packet,
            steps_total,
            empty_polls,
            waiting,
            overhead,
            timer: per(timer_cycles),
            measured,
            measured_untimed,
            accounted: ratio(steps_total),
            accounted_with_idle: ratio(steps_total + empty_polls + waiting + overhead),
        }
    }
}

/// Cycles per packet of each step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// Receiving.
    pub rx: f64,
    /// Processing.
    pub processing: f64,
    /// Transmitting.
    pub tx: f64,
    /// Buffer management.
    pub buffers: f64,
}

impl StepFigures {
    /// The sum of the steps.
    pub fn total(&self) -> f64 {
        self.rx + self.processing + self.tx + self.buffers
    }
}

/// Where a run's cycles went, per forwarded packet. All `f64` figures are cycles per packet
/// unless their name says otherwise; with no packet forwarded they are 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CycleReport {
    /// The counter's frequency, Hz.
    pub tsc_hz: f64,
    /// The calibrated cost of one counter read, cycles (subtracted from every interval).
    pub read_cycles: f64,
    /// Cycles of the whole run.
    pub elapsed_cycles: u64,
    /// Frames forwarded (the divisor of every per-packet figure).
    pub forwarded: u64,
    /// Frames received.
    pub received: u64,
    /// Receive calls that returned at least one frame.
    pub batches: u64,
    /// Frames per such call.
    pub mean_batch: f64,
    /// Frames forwarded per second of the run.
    pub packets_per_second: f64,
    /// Each step, the timer's cost taken out.
    pub per_packet: StepFigures,
    /// The sum of the steps.
    pub steps_total: f64,
    /// Receive calls that found nothing.
    pub empty_polls: f64,
    /// Sleeping or waiting in poll(2).
    pub waiting: f64,
    /// The loop's own time between steps.
    pub overhead: f64,
    /// The counter reads themselves.
    pub timer: f64,
    /// Cycles per second ÷ packets per second: the whole run per packet.
    pub measured: f64,
    /// `measured` without the counter reads.
    pub measured_untimed: f64,
    /// `steps_total / measured_untimed`: how much of the run the steps account for (near 1 at
    /// saturation, when no poll comes back empty).
    pub accounted: f64,
    /// As `accounted`, with empty polls, waiting and the loop's overhead added to the steps:
    /// 1 when the intervals cover the whole run and the timer's cost was calibrated right.
    pub accounted_with_idle: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(read_cycles: f64) -> Calibration {
        Calibration { read_cycles }
    }

    #[test]
    fn the_calibration_is_the_fastest_of_the_usable_loop_samples() {
        let c = Calibration::from_loop_samples(&[30.0, 20.0, f64::NAN, 24.0, -1.0]).unwrap();
        assert_eq!(c.read_cycles, 20.0);
        // A calibration the host slowed for all but one loop still finds the read's cost.
        let c = Calibration::from_loop_samples(&[275.0, 260.0, 25.0, 280.0]).unwrap();
        assert_eq!(c.read_cycles, 25.0);
        assert_eq!(Calibration::from_loop_samples(&[]), None);
        assert_eq!(Calibration::from_loop_samples(&[f64::INFINITY]), None);
    }

    #[test]
    fn each_read_inside_an_interval_costs_one_calibrated_read_and_never_goes_below_zero() {
        let c = calibration(20.0);
        assert_eq!(
            c.corrected(Interval {
                cycles: 100,
                reads: 3
            }),
            40.0
        );
        assert_eq!(
            c.corrected(Interval {
                cycles: 30,
                reads: 3
            }),
            0.0
        );
        assert_eq!(
            c.corrected(Interval {
                cycles: 0,
                reads: 0
            }),
            0.0
        );
    }

    /// Two batches of 32 frames at known cycles per step, the reads an engine makes.
    fn two_batches() -> CycleAccount {
        let mut a = CycleAccount::new();
        for _ in 0..2 {
            a.count_batch(32);
            // Per frame: 1 read in processing, 1 in TX; receiving holds frames + 2.
            a.add(
                Step::Rx,
                Interval {
                    cycles: 32 * 100 + 34 * 10,
                    reads: 34,
                },
            );
            a.add(
                Step::Processing,
                Interval {
                    cycles: 32 * (5 + 10),
                    reads: 32,
                },
            );
            a.add(
                Step::Tx,
                Interval {
                    cycles: 32 * (200 + 10),
                    reads: 32,
                },
            );
            a.add(
                Step::Buffers,
                Interval {
                    cycles: 32 * 20 + 10,
                    reads: 1,
                },
            );
            a.count_forwarded(32);
        }
        a
    }

    #[test]
    fn per_packet_figures_are_each_steps_cycles_less_the_timer_over_packets_forwarded() {
        let a = two_batches();
        // 64 packets; elapsed = steps + reads exactly: everything accounted for.
        let reads = 2 * (34 + 32 + 32 + 1);
        let steps = 64 * (100 + 5 + 200 + 20);
        let r = a.report(&calibration(10.0), steps + reads * 10, 1e9);
        assert_eq!(
            r.per_packet,
            StepFigures {
                rx: 100.0,
                processing: 5.0,
                tx: 200.0,
                buffers: 20.0
            }
        );
        assert_eq!(r.steps_total, 325.0);
        assert_eq!(r.timer, (reads * 10) as f64 / 64.0);
        assert_eq!(r.measured, r.steps_total + r.timer);
        assert_eq!(r.measured_untimed, 325.0);
        assert_eq!(r.accounted, 1.0);
        assert_eq!((r.received, r.batches, r.mean_batch), (64, 2, 32.0));
    }

    #[test]
    fn cycles_outside_the_steps_lower_the_accounted_ratio() {
        let a = two_batches();
        let reads = 2 * (34 + 32 + 32 + 1);
        // A quarter more than the steps took went elsewhere (the loop, the stop flag).
        let elapsed = 64 * 325 * 5 / 4 + reads * 10;
        let r = a.report(&calibration(10.0), elapsed, 1e9);
        assert!((r.accounted - 0.8).abs() < 1e-12, "{}", r.accounted);
        // 64 packets over elapsed cycles at 1 GHz.
        let pps = 64.0 / (elapsed as f64 / 1e9);
        assert!((r.packets_per_second - pps).abs() < 1e-6);
    }

    #[test]
    fn empty_polls_waiting_and_overhead_are_reported_apart_and_count_only_in_the_ratio_with_idle() {
        let mut a = two_batches();
        a.add_empty_poll(Interval {
            cycles: 64 * 50 + 20,
            reads: 2,
        });
        a.add_waiting(Interval {
            cycles: 64 * 1000 + 10,
            reads: 1,
        });
        let reads = 2 * (34 + 32 + 32 + 1) + 3;
        let elapsed = 64 * (325 + 50 + 1000) + reads * 10;
        let r = a.report(&calibration(10.0), elapsed, 1e9);
        assert_eq!((r.empty_polls, r.waiting), (50.0, 1000.0));
        assert!((r.accounted - 325.0 / 1375.0).abs() < 1e-12);
        assert!((r.accounted_with_idle - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_run_that_forwarded_nothing_reports_zeros_not_infinities() {
        let mut a = CycleAccount::new();
        a.add_empty_poll(Interval {
            cycles: 1000,
            reads: 2,
        });
        let r = a.report(&calibration(10.0), 1000, 1e9);
        assert_eq!(r.forwarded, 0);
        assert_eq!(
            (r.measured, r.accounted, r.packets_per_second),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(r.per_packet.total(), 0.0);
    }
}
