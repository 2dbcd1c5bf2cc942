//! HdrHistogram interval logs (`.hlog`), readable by HdrHistogram's own tools.
//!
//! The files follow the Java `HistogramLogWriter` layout, so the Java
//! `HistogramLogProcessor` and HdrHistogram plotters read them:
//!
//! ```text
//! #<your comment>
//! #[Histogram log format version 1.3]
//! #[StartTime: 1700000000.000 (seconds since epoch)]
//! #[BaseTime: 1700000000.000 (seconds since epoch)]
//! #[MaxValueDivisor: 1000000.000]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! 0.000,1.000,1.234,HISTFAAAA...
//! Tag=eth0,1.000,1.000,0.987,HISTFAAAA...
//! ```
//!
//! Interval timestamps are seconds since `BaseTime` (= `StartTime`), written with
//! millisecond resolution. Histograms are in V2 compressed (deflate) encoding, in
//! nanoseconds. The `Interval_Max` column is informational only: it is the interval's
//! maximum divided by a *max value unit ratio*, [`NS_TO_MS`] by default like the Java
//! writer, so it reads as milliseconds. Java tools treat the `MaxValueDivisor` line,
//! which hdrhistogram adds, as a comment.
//!
//! The saturated count of a [`LatencyHistogram`] is not part of the format; clamped
//! samples read back as samples in the [`HIGHEST_TRACKABLE_NS`](crate::HIGHEST_TRACKABLE_NS) bucket.

use std::fmt;
use std::io::{Read, Write};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::LogIteratorError;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, IntervalLogWriterError, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

use crate::{Error, LatencyHistogram};

/// Max value unit ratio that makes the `Interval_Max` column milliseconds for
/// nanosecond histograms; the Java `HistogramLogWriter` default.
pub const NS_TO_MS: f64 = 1e6;

/// The column legend Java's `HistogramLogWriter.outputLegend` writes.
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";

/// Format version line (without `#`) of the Java writer this layout follows.
const FORMAT_VERSION: &str = "[Histogram log format version 1.3]";

/// Writes one interval log.
///
/// hdrhistogram's `IntervalLogWriter` mutably borrows both the output and the serializer
/// for its whole life, so this type owns them and builds a short-lived writer per interval
/// into a scratch buffer, keeping only the interval line (the header hdrhistogram would
/// repeat is dropped). The result is one valid log with one header.
pub struct HlogWriter<W: Write> {
    out: W,
    serializer: V2DeflateSerializer,
    scratch: Vec<u8>,
    max_value_unit_ratio: f64,
}

impl<W: Write> HlogWriter<W> {
    /// Starts a log on `w` whose intervals are offsets from `start_time_unix_s`
    /// (seconds since the Unix epoch, written with millisecond resolution), with
    /// `Interval_Max` in milliseconds ([`NS_TO_MS`]).
    ///
    /// `comment` goes first, one `#` line per line of it; an empty comment writes none.
    ///
    /// # Errors
    /// [`Error::InvalidTime`] for a negative or non-finite start time; [`Error::Io`].
    pub fn new(w: W, start_time_unix_s: f64, comment: &str) -> Result<Self, Error> {
        Self::with_max_value_unit_ratio(w, start_time_unix_s, comment, NS_TO_MS)
    }

    /// Like [`new`](Self::new), but the `Interval_Max` column is the interval's maximum in
    /// nanoseconds divided by `max_value_unit_ratio` (1.0 keeps nanoseconds, 1e3 gives µs).
    ///
    /// # Errors
    /// [`Error::InvalidTime`] for a negative or non-finite start time or a ratio that is
    /// not finite and positive; [`Error::Io`].
    pub fn with_max_value_unit_ratio(
        mut w: W,
        start_time_unix_s: f64,
        comment: &str,
        max_value_unit_ratio: f64,
    ) -> Result<Self, Error> {
        if !(max_value_unit_ratio.is_finite() && max_value_unit_ratio > 0.0) {
            return Err(Error::InvalidTime(max_value_unit_ratio));
        }
        let start = SystemTime::UNIX_EPOCH + seconds(start_time_unix_s)?;
        let mut serializer = V2DeflateSerializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        if !comment.is_empty() {
            builder.add_comment(comment);
        }
        builder
            .add_comment(FORMAT_VERSION)
            .with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(max_value_unit_ratio);
        // Writes comments, StartTime, BaseTime and MaxValueDivisor; the writer is dropped
        // right away, which releases the borrows.
        builder.begin_log_with(&mut w, &mut serializer)?;
        w.write_all(LEGEND.as_bytes())?;
        Ok(Self {
            out: w,
            serializer,
            scratch: Vec::new(),
            max_value_unit_ratio,
        })
    }

    /// Appends one interval: `h` covering `duration_s` seconds starting `start_offset_s`
    /// seconds after the log's start time, optionally tagged.
    ///
    /// # Errors
    /// [`Error::InvalidTime`] for negative or non-finite times, [`Error::InvalidTag`] for an
    /// empty tag or one containing `,`, space, `\r` or `\n`, [`Error::Encode`], [`Error::Io`].
    pub fn write_interval(
        &mut self,
        start_offset_s: f64,
        duration_s: f64,
        h: &LatencyHistogram,
        tag: Option<&str>,
    ) -> Result<(), Error> {
        let start = seconds(start_offset_s)?;
        let duration = seconds(duration_s)?;
        let tag = match tag {
            None => None,
            Some(t) if t.is_empty() => return Err(Error::InvalidTag(t.to_owned())),
            Some(t) => Some(Tag::new(t).ok_or_else(|| Error::InvalidTag(t.to_owned()))?),
        };

        self.scratch.clear();
        let mut builder = IntervalLogWriterBuilder::new();
        builder.with_max_value_divisor(self.max_value_unit_ratio);
        let mut writer = builder.begin_log_with(&mut self.scratch, &mut self.serializer)?;
        writer
            .write_histogram(h.as_hdr(), start, duration, tag)
            .map_err(|e| match e {
                IntervalLogWriterError::SerializeError(e) => Error::Encode(e),
                IntervalLogWriterError::IoError(e) => Error::Io(e),
            })?;

        // Skip the header lines (`#...`) the builder wrote; keep the interval line.
        let mut line = &self.scratch[..];
        while line.first() == Some(&b'#') {
            let next = line
                .iter()
                .position(|&b| b == b'\n')
                .map_or(line.len(), |i| i + 1);
            line = &line[next..];
        }
        debug_assert!(line.ends_with(b"\n") && line.iter().filter(|&&b| b == b'\n').count() == 1);
        self.out.write_all(line)?;
        Ok(())
    }

    /// Flushes the underlying writer.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn flush(&mut self) -> Result<(), Error> {
        self.out.flush()?;
        Ok(())
    }

    /// The underlying writer, e.g. to recover a `Vec<u8>`; does not flush.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> fmt::Debug for HlogWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HlogWriter")
            .field("max_value_unit_ratio", &self.max_value_unit_ratio)
            .finish_non_exhaustive()
    }
}

/// `s` seconds as a `Duration`, refusing negative, non-finite and huge values.
fn seconds(s: f64) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s).map_err(|_| Error::InvalidTime(s))
}

/// One interval read back from a log.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Seconds from the log's `StartTime` to the start of this interval (millisecond resolution).
    pub start_offset_s: f64,
    /// Length of the interval in seconds (millisecond resolution).
    pub duration_s: f64,
    /// The interval's tag, if any.
    pub tag: Option<String>,
    /// The interval's samples.
    pub histogram: LatencyHistogram,
}

/// Seconds of one year; Java's `HistogramLogReader` treats interval timestamps that are
/// this much smaller than `StartTime` (without a `BaseTime`) as offsets.
const YEAR_S: f64 = 365.25 * 24.0 * 3600.0;

/// Reads every interval of a log, in file order.
///
/// `start_offset_s` is made relative to the log's `StartTime`, following Java's
/// `HistogramLogReader`: timestamps are offsets from `BaseTime` when there is one; without
/// `BaseTime` they are offsets if more than a year smaller than `StartTime` and absolute
/// Unix times otherwise; without either header they are relative to the first interval.
///
/// # Errors
/// [`Error::Hlog`] naming the 1-based line that does not parse or whose histogram does not
/// decode; [`Error::Io`] when reading fails.
pub fn read_hlog<R: Read>(mut r: R) -> Result<Vec<Interval>, Error> {
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)?;
    let line_at = |offset: usize| {
        buf[..offset.min(buf.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    };

    let mut start_time: Option<f64> = None;
    let mut base_time: Option<f64> = None;
    let mut intervals = Vec::new();
    let mut deserializer = Deserializer::new();
    let mut bytes = Vec::new();
    for entry in IntervalLogIterator::new(&buf) {
        let entry = entry.map_err(|e| {
            let LogIteratorError::ParseError { offset } = e;
            Error::Hlog {
                line: line_at(offset),
                message: "not a comment, header or interval line".into(),
            }
        })?;
        let ilh = match entry {
            LogEntry::StartTime(t) => {
                start_time = Some(t.as_secs_f64());
                continue;
            }
            LogEntry::BaseTime(t) => {
                base_time = Some(t.as_secs_f64());
                continue;
            }
            LogEntry::Interval(ilh) => ilh,
        };
        // The encoded histogram is a slice of `buf`; its address difference is its offset.
        let encoded = ilh.encoded_histogram();
        let line = line_at((encoded.as_ptr() as usize).saturating_sub(buf.as_ptr() as usize));
        let bad = |message: String| Error::Hlog { line, message };

        bytes.clear();
        base64::engine::general_purpose::STANDARD
            .decode_vec(encoded, &mut bytes)
            .map_err(|e| bad(format!("histogram is not valid base64: {e}")))?;
        let hist: hdrhistogram::Histogram<u64> = deserializer
            .deserialize(&mut &bytes[..])
            .map_err(|e| bad(format!("cannot decode histogram: {e}")))?;

        let ts = ilh.start_timestamp().as_secs_f64();
        let start_offset_s = match (start_time, base_time) {
            // Subtract the headers first so that equal StartTime and BaseTime give `ts` exactly.
            (Some(st), Some(bt)) => ts + (bt - st),
            (None, Some(_)) => ts,
            (Some(st), None) if ts < st - YEAR_S => ts,
            (Some(st), None) => ts - st,
            (None, None) => {
                let first = *start_time.get_or_insert(ts);
                ts - first
            }
        };
        intervals.push(Interval {
            start_offset_s,
            duration_s: ilh.duration().as_secs_f64(),
            tag: ilh.tag().map(|t| t.as_str().to_owned()),
            histogram: LatencyHistogram::from_hdr(hist),
        });
    }
    Ok(intervals)
}

/// Merges the intervals whose tag equals `tag` (`None` selects untagged intervals, like
/// Java's `HistogramLogProcessor` without `-tag`) into one histogram.
///
/// An empty selection gives an empty histogram with default precision.
///
/// # Errors
/// [`Error::PrecisionMismatch`] when the selected intervals differ in precision.
pub fn merge_intervals(
    intervals: &[Interval],
    tag: Option<&str>,
) -> Result<LatencyHistogram, Error> {
    let mut selected = intervals.iter().filter(|i| i.tag.as_deref() == tag);
    let Some(first) = selected.next() else {
        return Ok(LatencyHistogram::new());
    };
    let mut merged = first.histogram.clone();
    for i in selected {
        merged.merge(&i.histogram)?;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: impl IntoIterator<Item = u64>) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for v in values {
            h.record(v);
        }
        h
    }

    fn three_intervals() -> Vec<(f64, f64, LatencyHistogram, Option<&'static str>)> {
        vec![
            (0.0, 1.0, hist((1..=1_000).map(|i| i * 1_000)), None),
            (1.0, 1.0, hist((1..=500).map(|i| i * 7_919)), Some("eth0")),
            (2.5, 0.5, hist([42, 1_000_000_000, 3_000_000_000_000]), None),
        ]
    }

    fn write_log(intervals: &[(f64, f64, LatencyHistogram, Option<&str>)]) -> Vec<u8> {
        let mut w = HlogWriter::new(Vec::new(), 1_700_000_000.25, "latlab test run").unwrap();
        for (start, dur, h, tag) in intervals {
            w.write_interval(*start, *dur, h, *tag).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn hlog_round_trips_three_intervals() {
        let written = three_intervals();
        let read = read_hlog(&write_log(&written)[..]).unwrap();
        assert_eq!(read.len(), 3);
        for ((start, dur, h, tag), back) in written.iter().zip(&read) {
            assert_eq!(back.start_offset_s, *start);
            assert_eq!(back.duration_s, *dur);
            assert_eq!(back.tag.as_deref(), *tag);
            assert_eq!(back.histogram.as_hdr(), h.as_hdr());
            assert_eq!(back.histogram.len(), h.len());
            assert_eq!(back.histogram.max(), h.max());
            assert_eq!(
                back.histogram.value_at_rank(h.len() / 2 + 1),
                h.value_at_rank(h.len() / 2 + 1)
            );
        }
    }

    #[test]
    fn hlog_round_trips_through_a_file() {
        let written = three_intervals();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&write_log(&written)).unwrap();
        let read = read_hlog(std::fs::File::open(file.path()).unwrap()).unwrap();
        assert_eq!(read.len(), 3);
    }

    #[test]
    fn hlog_text_has_the_layout_java_tools_expect() {
        let log = String::from_utf8(write_log(&three_intervals())).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines[0], "#latlab test run");
        assert_eq!(lines[1], "#[Histogram log format version 1.3]");
        assert_eq!(
            lines[2],
            "#[StartTime: 1700000000.250 (seconds since epoch)]"
        );
        assert_eq!(
            lines[3],
            "#[BaseTime: 1700000000.250 (seconds since epoch)]"
        );
        assert_eq!(lines[4], "#[MaxValueDivisor: 1000000.000]");
        assert_eq!(
            lines[5],
            r#""StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram""#
        );
        assert_eq!(
            lines.len(),
            9,
            "one header, then one line per interval:\n{log}"
        );
        // Interval_Max is in ms: 1_000_447 ns (top of 1 ms's bucket) prints as 1.000.
        assert!(
            lines[6].starts_with("0.000,1.000,1.000,HISTF"),
            "{}",
            lines[6]
        );
        assert!(
            lines[7].starts_with("Tag=eth0,1.000,1.000,3.9"),
            "{}",
            lines[7]
        );
        assert!(lines[8].starts_with("2.500,0.500,3000"), "{}", lines[8]);
    }

    #[test]
    fn the_max_value_unit_ratio_scales_only_the_informational_max_column() {
        let mut w = HlogWriter::with_max_value_unit_ratio(Vec::new(), 0.0, "", 1.0).unwrap();
        w.write_interval(0.0, 1.0, &hist([1_000]), None).unwrap();
        let log = String::from_utf8(w.into_inner()).unwrap();
        assert!(!log.contains("MaxValueDivisor"), "{log}");
        assert!(
            log.lines().any(|l| l.starts_with("0.000,1.000,1000.000,")),
            "{log}"
        );
        assert_eq!(read_hlog(log.as_bytes()).unwrap()[0].histogram.max(), 1_000);
    }

    #[test]
    fn merge_intervals_selects_by_tag_like_the_java_processor() {
        let written = three_intervals();
        let read = read_hlog(&write_log(&written)[..]).unwrap();

        let untagged = merge_intervals(&read, None).unwrap();
        let mut expected = written[0].2.clone();
        expected.merge(&written[2].2).unwrap();
        assert_eq!(untagged.as_hdr(), expected.as_hdr());

        let eth0 = merge_intervals(&read, Some("eth0")).unwrap();
        assert_eq!(eth0.as_hdr(), written[1].2.as_hdr());

        assert!(merge_intervals(&read, Some("nope")).unwrap().is_empty());
    }

    #[test]
    fn bad_tags_and_times_are_refused() {
        let mut w = HlogWriter::new(Vec::new(), 0.0, "").unwrap();
        let h = hist([1]);
        for tag in ["", "a,b", "a b", "a\nb"] {
            assert!(matches!(
                w.write_interval(0.0, 1.0, &h, Some(tag)),
                Err(Error::InvalidTag(_))
            ));
        }
        assert!(matches!(
            w.write_interval(-1.0, 1.0, &h, None),
            Err(Error::InvalidTime(_))
        ));
        assert!(matches!(
            w.write_interval(0.0, f64::NAN, &h, None),
            Err(Error::InvalidTime(_))
        ));
        assert!(matches!(
            HlogWriter::new(Vec::new(), -5.0, ""),
            Err(Error::InvalidTime(_))
        ));
        assert!(matches!(
            HlogWriter::with_max_value_unit_ratio(Vec::new(), 0.0, "", 0.0),
            Err(Error::InvalidTime(_))
        ));
    }

    #[test]
    fn read_errors_name_the_offending_line() {
        let mut log = write_log(&three_intervals());
        log.extend_from_slice(b"this is not an interval\n");
        match read_hlog(&log[..]) {
            Err(Error::Hlog { line, .. }) => assert_eq!(line, 10),
            other => panic!("expected a parse error, got {other:?}"),
        }

        let corrupt =
            "#[StartTime: 10.000 (seconds since epoch)]\n0.000,1.000,1.0,HISTFAAAAnotreally\n";
        match read_hlog(corrupt.as_bytes()) {
            Err(Error::Hlog { line, message }) => {
                assert_eq!(line, 2);
                assert!(message.contains("histogram"), "{message}");
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[test]
    fn timestamps_follow_the_java_reader_rules() {
        let h = hist([1]);
        let mut body = Vec::new();
        {
            let mut w = HlogWriter::new(&mut body, 0.0, "").unwrap();
            w.write_interval(1_700_000_010.0, 1.0, &h, None).unwrap();
            w.write_interval(1_700_000_011.0, 1.0, &h, None).unwrap();
        }
        // Keep only the interval lines: no StartTime, no BaseTime -> relative to the first.
        let text = String::from_utf8(body).unwrap();
        let intervals: String = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
            .map(|l| format!("{l}\n"))
            .collect();
        let read = read_hlog(intervals.as_bytes()).unwrap();
        assert_eq!(
            read.iter().map(|i| i.start_offset_s).collect::<Vec<_>>(),
            [0.0, 1.0]
        );

        // StartTime only, absolute timestamps -> offsets from StartTime.
        let with_start = format!("#[StartTime: 1700000000.000 (seconds since epoch)]\n{intervals}");
        let read = read_hlog(with_start.as_bytes()).unwrap();
        assert_eq!(
            read.iter().map(|i| i.start_offset_s).collect::<Vec<_>>(),
            [10.0, 11.0]
        );
    }

    #[test]
    fn logs_written_by_java_hdrhistogram_are_read() {
        // Written by HdrHistogram's Java HistogramLogWriter (StartTime, no BaseTime,
        // absolute timestamps); the second histogram is an auto-resizing `new Histogram(3)`.
        let log = include_bytes!("../tests/data/java-written.hlog");
        let read = read_hlog(&log[..]).unwrap();
        assert_eq!(read.len(), 2);

        assert_eq!((read[0].start_offset_s, read[0].duration_s), (0.0, 1.0));
        assert_eq!(read[0].tag, None);
        let expected = hist((1..=1_000).map(|i| i * 1_000));
        assert_eq!(read[0].histogram, expected);

        assert_eq!((read[1].start_offset_s, read[1].duration_s), (1.0, 1.5));
        assert_eq!(read[1].tag.as_deref(), Some("A"));
        let mut expected = LatencyHistogram::new();
        expected.record_n(5_000_000, 10);
        assert_eq!(read[1].histogram, expected);
    }

    #[test]
    fn an_empty_interval_round_trips() {
        let read = read_hlog(&write_log(&[(0.0, 1.0, LatencyHistogram::new(), None)])[..]).unwrap();
        assert_eq!(read.len(), 1);
        assert!(read[0].histogram.is_empty());
    }

    #[test]
    fn saturation_is_not_part_of_the_log_but_the_clamped_samples_are() {
        let mut h = hist([10]);
        h.record(u64::MAX);
        let read = read_hlog(&write_log(&[(0.0, 1.0, h.clone(), None)])[..]).unwrap();
        let back = &read[0].histogram;
        assert_eq!(back.len(), 2);
        assert_eq!(back.saturated(), 0);
        assert_eq!(back.max(), h.max());
    }
}
