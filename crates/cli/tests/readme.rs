//! The guide says what the code does: its command summary (the `text` block under "## Synopsis"
//! in `docs/commands.md`) is held against clap's definition of every command, and its lists of
//! transports (`docs/transports.md`), timestamp sources (`docs/results.md`) and presets
//! (`docs/emulator.md`) against the constants the code parses and writes. `tests/guide.rs`
//! parses every example command of the README and the guide.
//!
//! The summary's rules, per command (all its lines together):
//! - every command clap defines is there, and nothing else;
//! - every flag clap shows is there, and no flag clap lacks (hidden flags may be left out);
//! - a value list (`socket|xdp`, with the other values the flag is shown with) is the flag's
//!   possible values in clap, no more and no fewer;
//! - a concrete value (`2s`, `1k,10k,100k`; not a placeholder such as `DUR` or `IF`) of a flag
//!   with a default is that default, and one of a flag with possible values is one of them.

use std::collections::{BTreeMap, BTreeSet};

use latlab_io::udp::TimestampSource;
use latlab_stream::transport::TRANSPORTS_HELP;
use latlab_stream::TransportSpec;

const COMMANDS: &str = include_str!("../../../docs/commands.md");
const TRANSPORTS: &str = include_str!("../../../docs/transports.md");
const RESULTS: &str = include_str!("../../../docs/results.md");
const EMULATOR: &str = include_str!("../../../docs/emulator.md");
const GATES: &str = include_str!("../../../docs/gates.md");
const README: &str = include_str!("../../../README.md");

/// One command line of the summary: the command's path (`["study", "emulator"]`) and its words
/// after it.
#[derive(Debug)]
struct SummaryLine {
    path: Vec<String>,
    words: Vec<String>,
}

/// The lines of the `text` block under `## Synopsis`, continuation lines joined, comments cut.
fn summary_lines(commands: &str) -> Vec<String> {
    let after = commands
        .split_once("\n## Synopsis\n")
        .expect("docs/commands.md has a \"## Synopsis\" section")
        .1;
    let block = after
        .split_once("```text\n")
        .expect("\"## Synopsis\" has a ```text block")
        .1;
    let block = block.split_once("```").expect("the ```text block ends").0;
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in block.lines() {
        let code = match raw.find(" #") {
            Some(i) => &raw[..i],
            None if raw.trim_start().starts_with('#') => "",
            None => raw,
        };
        let code = code.trim_end();
        let (code, continued) = match code.strip_suffix('\\') {
            Some(code) => (code, true),
            None => (code, false),
        };
        current.push(' ');
        current.push_str(code.trim());
        if !continued {
            if !current.trim().is_empty() {
                lines.push(current.trim().to_string());
            }
            current.clear();
        }
    }
    lines
}

/// Shell-like words: white space separates them, but not inside single quotes (which go).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A placeholder stands for a value (`DUR`, `IF`, `I/N`, `MATCH / SPEC`): no lower-case
/// letter, no digit.
fn is_placeholder(value: &str) -> bool {
    !value
        .chars()
        .any(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Whether `value` has the shape of `form`, whose upper-case runs stand for some text
/// (`rate:10000` has that of `rate:N`).
fn has_form(value: &str, form: &str) -> bool {
    match form.find(|c: char| c.is_ascii_uppercase()) {
        None => value == form,
        Some(at) => {
            let (literal, rest) = form.split_at(at);
            let Some(value) = value.strip_prefix(literal) else {
                return false;
            };
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_uppercase());
            // The placeholder takes at least one character.
            (1..=value.len())
                .filter(|&n| value.is_char_boundary(n))
                .any(|n| has_form(&value[n..], rest))
        }
    }
}

/// The leaf commands of clap's tree by path, with the command.
fn leaves(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, clap::Command)>,
) {
    let subcommands: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    if subcommands.is_empty() {
        out.push((path.clone(), cmd.clone()));
    }
    for sub in subcommands {
        path.push(sub.get_name().to_string());
        leaves(sub, path, out);
        path.pop();
    }
}

/// The flags clap shows for `cmd`, by long name.
fn flags(cmd: &clap::Command) -> BTreeMap<String, clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .filter_map(|a| Some((a.get_long()?.to_string(), a.clone())))
        .collect()
}

fn possible_values(arg: &clap::Arg) -> BTreeSet<String> {
    arg.get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect()
}

fn default_value(arg: &clap::Arg) -> Option<String> {
    let values = arg.get_default_values();
    (!values.is_empty()).then(|| {
        values
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// Splits each summary line into its command's path and the words after it; a line whose
/// path is not a leaf of clap's tree is a problem.
fn parse_summary(
    root: &clap::Command,
    lines: &[String],
    problems: &mut Vec<String>,
) -> Vec<SummaryLine> {
    let mut parsed = Vec::new();
    for line in lines {
        let mut words = words(line).into_iter();
        if words.next().as_deref() != Some("latlab") {
            problems.push(format!(
                "summary line {line:?} does not start with `latlab`"
            ));
            continue;
        }
        let mut cmd = root;
        let mut path = Vec::new();
        let mut rest: Vec<String> = words.collect();
        while let Some(sub) = rest.first().and_then(|w| cmd.find_subcommand(w)) {
            path.push(rest.remove(0));
            cmd = sub;
        }
        if cmd.has_subcommands() {
            let subs: Vec<&str> = cmd
                .get_subcommands()
                .map(|s| s.get_name())
                .filter(|&s| s != "help")
                .collect();
            problems.push(format!(
                "summary line {line:?}: `latlab {}` is not a command clap defines (after `latlab \
                 {}` come {})",
                path.iter()
                    .chain(rest.first())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" "),
                path.join(" "),
                subs.join(", ")
            ));
            continue;
        }
        parsed.push(SummaryLine { path, words: rest });
    }
    parsed
}

/// Every problem of the summary against clap, each naming the command and the flag.
fn summary_problems(commands: &str) -> Vec<String> {
    let mut root = latlab_cli::command();
    root.build();
    let mut problems = Vec::new();
    let lines = parse_summary(&root, &summary_lines(commands), &mut problems);
    let mut commands = Vec::new();
    leaves(&root, &mut Vec::new(), &mut commands);
    for (path, cmd) in &commands {
        let name = format!("latlab {}", path.join(" "));
        let mine: Vec<&SummaryLine> = lines.iter().filter(|l| &l.path == path).collect();
        if mine.is_empty() {
            problems.push(format!(
                "`{name}`: a command of clap's, missing from the command summary"
            ));
            continue;
        }
        let flags = flags(cmd);
        // Flag → every value the summary shows for it, and whether one was a list.
        let mut shown: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
        for line in &mine {
            let mut words = line
                .words
                .iter()
                .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
                .peekable();
            while let Some(word) = words.next() {
                // `-- CMD [ARGS...]`: what follows is another program's.
                if word == "--" {
                    break;
                }
                let Some(long) = word.strip_prefix("--") else {
                    continue;
                };
                let entry = shown.entry(long.to_string()).or_default();
                let Some(arg) = flags.get(long) else {
                    continue;
                };
                if !arg.get_action().takes_values() {
                    continue;
                }
                let Some(value) = words.next_if(|w| !w.starts_with("--")) else {
                    continue;
                };
                if value.contains('|') {
                    entry.0.extend(value.split('|').map(str::to_string));
                    entry.1 = true;
                    continue;
                }
                if value == "..." || is_placeholder(value) {
                    continue;
                }
                if let Some(default) = default_value(arg) {
                    if value != default {
                        problems.push(format!(
                            "`{name} --{long}`: the command summary shows {value}, \
                             clap's default is {default}"
                        ));
                    }
                }
                let possible = possible_values(arg);
                let parts: Vec<&str> = match arg.get_value_delimiter() {
                    Some(delimiter) => value.split(delimiter).collect(),
                    None => vec![value],
                };
                for part in parts {
                    if part == "..." || is_placeholder(part) {
                        continue;
                    }
                    if !possible.is_empty() && !possible.iter().any(|form| has_form(part, form)) {
                        problems.push(format!(
                            "`{name} --{long}`: the command summary shows {part}, \
                             which is not among clap's possible values ({})",
                            possible.iter().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                    entry.0.insert(part.to_string());
                }
            }
        }
        for long in flags.keys() {
            if !shown.contains_key(long) {
                problems.push(format!(
                    "`{name} --{long}`: a flag of clap's, missing from the command \
                     summary"
                ));
            }
        }
        for (long, (values, listed)) in &shown {
            let Some(arg) = flags.get(long) else {
                problems.push(format!(
                    "`{name} --{long}`: in the command summary, but clap has no such \
                     flag"
                ));
                continue;
            };
            let possible = possible_values(arg);
            if !listed {
                continue;
            }
            if possible.is_empty() {
                problems.push(format!(
                    "`{name} --{long}`: the command summary lists {}, but clap lists no \
                     values for it",
                    values.iter().cloned().collect::<Vec<_>>().join("|"),
                ));
            } else if possible != *values {
                let missing: Vec<&String> = possible.difference(values).collect();
                let extra: Vec<&String> = values.difference(&possible).collect();
                problems.push(format!(
                    "`{name} --{long}`: the command summary lists {}, clap's possible \
                     values are {} (missing from the summary: {missing:?}; not clap's: {extra:?})",
                    values.iter().cloned().collect::<Vec<_>>().join("|"),
                    possible.iter().cloned().collect::<Vec<_>>().join("|"),
                ));
            }
        }
    }
    problems
}

#[test]
fn the_command_summary_is_every_command_and_flag_as_clap_defines_them() {
    let problems = summary_problems(COMMANDS);
    assert!(
        problems.is_empty(),
        "docs/commands.md's command summary (\"## Synopsis\") and clap disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// Every possible value clap lists for a flag is one its parser takes (a form with a
/// placeholder, `rate:N`, is left out).
#[test]
fn every_listed_value_parses() {
    let mut root = latlab_cli::command();
    root.build();
    let mut commands = Vec::new();
    leaves(&root, &mut Vec::new(), &mut commands);
    let mut listed = 0;
    for (path, cmd) in &commands {
        for (long, arg) in flags(cmd) {
            for value in possible_values(&arg) {
                if value.chars().any(|c| c.is_ascii_uppercase()) {
                    continue;
                }
                let alone = clap::Command::new("t").arg(
                    clap::Arg::new("v")
                        .long("v")
                        .value_parser(arg.get_value_parser().clone()),
                );
                let parsed = alone.try_get_matches_from(["t", "--v", &value]);
                assert!(
                    parsed.is_ok(),
                    "`latlab {} --{long}` lists {value}, which its parser refuses: {}",
                    path.join(" "),
                    parsed.unwrap_err()
                );
                listed += 1;
            }
        }
    }
    assert!(listed > 30, "only {listed} values listed");
}

/// The forms of `TRANSPORTS_HELP` (what `--help` lists) by transport name.
fn transport_forms() -> BTreeMap<String, String> {
    TRANSPORTS_HELP
        .split(" | ")
        .map(|form| {
            let name = form.split(['[', ':']).next().unwrap().trim();
            (name.to_string(), form.trim().to_string())
        })
        .collect()
}

/// Each transport `--help` names parses, with each plain option it lists (`enet:reliable`).
#[test]
fn every_transport_the_help_names_parses() {
    for (name, form) in transport_forms() {
        assert!(
            name.parse::<TransportSpec>().is_ok(),
            "{name}, named by TRANSPORTS_HELP, does not parse"
        );
        let options = form[name.len()..]
            .strip_prefix("[:")
            .and_then(|o| o.split_once(']'))
            .map(|(o, _)| o);
        if let Some(options) = options.filter(|o| !o.contains(['=', '[', ','])) {
            for option in options.split('|') {
                let text = format!("{name}:{option}");
                assert!(
                    text.parse::<TransportSpec>().is_ok(),
                    "{text}, named by TRANSPORTS_HELP, does not parse"
                );
            }
        }
    }
    for text in ["enet:reliable", "quic:stream", "latlab:thin:urgent"] {
        assert!(text.parse::<TransportSpec>().is_ok(), "{text}");
    }
}

/// The guide's `--transport` table has a row per transport, spelled as `--help` spells it.
#[test]
fn the_transport_table_is_the_help() {
    let table = TRANSPORTS
        .split_once("\n| `--transport` | what runs |\n")
        .expect("docs/transports.md has the `--transport` table")
        .1;
    let mut rows = BTreeMap::new();
    for line in table.lines().skip(1).take_while(|l| l.starts_with('|')) {
        let first = line.split(" | ").next().unwrap().trim_start_matches("| ");
        for cell in first.split(", ") {
            let form = cell.trim_matches('`').replace("\\|", "|");
            let name = form.split(['[', ':']).next().unwrap().to_string();
            rows.insert(name, form);
        }
    }
    for (name, form) in transport_forms() {
        match rows.get(&name) {
            None => panic!("docs/transports.md's `--transport` table has no row for {name}"),
            Some(row) => assert_eq!(
                row, &form,
                "docs/transports.md's `--transport` table spells {name} otherwise than --help"
            ),
        }
    }
}

/// The guide's `timestamp_source` row names every source results files may hold.
#[test]
fn the_timestamp_sources_are_those_written() {
    let row = RESULTS
        .lines()
        .find(|l| l.starts_with("| `timestamp_source` |"))
        .expect("docs/results.md's summary.json table has timestamp_source");
    let meaning = row.splitn(3, '|').nth(2).unwrap();
    let named: BTreeSet<&str> = meaning.split('`').skip(1).step_by(2).collect();
    let written: BTreeSet<&str> = TimestampSource::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(
        named, written,
        "docs/results.md's timestamp_source row against TimestampSource::ALL"
    );
}

#[test]
fn the_summary_rules_catch_what_they_should() {
    let synopsis = "## Synopsis\n\n```text\n";
    let broken = COMMANDS.replacen("[--loopback]", "", 1);
    assert!(COMMANDS.contains(synopsis) && broken != COMMANDS);
    let problems = summary_problems(&broken);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`latlab demo --loopback`")),
        "{problems:?}"
    );
    assert!(has_form("rate:10000", "rate:N"));
    assert!(!has_form("rate:", "rate:N"));
    assert!(!has_form("block", "rate:N"));
    assert!(has_form("fixed:100@50ms", "fixed:SIZE@INTERVAL"));
    assert!(is_placeholder("I/N") && !is_placeholder("64k"));
}

#[test]
fn the_preset_table_is_latlabs_presets() {
    use latlab_emu::preset::PRESETS;
    let section = EMULATOR
        .split("## Presets: `--preset NAME`")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a presets section");
    for p in PRESETS {
        let row = format!("| `{}` | {} | `{}` | `{}` |", p.name, p.about, p.up, p.down);
        assert!(
            section.contains(&row),
            "docs/emulator.md lacks the row {row}"
        );
        assert!(
            section.contains(p.source),
            "docs/emulator.md lacks {}'s source",
            p.name
        );
    }
    let rows = section.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(rows, PRESETS.len(), "a row for each preset, no more");
}

/// Every `latlab demo --assert 'p…<=LIMIT'` example of the README and the gates' page says what
/// it does: a limit
/// under the emulated link's round trip (twice its delay each way, by design) fails, so the
/// example must say it exits 3 unless it leaves that run out.
#[test]
fn the_readmes_demo_gates_say_what_they_do() {
    let round_trip_ns = 2 * latlab_demo::EMULATED_DELAY_NS;
    let mut examples = 0;
    for line in [README, GATES]
        .iter()
        .flat_map(|text| text.lines())
        .filter(|l| l.starts_with("latlab demo ") && l.contains("--assert '"))
    {
        examples += 1;
        for gate in line.split("--assert '").skip(1) {
            let gate = gate.split('\'').next().unwrap();
            let Some((statistic, limit)) = gate.split_once("<=") else {
                continue;
            };
            if !statistic.starts_with('p') && statistic != "max" && statistic != "mean" {
                continue;
            }
            let limit_ns = latlab_lab::units::parse_duration(limit).unwrap().as_nanos() as u64;
            if limit_ns < round_trip_ns && !line.contains("--no-emulated-link") {
                assert!(
                    line.contains("exit 3"),
                    "{line:?}: {gate} cannot hold for the emulated link's run (at least {round_trip_ns} ns a round trip); say it exits 3"
                );
            }
        }
    }
    assert!(examples >= 1, "docs/gates.md has a gated demo example");
}
