//! Parsing and printing of the quantities on latlab's command line.

use std::time::Duration;

use latlab_probe::MAX_RATE_PPS;

/// Parses a duration: a number with a unit `ns`, `us` (or `µs`), `ms`, `s`, `m` or `h`; a bare
/// number is seconds. Fractions are allowed (`1.5s`); negative values are not.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 10s, 500ms, 100us)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown time unit {other:?} in {text:?} (use ns, us, ms, s, m, h)"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("{text:?} is not a duration latlab can run"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a packet rate in packets per second: `5000`, `10k`, `1.5M`, `2.5kpps`. Must be
/// above 0.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    read_rate(text).map_err(|e| e.to_string())
}

/// [`parse_rate`] with its typed error.
fn read_rate(text: &str) -> Result<f64, RateError> {
    let t = text.trim().trim_end_matches("pps");
    let (num, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| RateError::NotANumber(text.to_string()))?;
    let rate = value * scale;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(RateError::NotAboveZero(text.to_string()));
    }
    Ok(rate)
}

/// Why a rate was refused; each names the text (or the number) it was given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// The text is not a number with an optional `k`, `M` or `G` (and `pps`).
    #[error("{0:?} is not a rate (try 1000, 10k, 1M)")]
    NotANumber(String),
    /// The rate is not a finite number above 0.
    #[error("the rate must be above 0 packets per second, not {0}")]
    NotAboveZero(String),
    /// The rate is above [`MAX_RATE_PPS`]: a send schedule's due times are whole
    /// nanoseconds, so above it probes would be due at the same instant.
    #[error(
        "{0} is above 1G (10^9) packets per second, the most a send schedule keeps: its due \
         times are whole nanoseconds"
    )]
    AboveMax(String),
}

/// The rate a generator offers, packets per second: a finite number above 0 and at most
/// [`MAX_RATE_PPS`] (one probe per nanosecond, the resolution of a send schedule). Made only
/// by [`str::parse`] (the text [`parse_rate`] reads: `10k`, `1.5M`) or [`TryFrom<f64>`],
/// which are where the bounds are checked, so a rate that is one needs no check after.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct ProbeRate(f64);

impl ProbeRate {
    /// The rate, packets per second.
    pub fn pps(self) -> f64 {
        self.0
    }

    /// `rate` if it is within the bounds; errors name it as `given` says.
    fn within_bounds(rate: f64, given: impl FnOnce() -> String) -> Result<ProbeRate, RateError> {
        if !(rate.is_finite() && rate > 0.0) {
            Err(RateError::NotAboveZero(given()))
        } else if rate > MAX_RATE_PPS {
            Err(RateError::AboveMax(given()))
        } else {
            Ok(ProbeRate(rate))
        }
    }
}

impl std::str::FromStr for ProbeRate {
    type Err = RateError;

    fn from_str(text: &str) -> Result<ProbeRate, RateError> {
        ProbeRate::within_bounds(read_rate(text)?, || text.to_string())
    }
}

impl TryFrom<f64> for ProbeRate {
    type Error = RateError;

    /// Errors show the number as Rust prints it, in exponent form from 10^15 on (`1e30`).
    fn try_from(rate: f64) -> Result<ProbeRate, RateError> {
        ProbeRate::within_bounds(rate, || {
            if rate.abs() < 1e15 {
                rate.to_string()
            } else {
                format!("{rate:e}")
            }
        })
    }
}

impl std::fmt::Display for ProbeRate {
    /// The number of packets per second as Rust prints an `f64` (`1000`, `2500.5`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Parses a byte count: `64`, `16k` (KiB), `4M` (MiB).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text
        .trim()
        .trim_end_matches(['B', 'b'])
        .trim_end_matches('i');
    let (num, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1024),
        Some('m' | 'M') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let value: usize = num
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count (try 64, 16k, 4M)"))?;
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large"))
}

pub use latlab_link::format_duration_ns;

/// A share 0..=1 given as a percentage (`10%`) or a fraction (`0.1`), as the link's
/// probabilities are; the error is one line naming `flag`.
pub fn parse_share(flag: &str, text: &str) -> Result<f64, String> {
    latlab_link::parse::probability(flag, text).map_err(|e| e.to_string())
}

/// A duration as latlab's flags take it, in the largest unit that shows it exactly (`10ms`,
/// `100us`, `1500ms`, `0`): what [`parse_duration`] reads back. Durations the user set
/// (options, intervals, delays) print through this; measured latencies through [`format_us`].
pub fn format_duration(d: Duration) -> String {
    format_duration_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Prints nanoseconds as microseconds with two decimals: `12.35 µs`.
pub fn format_us(ns: f64) -> String {
    let us = ns / 1000.0;
    if us >= 100_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.2} µs")
    }
}

/// Prints a rate: `1000 pps`, `12.5 kpps`, `1.20 Mpps`: the one format of packet rates, offered
/// and achieved alike. The unit is chosen after rounding, so 9999.7 pps prints as `10.0 kpps`
/// beside an offered 10000, not as `10000 pps`.
pub fn format_rate(pps: f64) -> String {
    if (pps / 100.0).round() >= 10_000.0 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps.round() >= 1e4 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

/// Parses a MAC address: six hexadecimal bytes separated by colons (`aa:bb:cc:dd:ee:ff`).
pub fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{text:?} is not a MAC address (aa:bb:cc:dd:ee:ff)");
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        let part = parts
            .next()
            .filter(|p| (1..=2).contains(&p.len()))
            .ok_or_else(bad)?;
        *b = u8::from_str_radix(part, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_are_read_and_anything_else_refused() {
        assert_eq!(
            parse_mac("02:1a:7a:B0:00:2"),
            Ok([0x02, 0x1a, 0x7a, 0xb0, 0x00, 0x02])
        );
        for bad in [
            "",
            "02:00:00",
            "02:00:00:00:00:00:00",
            "02:00:00:00:00:zz",
            "002:0:0:0:0:0",
        ] {
            assert!(
                parse_mac(bad).unwrap_err().contains("not a MAC address"),
                "{bad}"
            );
        }
    }

    #[test]
    fn durations_take_every_unit() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_duration("100µs").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    }

    #[test]
    fn bad_durations_say_what_is_wrong() {
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("ten").unwrap_err().contains("ten"));
        assert!(parse_duration("10 parsecs")
            .unwrap_err()
            .contains("parsecs"));
    }

    #[test]
    fn rates_take_suffixes_and_refuse_zero_and_negatives() {
        assert_eq!(parse_rate("10k").unwrap(), 10_000.0);
        assert_eq!(parse_rate("1.5M").unwrap(), 1_500_000.0);
        assert_eq!(parse_rate("2500pps").unwrap(), 2500.0);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-5").unwrap_err().contains("above 0"));
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn a_probe_rate_is_checked_once_where_it_is_made() {
        assert_eq!("10k".parse::<ProbeRate>().unwrap().pps(), 10_000.0);
        assert_eq!("1G".parse::<ProbeRate>().unwrap().pps(), MAX_RATE_PPS);
        assert_eq!(ProbeRate::try_from(2500.5).unwrap().to_string(), "2500.5");
        for text in ["2G", "1e12"] {
            assert_eq!(
                text.parse::<ProbeRate>().unwrap_err().to_string(),
                format!(
                    "{text} is above 1G (10^9) packets per second, the most a send schedule \
                     keeps: its due times are whole nanoseconds"
                )
            );
        }
        // parse_rate's own refusals, typed.
        assert_eq!(
            "fast".parse::<ProbeRate>().unwrap_err(),
            RateError::NotANumber("fast".into())
        );
        assert_eq!(
            "-5".parse::<ProbeRate>().unwrap_err().to_string(),
            parse_rate("-5").unwrap_err()
        );
        // From a number: the same bounds, the number as given.
        assert_eq!(
            ProbeRate::try_from(1e30).unwrap_err(),
            RateError::AboveMax("1e30".into())
        );
        assert_eq!(
            ProbeRate::try_from(0.0).unwrap_err().to_string(),
            "the rate must be above 0 packets per second, not 0"
        );
        assert!(ProbeRate::try_from(f64::NAN).is_err());
    }

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("64").unwrap(), 64);
        assert_eq!(parse_bytes("16k").unwrap(), 16 * 1024);
        assert_eq!(parse_bytes("4MiB").unwrap(), 4 << 20);
        assert!(parse_bytes("-1").is_err());
    }

    #[test]
    fn latencies_print_in_microseconds() {
        assert_eq!(format_us(12_345.0), "12.35 µs");
        assert_eq!(format_us(250_000_000.0), "250.0 ms");
        assert_eq!(format_rate(12_500.0), "12.5 kpps");
    }

    #[test]
    fn rates_near_a_unit_boundary_print_in_the_unit_of_their_rounded_value() {
        assert_eq!(format_rate(10_000.0), "10.0 kpps");
        assert_eq!(format_rate(9_999.7), "10.0 kpps");
        assert_eq!(format_rate(9_999.4), "9999 pps");
        assert_eq!(format_rate(999_996.0), "1.00 Mpps");
        assert_eq!(format_rate(999_940.0), "999.9 kpps");
        assert_eq!(format_rate(100.6), "101 pps");
    }

    #[test]
    fn set_durations_print_in_their_largest_exact_unit_and_read_back() {
        assert_eq!(format_duration(Duration::from_millis(10)), "10ms");
        assert_eq!(format_duration(Duration::ZERO), "0");
        assert_eq!(format_duration(Duration::from_micros(100)), "100us");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(3)), "3s");
        for d in [
            Duration::ZERO,
            Duration::from_nanos(250),
            Duration::from_micros(100),
            Duration::from_millis(10),
            Duration::from_millis(1500),
            Duration::from_secs(30),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{d:?}");
        }
    }
}
