//! The per-flow rules of `latlab emu`: `--flow 'MATCH / SPEC'` and the `[[flow]]` tables of a
//! `--config` file, made into each direction's rules.
//!
//! MATCH is the match keys of [`latlab_link::flow`] (`proto=udp dport=27015`), plus
//! `dir=a-to-b` or `dir=b-to-a` for a rule of one direction (without it, a rule applies to
//! both); SPEC is the `key=value` pairs of `--a-to-b` (`loss=5% delay=20ms`), and may be
//! empty: the rule's frames then pass unimpaired. The `/` between them stands alone between
//! spaces (a prefix's `/` is part of its token). A rule's link starts with no impairment: the
//! flags, `--a-to-b` and `--b-to-a` set the default link, that of the frames no rule takes.
//! Rules are tried in order, the `--flow` ones first, then the file's; the first that
//! matches a frame takes it.
//!
//! ```
//! use latlab_emu::flow;
//!
//! let rule = flow::parse("--flow", "proto=udp dport=27015 dir=a-to-b / loss=5%").unwrap();
//! assert_eq!(rule.matcher.to_string(), "proto=udp dport=27015");
//! assert_eq!(rule.directions, [true, false]);
//! let [ab, ba] = flow::rules(&[rule], [1, 2], 2048).unwrap();
//! assert_eq!((ab.len(), ba.len()), (1, 0));
//! ```

use std::path::Path;

pub use latlab_link::flow::{ETHER_NAMES, PROTOCOL_NAMES};
use latlab_link::{FlowMatch, FlowRule, LinkConfig};

use super::knob;

/// What seeds two rules' links apart: rule `i` (from 0) of a direction whose default link has
/// seed `s` draws from seed `s + (i + 1) · RULE_SEED_STEP`, unless its SPEC names a `seed`.
pub const RULE_SEED_STEP: u64 = 0x632b_e59b_d9b4_e019;

/// A rule as given, before it becomes a link per direction.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Where it was given, for errors: `--flow`, or `--config FILE: flow 2`.
    pub source: String,
    /// The directions it applies to: A→B, B→A.
    pub directions: [bool; 2],
    /// Which frames it takes.
    pub matcher: FlowMatch,
    /// Its impairments, as `key=value` text.
    pub settings: Vec<(String, String)>,
}

/// Reads `MATCH / SPEC` as `--flow` takes it; `flag` names the option in errors, which also
/// name the token at fault.
pub fn parse(flag: &str, text: &str) -> Result<FlowSpec, String> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let Some(slash) = tokens.iter().position(|t| *t == "/") else {
        return Err(format!(
            "{flag} {text:?}: expected MATCH / SPEC with the / between spaces, such as \
             'proto=udp dport=27015 / loss=5%'"
        ));
    };
    let mut settings = Vec::new();
    for pair in &tokens[slash + 1..] {
        let Some((key, value)) = knob::key_value(pair) else {
            return Err(format!(
                "{flag} {pair}: not key=value (one / between MATCH and SPEC)"
            ));
        };
        settings.push((key.to_string(), value.to_string()));
    }
    FlowSpec::new(flag.to_string(), &tokens[..slash], settings)
}

/// A `[[flow]]` table of the `--config` file at `path`, the `index`th (from 1): `match` holds
/// MATCH, the other keys are impairments.
pub fn from_table(path: &Path, index: usize, table: &toml::Table) -> Result<FlowSpec, String> {
    let source = format!("--config {}: flow {index}", path.display());
    let Some(matcher) = table.get("match") else {
        return Err(format!(
            "{source}: no match key, such as match = \"proto=udp dport=27015\""
        ));
    };
    let toml::Value::String(text) = matcher else {
        return Err(format!("{source}: match: expected a string"));
    };
    let mut settings = Vec::new();
    for (key, value) in table.iter().filter(|(k, _)| *k != "match") {
        settings.push((key.clone(), knob::scalar(path, key, value)?));
    }
    let keys: Vec<&str> = text.split_whitespace().collect();
    FlowSpec::new(source, &keys, settings)
}

/// The rules of `specs` per direction (A→B, B→A): each rule's link with its settings, the
/// frame size of the bridge, and a seed of its own drawn from the direction's (`seeds`);
/// validated. Errors name the rule's source and match.
pub fn rules(
    specs: &[FlowSpec],
    seeds: [u64; 2],
    frame_size: usize,
) -> Result<[Vec<FlowRule>; 2], String> {
    let mut out = [Vec::new(), Vec::new()];
    for (i, spec) in specs.iter().enumerate() {
        let step = RULE_SEED_STEP.wrapping_mul(i as u64 + 1);
        for d in (0..2).filter(|&d| spec.directions[d]) {
            let config = spec.config(
                LinkConfig {
                    seed: seeds[d].wrapping_add(step),
                    max_frame: frame_size,
                    ..LinkConfig::default()
                },
                d == 0,
            )?;
            out[d].push(FlowRule {
                matcher: spec.matcher.clone(),
                config,
            });
        }
    }
    Ok(out)
}

impl FlowSpec {
    /// The rule from `source` whose MATCH is `keys` (`dir=` among them or not), with
    /// `settings`; every key is checked now, so a typo is named before anything runs.
    fn new(
        source: String,
        keys: &[&str],
        settings: Vec<(String, String)>,
    ) -> Result<FlowSpec, String> {
        let (directions, keys) = directions(&source, keys)?;
        let matcher = FlowMatch::parse(&source, &keys.join(" ")).map_err(|e| e.to_string())?;
        let spec = FlowSpec {
            source,
            directions,
            matcher,
            settings,
        };
        for up in [true, false] {
            spec.config(LinkConfig::default(), up)?;
        }
        Ok(spec)
    }

    /// `base` with this rule's settings for one direction (`up`: A→B), validated.
    fn config(&self, mut base: LinkConfig, up: bool) -> Result<LinkConfig, String> {
        let named = |e: String| format!("{} {}: {e}", self.source, self.matcher);
        for (key, value) in &self.settings {
            if key == "dir" {
                return Err(named(
                    "dir: goes in the match (dir=a-to-b proto=udp), not among the impairments"
                        .into(),
                ));
            }
            super::config::apply_key(&mut base, up, key, value).map_err(named)?;
        }
        base.validate().map_err(|e| named(knob::naming_key(e)))?;
        Ok(base)
    }
}

/// The directions `dir=` names among `keys` (both without it), and the other keys.
fn directions<'a>(flag: &str, keys: &[&'a str]) -> Result<([bool; 2], Vec<&'a str>), String> {
    let mut directions = None;
    let mut rest = Vec::new();
    for &token in keys {
        let Some(value) = token.strip_prefix("dir=") else {
            rest.push(token);
            continue;
        };
        let d = match value {
            "a-to-b" | "a_to_b" => [true, false],
            "b-to-a" | "b_to_a" => [false, true],
            _ => return Err(format!("{flag} {token}: expected dir=a-to-b or dir=b-to-a")),
        };
        if directions.replace(d).is_some() {
            return Err(format!(
                "{flag} {token}: given twice (every key at most once per rule)"
            ));
        }
    }
    Ok((directions.unwrap_or([true, true]), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_reads_its_match_its_directions_and_its_spec() {
        let rule = parse("--flow", "proto=udp dport=27015 / loss=5% delay=20ms").unwrap();
        assert_eq!(rule.matcher.to_string(), "proto=udp dport=27015");
        assert_eq!(rule.directions, [true, true]);
        assert_eq!(
            rule.settings,
            [
                ("loss".into(), "5%".into()),
                ("delay".into(), "20ms".into())
            ]
        );
        let back = parse("--flow", "dir=b_to_a src=10.0.0.0/8 /").unwrap();
        assert_eq!((back.directions, back.settings.len()), ([false, true], 0));
        assert_eq!(back.matcher.to_string(), "src=10.0.0.0/8");
        let one_way = parse("--flow", "dir=a-to-b port=22 / delay=1ms").unwrap();
        assert_eq!(one_way.directions, [true, false]);
        // A queue discipline per rule, `ecn` alone a switch.
        let aqm = parse("--flow", "proto=tcp / rate=10mbit aqm=fq_codel ecn").unwrap();
        assert_eq!(aqm.settings[2], ("ecn".into(), "on".into()));
        let [ab, _] = rules(&[aqm], [1, 2], 1600).unwrap();
        assert_eq!(
            ab[0].config.aqm.discipline,
            latlab_link::Discipline::FqCodel
        );
        assert!(ab[0].config.aqm.ecn);
        let err = parse("--flow", "proto=tcp / aqm=codel").unwrap_err();
        assert!(err.contains("--aqm: needs a --rate"), "{err}");
    }

    #[test]
    fn each_rule_gets_its_own_link_seed_and_the_bridges_frame_size() {
        let specs = [
            parse("--flow", "dport=1 / loss=1%").unwrap(),
            parse("--flow", "dport=2 dir=b-to-a / delay=5ms").unwrap(),
            parse("--flow", "dport=3 / seed=77").unwrap(),
        ];
        let [ab, ba] = rules(&specs, [10, 20], 1600).unwrap();
        let seeds = |rules: &[FlowRule]| rules.iter().map(|r| r.config.seed).collect::<Vec<_>>();
        let step = RULE_SEED_STEP;
        assert_eq!(seeds(&ab), [10 + step, 77]);
        assert_eq!(seeds(&ba), [20 + step, 20 + 2 * step, 77]);
        assert!(ab.iter().chain(&ba).all(|r| r.config.max_frame == 1600));
        assert_eq!(ba[1].config.delay_ns, 5_000_000);
        assert_eq!(
            ba[1].config.loss,
            latlab_link::LossModel::None,
            "not the default's"
        );
    }

    #[test]
    fn a_bad_rule_is_one_line_naming_the_flag_and_the_token() {
        for (text, needle) in [
            (
                "proto=udp dport=27015",
                "--flow \"proto=udp dport=27015\": expected MATCH / SPEC",
            ),
            (
                "proto=udp/loss=5%",
                "--flow \"proto=udp/loss=5%\": expected MATCH / SPEC",
            ),
            ("dport=abc / loss=1%", "--flow dport=abc: expected a port"),
            ("wobble=1 / loss=1%", "--flow wobble=1: unknown match key"),
            ("/ loss=1%", "--flow: no match key"),
            (
                "dir=up proto=udp / loss=1%",
                "--flow dir=up: expected dir=a-to-b or dir=b-to-a",
            ),
            (
                "dir=a-to-b dir=b-to-a port=1 /",
                "--flow dir=b-to-a: given twice",
            ),
            ("proto=udp / loss", "--flow loss: not key=value"),
            (
                "proto=udp / loss=120%",
                "--flow proto=udp: loss: 120% is above 100%",
            ),
            (
                "proto=udp / wobble=1",
                "--flow proto=udp: unknown impairment \"wobble\"",
            ),
            (
                "proto=udp / limit=0",
                "--flow proto=udp: --limit: must be at least 1 frame",
            ),
            (
                "proto=udp / dir=a-to-b",
                "--flow proto=udp: dir: goes in the match",
            ),
            ("proto=udp / / loss=1%", "--flow /: not key=value"),
        ] {
            let error = parse("--flow", text).unwrap_err();
            assert!(error.starts_with(needle), "{text:?}: {error}");
            assert_eq!(error.lines().count(), 1, "{error}");
        }
    }

    #[test]
    fn a_config_table_reads_as_the_flag_does_and_names_the_file_and_the_rule() {
        let path = Path::new("link.toml");
        let table: toml::Table = toml::from_str(
            "match = \"dir=a-to-b proto=udp dport=27015\"\nloss = \"5%\"\nlimit = 50",
        )
        .unwrap();
        let rule = from_table(path, 1, &table).unwrap();
        let flag = parse(
            "--flow",
            "dir=a-to-b proto=udp dport=27015 / loss=5% limit=50",
        )
        .unwrap();
        assert_eq!(
            (rule.directions, &rule.matcher),
            (flag.directions, &flag.matcher)
        );
        assert_eq!(rule.source, "--config link.toml: flow 1");
        let sorted = |mut pairs: Vec<(String, String)>| {
            pairs.sort();
            pairs
        };
        assert_eq!(sorted(rule.settings), sorted(flag.settings));
        for (text, needle) in [
            ("loss = \"5%\"", "--config link.toml: flow 2: no match key"),
            (
                "match = 5",
                "--config link.toml: flow 2: match: expected a string",
            ),
            (
                "match = \"port=x\"",
                "--config link.toml: flow 2 port=x: expected a port",
            ),
            (
                "match = \"port=1\"\nloss = \"2\"",
                "--config link.toml: flow 2 port=1: loss: ",
            ),
        ] {
            let table: toml::Table = toml::from_str(text).unwrap();
            let error = from_table(path, 2, &table).unwrap_err();
            assert!(error.starts_with(needle), "{text:?}: {error}");
        }
    }
}
