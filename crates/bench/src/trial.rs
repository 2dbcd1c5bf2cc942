//! What one trial is and what it measured, and the error that ends a search.

use serde::Serialize;

/// What the traffic source and the sink counted in one trial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrialCounts {
    /// Frames the source sent into the device under test.
    pub sent: u64,
    /// Frames the sink got back out of it.
    pub received: u64,
}

impl TrialCounts {
    /// Frames lost as a fraction of those sent (RFC 2544 26.3's `(input − output) / input`);
    /// 0 when nothing was sent, and never below 0 (frames the sink got that were not sent in
    /// the trial, duplicates for instance, do not make up for lost ones but are not negative
    /// loss either).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        self.sent.saturating_sub(self.received) as f64 / self.sent as f64
    }
}

/// One trial of a search: what was tried and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrialPoint {
    /// Which search ran it: `ndr`, `pdr`, `loss`, `back_to_back`.
    pub search: &'static str,
    /// The value tried: an offered rate in frames per second, or a burst in frames.
    pub value: u64,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// `(sent − received) / sent`.
    pub loss_ratio: f64,
    /// Whether the trial met its search's loss tolerance.
    pub passed: bool,
}

/// Why a search ended without a result. Each variant keeps every trial measured before it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// A trial sent frames and none came back: the device under test stopped answering (or
    /// never did), so no later trial could be judged.
    #[error(
        "the device under test forwarded none of {sent} frames at {value} ({search} trial {}): \
         it stopped answering; the {} trials before it are kept",
        points.len() + 1,
        points.len()
    )]
    DutSilent {
        /// Which search.
        search: &'static str,
        /// The value of the silent trial.
        value: u64,
        /// Frames sent in it.
        sent: u64,
        /// The trials measured before it.
        points: Vec<TrialPoint>,
    },
    /// A trial sent no frame at all: the traffic source failed, and the trial says nothing.
    #[error(
        "the traffic source sent no frame at {value} ({search} trial {}); the {} trials before \
         it are kept",
        points.len() + 1,
        points.len()
    )]
    NothingSent {
        /// Which search.
        search: &'static str,
        /// The value of the empty trial.
        value: u64,
        /// The trials measured before it.
        points: Vec<TrialPoint>,
    },
    /// A trial was handed in for a value the search did not ask for.
    #[error("{search}: a trial at {value} was not asked for (expected {expected:?})")]
    Unexpected {
        /// Which search.
        search: &'static str,
        /// The value handed in.
        value: u64,
        /// What the search asked for.
        expected: Option<u64>,
    },
}

impl SearchError {
    /// The trials measured before the search ended.
    pub fn points(&self) -> &[TrialPoint] {
        match self {
            SearchError::DutSilent { points, .. } | SearchError::NothingSent { points, .. } => {
                points
            }
            SearchError::Unexpected { .. } => &[],
        }
    }
}

/// Checks one trial's counts: an error (with `points`) when nothing was sent or nothing came
/// back.
pub(crate) fn check_counts(
    search: &'static str,
    value: u64,
    counts: TrialCounts,
    points: &[TrialPoint],
) -> Result<(), SearchError> {
    if counts.sent == 0 {
        return Err(SearchError::NothingSent {
            search,
            value,
            points: points.to_vec(),
        });
    }
    if counts.received == 0 {
        return Err(SearchError::DutSilent {
            search,
            value,
            sent: counts.sent,
            points: points.to_vec(),
        });
    }
    Ok(())
}

/// Errors in a search's configuration, each naming the field at fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A field is out of its range.
    #[error("{field}: {why}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What its range is.
        why: String,
    },
}

pub(crate) fn out_of_range(field: &'static str, why: impl Into<String>) -> ConfigError {
    ConfigError::OutOfRange {
        field,
        why: why.into(),
    }
}
