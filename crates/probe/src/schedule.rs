//! Open-loop send schedules.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Poisson};

use crate::model::{Message, ModelError, TrafficModel};
use crate::{Error, MAX_RATE_PPS};

/// Where a schedule whose messages differ takes their sizes and gaps from.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Drawn from a model, one message after another, from the schedule's seed.
    Model(TrafficModel),
    /// Replayed from a list once (a stream of a capture): message `i` is due `gap_ns` after
    /// message `i − 1`; the first is due at the start and its gap is not used.
    Trace(Arc<[Message]>),
}

impl Traffic {
    /// The same traffic at `speed` times its pace: the same sizes, every gap divided by
    /// `speed`. Refused unless `speed` is a finite number above 0.
    pub fn paced(&self, speed: f64) -> Result<Traffic, ModelError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(ModelError::BadSpeed(speed.to_string()));
        }
        Ok(match self {
            Traffic::Model(model) => Traffic::Model(model.paced(speed)?),
            Traffic::Trace(messages) => Traffic::Trace(
                messages
                    .iter()
                    .map(|m| Message {
                        size: m.size,
                        gap_ns: (m.gap_ns as f64 / speed).round() as u64,
                    })
                    .collect(),
            ),
        })
    }

    /// The largest message.
    pub fn max_size(&self) -> usize {
        match self {
            Traffic::Model(model) => model.max_size(),
            Traffic::Trace(messages) => messages.iter().map(|m| m.size).max().unwrap_or(0),
        }
    }

    /// An upper bound on the messages due in `duration_ns` from the start: a trace's
    /// messages before the end, exactly; for a model, three times the expected count
    /// (duration over mean gap) plus twenty times its square root plus 64, far above what
    /// the models' bursts of short gaps reach (the sender stops at the bound, so it must
    /// never be reached; it only sizes the meter's window of valid sequence numbers).
    pub fn max_messages(&self, duration_ns: u64) -> u64 {
        match self {
            Traffic::Model(model) => {
                let expected = duration_ns as f64 / model.mean_gap_ns();
                (3.0 * expected + 20.0 * expected.sqrt() + 64.0).ceil() as u64
            }
            Traffic::Trace(messages) => {
                let mut elapsed = 0u64;
                let mut n = 0u64;
                for (i, m) in messages.iter().enumerate() {
                    if i > 0 {
                        elapsed = elapsed.saturating_add(m.gap_ns);
                    }
                    if elapsed >= duration_ns {
                        break;
                    }
                    n += 1;
                }
                n
            }
        }
    }

    /// Messages per second on average: the model's, or the trace's count over its span.
    pub fn rate_pps(&self) -> f64 {
        match self {
            Traffic::Model(model) => model.rate_pps(),
            Traffic::Trace(messages) => {
                let span: u64 = messages.iter().skip(1).map(|m| m.gap_ns).sum();
                if messages.len() < 2 || span == 0 {
                    1.0
                } else {
                    (messages.len() - 1) as f64 * 1e9 / span as f64
                }
            }
        }
    }
}

/// The state of a schedule that follows a [`Traffic`].
#[derive(Debug, Clone)]
struct Messages {
    traffic: Traffic,
    rng: SmallRng,
    /// Index of the next message of a trace.
    index: usize,
    /// The size of the next message, `None` once a trace is over.
    next_size: Option<usize>,
}

impl Messages {
    /// Moves to the next message; returns its gap, or `None` when a trace is over.
    fn step(&mut self) -> Option<u64> {
        let next = match &self.traffic {
            Traffic::Model(model) => Some(model.sample(&mut self.rng)),
            Traffic::Trace(messages) => {
                self.index += 1;
                messages.get(self.index).copied()
            }
        };
        self.next_size = next.map(|m| m.size);
        next.map(|m| m.gap_ns)
    }
}

/// How send times are spaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Exactly 1/rate apart.
    Constant,
    /// Exponentially distributed gaps with mean 1/rate (a Poisson process), seeded.
    Poisson,
}

impl std::str::FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names = Pattern::ALL.map(Pattern::name);
                format!("unknown pattern {s:?}: expected {}", names.join(" or "))
            })
    }
}

impl Pattern {
    /// Every pattern, in the order the command line lists them (its `--pattern` values).
    pub const ALL: [Pattern; 2] = [Pattern::Constant, Pattern::Poisson];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Constant => "constant",
            Pattern::Poisson => "poisson",
        }
    }
}

/// The send times of one run: `next_due` is when the next probe is due, `advance` moves on.
///
/// Times are computed from the start, not added up gap by gap in integers, so a constant
/// schedule does not drift however long it runs.
#[derive(Debug, Clone)]
pub struct Schedule {
    start_ns: u64,
    period_ns: f64,
    /// Offset of the next due time from the start, in ns (f64: exact to 1 ns for ~100 days).
    offset_ns: f64,
    count: u64,
    poisson: Option<(SmallRng, Exp<f64>)>,
    messages: Option<Messages>,
}

impl Schedule {
    /// A schedule whose first probe is due at `start_ns`; the rate is above 0 and at most
    /// [`MAX_RATE_PPS`].
    pub fn new(pattern: Pattern, rate_pps: f64, start_ns: u64, seed: u64) -> Result<Self, Error> {
        if !(rate_pps.is_finite() && rate_pps > 0.0) {
            return Err(Error::BadRate(rate_pps));
        }
        if rate_pps > MAX_RATE_PPS {
            return Err(Error::RateTooHigh(rate_pps));
        }
        let poisson = match pattern {
            Pattern::Constant => None,
            Pattern::Poisson => {
                // The rate was checked to be finite and above 0, which is all Exp needs.
                let exp = Exp::new(rate_pps / 1e9).map_err(|_| Error::BadRate(rate_pps))?;
                Some((SmallRng::seed_from_u64(seed), exp))
            }
        };
        Ok(Schedule {
            start_ns,
            period_ns: 1e9 / rate_pps,
            offset_ns: 0.0,
            count: 0,
            poisson,
            messages: None,
        })
    }

    /// A schedule that follows `traffic`: each message is due its gap after the one before
    /// (from the start, not from when the one before was sent), the first at `start_ns`.
    /// A model's messages are drawn from `seed`. A trace with no message is refused.
    pub fn from_traffic(traffic: Traffic, start_ns: u64, seed: u64) -> Result<Self, Error> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let first = match &traffic {
            Traffic::Model(model) => model.sample(&mut rng),
            Traffic::Trace(messages) => *messages.first().ok_or(Error::EmptyTrace)?,
        };
        Ok(Schedule {
            start_ns,
            period_ns: 1e9 / traffic.rate_pps(),
            offset_ns: 0.0,
            count: 0,
            poisson: None,
            messages: Some(Messages {
                traffic,
                rng,
                index: 0,
                next_size: Some(first.size),
            }),
        })
    }

    /// The payload size of the next message when the schedule follows a [`Traffic`]; `None`
    /// for a rate schedule (every probe has the configured size).
    pub fn next_size(&self) -> Option<usize> {
        self.messages.as_ref().and_then(|m| m.next_size)
    }

    /// When the next probe is due; `u64::MAX` once a trace is over.
    pub fn next_due(&self) -> u64 {
        if matches!(&self.messages, Some(m) if m.next_size.is_none()) {
            return u64::MAX;
        }
        self.start_ns + self.offset_ns.round() as u64
    }

    /// How many due times were consumed.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Consumes the next due time and returns it.
    pub fn advance(&mut self) -> u64 {
        let due = self.next_due();
        self.count += 1;
        if let Some(messages) = &mut self.messages {
            if let Some(gap) = messages.step() {
                self.offset_ns += gap as f64;
            }
            return due;
        }
        self.offset_ns = match &mut self.poisson {
            None => self.count as f64 * self.period_ns,
            Some((rng, exp)) => self.offset_ns + exp.sample(rng),
        };
        due
    }

    /// Consumes every due time before `end_ns` at once and returns how many there were, in
    /// constant time however many are owed; afterwards [`next_due`](Schedule::next_due) is
    /// at or after `end_ns`.
    ///
    /// A constant schedule counts exactly the due times `advance` would have given. A Poisson
    /// schedule draws the count from the Poisson distribution of the arrivals in the rest of
    /// the interval (the process is memoryless, so this is the law `advance` follows), from
    /// the same seeded generator; the due times themselves are never drawn. A schedule that
    /// follows a [`Traffic`] steps through its messages (their count is bounded by
    /// [`Traffic::max_messages`]).
    pub fn skip_until(&mut self, end_ns: u64) -> u64 {
        let due = self.next_due();
        if due >= end_ns {
            return 0;
        }
        if self.messages.is_some() {
            let mut skipped = 0;
            while self.next_due() < end_ns {
                self.advance();
                skipped += 1;
            }
            return skipped;
        }
        // Due times before `end_ns` are those whose offset rounds to less than `span`.
        let span = end_ns - self.start_ns;
        match &mut self.poisson {
            None => {
                // The first k with round(k × period) ≥ span: an estimate, then corrected by a
                // step or two against the very expression `advance` uses.
                let period = self.period_ns;
                let before = |k: u64| ((k as f64 * period).round() as u64) < span;
                let mut k = ((span as f64 - 0.5) / period).ceil().max(0.0) as u64;
                k = k.max(self.count);
                while k > self.count && !before(k - 1) {
                    k -= 1;
                }
                while before(k) {
                    k += 1;
                }
                let skipped = k - self.count;
                self.count = k;
                self.offset_ns = k as f64 * period;
                skipped
            }
            Some((rng, _)) => {
                // The next due time is known; after it, arrivals in the rest of the interval.
                let lambda =
                    ((end_ns - due) as f64 / self.period_ns).min(Poisson::<f64>::MAX_LAMBDA);
                let more = match Poisson::new(lambda) {
                    Ok(poisson) => poisson.sample(rng) as u64,
                    // Only a λ of 0 (the next due time is the last nanosecond) gets here.
                    Err(_) => 0,
                };
                self.count += 1 + more;
                self.offset_ns = span as f64;
                1 + more
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_rate_is_exactly_spaced_and_does_not_drift() {
        let mut s = Schedule::new(Pattern::Constant, 3.0, 100, 0).unwrap();
        let dues: Vec<u64> = (0..4).map(|_| s.advance()).collect();
        assert_eq!(dues, vec![100, 333_333_433, 666_666_767, 1_000_000_100]);
        let mut s = Schedule::new(Pattern::Constant, 1e6, 0, 0).unwrap();
        for _ in 0..10_000_000 {
            s.advance();
        }
        assert_eq!(s.next_due(), 10_000_000_000);
    }

    #[test]
    fn poisson_gaps_have_the_mean_and_spread_of_an_exponential() {
        let rate = 100_000.0;
        let mut s = Schedule::new(Pattern::Poisson, rate, 0, 42).unwrap();
        let n = 200_000;
        let mut prev = s.advance();
        let mut gaps = Vec::with_capacity(n);
        for _ in 0..n {
            let d = s.advance();
            gaps.push((d - prev) as f64);
            prev = d;
        }
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        // Mean 10 µs within 1%; an exponential's std dev equals its mean.
        assert!((mean - 10_000.0).abs() < 100.0, "mean {mean}");
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.02,
            "cv {}",
            var.sqrt() / mean
        );
    }

    #[test]
    fn poisson_is_reproducible_from_its_seed() {
        let run = |seed| {
            let mut s = Schedule::new(Pattern::Poisson, 1000.0, 0, seed).unwrap();
            (0..100).map(|_| s.advance()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn bad_rates_are_refused() {
        for rate in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            assert!(Schedule::new(Pattern::Constant, rate, 0, 0).is_err());
        }
    }

    #[test]
    fn skipping_counts_exactly_the_due_times_advance_would_give() {
        for (rate, start, end) in [
            (3.0, 100, 1_000_000_100),
            (3.0, 100, 1_000_000_101),
            (7.0, 0, 5_000_000_000),
            (1e6 / 3.0, 17, 20_000_017),
            (1e9, 5, 1_000_005),
            (1000.0, 0, 1),
        ] {
            let mut stepped = Schedule::new(Pattern::Constant, rate, start, 0).unwrap();
            let mut skipped = stepped.clone();
            stepped.advance();
            skipped.advance();
            let mut n = 0;
            while stepped.next_due() < end {
                stepped.advance();
                n += 1;
            }
            assert_eq!(skipped.skip_until(end), n, "rate {rate} until {end}");
            assert_eq!(skipped.next_due(), stepped.next_due());
            assert_eq!(skipped.skip_until(end), 0, "nothing is owed twice");
        }
    }

    #[test]
    fn skipping_a_poisson_schedule_draws_a_count_with_the_right_mean() {
        // 1000 pps over the 1 s after the first due time: 1 + Poisson(1000) each.
        let counts: Vec<f64> = (0..200)
            .map(|seed| {
                let mut s = Schedule::new(Pattern::Poisson, 1000.0, 0, seed).unwrap();
                let first = s.next_due();
                let n = s.skip_until(first + 1_000_000_000) as f64;
                assert!(s.next_due() >= first + 1_000_000_000);
                n
            })
            .collect();
        let mean = counts.iter().sum::<f64>() / counts.len() as f64;
        // The mean of 200 draws of sd √1000 ≈ 32 is within 10 of 1001.
        assert!((mean - 1001.0).abs() < 10.0, "mean {mean}");
    }

    #[test]
    fn a_rate_above_one_probe_per_nanosecond_is_refused() {
        assert!(Schedule::new(Pattern::Constant, 1e9, 0, 0).is_ok());
        for rate in [1.5e9, 1e12, 1e30] {
            assert_eq!(
                Schedule::new(Pattern::Poisson, rate, 0, 0).unwrap_err(),
                Error::RateTooHigh(rate)
            );
        }
    }

    #[test]
    fn unknown_patterns_are_named_in_the_error() {
        let err = "bursty".parse::<Pattern>().unwrap_err();
        assert!(err.contains("bursty"));
    }

    fn trace(messages: &[(usize, u64)]) -> Traffic {
        Traffic::Trace(
            messages
                .iter()
                .map(|&(size, gap_ns)| Message { size, gap_ns })
                .collect(),
        )
    }

    #[test]
    fn a_trace_is_replayed_once_with_its_sizes_and_gaps() {
        let t = trace(&[(100, 999), (60, 20_000), (1200, 0), (80, 5_000)]);
        let mut s = Schedule::from_traffic(t, 1_000, 0).unwrap();
        let mut got = Vec::new();
        while s.next_due() != u64::MAX {
            let size = s.next_size().unwrap();
            got.push((s.advance(), size));
        }
        assert_eq!(
            got,
            vec![(1_000, 100), (21_000, 60), (21_000, 1200), (26_000, 80)]
        );
        assert_eq!(s.next_size(), None);
        assert_eq!(
            s.skip_until(u64::MAX - 1),
            0,
            "nothing is due after the trace"
        );
    }

    #[test]
    fn a_model_schedule_is_due_at_the_sum_of_the_models_gaps() {
        let model: TrafficModel = "counter-strike".parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(9);
        let drawn: Vec<Message> = (0..1000).map(|_| model.sample(&mut rng)).collect();
        let mut s = Schedule::from_traffic(Traffic::Model(model), 500, 9).unwrap();
        let mut due = 500;
        for (i, m) in drawn.iter().enumerate() {
            if i > 0 {
                due += m.gap_ns;
            }
            assert_eq!(s.next_size(), Some(m.size));
            assert_eq!(s.advance(), due, "message {i}");
        }
    }

    #[test]
    fn paced_traffic_keeps_its_sizes_and_divides_its_gaps() {
        let t = trace(&[(100, 999), (60, 20_000), (1200, 0), (80, 5_000)]);
        assert_eq!(
            t.paced(4.0).unwrap(),
            trace(&[(100, 250), (60, 5_000), (1200, 0), (80, 1_250)])
        );
        assert_eq!(t.paced(4.0).unwrap().rate_pps(), 4.0 * t.rate_pps());

        let model: TrafficModel = "wow".parse().unwrap();
        let fast = Traffic::Model(model.clone()).paced(2.5).unwrap();
        let Traffic::Model(fast_model) = &fast else {
            panic!("a model stays a model")
        };
        assert_eq!(fast_model.to_string(), "wow*2.5");
        assert_eq!(
            fast_model.to_string().parse::<TrafficModel>().unwrap(),
            *fast_model
        );
        assert!((fast.rate_pps() - 2.5 * model.rate_pps()).abs() < 1e-9);
        let (mut a, mut b) = (SmallRng::seed_from_u64(3), SmallRng::seed_from_u64(3));
        for _ in 0..1000 {
            let (slow, quick) = (model.sample(&mut a), fast_model.sample(&mut b));
            assert_eq!(quick.size, slow.size);
            assert!(
                quick
                    .gap_ns
                    .abs_diff((slow.gap_ns as f64 / 2.5).round() as u64)
                    <= 1
            );
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                t.paced(bad).unwrap_err(),
                ModelError::BadSpeed(bad.to_string())
            );
        }
        assert!(matches!(
            "wow*fast".parse::<TrafficModel>(),
            Err(ModelError::BadSpeed(_))
        ));
    }

    #[test]
    fn skipping_a_traffic_schedule_counts_its_messages() {
        let t = trace(&[(100, 0), (100, 10), (100, 10), (100, 10), (100, 10)]);
        let mut s = Schedule::from_traffic(t, 0, 0).unwrap();
        s.advance();
        assert_eq!(s.skip_until(25), 2, "due at 10 and 20");
        assert_eq!(s.next_due(), 30);
        assert!(Schedule::from_traffic(trace(&[]), 0, 0).is_err());
    }
}
