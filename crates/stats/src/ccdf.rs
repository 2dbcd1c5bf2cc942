//! Complementary cumulative distribution (CCDF) of a histogram, and its CSV form.
//!
//! A CCDF plotted on log axes is how latlab shows tails: the fraction of samples
//! slower than each latency.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::{Error, LatencyHistogram};

/// Header line of the CCDF CSV format.
pub const CCDF_CSV_HEADER: &str = "latency_ns,fraction_above,count_at_or_below";

/// One step of the CCDF.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CcdfPoint {
    /// Highest equivalent value of a recorded bucket, in nanoseconds.
    pub latency_ns: u64,
    /// Fraction of all samples strictly above `latency_ns`, in [0, 1].
    pub fraction_above: f64,
    /// Number of samples at or below `latency_ns`.
    pub count_at_or_below: u64,
}

/// The CCDF of `h`: one point per recorded bucket, in increasing latency.
///
/// Guarantees: `latency_ns` strictly increases, `count_at_or_below` strictly increases,
/// `fraction_above` never increases, and the last point has `fraction_above == 0` and
/// `count_at_or_below == h.len()`. Empty for an empty histogram.
pub fn ccdf(h: &LatencyHistogram) -> Vec<CcdfPoint> {
    let n = h.len();
    let mut points = Vec::new();
    let mut at_or_below: u64 = 0;
    for v in h.as_hdr().iter_recorded() {
        at_or_below = at_or_below.saturating_add(v.count_at_value());
        points.push(CcdfPoint {
            latency_ns: v.value_iterated_to(),
            fraction_above: (n - at_or_below.min(n)) as f64 / n as f64,
            count_at_or_below: at_or_below,
        });
    }
    debug_assert!(points.last().is_none_or(|p| p.fraction_above == 0.0));
    points
}

/// Writes `points` as CSV with header [`CCDF_CSV_HEADER`].
///
/// Fractions are written in Rust's shortest round-trip form, so
/// [`read_ccdf_csv`] reproduces them bit for bit.
///
/// # Errors
/// [`Error::Io`] when writing fails.
pub fn write_ccdf_csv<W: Write>(points: &[CcdfPoint], mut w: W) -> Result<(), Error> {
    writeln!(w, "{CCDF_CSV_HEADER}")?;
    for p in points {
        writeln!(
            w,
            "{},{},{}",
            p.latency_ns, p.fraction_above, p.count_at_or_below
        )?;
    }
    w.flush()?;
    Ok(())
}

/// Reads CSV written by [`write_ccdf_csv`].
///
/// Accepts `\r\n` line endings and trailing empty lines.
///
/// # Errors
/// [`Error::Csv`] naming the 1-based line (the header is line 1) when the header is
/// missing or wrong, a line does not have three fields, a field does not parse, or a
/// fraction lies outside [0, 1]; [`Error::Io`] when reading fails.
pub fn read_ccdf_csv<R: BufRead>(r: R) -> Result<Vec<CcdfPoint>, Error> {
    let mut points = Vec::new();
    let mut saw_header = false;
    let mut blank_since: Option<usize> = None;
    for (i, line) in r.lines().enumerate() {
        let line_no = i + 1;
        let line = line?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        let bad = |message: String| Error::Csv {
            line: line_no,
            message,
        };
        if !saw_header {
            if line != CCDF_CSV_HEADER {
                return Err(bad(format!(
                    "expected header {CCDF_CSV_HEADER:?}, found {line:?}"
                )));
            }
            saw_header = true;
            continue;
        }
        if line.trim().is_empty() {
            blank_since.get_or_insert(line_no);
            continue;
        }
        if let Some(blank) = blank_since {
            return Err(Error::Csv {
                line: blank,
                message: "empty line before the end of the data".into(),
            });
        }
        let fields: Vec<&str> = line.split(',').collect();
        let [latency, fraction, count] = fields[..] else {
            return Err(bad(format!(
                "expected 3 comma-separated fields, found {}",
                fields.len()
            )));
        };
        let latency_ns = latency
            .trim()
            .parse::<u64>()
            .map_err(|e| bad(format!("latency_ns {latency:?}: {e}")))?;
        let fraction_above = fraction
            .trim()
            .parse::<f64>()
            .map_err(|e| bad(format!("fraction_above {fraction:?}: {e}")))?;
        if !(0.0..=1.0).contains(&fraction_above) {
            return Err(bad(format!(
                "fraction_above {fraction_above} is outside [0, 1]"
            )));
        }
        let count_at_or_below = count
            .trim()
            .parse::<u64>()
            .map_err(|e| bad(format!("count_at_or_below {count:?}: {e}")))?;
        points.push(CcdfPoint {
            latency_ns,
            fraction_above,
            count_at_or_below,
        });
    }
    if !saw_header {
        return Err(Error::Csv {
            line: 1,
            message: format!("empty input, expected header {CCDF_CSV_HEADER:?}"),
        });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skewed() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for i in 1..=10_000u64 {
            h.record(1_000 + i * i); // long tail
        }
        h.record(u64::MAX);
        h
    }

    #[test]
    fn ccdf_of_an_empty_histogram_is_empty() {
        assert!(ccdf(&LatencyHistogram::new()).is_empty());
    }

    #[test]
    fn ccdf_counts_samples_strictly_above_each_bucket() {
        let mut h = LatencyHistogram::new();
        h.record_n(10, 3);
        h.record(20);
        assert_eq!(
            ccdf(&h),
            [
                CcdfPoint {
                    latency_ns: 10,
                    fraction_above: 0.25,
                    count_at_or_below: 3
                },
                CcdfPoint {
                    latency_ns: 20,
                    fraction_above: 0.0,
                    count_at_or_below: 4
                },
            ]
        );
    }

    #[test]
    fn ccdf_is_monotone_non_increasing_and_ends_at_zero() {
        let h = skewed();
        let points = ccdf(&h);
        assert_eq!(
            points.len() as u64,
            h.as_hdr().iter_recorded().count() as u64
        );
        assert!(points.windows(2).all(|w| w[0].latency_ns < w[1].latency_ns
            && w[0].fraction_above >= w[1].fraction_above
            && w[0].count_at_or_below < w[1].count_at_or_below));
        let last = points.last().unwrap();
        assert_eq!(last.fraction_above, 0.0);
        assert_eq!(last.count_at_or_below, h.len());
        assert_eq!(last.latency_ns, h.max());
    }

    #[test]
    fn ccdf_csv_round_trips_bit_for_bit() {
        let points = ccdf(&skewed());
        let mut buf = Vec::new();
        write_ccdf_csv(&points, &mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.starts_with("latency_ns,fraction_above,count_at_or_below\n"));
        assert_eq!(read_ccdf_csv(&buf[..]).unwrap(), points);
    }

    #[test]
    fn ccdf_csv_round_trips_through_a_file() {
        let points = ccdf(&skewed());
        let file = tempfile::NamedTempFile::new().unwrap();
        write_ccdf_csv(&points, std::io::BufWriter::new(file.reopen().unwrap())).unwrap();
        let back = read_ccdf_csv(std::io::BufReader::new(
            std::fs::File::open(file.path()).unwrap(),
        ))
        .unwrap();
        assert_eq!(back, points);
    }

    #[test]
    fn ccdf_csv_accepts_crlf_and_trailing_blank_lines() {
        let text = "latency_ns,fraction_above,count_at_or_below\r\n10,0.5,1\r\n20,0,2\r\n\r\n";
        let points = read_ccdf_csv(text.as_bytes()).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].fraction_above, 0.0);
    }

    fn csv_error(text: &str) -> (usize, String) {
        match read_ccdf_csv(text.as_bytes()) {
            Err(Error::Csv { line, message }) => (line, message),
            other => panic!("expected a CSV error, got {other:?}"),
        }
    }

    #[test]
    fn ccdf_csv_errors_name_the_offending_line() {
        let h = "latency_ns,fraction_above,count_at_or_below\n";
        assert_eq!(csv_error("").0, 1);
        assert_eq!(csv_error("latency,fraction\n1,0,1\n").0, 1);
        assert_eq!(csv_error(&format!("{h}10,0.5,1\n20,0\n")).0, 3);
        assert_eq!(csv_error(&format!("{h}10,0.5,1\nx,0,2\n")).0, 3);
        assert_eq!(csv_error(&format!("{h}10,half,1\n")).0, 2);
        assert_eq!(csv_error(&format!("{h}10,0.5,-1\n")).0, 2);
        assert_eq!(csv_error(&format!("{h}10,1.5,1\n")).0, 2);
        assert_eq!(csv_error(&format!("{h}10,0.5,1\n\n20,0,2\n")).0, 3);

        let (line, message) = csv_error(&format!("{h}1,0.5,1\n2,0.25,2\n3,NaN,3\n"));
        assert_eq!(line, 4);
        assert!(message.contains("fraction_above"), "{message}");
        let shown = Error::Csv { line, message }.to_string();
        assert!(shown.starts_with("CCDF CSV line 4: "), "{shown}");
    }
}
