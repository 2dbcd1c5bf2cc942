//! What a `stream send` run sends when: one size at one interval, or a game's traffic model
//! drawn in advance (sizes and gaps from the model, each message due its gap after the one
//! before, from the start).

use std::time::Duration;

use latlab_probe::model::TrafficModel;
use latlab_probe::{Schedule, Traffic};

use super::message::HEADER_LEN;

/// The messages of one run.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// `count` messages of `size` bytes, `interval_ns` apart.
    Fixed {
        /// Bytes per message.
        size: usize,
        /// Gap between messages, ns.
        interval_ns: u64,
        /// How many.
        count: u64,
    },
    /// Drawn from a model: (due after the start in ns, bytes) per message; messages the model
    /// makes smaller than the message header are sent at the header's size and counted in
    /// `raised`.
    Drawn {
        /// The messages.
        messages: Vec<(u64, usize)>,
        /// How many were raised to the header's size.
        raised: u64,
    },
}

impl Plan {
    /// The messages `model` (seeded by `seed`) makes due within `duration`, at most `max`
    /// (`None` when the model would make more).
    pub fn drawn(model: &TrafficModel, seed: u64, duration: Duration, max: u64) -> Option<Plan> {
        let end = duration.as_nanos() as u64;
        let mut schedule = Schedule::from_traffic(Traffic::Model(model.clone()), 0, seed)
            .expect("a model's schedule always has a first message");
        let (mut messages, mut raised) = (Vec::new(), 0);
        while schedule.next_due() < end {
            if messages.len() as u64 >= max {
                return None;
            }
            let size = schedule.next_size().unwrap_or(HEADER_LEN);
            if size < HEADER_LEN {
                raised += 1;
            }
            messages.push((schedule.advance(), size.max(HEADER_LEN)));
        }
        Some(Plan::Drawn { messages, raised })
    }

    /// How many messages.
    pub fn len(&self) -> u64 {
        match self {
            Plan::Fixed { count, .. } => *count,
            Plan::Drawn { messages, .. } => messages.len() as u64,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Message `i`: when it is due after the start (ns) and its bytes.
    pub fn at(&self, i: u64) -> (u64, usize) {
        match self {
            Plan::Fixed {
                size, interval_ns, ..
            } => (i * interval_ns, *size),
            Plan::Drawn { messages, .. } => messages[i as usize],
        }
    }

    /// The largest message.
    pub fn max_size(&self) -> usize {
        match self {
            Plan::Fixed { size, .. } => *size,
            Plan::Drawn { messages, .. } => {
                messages.iter().map(|m| m.1).max().unwrap_or(HEADER_LEN)
            }
        }
    }

    /// Bytes of the first `sent` messages.
    pub fn payload_bytes(&self, sent: u64) -> u64 {
        match self {
            Plan::Fixed { size, .. } => sent * *size as u64,
            Plan::Drawn { messages, .. } => messages
                .iter()
                .take(sent as usize)
                .map(|m| m.1 as u64)
                .sum(),
        }
    }

    /// Messages raised to the header's size.
    pub fn raised(&self) -> u64 {
        match self {
            Plan::Fixed { .. } => 0,
            Plan::Drawn { raised, .. } => *raised,
        }
    }

    /// The mean gap, ns (the interval of a fixed plan).
    pub fn mean_gap_ns(&self) -> u64 {
        match self {
            Plan::Fixed { interval_ns, .. } => *interval_ns,
            Plan::Drawn { messages, .. } => match (messages.first(), messages.last()) {
                (Some(a), Some(b)) if messages.len() > 1 => {
                    (b.0 - a.0) / (messages.len() as u64 - 1)
                }
                _ => 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_plan_has_the_models_sizes_and_gaps_with_small_messages_raised() {
        let model: TrafficModel = "counter-strike".parse().unwrap();
        let plan = Plan::drawn(&model, 7, Duration::from_secs(600), 1_000_000).unwrap();
        // 600 s at 124 ms on average: about 4,800 messages (the gaps' long tail, up to 66 s,
        // moves the count of one draw by a fifth either way).
        assert!((3_500..7_000).contains(&plan.len()), "{}", plan.len());
        let mut due = 0;
        for i in 0..plan.len() {
            let (at, size) = plan.at(i);
            assert!(at >= due && at < 600_000_000_000);
            assert!(size >= HEADER_LEN);
            due = at;
        }
        // Counter-Strike's messages are 25 bytes and more: none is below the 24-byte header.
        assert_eq!(plan.raised(), 0);
        let wow: TrafficModel = "wow".parse().unwrap();
        let plan = Plan::drawn(&wow, 7, Duration::from_secs(600), 1_000_000).unwrap();
        // WoW's messages start at 6 bytes and average 26: many are raised.
        assert!(
            plan.raised() > plan.len() / 10,
            "{} of {}",
            plan.raised(),
            plan.len()
        );
        assert_eq!(
            Plan::drawn(&wow, 7, Duration::from_secs(600), 100),
            None,
            "more messages than allowed"
        );
        let fixed = Plan::Fixed {
            size: 100,
            interval_ns: 50,
            count: 4,
        };
        assert_eq!(
            (fixed.at(3), fixed.payload_bytes(4), fixed.mean_gap_ns()),
            ((150, 100), 400, 50)
        );
    }
}
