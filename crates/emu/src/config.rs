//! The emulator's impairments from the command line, per-direction specs and TOML files.
//!
//! One set of keys serves all three: `--delay 1ms` on the command line applies to both
//! directions; `--a-to-b "delay=1ms loss=1%"` to one (space-separated `key=value` pairs); and a
//! TOML file has the same keys at the top level (both directions) and in `[a_to_b]` and
//! `[b_to_a]` tables. Later sources override earlier ones: file, then flags, then per-direction
//! specs. Every error names the key (as its flag) and, for files, the file. Per-flow rules
//! (`--flow`, `[[flow]]` tables) are read by [`crate::flow`] into each direction's
//! [`Flows`] beside its default link.

use std::path::Path;

use latlab_link::{Flows, LinkConfig};

use super::flow::{self, FlowSpec};
#[cfg(test)]
use super::knob::keys;
use super::knob::{self, scalar};
pub use super::knob::{apply, key_of_field, naming_key};

/// Applies a per-direction spec: space-separated `key=value` pairs; `up` says which direction
/// it is for (A→B), which a `preset=` key among them needs. Errors name `flag` (`--a-to-b`,
/// `body`) and the key as the spec gives it (`--a-to-b: delay: …`).
pub fn apply_spec(config: &mut LinkConfig, up: bool, flag: &str, spec: &str) -> Result<(), String> {
    for pair in spec.split_whitespace() {
        let (key, value) =
            knob::key_value(pair).ok_or_else(|| format!("{flag}: {pair:?} is not key=value"))?;
        apply_named(config, up, key, value, key).map_err(|err| format!("{flag}: {err}"))?;
    }
    Ok(())
}

/// Sets `key` to `value` in the link of one direction (`up`: A→B): a knob of the table, or
/// `preset`, whose keys for that direction are set in its place ([`super::preset`]). Errors
/// name the key's flag (`--delay`).
pub fn apply_in(config: &mut LinkConfig, up: bool, key: &str, value: &str) -> Result<(), String> {
    apply_named(config, up, key, value, &format!("--{key}"))
}

/// [`apply_in`] for a key written as `key=value` (a `--flow` rule, a `[[flow]]` table): errors
/// name the key as it was written, not as a flag.
pub fn apply_key(config: &mut LinkConfig, up: bool, key: &str, value: &str) -> Result<(), String> {
    apply_named(config, up, key, value, key)
}

/// [`apply_in`], errors naming the key as `name`.
fn apply_named(
    config: &mut LinkConfig,
    up: bool,
    key: &str,
    value: &str,
    name: &str,
) -> Result<(), String> {
    if key == "preset" {
        apply_preset(config, up, value).map_err(|e| format!("{name}: {e}"))
    } else {
        knob::apply_named(config, key, value, name)
    }
}

/// The line of `text` (a TOML file) that sets `key` in `section` (`None`: the top level,
/// before any table), for errors.
fn key_line(text: &str, section: Option<&str>, key: &str) -> Option<usize> {
    let mut current: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            current = Some(
                header
                    .trim_matches(|c| c == '[' || c == ']' || c == ' ')
                    .into(),
            );
            continue;
        }
        let Some((k, _)) = line.split_once('=') else {
            continue;
        };
        if current.as_deref() == section && k.trim().trim_matches('"') == key {
            return Some(i + 1);
        }
    }
    None
}

/// Sets the keys of the preset `name` for one direction (`up`: A→B).
fn apply_preset(config: &mut LinkConfig, up: bool, name: &str) -> Result<(), String> {
    for pair in super::preset::keys(name, up)?.split_whitespace() {
        let (k, v) = pair.split_once('=').expect("a preset's keys are key=value");
        apply(config, k, v).map_err(|e| format!("{name}: {e}"))?;
    }
    let events = super::preset::preset(name)?.events;
    if !events.is_empty() {
        let schedule = latlab_link::Schedule::parse(events).map_err(|e| format!("{name}: {e}"))?;
        config.schedule = Some(schedule);
    }
    Ok(())
}

/// The impairments of a TOML file, as key/value text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileSettings {
    /// The keys at the top level: both directions.
    pub both: Vec<(String, String)>,
    /// The `[a_to_b]` table.
    pub a_to_b: Vec<(String, String)>,
    /// The `[b_to_a]` table.
    pub b_to_a: Vec<(String, String)>,
    /// The `[[flow]]` tables, in order: `match = "MATCH"` and impairment keys.
    pub flows: Vec<FlowSpec>,
}

/// Reads a TOML file of impairments.
pub fn load_file(path: &Path) -> Result<FileSettings, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|err| format!("--config {name}: {err}"))?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|err| format!("--config {name}: {}", toml_error(&text, &err)))?;
    let mut settings = FileSettings::default();
    for (key, value) in &table {
        match (key.as_str(), value) {
            ("a_to_b" | "b_to_a", toml::Value::Table(t)) => {
                let list = if key == "a_to_b" {
                    &mut settings.a_to_b
                } else {
                    &mut settings.b_to_a
                };
                for (k, v) in t {
                    list.push((k.clone(), scalar(path, &format!("{key}.{k}"), v)?));
                }
            }
            ("flow", value) => {
                let not_tables = || {
                    format!("--config {name}: flow: expected [[flow]] tables, each with a match")
                };
                let toml::Value::Array(rules) = value else {
                    return Err(not_tables());
                };
                for (i, rule) in rules.iter().enumerate() {
                    let toml::Value::Table(rule) = rule else {
                        return Err(not_tables());
                    };
                    settings.flows.push(flow::from_table(path, i + 1, rule)?);
                }
            }
            (k, v) => settings.both.push((k.to_string(), scalar(path, k, v)?)),
        }
    }
    // Check every key now, so a bad value names the file, the line, the section and the key
    // (`--config link.toml line 3: [a_to_b] delay: …`) before anything runs.
    let mut probe = LinkConfig::default();
    for (section, list) in [
        (None, &settings.both),
        (Some("a_to_b"), &settings.a_to_b),
        (Some("b_to_a"), &settings.b_to_a),
    ] {
        for (k, v) in list {
            let key = match section {
                Some(section) => format!("[{section}] {k}"),
                None => k.clone(),
            };
            apply_named(&mut probe, true, k, v, &key).map_err(|err| {
                let line =
                    key_line(&text, section, k).map_or(String::new(), |l| format!(" line {l}"));
                format!("--config {name}{line}: {err}")
            })?;
        }
    }
    Ok(settings)
}

/// A TOML error on one line: `line L, column C: what` (toml's own text spans several lines
/// with a picture of the line).
fn toml_error(text: &str, err: &toml::de::Error) -> String {
    let what = err.message().trim().replace('\n', " ");
    match err.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {what}")
        }
        None => what,
    }
}

/// The impairment flags of `latlab emu` as given on its command line: each flag's name (after
/// `--`, one of a [`Knob`](super::knob::Knob)'s flags) with its value as typed, in the order
/// they apply (the order of [`KNOBS`](super::knob::KNOBS)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImpairmentFlags(pub Vec<(String, String)>);

impl<const N: usize> From<[(&str, &str); N]> for ImpairmentFlags {
    fn from(given: [(&str, &str); N]) -> ImpairmentFlags {
        ImpairmentFlags(
            given
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect(),
        )
    }
}

/// Where the two directions' impairments come from, in the order they apply: a TOML file,
/// the flags (both directions), then one spec per direction.
#[derive(Clone, Debug, Default)]
pub struct LinkSources {
    /// `--preset NAME`: the first layer of both directions.
    pub preset: Option<String>,
    /// `--config FILE`.
    pub config: Option<std::path::PathBuf>,
    /// The flags.
    pub flags: ImpairmentFlags,
    /// Largest frame bridged, bytes (`--frame-size`, the `max-frame` key).
    pub frame_size: usize,
    /// `--a-to-b SPEC`.
    pub a_to_b: Option<String>,
    /// `--b-to-a SPEC`.
    pub b_to_a: Option<String>,
    /// `--flow 'MATCH / SPEC'`, each as typed, in order.
    pub flows: Vec<String>,
}

/// The A→B and B→A links `sources` make, validated: each direction's default link and its
/// per-flow rules (the `--flow` ones, then the file's). Each direction draws its own random
/// numbers (B→A's seed is A→B's plus a constant; each rule's is its direction's plus a step
/// per rule). Every error names the flag, spec or file at fault.
pub fn links(sources: &LinkSources) -> Result<(Flows, Flows), String> {
    let mut ab = LinkConfig::default();
    let mut ba = LinkConfig::default();
    if let Some(name) = &sources.preset {
        let named = |e: String| format!("--preset {name}: {e}");
        apply_preset(&mut ab, true, name).map_err(named)?;
        apply_preset(&mut ba, false, name).map_err(named)?;
    }
    let mut rules = Vec::new();
    for text in &sources.flows {
        rules.push(flow::parse("--flow", text)?);
    }
    if let Some(path) = &sources.config {
        let file = load_file(path)?;
        for (k, v) in &file.both {
            apply_in(&mut ab, true, k, v)?;
            apply_in(&mut ba, false, k, v)?;
        }
        for (k, v) in &file.a_to_b {
            apply_in(&mut ab, true, k, v)?;
        }
        for (k, v) in &file.b_to_a {
            apply_in(&mut ba, false, k, v)?;
        }
        rules.extend(file.flows);
    }
    // --frame-size is checked on its own first, so that its error names the flag typed (a
    // spec's max-frame key is named by validate below).
    LinkConfig {
        max_frame: sources.frame_size,
        ..LinkConfig::default()
    }
    .validate()
    .map_err(|e| e.naming_field_as("--frame-size").to_string())?;
    // The flags, then the typed --frame-size as the max-frame knob.
    let frame_size = sources.frame_size.to_string();
    let flags = sources
        .flags
        .0
        .iter()
        .map(|(f, v)| (f.as_str(), v.as_str()))
        .chain([("frame-size", frame_size.as_str())]);
    for (flag, value) in flags {
        let knob = match flag {
            "frame-size" => knob::knob("max-frame"),
            _ => knob::knob_of_flag(flag),
        }
        .ok_or_else(|| format!("--{flag}: not an impairment flag"))?;
        (knob.set)(&mut ab, &format!("--{flag}"), value)?;
        (knob.set)(&mut ba, &format!("--{flag}"), value)?;
    }
    ba.seed = ba.seed.wrapping_add(0x9e37_79b9);
    if let Some(spec) = &sources.a_to_b {
        apply_spec(&mut ab, true, "--a-to-b", spec)?;
    }
    if let Some(spec) = &sources.b_to_a {
        apply_spec(&mut ba, false, "--b-to-a", spec)?;
    }
    ab.validate()
        .map_err(|e| format!("A to B: {}", naming_key(e)))?;
    ba.validate()
        .map_err(|e| format!("B to A: {}", naming_key(e)))?;
    let [rules_ab, rules_ba] = flow::rules(&rules, [ab.seed, ba.seed], sources.frame_size)?;
    let flows = |default, rules| Flows { default, rules };
    Ok((flows(ab, rules_ab), flows(ba, rules_ba)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_specs_and_files_set_the_same_knobs() {
        let mut c = LinkConfig::default();
        apply(&mut c, "delay", "5ms").unwrap();
        apply_spec(
            &mut c,
            true,
            "--a-to-b",
            "jitter=100us jitter-dist=normal loss=gemodel:1%,10%,70%,0.1% rate=100mbit limit=500",
        )
        .unwrap();
        assert_eq!((c.delay_ns, c.jitter_ns), (5_000_000, 100_000));
        assert_eq!(c.rate_bps, Some(100_000_000));
        assert_eq!(c.limit_frames, Some(500));
        assert!(matches!(
            c.loss,
            latlab_link::LossModel::GilbertElliott { .. }
        ));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link.toml");
        std::fs::write(
            &path,
            "delay = \"1ms\"\nseed = 7\n[a_to_b]\nloss = \"1%\"\n[b_to_a]\nrate = \"1gbit\"\n",
        )
        .unwrap();
        let file = load_file(&path).unwrap();
        assert_eq!(file.both.len(), 2);
        assert_eq!(file.a_to_b, vec![("loss".to_string(), "1%".to_string())]);
        assert_eq!(file.b_to_a, vec![("rate".to_string(), "1gbit".to_string())]);
        assert!(file.flows.is_empty());
    }

    #[test]
    fn validation_errors_name_the_key_not_the_field() {
        let sources = |flags: ImpairmentFlags| LinkSources {
            flags,
            frame_size: 2048,
            ..LinkSources::default()
        };
        let error = |flags| links(&sources(flags)).unwrap_err();
        assert_eq!(
            error(ImpairmentFlags::from([("limit", "0")])),
            "A to B: --limit: must be at least 1 frame"
        );
        assert_eq!(
            error(ImpairmentFlags::from([("limit-bytes", "0")])),
            "A to B: --limit-bytes: must be at least 1 byte"
        );
        assert_eq!(
            error(ImpairmentFlags::from([("reorder", "50%")])),
            "A to B: --reorder: needs a --delay: a reordered frame overtakes the delayed ones"
        );
        let mut small = sources(ImpairmentFlags::default());
        small.frame_size = 10;
        assert_eq!(
            links(&small).unwrap_err(),
            "--frame-size: 10 bytes is below 14 (an Ethernet header)"
        );
        let mut b_only = sources(ImpairmentFlags::default());
        b_only.b_to_a = Some("limit=0".into());
        assert_eq!(
            links(&b_only).unwrap_err(),
            "B to A: --limit: must be at least 1 frame"
        );
        for field in [
            "jitter_dist",
            "correlation",
            "loss",
            "duplicate",
            "corrupt",
            "reorder",
            "rate_bps",
            "limit_frames",
            "limit_bytes",
            "max_frame",
            "schedule",
            "aqm",
            "aqm_target",
            "aqm_interval",
            "aqm_flows",
            "aqm_quantum",
            "aqm_tupdate",
            "aqm_alpha",
            "aqm_beta",
            "aqm_max_burst",
            "aqm_coupling",
            "aqm_step",
            "ecn",
        ] {
            let key = key_of_field(field).unwrap();
            assert!(keys().any(|k| k == &key[2..]), "{field} → {key}");
        }
    }

    #[test]
    fn queue_discipline_keys_come_from_flags_specs_and_files_and_errors_name_the_key() {
        let sources = |flags: ImpairmentFlags| LinkSources {
            flags,
            frame_size: 2048,
            ..LinkSources::default()
        };
        let error = |flags| links(&sources(flags)).unwrap_err();
        assert_eq!(
            error(ImpairmentFlags::from([("aqm", "codel")])),
            "A to B: --aqm: needs a --rate or a --trace: without a bottleneck no queue builds for it to manage"
        );
        let codel = [("rate", "10mbit"), ("aqm", "fq_codel")];
        let with = |extra: (&'static str, &'static str)| {
            ImpairmentFlags::from([codel[0], codel[1], extra])
        };
        assert_eq!(
            error(with(("flows", "0"))),
            "A to B: --flows: 0 is outside 1..=65536"
        );
        assert_eq!(
            error(with(("target", "200ms"))),
            "A to B: --target: must be below CoDel's interval"
        );
        assert_eq!(
            error(with(("max-burst", "11s"))),
            "A to B: --max-burst: 11s is outside 0..=10s"
        );
        assert_eq!(
            error(ImpairmentFlags::from([("ecn", "on")])),
            "A to B: --ecn: needs an aqm of codel, fq_codel, pie or dualpi2 (tail drop never marks)"
        );
        let mut c = LinkConfig::default();
        let err = apply(&mut c, "aqm", "red").unwrap_err();
        assert!(
            err.starts_with("--aqm: \"red\" is not a queue discipline"),
            "{err}"
        );
        assert!(apply(&mut c, "ecn", "maybe")
            .unwrap_err()
            .starts_with("--ecn"));
        assert!(apply(&mut c, "alpha", "inf")
            .unwrap_err()
            .starts_with("--alpha"));
        // A spec: `ecn` alone is `ecn=on`, `max_burst` is `max-burst`.
        let spec = "rate=10mbit aqm=pie target=20ms tupdate=30ms alpha=0.25 beta=2.5 \
                    max_burst=100ms ecn";
        apply_spec(&mut c, true, "--a-to-b", spec).unwrap();
        let pie = latlab_link::Aqm {
            discipline: latlab_link::Discipline::Pie,
            target_ns: Some(20_000_000),
            tupdate_ns: Some(30_000_000),
            alpha: Some(0.25),
            beta: Some(2.5),
            max_burst_ns: 100_000_000,
            ecn: true,
            ..latlab_link::Aqm::default()
        };
        assert_eq!((c.aqm, c.validate()), (pie, Ok(())));
        // What the API shows reads back as the same settings.
        let text = crate::api::spec_text(&c);
        let mut again = LinkConfig::default();
        apply_spec(&mut again, true, "--a-to-b", &text).unwrap();
        assert_eq!(again, c, "{text}");
        assert!(apply_spec(&mut again, true, "--a-to-b", "delay").is_err());
        // DualPI2's knobs, read back from what the API shows; out of range, named.
        let mut c = LinkConfig::default();
        let spec = "rate=20mbit aqm=dualpi2 coupling=3 step=2ms alpha=0.2 ecn";
        apply_spec(&mut c, true, "--a-to-b", spec).unwrap();
        let dual = latlab_link::Aqm {
            discipline: latlab_link::Discipline::DualPi2,
            coupling: 3.0,
            step_ns: 2_000_000,
            alpha: Some(0.2),
            ecn: true,
            ..latlab_link::Aqm::default()
        };
        assert_eq!((c.aqm, c.validate()), (dual, Ok(())));
        let text = crate::api::spec_text(&c);
        let mut again = LinkConfig::default();
        apply_spec(&mut again, true, "--a-to-b", &text).unwrap();
        assert_eq!(again, c, "{text}");
        let dual = [("rate", "20mbit"), ("aqm", "dualpi2")];
        let with = |extra| ImpairmentFlags::from([dual[0], dual[1], extra]);
        assert_eq!(
            error(with(("coupling", "20"))),
            "A to B: --coupling: 20 is outside 0.5..=16"
        );
        assert_eq!(
            error(with(("step", "0"))),
            "A to B: --step: 0 is outside 1us..=1s"
        );
        // A file: the same keys, `ecn` a boolean.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aqm.toml");
        std::fs::write(
            &path,
            "rate = \"10mbit\"\naqm = \"fq_codel\"\nquantum = 3028\n[b_to_a]\necn = true\n",
        )
        .unwrap();
        let file = load_file(&path).unwrap();
        let mut b = LinkConfig::default();
        for (k, v) in file.both.iter().chain(&file.b_to_a) {
            apply(&mut b, k, v).unwrap();
        }
        assert_eq!((b.aqm.quantum, b.aqm.ecn), (3028, true));
        assert_eq!(b.aqm.discipline, latlab_link::Discipline::FqCodel);
    }

    #[test]
    fn every_error_names_its_key_or_file() {
        let mut c = LinkConfig::default();
        assert!(apply(&mut c, "loss", "120%")
            .unwrap_err()
            .contains("--loss"));
        assert!(apply(&mut c, "delay", "soon")
            .unwrap_err()
            .contains("--delay"));
        assert!(apply(&mut c, "wobble", "1").unwrap_err().contains("wobble"));
        assert!(apply(&mut c, "schedule", "/nonexistent/s.txt")
            .unwrap_err()
            .contains("--schedule"));
        assert!(apply_spec(&mut c, false, "--b-to-a", "delay")
            .unwrap_err()
            .contains("--b-to-a"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[a_to_b]\nlos = \"1%\"\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(err.contains("bad.toml") && err.contains("los"), "{err}");
    }

    #[test]
    fn flow_rules_come_from_flags_then_the_file_each_in_its_directions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link.toml");
        std::fs::write(
            &path,
            "delay = \"10ms\"\n\
             [[flow]]\nmatch = \"proto=tcp dport=22\"\n\
             [[flow]]\nmatch = \"dir=b-to-a proto=udp\"\nloss = \"1%\"\n",
        )
        .unwrap();
        let sources = LinkSources {
            config: Some(path.clone()),
            frame_size: 2048,
            flows: vec!["dir=a-to-b proto=udp dport=27015 / delay=5ms".into()],
            ..LinkSources::default()
        };
        let (ab, ba) = links(&sources).unwrap();
        let matches =
            |f: &Flows| -> Vec<String> { f.rules.iter().map(|r| r.matcher.to_string()).collect() };
        assert_eq!(
            matches(&ab),
            ["proto=udp dport=27015", "proto=tcp dport=22"]
        );
        assert_eq!(matches(&ba), ["proto=tcp dport=22", "proto=udp"]);
        assert_eq!(
            (ab.default.delay_ns, ab.rules[0].config.delay_ns),
            (10_000_000, 5_000_000)
        );
        assert_eq!(
            ab.rules[1].config.delay_ns, 0,
            "a rule starts with no impairment"
        );
        assert_eq!(
            ba.rules[1].config.loss,
            latlab_link::LossModel::Bernoulli { p: 0.01 }
        );
        // A preset is the first layer: the file, the flags and the specs override it key by
        // key; `preset=` in a spec sets that direction's keys where it stands.
        std::fs::write(&path, "loss = \"1%\"\n").unwrap();
        let (ab, ba) = links(&LinkSources {
            preset: Some("chrome-fast-4g".into()),
            config: Some(path.clone()),
            flags: ImpairmentFlags::from([("jitter", "1ms")]),
            frame_size: 2048,
            b_to_a: Some("delay=5ms preset=firefox-lte jitter=2ms".into()),
            ..LinkSources::default()
        })
        .unwrap();
        let (ab, ba) = (ab.default, ba.default);
        assert_eq!(ab.rate_bps, Some(1_350_000), "the preset's up rate");
        assert_eq!(ab.delay_ns, 82_500_000);
        assert_eq!(ab.jitter_ns, 1_000_000, "a flag over the preset");
        assert_eq!(ab.loss, latlab_link::LossModel::Bernoulli { p: 0.01 });
        assert_eq!(
            ba.rate_bps,
            Some(4 * 1024 * 1024),
            "firefox-lte's down rate"
        );
        assert_eq!(
            ba.delay_ns, 10_000_000,
            "the spec's preset= over its delay="
        );
        assert_eq!(ba.jitter_ns, 2_000_000, "a key after preset= over it");
        let err = links(&LinkSources {
            preset: Some("5g".into()),
            frame_size: 2048,
            ..LinkSources::default()
        })
        .unwrap_err();
        assert!(
            err.starts_with("--preset 5g: unknown preset \"5g\": expected one of chrome-3g"),
            "{err}"
        );
        // Without rules, the directions are their default links.
        let plain = links(&LinkSources {
            frame_size: 2048,
            ..LinkSources::default()
        })
        .unwrap();
        assert!(plain.0.rules.is_empty() && plain.1.rules.is_empty());

        std::fs::write(&path, "[[flow]]\nmatch = \"dport=1\"\nwobble = 1\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(
            err.starts_with(&format!("--config {}: flow 1 dport=1: ", path.display())),
            "{err}"
        );
        assert!(err.contains("wobble"), "{err}");
        std::fs::write(&path, "flow = \"dport=1\"\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(
            err.ends_with("flow: expected [[flow]] tables, each with a match"),
            "{err}"
        );
    }

    #[test]
    fn a_config_file_that_is_not_toml_is_named_with_its_line_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "delay = \"1ms\"\nloss = = 3\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(
            err.starts_with(&format!("--config {}: line 2, column ", path.display())),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
