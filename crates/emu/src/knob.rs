//! The emulator's knobs, one table ([`KNOBS`]): each row is a knob's key (in a per-direction
//! spec `--a-to-b "delay=1ms"`, a TOML file, a `--flow` rule and a body for the control API),
//! its command-line flags with their help (the CLI builds its impairment flags from them),
//! the [`LinkConfig`] field its errors are named by ([`naming_key`]), and what it sets. A new
//! knob is one row. [`super::config`] (flags, specs, files) and [`super::flow`] (per-flow
//! rules) both stand on it.

use std::path::Path;

use latlab_link::{parse, Discipline, LinkConfig, Schedule};
mod timing;

/// A command-line flag of a knob: its name after `--`, what `--help` says, and the name of
/// its value there.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    /// After `--`.
    pub name: &'static str,
    /// Its `--help` line.
    pub help: &'static str,
    /// Its value's name in `--help`.
    pub value_name: &'static str,
    /// Whether a value may start with `-` (a probability clap would take for a flag).
    pub hyphen_values: bool,
    /// The names its value takes, from the parser's own list, shown after the help
    /// (`--jitter-dist`'s distributions); empty for a value that is not a name.
    pub names: &'static [&'static str],
    /// The value it takes when given alone, as a switch (`--ecn`, `ecn` in a spec, for
    /// `ecn=on`); `None` for a flag that needs a value.
    pub alone: Option<&'static str>,
}

impl Flag {
    /// Its `--help` line, with the names it takes.
    pub fn help_text(&self) -> String {
        match self.names {
            [] => self.help.to_string(),
            names => format!("{}: {}", self.help, names.join(", ")),
        }
    }
}

/// One impairment knob: everything that names it, and what it sets.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// Its key in a per-direction spec, a TOML file and an API body (`delay=1ms`).
    pub key: &'static str,
    /// The flags that set it on the command line for both directions (`--loss` and
    /// `--loss-model` set the same knob; `max-frame` has none of its own: `--frame-size` is
    /// typed, and given to the knob as text).
    pub flags: &'static [Flag],
    /// The [`LinkConfig`] field [`LinkConfig::validate`] names when it refuses this knob's
    /// value, if this knob alone sets it.
    pub field: Option<&'static str>,
    /// Sets the knob to `value`, errors naming `flag` (`--delay`, or the flag or key the value
    /// came with). File-valued knobs (`schedule`, `dist-table`) read the file.
    pub set: fn(&mut LinkConfig, flag: &str, value: &str) -> Result<(), String>,
}

const fn flag(name: &'static str, value_name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        help,
        value_name,
        hyphen_values: false,
        names: &[],
        alone: None,
    }
}

const fn probability_flag(name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        help,
        value_name: "P",
        hyphen_values: true,
        names: &[],
        alone: None,
    }
}

/// A parser's error as text (it names the flag it was given).
fn text(err: latlab_link::ConfigError) -> String {
    err.to_string()
}

/// Every knob, in the order `--help` lists their flags and a spec is written: a new knob is
/// one row here (and, for how a running link shows it, one line in [`super::api::spec_text`]
/// and [`super::api::direction_json`]).
pub static KNOBS: &[Knob] = &[
    Knob {
        key: "delay",
        flags: &[flag(
            "delay",
            "DUR",
            "Delay added to every frame (both directions): 100us, 1ms.",
        )],
        field: None,
        set: |c, flag, v| {
            c.delay_ns = parse::duration_ns(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "jitter",
        flags: &[flag("jitter", "DUR", "Jitter around the delay.")],
        field: None,
        set: |c, flag, v| {
            c.jitter_ns = parse::duration_ns(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "jitter-dist",
        flags: &[Flag {
            names: &parse::DISTRIBUTIONS,
            ..flag("jitter-dist", "DIST", "Jitter distribution")
        }],
        field: None,
        set: |c, flag, v| {
            c.jitter_dist = parse::distribution(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "dist-table",
        flags: &[flag(
            "dist-table",
            "FILE",
            "Jitter values from a file (one number per line, in units of --jitter).",
        )],
        field: Some("jitter_dist"),
        set: |c, flag, v| {
            let file = read(flag, v)?;
            // Its errors name the file and the line: `--dist-table jitter.txt line 3: …`.
            let table = parse::dist_table(&format!("{flag} {v}"), &file).map_err(text)?;
            c.jitter_dist = latlab_link::JitterDist::Table(table);
            Ok(())
        },
    },
    Knob {
        key: "correlation",
        flags: &[flag(
            "correlation",
            "P",
            "Correlation of successive jitter values, 0..1.",
        )],
        field: Some("correlation"),
        set: |c, flag, v| {
            c.correlation = parse::probability(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "loss",
        flags: &[
            probability_flag("loss", "Independent loss probability: 1%, 0.01."),
            flag(
                "loss-model",
                "MODEL",
                "A loss model: gemodel:P,R,1-H,1-K or state:P13,P31,P32,P23,P14 (NetEm's \
                 definitions).",
            ),
        ],
        field: Some("loss"),
        set: |c, flag, v| {
            c.loss = parse::loss(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "duplicate",
        flags: &[probability_flag("duplicate", "Duplication probability.")],
        field: Some("duplicate"),
        set: |c, flag, v| {
            c.duplicate = parse::probability(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "corrupt",
        flags: &[probability_flag(
            "corrupt",
            "Corruption probability (one bit flipped).",
        )],
        field: Some("corrupt"),
        set: |c, flag, v| {
            c.corrupt = parse::probability(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "reorder",
        flags: &[flag(
            "reorder",
            "P",
            "Reordering: P (sent without the delay with probability P) or P,gap=N.",
        )],
        field: Some("reorder"),
        set: |c, flag, v| {
            c.reorder = Some(parse::reorder(flag, v).map_err(text)?);
            Ok(())
        },
    },
    Knob {
        key: "rate",
        flags: &[flag("rate", "RATE", "Rate limit: 1gbit, 100mbit, 56kbit.")],
        field: Some("rate_bps"),
        set: |c, flag, v| {
            c.rate_bps = match v {
                "none" | "0" => None,
                v => Some(parse::rate_bps(flag, v).map_err(text)?),
            };
            Ok(())
        },
    },
    Knob {
        key: "overhead",
        flags: &[flag(
            "overhead",
            "BYTES",
            "Per-frame overhead counted by the rate limit, bytes (default 24: preamble, gap, \
             FCS).",
        )],
        field: None,
        set: |c, flag, v| {
            c.overhead_bytes = v
                .parse()
                .map_err(|_| format!("{flag}: {v:?} is not a byte count"))?;
            Ok(())
        },
    },
    Knob {
        key: "limit",
        flags: &[flag(
            "limit",
            "FRAMES",
            "Queue limit in frames (default 1000).",
        )],
        field: Some("limit_frames"),
        set: |c, flag, v| {
            c.limit_frames = match v {
                "none" => None,
                v => Some(
                    v.parse()
                        .map_err(|_| format!("{flag}: {v:?} is not a number of frames"))?,
                ),
            };
            Ok(())
        },
    },
    Knob {
        key: "limit-bytes",
        flags: &[flag("limit-bytes", "BYTES", "Queue limit in bytes.")],
        field: Some("limit_bytes"),
        set: |c, flag, v| {
            c.limit_bytes = match v {
                "none" => None,
                v => Some(parse::bytes(flag, v).map_err(text)?),
            };
            Ok(())
        },
    },
    Knob {
        key: "aqm",
        flags: &[Flag {
            names: &Discipline::NAMES,
            ..flag(
                "aqm",
                "QDISC",
                "Queue discipline at the rate's queue (needs --rate; default tail)",
            )
        }],
        field: Some("aqm"),
        set: |c, flag, v| {
            c.aqm.discipline = Discipline::from_name(v).ok_or_else(|| {
                format!(
                    "{flag}: {v:?} is not a queue discipline: expected one of {}",
                    Discipline::NAMES.join(", ")
                )
            })?;
            Ok(())
        },
    },
    Knob {
        key: "target",
        flags: &[flag(
            "target",
            "DUR",
            "AQM target queue delay (default 5ms for codel and fq_codel, 15ms for pie and \
             dualpi2's classic queue).",
        )],
        field: Some("aqm_target"),
        set: |c, flag, v| {
            c.aqm.target_ns = Some(parse::duration_ns(flag, v).map_err(text)?);
            Ok(())
        },
    },
    Knob {
        key: "interval",
        flags: &[flag(
            "interval",
            "DUR",
            "CoDel's and FQ-CoDel's interval (default 100ms).",
        )],
        field: Some("aqm_interval"),
        set: |c, flag, v| {
            c.aqm.interval_ns = parse::duration_ns(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "flows",
        flags: &[flag("flows", "N", "FQ-CoDel's flow queues (default 1024).")],
        field: Some("aqm_flows"),
        set: |c, flag, v| {
            c.aqm.flows = v
                .parse()
                .map_err(|_| format!("{flag}: {v:?} is not a number of flows"))?;
            Ok(())
        },
    },
    Knob {
        key: "quantum",
        flags: &[flag(
            "quantum",
            "BYTES",
            "FQ-CoDel's quantum, bytes a queue sends per round (default 1514).",
        )],
        field: Some("aqm_quantum"),
        set: |c, flag, v| {
            c.aqm.quantum = v
                .parse()
                .map_err(|_| format!("{flag}: {v:?} is not a byte count"))?;
            Ok(())
        },
    },
    Knob {
        key: "tupdate",
        flags: &[flag(
            "tupdate",
            "DUR",
            "PIE's and DualPI2's update period (default 15ms for pie, 16ms for dualpi2).",
        )],
        field: Some("aqm_tupdate"),
        set: |c, flag, v| {
            c.aqm.tupdate_ns = Some(parse::duration_ns(flag, v).map_err(text)?);
            Ok(())
        },
    },
    Knob {
        key: "alpha",
        flags: &[flag(
            "alpha",
            "HZ",
            "PIE's and DualPI2's alpha (default 0.125 for pie, 0.16 for dualpi2).",
        )],
        field: Some("aqm_alpha"),
        set: |c, flag, v| {
            c.aqm.alpha = Some(number(flag, v)?);
            Ok(())
        },
    },
    Knob {
        key: "beta",
        flags: &[flag(
            "beta",
            "HZ",
            "PIE's and DualPI2's beta (default 1.25 for pie, 3.2 for dualpi2).",
        )],
        field: Some("aqm_beta"),
        set: |c, flag, v| {
            c.aqm.beta = Some(number(flag, v)?);
            Ok(())
        },
    },
    Knob {
        key: "max-burst",
        flags: &[flag(
            "max-burst",
            "DUR",
            "PIE's burst allowance (default 150ms).",
        )],
        field: Some("aqm_max_burst"),
        set: |c, flag, v| {
            c.aqm.max_burst_ns = parse::duration_ns(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "coupling",
        flags: &[flag(
            "coupling",
            "K",
            "DualPI2's coupling factor: the L4S queue marks with K·p' where the classic queue \
             drops with p'² (default 2).",
        )],
        field: Some("aqm_coupling"),
        set: |c, flag, v| {
            c.aqm.coupling = number(flag, v)?;
            Ok(())
        },
    },
    Knob {
        key: "step",
        flags: &[flag(
            "step",
            "DUR",
            "DualPI2's L4S step: an L4S frame that waited this long is marked (default 1ms).",
        )],
        field: Some("aqm_step"),
        set: |c, flag, v| {
            c.aqm.step_ns = parse::duration_ns(flag, v).map_err(text)?;
            Ok(())
        },
    },
    Knob {
        key: "ecn",
        flags: &[Flag {
            alone: Some("on"),
            ..flag(
                "ecn",
                "on|off",
                "Mark ECN-capable frames CE instead of the AQM dropping them (--ecn alone: on).",
            )
        }],
        field: Some("ecn"),
        set: |c, flag, v| {
            c.aqm.ecn = match v {
                "on" | "" => true,
                "off" => false,
                v => return Err(format!("{flag}: {v:?} is not on or off")),
            };
            Ok(())
        },
    },
    Knob {
        key: "schedule",
        flags: &[flag(
            "schedule",
            "FILE",
            "Conditions that change over time: lines of `TIME DELAY LOSS RATE`.",
        )],
        field: Some("schedule"),
        set: |c, flag, v| {
            let text = read(flag, v)?;
            let schedule = Schedule::parse(&text).map_err(|err| format!("{flag} {v}: {err}"))?;
            c.schedule = Some(schedule);
            Ok(())
        },
    },
    Knob {
        key: "trace",
        flags: &[flag(
            "trace",
            "FILE",
            "The link's capacity from a delivery trace in mahimahi's format (one line per \
             1,500-byte opportunity, in ms; it repeats), in place of --rate.",
        )],
        field: Some("trace"),
        set: |c, flag, v| {
            let trace = latlab_link::trace::DeliveryTrace::read(std::path::Path::new(v))
                .map_err(|err| format!("{flag}: {err}"))?;
            c.trace = Some(trace);
            Ok(())
        },
    },
    timing::DELAY_TRACE,
    timing::DELAY_TRACE_STEP,
    timing::DELAY_TRACE_MODE,
    timing::SLOT,
    timing::SLOT_DIST,
    timing::SLOT_PACKETS,
    timing::SLOT_BYTES,
    Knob {
        key: "seed",
        flags: &[flag("seed", "N", "Seed of the random choices.")],
        field: None,
        set: |c, flag, v| {
            c.seed = v
                .parse()
                .map_err(|_| format!("{flag}: {v:?} is not a number"))?;
            Ok(())
        },
    },
    Knob {
        key: "max-frame",
        flags: &[],
        field: Some("max_frame"),
        set: |c, flag, v| {
            c.max_frame = parse::bytes(flag, v).map_err(text)?;
            Ok(())
        },
    },
];

/// Every key, as it is spelled after `--` and in specs and files.
pub fn keys() -> impl Iterator<Item = &'static str> {
    KNOBS.iter().map(|k| k.key)
}

/// The knob of `key`; `_` may stand for `-` (`max_burst` for `max-burst`).
pub fn knob(key: &str) -> Option<&'static Knob> {
    KNOBS
        .iter()
        .find(|k| k.key == key || (key.contains('_') && k.key == key.replace('_', "-")))
}

/// A spec's `key=value` pair as key and value; a key alone is a switch's (`ecn`), given the
/// value its flag takes alone ([`Flag::alone`]). `None` for a key alone that is no switch.
pub fn key_value(pair: &str) -> Option<(&str, &str)> {
    if let Some(kv) = pair.split_once('=') {
        return Some(kv);
    }
    let knob = knob(pair)?;
    let alone = knob.flags.iter().find_map(|f| f.alone)?;
    Some((pair, alone))
}

/// The knob a command-line flag (its name after `--`) sets.
pub fn knob_of_flag(name: &str) -> Option<&'static Knob> {
    KNOBS
        .iter()
        .find(|k| k.flags.iter().any(|f| f.name == name))
}

/// Sets `key` to `value` in `config`, errors naming `--KEY`.
pub fn apply(config: &mut LinkConfig, key: &str, value: &str) -> Result<(), String> {
    apply_named(config, key, value, &format!("--{key}"))
}

/// Sets `key` to `value` in `config`, errors naming `name`: the key as it was given (`delay`
/// in a spec or an API body, `[a_to_b] delay` in a file), where [`apply`] names its flag.
pub fn apply_named(
    config: &mut LinkConfig,
    key: &str,
    value: &str,
    name: &str,
) -> Result<(), String> {
    let knob = knob(key).ok_or_else(|| {
        format!(
            "unknown impairment {key:?}: expected one of {}",
            keys().collect::<Vec<_>>().join(", ")
        )
    })?;
    (knob.set)(config, name, value)
}

/// A finite number, errors naming `flag`.
fn number(flag: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{flag}: {v:?} is not a number"))
}

fn read(flag: &str, path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|err| format!("{flag} {path}: {err}"))
}

/// A key's value as text (a string or a number); anything else is an error naming the file.
pub(crate) fn scalar(path: &Path, key: &str, value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.to_string()),
        _ => Err(format!(
            "--config {}: {key}: expected a string, a number or a boolean",
            path.display()
        )),
    }
}

/// The key (as its flag) that sets a [`LinkConfig`] field, for the messages of
/// [`LinkConfig::validate`], which name the field. `None` for a field no key sets alone.
pub fn key_of_field(field: &str) -> Option<String> {
    KNOBS
        .iter()
        .find(|k| k.field == Some(field))
        .map(|k| format!("--{}", k.key))
}

/// A validation error's message with the field at fault named by its key, as the keys are
/// given (`limit_frames: must be at least 1 frame` becomes `--limit: must be ...`).
pub fn naming_key(error: latlab_link::ConfigError) -> String {
    let Some(key) = error.field().and_then(key_of_field) else {
        return error.to_string();
    };
    // The reason may name another field: say which key sets it.
    error
        .naming_field_as(&key)
        .to_string()
        .replace("needs delay_ns above 0", "needs a --delay")
        .replace("needs rate_bps or a trace", "needs a --rate or a --trace")
        .replace("leave rate_bps out", "leave --rate out")
        .replace("leave delay_ns out", "leave --delay out")
        .replace("needs rate_bps", "needs a --rate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_and_flag_names_one_knob() {
        let mut names = std::collections::BTreeSet::new();
        for k in KNOBS {
            assert!(std::ptr::eq(knob(k.key).unwrap(), k), "{}", k.key);
            for f in k.flags {
                assert!(names.insert(f.name), "--{} twice", f.name);
                assert!(
                    std::ptr::eq(knob_of_flag(f.name).unwrap(), k),
                    "--{}",
                    f.name
                );
            }
        }
        let keys: std::collections::BTreeSet<_> = keys().collect();
        assert_eq!(keys.len(), KNOBS.len(), "a key twice");
    }

    #[test]
    fn a_knobs_errors_name_the_flag_it_was_given_with() {
        let mut c = LinkConfig::default();
        let loss = knob_of_flag("loss-model").unwrap();
        let err = (loss.set)(&mut c, "--loss-model", "gemodel:x").unwrap_err();
        assert!(err.starts_with("--loss-model"), "{err}");
        let err = apply(&mut c, "loss", "gemodel:x").unwrap_err();
        assert!(err.starts_with("--loss"), "{err}");
        let frame = knob("max-frame").unwrap();
        let err = (frame.set)(&mut c, "--frame-size", "big").unwrap_err();
        assert!(err.starts_with("--frame-size"), "{err}");
        // Every validated field is named by the key that sets it.
        for k in KNOBS.iter().filter(|k| k.field.is_some()) {
            assert_eq!(key_of_field(k.field.unwrap()), Some(format!("--{}", k.key)));
        }
    }
}
