//! The one error type of this crate.

use std::io;

use hdrhistogram::serialization::V2DeflateSerializeError;

/// Everything that can go wrong in `latlab-stats`.
///
/// Recording never fails (see [`crate::LatencyHistogram::record`]); errors come
/// from configuration, merging, and reading or writing files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The requested number of significant digits is outside `1..=5`.
    #[error("significant digits must be in 1..=5, got {0}")]
    InvalidSigfig(u8),

    /// Two histograms of different precision cannot be merged without silently losing resolution.
    #[error("cannot merge a histogram with {theirs} significant digits into one with {ours}")]
    PrecisionMismatch {
        /// Significant digits of the histogram being merged into.
        ours: u8,
        /// Significant digits of the histogram being merged from.
        theirs: u8,
    },

    /// hdrhistogram refused to combine two histograms.
    #[error("cannot merge histograms: {0}")]
    Merge(#[from] hdrhistogram::AdditionError),

    /// An underlying reader or writer failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),

    /// A CCDF CSV file is malformed; `line` is 1-based and counts the header.
    #[error("CCDF CSV line {line}: {message}")]
    Csv {
        /// 1-based line number of the offending line (the header is line 1).
        line: usize,
        /// What is wrong with it.
        message: String,
    },

    /// An interval log line could not be parsed; `line` is 1-based.
    #[error("interval log line {line}: {message}")]
    Hlog {
        /// 1-based line number of the offending line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },

    /// A histogram could not be serialized into the interval log.
    #[error("cannot encode histogram: {0}")]
    Encode(#[from] V2DeflateSerializeError),

    /// An interval tag contains a character the log format forbids (`,`, space, `\r`, `\n`).
    #[error("invalid interval tag {0:?}: must not contain ',', ' ', '\\r' or '\\n'")]
    InvalidTag(String),

    /// A time, duration or unit ratio is negative, not finite, or too large.
    #[error("invalid time or ratio {0}: must be finite and non-negative")]
    InvalidTime(f64),
}
