//! Parsers for the command-line forms of the link's knobs. Each takes the flag it reads (or the
//! file field, e.g. `DELAY`) so that its error names it:
//!
//! | parser | accepts |
//! |---|---|
//! | [`duration_ns`] | `250ns`, `100us`, `1.5ms`, `2s`, `0` |
//! | [`probability`] | `1%`, `0.01`, `0` (kept to a millionth of a percent) |
//! | [`rate_bps`] | `1gbit`, `100mbit`, `56kbit`, `9600bit`, `1000000` (bits per second) |
//! | [`bytes`] | `1500`, `64k`, `1m` (powers of 1024, as `tc`) |
//! | [`loss`] | `none`, `1%`, `random:1%`, `gemodel:P[,R[,1-H[,1-K]]]`, `state:P13[,P31[,P32[,P23[,P14]]]]` |
//! | [`distribution`] | `uniform`, `normal`, `pareto`, `paretonormal` |
//! | [`dist_table`] | a table file: numbers in units of jitter, `#` comments |
//! | [`netem_dist_table`] | a NetEm `.dist` file: integers scaled by 8192 |
//! | [`reorder`] | `25%`, `100%,gap=5`, `100%,5` |

use crate::config::{check_probability, check_table};
use crate::{ConfigError, JitterDist, LossModel, Reorder};

/// What [`duration_ns`] accepts, for its error.
const DURATION: &str = "a duration (a number and ns, us, ms or s: 100us, 1.5ms)";
/// What [`probability`] accepts, for its error.
const PROBABILITY: &str = "a probability (1% or 0.01)";
/// What [`rate_bps`] accepts, for its error.
const RATE: &str = "a rate (1gbit, 100mbit, 56kbit, or bits per second: 1000000)";
/// What [`bytes`] accepts, for its error.
const BYTES: &str = "a size in bytes (1500, 64k, 1m)";
/// What [`loss`] accepts, for its error.
const LOSS: &str =
    "a loss model (none, 1%, 0.01, gemodel:P[,R[,1-H[,1-K]]], state:P13[,P31[,P32[,P23[,P14]]]])";
/// What [`distribution`] accepts, for its error.
const DISTRIBUTION: &str = "a distribution (uniform, normal, pareto, paretonormal)";
/// What a table value must be, for [`dist_table`]'s error.
const TABLE_VALUE: &str = "a number";
/// What a reorder gap must be, for [`reorder`]'s error.
const GAP: &str = "a number of frames, at least 1 (5)";

/// NetEm's `NETEM_DIST_SCALE`: a `.dist` file's integers are jitters times 8192.
pub const NETEM_DIST_SCALE: f64 = 8192.0;

/// A duration in nanoseconds: a number (decimals allowed) and a unit, `ns`, `us` (or `µs`,
/// `usec`), `ms` (`msec`), `s` (`sec`). A unit is required unless the value is 0.
pub fn duration_ns(flag: &str, text: &str) -> Result<u64, ConfigError> {
    let (value, unit) = split_number(flag, text, DURATION)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "ns" | "nsec" => 1.0,
        "us" | "µs" | "usec" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        "" if value == 0.0 => 1.0,
        _ => return Err(unreadable(flag, text, DURATION)),
    };
    to_u64(flag, text, value * scale)
}

/// The resolution probabilities are kept at: a millionth of a percent, the precision every
/// setting is shown at (the API, the report, `--json`), so what is shown is what runs.
pub const PROBABILITY_RESOLUTION: f64 = 1e-8;

/// A probability 0..=1: a percentage (`1%`) or a fraction (`0.01`), rounded to
/// [`PROBABILITY_RESOLUTION`]. A bare number above 1 is refused rather than read as a
/// percentage.
pub fn probability(flag: &str, text: &str) -> Result<f64, ConfigError> {
    let trimmed = text.trim();
    let value = if let Some(percent) = trimmed.strip_suffix('%') {
        parse_f64(percent).ok_or_else(|| unreadable(flag, text, PROBABILITY))? / 100.0
    } else {
        let value = parse_f64(trimmed).ok_or_else(|| unreadable(flag, text, PROBABILITY))?;
        if value > 1.0 {
            return Err(ConfigError::Invalid {
                option: flag.to_string(),
                reason: format!("{trimmed} is above 1; write {trimmed}% for a percentage"),
            });
        }
        value
    };
    check_probability(flag, value)?;
    // Divided by the exact steps per unit, so that k steps is the double nearest k × 1e-8,
    // the one the shown text reads back as.
    const STEPS: f64 = 100_000_000.0;
    debug_assert_eq!(STEPS * PROBABILITY_RESOLUTION, 1.0);
    Ok((value * STEPS).round() / STEPS)
}

/// A rate in bits per second: a number and `bit`, `kbit`, `mbit`, `gbit` or `tbit` (powers of
/// 1000, any case), or a bare number of bits per second. Must be at least 1 bit/s.
pub fn rate_bps(flag: &str, text: &str) -> Result<u64, ConfigError> {
    let (value, unit) = split_number(flag, text, RATE)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        _ => return Err(unreadable(flag, text, RATE)),
    };
    let rate = to_u64(flag, text, value * scale)?;
    if rate == 0 {
        return Err(ConfigError::Invalid {
            option: flag.to_string(),
            reason: format!("{} is not above 0 bit/s", text.trim()),
        });
    }
    Ok(rate)
}

/// A size in bytes: a number and an optional `k`/`kb`, `m`/`mb`, `g`/`gb` (powers of 1024, as
/// `tc` reads sizes).
pub fn bytes(flag: &str, text: &str) -> Result<usize, ConfigError> {
    let (value, unit) = split_number(flag, text, BYTES)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(unreadable(flag, text, BYTES)),
    };
    let size = to_u64(flag, text, value * scale)?;
    usize::try_from(size).map_err(|_| ConfigError::Invalid {
        option: flag.to_string(),
        reason: format!("{} does not fit in memory", text.trim()),
    })
}

/// A loss model: `none`; a probability of independent loss (`1%`, `0.01`, `random:1%`);
/// `gemodel:P[,R[,1-H[,1-K]]]` (Gilbert-Elliott, NetEm's defaults R = 1 − P, 1-H = 100%,
/// 1-K = 0%); or `state:P13[,P31[,P32[,P23[,P14]]]]` (4-state Markov, NetEm's defaults
/// P31 = 1 − P13, P32 = 0, P23 = 100%, P14 = 0). See [`LossModel`].
pub fn loss(flag: &str, text: &str) -> Result<LossModel, ConfigError> {
    let trimmed = text.trim();
    let model = if trimmed.eq_ignore_ascii_case("none") {
        LossModel::None
    } else if let Some(params) = trimmed.strip_prefix("gemodel:") {
        let values = probabilities(
            &format!("{flag} gemodel"),
            params,
            &["p", "r", "1-h", "1-k"],
        )?;
        let p = values[0];
        LossModel::GilbertElliott {
            p,
            r: values.get(1).copied().unwrap_or(1.0 - p),
            one_minus_h: values.get(2).copied().unwrap_or(1.0),
            one_minus_k: values.get(3).copied().unwrap_or(0.0),
        }
    } else if let Some(params) = trimmed.strip_prefix("state:") {
        let names = ["p13", "p31", "p32", "p23", "p14"];
        let values = probabilities(&format!("{flag} state"), params, &names)?;
        let p13 = values[0];
        LossModel::FourState {
            p13,
            p31: values.get(1).copied().unwrap_or(1.0 - p13),
            p32: values.get(2).copied().unwrap_or(0.0),
            p23: values.get(3).copied().unwrap_or(1.0),
            p14: values.get(4).copied().unwrap_or(0.0),
        }
    } else {
        let number = trimmed.strip_prefix("random:").unwrap_or(trimmed);
        if parse_f64(number.strip_suffix('%').unwrap_or(number)).is_none() {
            return Err(unreadable(flag, text, LOSS));
        }
        let p = probability(flag, number)?;
        if p == 0.0 {
            LossModel::None
        } else {
            LossModel::Bernoulli { p }
        }
    };
    model.validate(flag)?;
    Ok(model)
}

/// The jitter distributions [`distribution`] takes by name.
pub const DISTRIBUTIONS: [&str; 4] = ["uniform", "normal", "pareto", "paretonormal"];

/// A named jitter distribution: `uniform`, `normal`, `pareto` or `paretonormal` (any case).
/// A table comes from a file: [`dist_table`] or [`netem_dist_table`].
pub fn distribution(flag: &str, text: &str) -> Result<JitterDist, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "uniform" => Ok(JitterDist::Uniform),
        "normal" => Ok(JitterDist::Normal),
        "pareto" => Ok(JitterDist::Pareto),
        "paretonormal" => Ok(JitterDist::ParetoNormal),
        _ => Err(unreadable(flag, text, DISTRIBUTION)),
    }
}

/// A distribution table file: numbers in units of jitter, separated by white space or line
/// breaks (one per line is the usual form), `#` comments; at least one. `flag` names the table
/// in errors, with the line (`--dist-table FILE`: `--dist-table FILE line 3: …`). Each frame's jitter
/// is one of them, drawn uniformly, so their mean and spread are the distribution's.
pub fn dist_table(flag: &str, text: &str) -> Result<Vec<f64>, ConfigError> {
    let mut values = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or_default();
        for word in content.split_whitespace() {
            let value = parse_f64(word)
                .filter(|value| value.is_finite())
                .ok_or_else(|| ConfigError::Line {
                    file: flag.to_string(),
                    line: index + 1,
                    cause: Box::new(unreadable("value", word, TABLE_VALUE)),
                })?;
            values.push(value);
        }
    }
    check_table(flag, &values)?;
    Ok(values)
}

/// A NetEm `.dist` file (`/usr/lib/tc/normal.dist` and the like, or one made by NetEm's
/// `maketable`): integers that are jitters times [`NETEM_DIST_SCALE`].
pub fn netem_dist_table(flag: &str, text: &str) -> Result<Vec<f64>, ConfigError> {
    let mut values = dist_table(flag, text)?;
    for value in &mut values {
        *value /= NETEM_DIST_SCALE;
    }
    Ok(values)
}

/// Reordering: `P` (every frame a candidate) or `P,gap=N` / `P,N` (NetEm's `reorder P gap N`).
pub fn reorder(flag: &str, text: &str) -> Result<Reorder, ConfigError> {
    let (probability_text, gap_text) = match text.split_once(',') {
        Some((probability_text, gap_text)) => (probability_text, Some(gap_text.trim())),
        None => (text, None),
    };
    let gap_flag = format!("{flag} gap");
    let gap = match gap_text {
        None => None,
        Some(gap_text) => {
            let number = gap_text.strip_prefix("gap=").unwrap_or(gap_text);
            match number.trim().parse::<u32>() {
                Ok(gap) if gap >= 1 => Some(gap),
                _ => return Err(unreadable(&gap_flag, gap_text, GAP)),
            }
        }
    };
    let reorder = Reorder {
        probability: probability(flag, probability_text)?,
        gap,
    };
    reorder.validate(flag)?;
    Ok(reorder)
}

/// Comma-separated probabilities, at least one and at most `names.len()`; errors name
/// `option` and the parameter.
fn probabilities(option: &str, params: &str, names: &[&str]) -> Result<Vec<f64>, ConfigError> {
    let parts: Vec<&str> = params.split(',').collect();
    if parts.len() > names.len() {
        return Err(ConfigError::Invalid {
            option: option.to_string(),
            reason: format!(
                "takes 1 to {} values ({}), not {}",
                names.len(),
                names.join(","),
                parts.len()
            ),
        });
    }
    parts
        .iter()
        .zip(names)
        .map(|(part, name)| probability(&format!("{option} {name}"), part))
        .collect()
}

/// Splits `12.5ms` into 12.5 and `ms`: the leading digits and dots, then the rest.
fn split_number<'a>(
    flag: &str,
    text: &'a str,
    expected: &'static str,
) -> Result<(f64, &'a str), ConfigError> {
    let trimmed = text.trim();
    let end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(end);
    let value = parse_f64(number).ok_or_else(|| unreadable(flag, text, expected))?;
    Ok((value, unit.trim()))
}

/// A finite, non-negative number of nanoseconds, bits per second or bytes, rounded.
fn to_u64(flag: &str, text: &str, value: f64) -> Result<u64, ConfigError> {
    // 2^64 as a float: every float below it converts to u64 without saturating.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    let rounded = value.round();
    if !(0.0..LIMIT).contains(&rounded) {
        return Err(ConfigError::Invalid {
            option: flag.to_string(),
            reason: format!("{} is too large", text.trim()),
        });
    }
    Ok(rounded as u64)
}

/// A decimal number, or `None`; refuses the words Rust's float parser accepts (`inf`, `NaN`).
fn parse_f64(text: &str) -> Option<f64> {
    let text = text.trim();
    let numeric = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
    text.parse::<f64>().ok().filter(|_| numeric)
}

/// A [`ConfigError::Unreadable`].
fn unreadable(option: &str, input: &str, expected: &'static str) -> ConfigError {
    ConfigError::Unreadable {
        option: option.to_string(),
        input: input.trim().to_string(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message<T: std::fmt::Debug>(result: Result<T, ConfigError>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn durations_take_ns_us_ms_and_s() {
        assert_eq!(duration_ns("--delay", "250ns"), Ok(250));
        assert_eq!(duration_ns("--delay", "100us"), Ok(100_000));
        assert_eq!(duration_ns("--delay", "100µs"), Ok(100_000));
        assert_eq!(duration_ns("--delay", "1ms"), Ok(1_000_000));
        assert_eq!(duration_ns("--delay", "0.1ms"), Ok(100_000));
        assert_eq!(duration_ns("--delay", "1.5ms"), Ok(1_500_000));
        assert_eq!(duration_ns("--delay", " 2s "), Ok(2_000_000_000));
        assert_eq!(duration_ns("--delay", "0"), Ok(0));
    }

    #[test]
    fn bad_durations_name_the_flag() {
        assert_eq!(
            message(duration_ns("--jitter", "10")),
            "--jitter: cannot read \"10\" as a duration (a number and ns, us, ms or s: 100us, 1.5ms)"
        );
        assert!(message(duration_ns("--delay", "-1ms")).starts_with("--delay: cannot read"));
        assert!(message(duration_ns("--delay", "ms")).starts_with("--delay: cannot read"));
        assert!(message(duration_ns("--delay", "1.2.3ms")).starts_with("--delay: cannot read"));
        assert!(message(duration_ns("--delay", "1h")).starts_with("--delay: cannot read"));
        assert!(message(duration_ns("--delay", "")).starts_with("--delay: cannot read"));
        assert_eq!(
            message(duration_ns("--delay", "99999999999999s")),
            "--delay: 99999999999999s is too large"
        );
    }

    #[test]
    fn probabilities_take_percentages_and_fractions() {
        assert_eq!(probability("--loss", "1%"), Ok(0.01));
        assert_eq!(probability("--loss", "0.01"), Ok(0.01));
        assert_eq!(probability("--loss", "100%"), Ok(1.0));
        assert_eq!(probability("--loss", "0"), Ok(0.0));
        assert_eq!(probability("--loss", "1e-3"), Ok(0.001));
        assert_eq!(
            message(probability("--loss", "120%")),
            "--loss: 120% is above 100%"
        );
        assert_eq!(
            message(probability("--loss", "5")),
            "--loss: 5 is above 1; write 5% for a percentage"
        );
        assert_eq!(
            message(probability("--duplicate", "-1%")),
            "--duplicate: -1% is below 0%"
        );
        assert_eq!(
            message(probability("--corrupt", "lots")),
            "--corrupt: cannot read \"lots\" as a probability (1% or 0.01)"
        );
        assert!(message(probability("--loss", "NaN")).starts_with("--loss: cannot read"));
        assert!(message(probability("--loss", "inf%")).starts_with("--loss: cannot read"));
    }

    #[test]
    fn rates_take_bit_kbit_mbit_gbit_and_bare_numbers() {
        assert_eq!(rate_bps("--rate", "1gbit"), Ok(1_000_000_000));
        assert_eq!(rate_bps("--rate", "100mbit"), Ok(100_000_000));
        assert_eq!(rate_bps("--rate", "100Mbit"), Ok(100_000_000));
        assert_eq!(rate_bps("--rate", "56kbit"), Ok(56_000));
        assert_eq!(rate_bps("--rate", "1.5mbit"), Ok(1_500_000));
        assert_eq!(rate_bps("--rate", "9600bit"), Ok(9600));
        assert_eq!(rate_bps("--rate", "1000000"), Ok(1_000_000));
        assert_eq!(
            message(rate_bps("--rate", "10mbps")),
            "--rate: cannot read \"10mbps\" as a rate (1gbit, 100mbit, 56kbit, or bits per second: 1000000)"
        );
        assert_eq!(
            message(rate_bps("--rate", "0")),
            "--rate: 0 is not above 0 bit/s"
        );
        assert!(message(rate_bps("--rate", "fast")).starts_with("--rate: cannot read"));
    }

    #[test]
    fn sizes_take_powers_of_1024() {
        assert_eq!(bytes("--limit-bytes", "1500"), Ok(1500));
        assert_eq!(bytes("--limit-bytes", "64k"), Ok(65_536));
        assert_eq!(bytes("--limit-bytes", "64kb"), Ok(65_536));
        assert_eq!(bytes("--limit-bytes", "1m"), Ok(1_048_576));
        assert!(message(bytes("--limit-bytes", "1q")).starts_with("--limit-bytes: cannot read"));
    }

    #[test]
    fn loss_models_take_netem_forms_with_netem_defaults() {
        assert_eq!(loss("--loss", "none"), Ok(LossModel::None));
        assert_eq!(loss("--loss", "0%"), Ok(LossModel::None));
        // Below a millionth of a percent is none (what the link_spec fuzz target found: it
        // was kept, and shown as loss=0%, which reads back as no loss at all).
        assert_eq!(
            loss("--loss", ".000000000000000000004"),
            Ok(LossModel::None)
        );
        assert_eq!(probability("--x", "0.0000123456789%"), Ok(0.00000012));
        assert_eq!(loss("--loss", "1%"), Ok(LossModel::Bernoulli { p: 0.01 }));
        assert_eq!(
            loss("--loss", "random:0.5%"),
            Ok(LossModel::Bernoulli { p: 0.005 })
        );
        assert_eq!(
            loss("--loss", "gemodel:1%"),
            Ok(LossModel::GilbertElliott {
                p: 0.01,
                r: 0.99,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            })
        );
        assert_eq!(
            loss("--loss", "gemodel:1%,30%,80%,0.1%"),
            Ok(LossModel::GilbertElliott {
                p: 0.01,
                r: 0.3,
                one_minus_h: 0.8,
                one_minus_k: 0.001
            })
        );
        assert_eq!(
            loss("--loss", "state:1%"),
            Ok(LossModel::FourState {
                p13: 0.01,
                p31: 0.99,
                p32: 0.0,
                p23: 1.0,
                p14: 0.0
            })
        );
        assert_eq!(
            loss("--loss", "state:1%,50%,10%,5%,0.5%"),
            Ok(LossModel::FourState {
                p13: 0.01,
                p31: 0.5,
                p32: 0.1,
                p23: 0.05,
                p14: 0.005
            })
        );
    }

    #[test]
    fn bad_loss_models_name_the_flag_and_the_parameter() {
        assert_eq!(
            message(loss("--loss", "gemodel:1%,130%")),
            "--loss gemodel r: 130% is above 100%"
        );
        assert_eq!(
            message(loss("--loss", "gemodel:1%,2%,3%,4%,5%")),
            "--loss gemodel: takes 1 to 4 values (p,r,1-h,1-k), not 5"
        );
        assert!(message(loss("--loss", "gemodel:")).starts_with("--loss gemodel p: cannot read"));
        assert_eq!(
            message(loss("--loss", "state:60%,50%,0,100%,60%")),
            "--loss state: p13 + p14 = 120% is above 100%"
        );
        assert!(message(loss("--loss", "state:1%,x")).starts_with("--loss state p31: cannot read"));
        assert!(message(loss("--loss", "bursty"))
            .starts_with("--loss: cannot read \"bursty\" as a loss model"));
        assert_eq!(
            message(loss("--loss", "120%")),
            "--loss: 120% is above 100%"
        );
    }

    #[test]
    fn every_named_distribution_parses_and_its_error_lists_them_all() {
        for name in DISTRIBUTIONS {
            assert!(distribution("--x", name).is_ok(), "{name}");
        }
        assert!(DISTRIBUTION.ends_with(&format!("({})", DISTRIBUTIONS.join(", "))));
    }

    #[test]
    fn distributions_are_named() {
        assert_eq!(
            distribution("--distribution", "uniform"),
            Ok(JitterDist::Uniform)
        );
        assert_eq!(
            distribution("--distribution", "Normal"),
            Ok(JitterDist::Normal)
        );
        assert_eq!(
            distribution("--distribution", "pareto"),
            Ok(JitterDist::Pareto)
        );
        assert_eq!(
            distribution("--distribution", "paretonormal"),
            Ok(JitterDist::ParetoNormal)
        );
        assert_eq!(
            message(distribution("--distribution", "gauss")),
            "--distribution: cannot read \"gauss\" as a distribution (uniform, normal, pareto, paretonormal)"
        );
    }

    #[test]
    fn distribution_tables_read_numbers_and_skip_comments() {
        let text = "# measured on the lab's wifi\n-1.0\n0\n\n0.5   # a note\n2.5\n";
        assert_eq!(
            dist_table("--distribution", text),
            Ok(vec![-1.0, 0.0, 0.5, 2.5])
        );
        assert_eq!(
            netem_dist_table("--distribution", "-8192 0 4096\n16384"),
            Ok(vec![-1.0, 0.0, 0.5, 2.0])
        );
        assert_eq!(
            message(dist_table("--distribution", "1\n2\nthree\n")),
            "--distribution line 3: value: cannot read \"three\" as a number"
        );
        assert!(message(dist_table("--distribution", "1\ninf\n")).contains("line 2"));
        assert_eq!(
            message(dist_table("--distribution", "# nothing\n")),
            "--distribution: the distribution table has no values"
        );
    }

    #[test]
    fn reorder_takes_a_probability_and_an_optional_gap() {
        assert_eq!(
            reorder("--reorder", "25%"),
            Ok(Reorder {
                probability: 0.25,
                gap: None
            })
        );
        assert_eq!(
            reorder("--reorder", "100%,gap=5"),
            Ok(Reorder {
                probability: 1.0,
                gap: Some(5)
            })
        );
        assert_eq!(
            reorder("--reorder", "50%, 3"),
            Ok(Reorder {
                probability: 0.5,
                gap: Some(3)
            })
        );
        assert_eq!(
            message(reorder("--reorder", "100%,gap=0")),
            "--reorder gap: cannot read \"gap=0\" as a number of frames, at least 1 (5)"
        );
        assert_eq!(
            message(reorder("--reorder", "150%")),
            "--reorder: 150% is above 100%"
        );
    }
}
