//! Traffic models: the payload size and the gap before each message of a game stream.
//!
//! The eight named models are the rows of Table 1 of Harcsik et al., "Latency Evaluation of
//! Networking Mechanisms for Game Traffic" (NetGames '07), per stream of a real game:
//!
//! | name             | payload avg / min / max (B) | interarrival avg / median / min / max / 1% / 99% (ms) |
//! |------------------|-----------------------------|--------------------------------------------------------|
//! | `anarchy-online` | 98 / 8 / 1333               | 632 / 449 / 7 / 17032 / 83 / 4195                      |
//! | `wow`            | 26 / 6 / 1228               | 314 / 133 / 0 / 14855 / 0 / 3785                       |
//! | `counter-strike` | 36 / 25 / 1342              | 124 / 65 / 0 / 66354 / 34 / 575                        |
//! | `halo3-intense`  | 247 / 32 / 1264             | 36 / 33 / 0 / 1403 / 32 / 182                          |
//! | `halo3-moderate` | 270 / 32 / 280              | 67 / 66 / 32 / 716 / 64 / 69                           |
//! | `gears-of-war`   | 66 / 32 / 705               | 457 / 113 / 3 / 10155 / 14 / 8953                      |
//! | `tony-hawk`      | 90 / 32 / 576               | 308 / 163 / 0 / 4070 / 53 / 2332                       |
//! | `test-drive`     | 80 / 34 / 104               | 40 / 33 / 0 / 298 / 0 / 158                            |
//!
//! The numbers are the table's (the paper's prose rounds two of them differently: 93 B for
//! Anarchy Online and 142 B for Counter Strike; the table is what the models follow). The
//! table's packets/s column is 1000 / the interarrival average, which the models keep; its
//! bits/s column counts headers the table does not give, so it is not modelled.
//!
//! # How each model was fitted
//!
//! Each quantity is drawn by inverse transform from a quantile function `Q(u)`, `u` uniform
//! in `[0, 1)`, that passes exactly through every point the row gives, so the row's
//! percentiles are the model's by construction and only the mean is fitted:
//!
//! - **Interarrival time**: knots `(0, min)`, `(0.01, 1%)`, `(0.5, median)`, `(0.99, 99%)`,
//!   `(1, max)`. Below the median `Q` is linear between the knots. Above it, each of the two
//!   segments is a power curve `q₀ + (q₁ − q₀)·t^k` (`t` the position within the segment)
//!   with one exponent `k` shared by both. A segment's mean is `q₀ + (q₁ − q₀)/(k + 1)`, so
//!   the whole mean is `L + U/(k + 1)` and `k` follows in closed form from the row's
//!   average. Every row needs `k > 1` (its average is below that of straight lines: game
//!   traffic is a steady beat with a long tail), so the tail stays near the median and rises
//!   late, and `Q` is flat (derivative 0) just right of the median and of the 99% knot.
//! - **Payload size**: only min, max and average are known: one power curve from min to max,
//!   `min + (max − min)·u^k` when the average is below the midpoint, and its mirror
//!   `max − (max − min)·(1 − u)^k` when above, with `k` again in closed form from the
//!   average. Both reach min and max at the ends, so samples do too.
//!
//! Sizes are rounded to whole bytes and gaps to whole nanoseconds. `fixed:SIZE@INTERVAL`
//! (the paper's own test traffic, e.g. `fixed:100@100ms`) is one size at one interval.
//!
//! ```
//! use latlab_probe::model::TrafficModel;
//! use rand::SeedableRng;
//! let model: TrafficModel = "halo3-moderate".parse().unwrap();
//! let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
//! let m = model.sample(&mut rng);
//! assert!((32..=280).contains(&m.size));
//! assert!((32_000_000..=716_000_000).contains(&m.gap_ns));
//! assert_eq!("fixed:100@50ms".parse::<TrafficModel>().unwrap().sample(&mut rng).gap_ns, 50_000_000);
//! ```

use std::fmt;
use std::str::FromStr;

use rand::Rng;

/// One message of a traffic model: its payload bytes and the time since the message before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Payload bytes (at least 1).
    pub size: usize,
    /// Nanoseconds since the previous message's send time.
    pub gap_ns: u64,
}

/// One row of Table 1: what a named model reproduces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableRow {
    /// The model's name.
    pub name: &'static str,
    /// The game (and platform) the row was measured on.
    pub game: &'static str,
    /// Payload bytes: average, min, max.
    pub size_avg: f64,
    /// Smallest payload.
    pub size_min: f64,
    /// Largest payload.
    pub size_max: f64,
    /// Interarrival time, ms: average.
    pub gap_avg_ms: f64,
    /// Median.
    pub gap_median_ms: f64,
    /// Smallest.
    pub gap_min_ms: f64,
    /// Largest.
    pub gap_max_ms: f64,
    /// 1st percentile.
    pub gap_p1_ms: f64,
    /// 99th percentile.
    pub gap_p99_ms: f64,
}

const fn row(name: &'static str, game: &'static str, size: [f64; 3], gap: [f64; 6]) -> TableRow {
    TableRow {
        name,
        game,
        size_avg: size[0],
        size_min: size[1],
        size_max: size[2],
        gap_avg_ms: gap[0],
        gap_median_ms: gap[1],
        gap_min_ms: gap[2],
        gap_max_ms: gap[3],
        gap_p1_ms: gap[4],
        gap_p99_ms: gap[5],
    }
}

/// Table 1 of Harcsik et al. (NetGames '07), in its order: sizes `[avg, min, max]`, gaps
/// `[avg, median, min, max, 1%, 99%]`.
pub const TABLE_1: [TableRow; 8] = [
    row(
        "anarchy-online",
        "Anarchy Online (PC)",
        [98.0, 8.0, 1333.0],
        [632.0, 449.0, 7.0, 17032.0, 83.0, 4195.0],
    ),
    row(
        "wow",
        "World of Warcraft (PC)",
        [26.0, 6.0, 1228.0],
        [314.0, 133.0, 0.0, 14855.0, 0.0, 3785.0],
    ),
    row(
        "counter-strike",
        "Counter Strike (PC)",
        [36.0, 25.0, 1342.0],
        [124.0, 65.0, 0.0, 66354.0, 34.0, 575.0],
    ),
    row(
        "halo3-intense",
        "Halo 3 (Xbox 360), intense action",
        [247.0, 32.0, 1264.0],
        [36.0, 33.0, 0.0, 1403.0, 32.0, 182.0],
    ),
    row(
        "halo3-moderate",
        "Halo 3 (Xbox 360), moderate action",
        [270.0, 32.0, 280.0],
        [67.0, 66.0, 32.0, 716.0, 64.0, 69.0],
    ),
    row(
        "gears-of-war",
        "Gears of War (Xbox 360)",
        [66.0, 32.0, 705.0],
        [457.0, 113.0, 3.0, 10155.0, 14.0, 8953.0],
    ),
    row(
        "tony-hawk",
        "Tony Hawk's Project 8 (Xbox 360)",
        [90.0, 32.0, 576.0],
        [308.0, 163.0, 0.0, 4070.0, 53.0, 2332.0],
    ),
    row(
        "test-drive",
        "Test Drive Unlimited (Xbox 360)",
        [80.0, 34.0, 104.0],
        [40.0, 33.0, 0.0, 298.0, 0.0, 158.0],
    ),
];

/// How a segment of a quantile function bends between its two knots.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bend {
    /// `q₀ + (q₁ − q₀)·t^k`: flat at the start for `k > 1`.
    Power(f64),
    /// `q₁ − (q₁ − q₀)·(1 − t)^k`: flat at the end for `k > 1`.
    Mirrored(f64),
}

/// One segment of a quantile function: from `(p0, q0)` to `(p1, q1)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    p0: f64,
    p1: f64,
    q0: f64,
    q1: f64,
    bend: Bend,
}

impl Segment {
    fn at(&self, u: f64) -> f64 {
        let t = ((u - self.p0) / (self.p1 - self.p0)).clamp(0.0, 1.0);
        let d = self.q1 - self.q0;
        match self.bend {
            Bend::Power(k) => self.q0 + d * t.powf(k),
            Bend::Mirrored(k) => self.q1 - d * (1.0 - t).powf(k),
        }
    }
}

/// A monotone quantile function made of segments that cover `[0, 1]` in order.
#[derive(Clone, Debug, PartialEq)]
struct Quantile {
    segments: Vec<Segment>,
}

impl Quantile {
    fn at(&self, u: f64) -> f64 {
        let seg = self
            .segments
            .iter()
            .find(|s| u < s.p1)
            .or(self.segments.last());
        // Both constructors make at least one segment.
        seg.map_or(0.0, |s| s.at(u))
    }

    /// The interarrival fit: linear below the median, one shared exponent above it.
    fn gaps(r: &TableRow) -> Quantile {
        let knots = [
            (0.0, r.gap_min_ms),
            (0.01, r.gap_p1_ms),
            (0.5, r.gap_median_ms),
            (0.99, r.gap_p99_ms),
            (1.0, r.gap_max_ms),
        ];
        let width = |i: usize| knots[i + 1].0 - knots[i].0;
        let rise = |i: usize| knots[i + 1].1 - knots[i].1;
        let linear: f64 = (0..2)
            .map(|i| width(i) * (knots[i].1 + knots[i + 1].1) / 2.0)
            .sum();
        let low: f64 = (2..4).map(|i| width(i) * knots[i].1).sum();
        let spread: f64 = (2..4).map(|i| width(i) * rise(i)).sum();
        // mean = linear + low + spread / (k + 1); every row of Table 1 has its average above
        // `linear + low` (the test checks it), so k is positive.
        let k = (spread / (r.gap_avg_ms - linear - low) - 1.0).max(f64::MIN_POSITIVE);
        let segments = (0..4)
            .map(|i| Segment {
                p0: knots[i].0,
                p1: knots[i + 1].0,
                q0: knots[i].1,
                q1: knots[i + 1].1,
                bend: Bend::Power(if i < 2 { 1.0 } else { k }),
            })
            .collect();
        Quantile { segments }
    }

    /// The payload fit: one power curve (or its mirror) from min to max with the average.
    fn sizes(r: &TableRow) -> Quantile {
        let range = r.size_max - r.size_min;
        let bend = if r.size_avg <= (r.size_min + r.size_max) / 2.0 {
            Bend::Power(range / (r.size_avg - r.size_min) - 1.0)
        } else {
            Bend::Mirrored(range / (r.size_max - r.size_avg) - 1.0)
        };
        Quantile {
            segments: vec![Segment {
                p0: 0.0,
                p1: 1.0,
                q0: r.size_min,
                q1: r.size_max,
                bend,
            }],
        }
    }
}

/// A source of messages: a row of Table 1 or a fixed size at a fixed interval.
///
/// Parse one from its text form ([`FromStr`]: a name of [`TABLE_1`] or
/// `fixed:SIZE@INTERVAL`), then draw messages with [`sample`](TrafficModel::sample) from a
/// seeded generator. A model holds no state: the same generator state gives the same message.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficModel {
    kind: Kind,
    /// Gaps are divided by this ([`TrafficModel::paced`]); 1 as the model was measured.
    speed: f64,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Game {
        row: &'static TableRow,
        sizes: Quantile,
        gaps: Quantile,
    },
    Fixed {
        size: usize,
        interval_ns: u64,
    },
}

impl TrafficModel {
    /// The named models, in Table 1's order.
    pub const NAMES: [&'static str; 8] = [
        "anarchy-online",
        "wow",
        "counter-strike",
        "halo3-intense",
        "halo3-moderate",
        "gears-of-war",
        "tony-hawk",
        "test-drive",
    ];

    /// The forms the text takes besides [`TrafficModel::NAMES`]: one size at one interval,
    /// and a model at SPEED times its pace.
    pub const FORMS: [&'static str; 2] = ["fixed:SIZE@INTERVAL", "NAME*SPEED"];

    /// The model of one row of [`TABLE_1`].
    pub fn game(row: &'static TableRow) -> TrafficModel {
        TrafficModel {
            kind: Kind::Game {
                row,
                sizes: Quantile::sizes(row),
                gaps: Quantile::gaps(row),
            },
            speed: 1.0,
        }
    }

    /// `size` bytes every `interval_ns`.
    pub fn fixed(size: usize, interval_ns: u64) -> Result<TrafficModel, ModelError> {
        if size == 0 || size > crate::MAX_PAYLOAD {
            return Err(ModelError::BadSize(size.to_string()));
        }
        if interval_ns == 0 {
            return Err(ModelError::BadInterval("0".into()));
        }
        Ok(TrafficModel {
            kind: Kind::Fixed { size, interval_ns },
            speed: 1.0,
        })
    }

    /// The same model at `speed` times its pace: the same sizes, every gap divided by
    /// `speed` (so the rate is `speed` times as high). Speeds multiply. Refused unless `speed`
    /// is a finite number above 0.
    pub fn paced(&self, speed: f64) -> Result<TrafficModel, ModelError> {
        let speed = self.speed * speed;
        if !(speed.is_finite() && speed > 0.0) {
            return Err(ModelError::BadSpeed(speed.to_string()));
        }
        Ok(TrafficModel {
            kind: self.kind.clone(),
            speed,
        })
    }

    /// How many times its measured pace the model runs (1 unless [`TrafficModel::paced`]).
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// The Table 1 row this model reproduces, if it is a named model.
    pub fn row(&self) -> Option<&'static TableRow> {
        match &self.kind {
            Kind::Game { row, .. } => Some(row),
            Kind::Fixed { .. } => None,
        }
    }

    /// Draws the next message.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Message {
        match &self.kind {
            Kind::Game { sizes, gaps, .. } => {
                let size = sizes.at(rng.random::<f64>()).round().max(1.0) as usize;
                let gap_ns = (gaps.at(rng.random::<f64>()) * 1e6 / self.speed)
                    .round()
                    .max(0.0) as u64;
                Message { size, gap_ns }
            }
            Kind::Fixed { size, interval_ns } => Message {
                size: *size,
                gap_ns: (*interval_ns as f64 / self.speed).round() as u64,
            },
        }
    }

    /// The mean gap between messages, in ns (the row's interarrival average).
    pub fn mean_gap_ns(&self) -> f64 {
        let measured = match &self.kind {
            Kind::Game { row, .. } => row.gap_avg_ms * 1e6,
            Kind::Fixed { interval_ns, .. } => *interval_ns as f64,
        };
        measured / self.speed
    }

    /// Messages per second on average.
    pub fn rate_pps(&self) -> f64 {
        1e9 / self.mean_gap_ns()
    }

    /// The largest payload the model draws.
    pub fn max_size(&self) -> usize {
        match &self.kind {
            Kind::Game { row, .. } => row.size_max as usize,
            Kind::Fixed { size, .. } => *size,
        }
    }

    /// The smallest positive gap the model can draw, ns, or `None` when it can draw gaps of 0
    /// (messages sent at the same instant, as the games' traces have).
    pub fn min_gap_ns(&self) -> Option<u64> {
        let measured = match &self.kind {
            Kind::Game { row, .. } if row.gap_min_ms > 0.0 => row.gap_min_ms * 1e6,
            Kind::Game { .. } => return None,
            Kind::Fixed { interval_ns, .. } => *interval_ns as f64,
        };
        Some(((measured / self.speed) as u64).max(1))
    }
}

impl fmt::Display for TrafficModel {
    /// The text form [`FromStr`] reads back (`*SPEED` after it when paced).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Game { row, .. } => f.write_str(row.name)?,
            Kind::Fixed { size, interval_ns } => write!(
                f,
                "fixed:{size}@{}",
                latlab_link::format_duration_ns(*interval_ns)
            )?,
        }
        if self.speed != 1.0 {
            write!(f, "*{}", self.speed)?;
        }
        Ok(())
    }
}

/// Why a model's text form was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The name is neither a Table 1 model nor `fixed:…`.
    #[error(
        "unknown model {0:?}: expected one of {names}, or {fixed} (e.g. fixed:100@50ms)",
        names = TrafficModel::NAMES.join(", "),
        fixed = TrafficModel::FORMS[0]
    )]
    Unknown(String),
    /// `fixed:` without the `@` between size and interval.
    #[error("model {0:?}: expected fixed:SIZE@INTERVAL, e.g. fixed:100@50ms")]
    FixedShape(String),
    /// The size of a fixed model is not a whole number of bytes from 1 to 65507.
    #[error("model size {0:?}: expected whole bytes from 1 to 65507 (e.g. 100 or 100B)")]
    BadSize(String),
    /// The interval of a fixed model is not a duration above 0.
    #[error("model interval {0:?}: expected a duration above 0 with a unit: ns, us, ms or s (e.g. 50ms)")]
    BadInterval(String),
    /// The speed after `*` is not a number above 0.
    #[error("model speed {0:?}: expected a number above 0 after `*` (e.g. wow*2)")]
    BadSpeed(String),
}

impl FromStr for TrafficModel {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some((model, speed)) = s.rsplit_once('*') {
            let speed: f64 = speed
                .parse()
                .map_err(|_| ModelError::BadSpeed(speed.to_string()))?;
            return model.parse::<TrafficModel>()?.paced(speed);
        }
        if let Some(spec) = s.strip_prefix("fixed:") {
            let (size, interval) = spec
                .split_once('@')
                .ok_or_else(|| ModelError::FixedShape(s.to_string()))?;
            let size_digits = size.strip_suffix('B').unwrap_or(size);
            let size_bytes: usize = size_digits
                .parse()
                .map_err(|_| ModelError::BadSize(size.to_string()))?;
            if size_bytes == 0 || size_bytes > crate::MAX_PAYLOAD {
                return Err(ModelError::BadSize(size.to_string()));
            }
            let interval_ns = parse_interval(interval)
                .ok_or_else(|| ModelError::BadInterval(interval.to_string()))?;
            return TrafficModel::fixed(size_bytes, interval_ns);
        }
        TABLE_1
            .iter()
            .find(|r| r.name == s)
            .map(TrafficModel::game)
            .ok_or_else(|| ModelError::Unknown(s.to_string()))
    }
}

/// `50ms`, `1.5s`, `200us`, `100ns`: a duration above 0 and below about 292 years.
fn parse_interval(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let ns = (value * scale).round();
    (ns.is_finite() && ns >= 1.0 && ns < u64::MAX as f64).then_some(ns as u64)
}

#[cfg(test)]
mod tests;
