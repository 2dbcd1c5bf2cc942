//! The emulator's knobs, each by the key it is spelled with after `--`, in a per-direction spec
//! (`--a-to-b "delay=1ms"`), in a TOML file and in a body for the control API: what a key
//! sets ([`apply`]), and the key that names a [`LinkConfig`] field in an error
//! ([`naming_key`]). [`super::config`] (flags, specs, files) and [`super::flow`] (per-flow
//! rules) both stand on it.

use std::path::Path;

use latlab_link::{parse, LinkConfig, Schedule};

/// Every key, as it is spelled after `--` and in specs and files.
pub const KEYS: [&str; 16] = [
    "delay",
    "jitter",
    "jitter-dist",
    "dist-table",
    "correlation",
    "loss",
    "duplicate",
    "corrupt",
    "reorder",
    "rate",
    "overhead",
    "limit",
    "limit-bytes",
    "schedule",
    "seed",
    "max-frame",
];

/// Sets `key` to `value` in `config`. File-valued keys (`schedule`, `dist-table`) read the file.
pub fn apply(config: &mut LinkConfig, key: &str, value: &str) -> Result<(), String> {
    let flag = format!("--{key}");
    let e = |err: latlab_link::ConfigError| err.to_string();
    match key {
        "delay" => config.delay_ns = parse::duration_ns(&flag, value).map_err(e)?,
        "jitter" => config.jitter_ns = parse::duration_ns(&flag, value).map_err(e)?,
        "jitter-dist" => config.jitter_dist = parse::distribution(&flag, value).map_err(e)?,
        "dist-table" => {
            let text = read(&flag, value)?;
            config.jitter_dist =
                latlab_link::JitterDist::Table(parse::dist_table(&flag, &text).map_err(e)?);
        }
        "correlation" => config.correlation = parse::probability(&flag, value).map_err(e)?,
        "loss" => config.loss = parse::loss(&flag, value).map_err(e)?,
        "duplicate" => config.duplicate = parse::probability(&flag, value).map_err(e)?,
        "corrupt" => config.corrupt = parse::probability(&flag, value).map_err(e)?,
        "reorder" => config.reorder = Some(parse::reorder(&flag, value).map_err(e)?),
        "rate" => {
            config.rate_bps = match value {
                "none" | "0" => None,
                v => Some(parse::rate_bps(&flag, v).map_err(e)?),
            }
        }
        "overhead" => {
            config.overhead_bytes = value
                .parse()
                .map_err(|_| format!("{flag}: {value:?} is not a byte count"))?
        }
        "limit" => {
            config.limit_frames = match value {
                "none" => None,
                v => Some(
                    v.parse()
                        .map_err(|_| format!("{flag}: {v:?} is not a number of frames"))?,
                ),
            }
        }
        "limit-bytes" => {
            config.limit_bytes = match value {
                "none" => None,
                v => Some(parse::bytes(&flag, v).map_err(e)?),
            }
        }
        "schedule" => {
            let text = read(&flag, value)?;
            config.schedule =
                Some(Schedule::parse(&text).map_err(|err| format!("{flag} {value}: {err}"))?);
        }
        "seed" => {
            config.seed = value
                .parse()
                .map_err(|_| format!("{flag}: {value:?} is not a number"))?
        }
        "max-frame" => config.max_frame = parse::bytes(&flag, value).map_err(e)?,
        other => {
            return Err(format!(
                "unknown impairment {other:?}: expected one of {}",
                KEYS.join(", ")
            ))
        }
    }
    Ok(())
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
        _ => Err(format!(
            "--config {}: {key}: expected a string or a number",
            path.display()
        )),
    }
}

/// The key (as its flag) that sets a [`LinkConfig`] field, for the messages of
/// [`LinkConfig::validate`], which name the field. `None` for a field no key sets alone.
pub fn key_of_field(field: &str) -> Option<&'static str> {
    Some(match field {
        "jitter_dist" => "--dist-table",
        "correlation" => "--correlation",
        "loss" => "--loss",
        "duplicate" => "--duplicate",
        "corrupt" => "--corrupt",
        "reorder" => "--reorder",
        "rate_bps" => "--rate",
        "limit_frames" => "--limit",
        "limit_bytes" => "--limit-bytes",
        "max_frame" => "--max-frame",
        "schedule" => "--schedule",
        _ => return None,
    })
}

/// A validation error's message with the field at fault named by its key, as the keys are
/// given (`limit_frames: must be at least 1 frame` becomes `--limit: must be ...`).
pub fn naming_key(error: latlab_link::ConfigError) -> String {
    let Some(key) = error.field().and_then(key_of_field) else {
        return error.to_string();
    };
    // The reason may name another field: say which key sets it.
    error
        .naming_field_as(key)
        .to_string()
        .replace("needs delay_ns above 0", "needs a --delay")
}
