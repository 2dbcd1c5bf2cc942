//! The README and the guide under `docs/` against the command line they describe:
//! - every command clap defines, and every long flag it shows for it, is named on some page of
//!   `docs/` (as `latlab man` writes a page for each);
//! - every example command of their `sh`, `bash` and `console` blocks parses with the current
//!   command line (`clap::Command::try_get_matches_from`): a line that starts with `latlab ` or
//!   `cargo run --release -- ` (after a `$ ` prompt, `sudo`, `ip netns exec NAME`, `nsenter
//!   …`, `srun …`, `sh -c '…'` or `exec`), its `\` continuations joined, its `# comment` cut, and the command ending where the
//!   shell's would (`|`, `>`, `&`, `;`). A `latlab` command after another's `--` (`latlab run …
//!   -- latlab gen …`) is parsed too.

use std::path::{Path, PathBuf};

/// The README and every page of `docs/`, by path from the top of the tree, with their text.
fn pages() -> Vec<(String, String)> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(top.join("docs"))
        .expect("the docs/ folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths.insert(0, top.join("README.md"));
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            let name = p.strip_prefix(&top).unwrap().display().to_string();
            (name, text)
        })
        .collect()
}

/// Every command of clap's tree but `help`, as typed (`["study", "bufferbloat"]`), with the
/// long flags clap shows for it.
fn commands() -> Vec<(Vec<String>, Vec<String>)> {
    fn walk(
        cmd: &clap::Command,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Vec<String>)>,
    ) {
        let flags = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        out.push((path.clone(), flags));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut root = latlab_cli::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, &mut Vec::new(), &mut out);
    out
}

/// Whether `text` has `word` standing alone: not followed by a letter, digit, `-` or `_`
/// (`--rate` is not in `--rates`).
fn names(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        !text[at + word.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// Each command the guide's pages do not name (`latlab study emulator`, white space
/// collapsed), and each flag no page names.
fn undocumented(guide: &str) -> Vec<String> {
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut problems = Vec::new();
    for (path, flags) in commands() {
        let name = std::iter::once("latlab")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        if !names(&guide, &name) {
            problems.push(format!(
                "`{name}`: a command of clap's that no page of docs/ names"
            ));
        }
        for flag in flags {
            if !names(&guide, &flag) {
                problems.push(format!(
                    "`{name} {flag}`: a flag of clap's that no page of docs/ names"
                ));
            }
        }
    }
    problems
}

#[test]
fn every_command_and_flag_of_the_help_is_in_the_guide() {
    let guide: String = pages()
        .into_iter()
        .filter(|(name, _)| name.starts_with("docs/"))
        .map(|(_, text)| text + "\n")
        .collect();
    let problems = undocumented(&guide);
    assert!(
        problems.is_empty(),
        "the guide (docs/*.md) lacks:\n  {}",
        problems.join("\n  ")
    );
    let flags: usize = commands().iter().map(|(_, f)| f.len()).sum();
    assert!(flags > 300, "only {flags} flags in clap's tree");
}

#[test]
fn a_command_or_flag_left_out_of_the_guide_is_named() {
    let guide = "latlab demo [--duration 2s] [--rates 1k,10k,100k] [--out DIR] [--loopback]";
    let problems = undocumented(guide);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`latlab demo --no-emulated-link`")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`latlab gen`: a command")),
        "{problems:?}"
    );
    assert!(
        !problems
            .iter()
            .any(|p| p.contains("`latlab demo --loopback`")),
        "{problems:?}"
    );
    assert!(names("--rate 10k", "--rate") && !names("--rates 1k", "--rate"));
}

/// The values the pages' examples take for the shell's variables they use (`$LATLAB_HOST` is
/// what `latlab run` gives its command).
const VARIABLES: &[(&str, &str)] = &[
    ("LATLAB_HOST", "198.19.0.1"),
    ("LATLAB_ADDR", "198.19.0.2"),
    ("HOME", "/home/user"),
    ("JOB_COMPLETION_INDEX", "0"),
    ("SLURM_ARRAY_TASK_ID", "1"),
    ("SLURM_ARRAY_TASK_COUNT", "3"),
    ("SLURM_PROCID", "0"),
    // The Slurm scripts' arguments (scale-out.md: `study.sh DIR`, `fleet.sh TARGET DIR`, which
    // exports them as TARGET and FLEET).
    ("1", "/home/user/latlab/emulator-study"),
    ("2", "/home/user/latlab/fleet"),
    ("TARGET", "game-server.example:7777"),
    ("FLEET", "/home/user/latlab/fleet"),
];

/// A shell line's words, as the shell would hand them over: white space separates them, but not
/// inside single or double quotes (which go); `$NAME` and `${NAME}` outside single quotes are
/// [`VARIABLES`]' values; an unquoted word with a `*` is a glob, which stands for two paths
/// here; the command ends at an operator of the shell's (`|`, `>`, `&`, `;`, `<` …) outside
/// quotes. An error for a line the shell would not finish (a quote left open), a variable the
/// table lacks, or a command substitution.
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut in_word = false;
    let mut glob = false;
    let mut chars = line.chars().peekable();
    let finish = |word: &mut String, glob: &mut bool, words: &mut Vec<String>| {
        if std::mem::take(glob) {
            words.push(word.clone());
        }
        words.push(std::mem::take(word));
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '$') => {
                let braced = chars.next_if_eq(&'{').is_some();
                if chars.peek() == Some(&'(') {
                    return Err("a command substitution, $(…)".into());
                }
                let mut name = String::new();
                while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_') {
                    name.push(c);
                }
                if braced && chars.next() != Some('}') {
                    return Err(format!("${{{name}: no closing brace"));
                }
                let Some((_, value)) = VARIABLES.iter().find(|(n, _)| *n == name) else {
                    return Err(format!("${name}: a variable tests/guide.rs gives no value"));
                };
                word.push_str(value);
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '|' | '>' | '<' | '&' | ';') => {
                // `2>`: the descriptor goes with the redirection.
                if word.chars().all(|c| c.is_ascii_digit()) && !word.is_empty() {
                    word.clear();
                    in_word = false;
                }
                break;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    finish(&mut word, &mut glob, &mut words);
                    in_word = false;
                }
            }
            (None, c) => {
                glob |= c == '*';
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("a quote is left open".into());
    }
    if in_word {
        finish(&mut word, &mut glob, &mut words);
    }
    Ok(words)
}

/// `line` without its comment: from an unquoted `#` that starts a word.
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => return &line[..at],
            _ => {}
        }
        previous = c;
    }
    line
}

/// The command lines of `text`'s `sh`, `bash` and `console` blocks, each with the number of
/// its first line: continuations joined, comments cut, a `$ ` prompt taken off.
fn example_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut shell = None;
    let mut current: Option<(usize, String)> = None;
    for (n, raw) in text.lines().enumerate() {
        let number = n + 1;
        if let Some(info) = raw.trim_start().strip_prefix("```") {
            shell = match shell {
                Some(_) => None,
                None => Some(matches!(info.trim(), "sh" | "bash" | "console")),
            };
            current = None;
            continue;
        }
        if shell != Some(true) {
            continue;
        }
        let code = without_comment(raw).trim_end();
        let (code, continued) = match code.strip_suffix('\\') {
            Some(code) => (code, true),
            None => (code, false),
        };
        let (start, mut line) = current.take().unwrap_or((number, String::new()));
        line.push(' ');
        line.push_str(code.trim());
        if continued {
            current = Some((start, line));
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line).trim();
        if !line.is_empty() {
            out.push((start, line.to_string()));
        }
    }
    out
}

/// The `latlab` command of a shell line's words, from its first word (`latlab`), with what the
/// line runs it under taken off; `None` when the line runs something else.
fn latlab_words(mut words: &[String]) -> Option<Vec<String>> {
    loop {
        match words {
            [first, rest @ ..] if first == "sudo" || first == "exec" => words = rest,
            [ip, netns, exec, _name, rest @ ..]
                if ip == "ip" && netns == "netns" && exec == "exec" =>
            {
                words = rest
            }
            // `srun -n 3 COMMAND`: each short option taken with its value, as `-n 3`.
            [srun, rest @ ..] if srun == "srun" => {
                let mut at = 0;
                while let Some(option) = rest.get(at).filter(|w| w.starts_with('-')) {
                    at += if option.len() == 2 { 2 } else { 1 };
                }
                words = &rest[at.min(rest.len())..];
            }
            [nsenter, rest @ ..] if nsenter == "nsenter" => {
                let options = rest.iter().take_while(|w| w.starts_with('-')).count();
                words = &rest[options..];
            }
            [cargo, run, release, dashes, rest @ ..]
                if cargo == "cargo" && run == "run" && release == "--release" && dashes == "--" =>
            {
                let mut out = vec!["latlab".to_string()];
                out.extend(rest.iter().cloned());
                return Some(out);
            }
            [shell, c, script, ..] if matches!(shell.as_str(), "sh" | "bash") && c == "-c" => {
                return latlab_words(&shell_words(script).ok()?);
            }
            [first, ..] if first == "latlab" => return Some(words.to_vec()),
            _ => return None,
        }
    }
}

/// Every example command of `text` (named `page`) that the command line refuses, as
/// `page:line: the command: clap's error`; and how many were parsed.
fn refused_examples(page: &str, text: &str) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut parsed = 0;
    for (number, line) in example_lines(text) {
        let words = match shell_words(&line) {
            Ok(words) => words,
            Err(e) => {
                problems.push(format!("{page}:{number}: {line}: {e}"));
                continue;
            }
        };
        let mut next = latlab_words(&words);
        while let Some(command) = next.take() {
            parsed += 1;
            let matches = latlab_cli::command().try_get_matches_from(&command);
            if let Err(e) = &matches {
                let help = matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                );
                if !help {
                    let first = e.to_string();
                    let first = first.lines().next().unwrap_or_default();
                    problems.push(format!("{page}:{number}: {line}: {first}"));
                }
            }
            // A latlab command run by another (`latlab run … -- latlab gen …`).
            if let Some(at) = command.iter().position(|w| w == "--") {
                next = latlab_words(&command[at + 1..]);
            }
        }
    }
    (problems, parsed)
}

#[test]
fn every_example_command_of_the_readme_and_the_guide_parses() {
    let mut problems = Vec::new();
    let mut parsed = 0;
    for (page, text) in pages() {
        let (mine, count) = refused_examples(&page, &text);
        problems.extend(mine);
        parsed += count;
    }
    assert!(
        problems.is_empty(),
        "example commands the command line refuses:\n  {}",
        problems.join("\n  ")
    );
    assert!(parsed > 80, "only {parsed} example commands parsed");
}

#[test]
fn a_broken_example_is_named_with_its_page_and_line() {
    let page = "intro\n\n```sh\nlatlab echo --listen 127.0.0.1:7777 &   # the reflector\n\
                sudo latlab gen --target 127.0.0.1:7777 \\\n    --rat 10k\n```\n\n\
                ```text\nlatlab gen --nothing-checked-here\n```\n\n\
                ```console\n$ latlab run --delay 20ms -- latlab gen --target 127.0.0.1:1 --rate fast\n\
                $ ip netns exec EMU latlab emu --iface-a a --iface-b b --delay 2ms | head\n```\n";
    let (problems, parsed) = refused_examples("page.md", page);
    assert_eq!(parsed, 5, "{problems:?}");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("page.md:5: sudo latlab gen --target 127.0.0.1:7777 --rat 10k:")
            && problems[0].contains("--rat"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("page.md:14: latlab run --delay 20ms -- latlab gen")
            && problems[1].contains("fast"),
        "{problems:?}"
    );
    assert_eq!(
        shell_words("latlab completions bash > ~/x 'a b' # no"),
        Ok(vec!["latlab".into(), "completions".into(), "bash".into()])
    );
    assert_eq!(
        shell_words("m d/* \"$HOME/x\" '$HOME' ${LATLAB_HOST}:1").unwrap(),
        ["m", "d/*", "d/*", "/home/user/x", "$HOME", "198.19.0.1:1"]
    );
    assert!(shell_words("latlab gen 'open").is_err());
    assert!(shell_words("latlab emu --attach-pid $(pidof x)").is_err());
    assert!(shell_words("latlab gen --target $NOWHERE:1").is_err());
    let (problems, parsed) = refused_examples(
        "p.md",
        "```sh\nlatlab run -- sh -c 'latlab gen --target $LATLAB_HOST:7 --rate 1x'\n\
         srun -n 3 --exclusive sh -c 'exec latlab gen --target $TARGET --rate 2x'\n```\n",
    );
    assert_eq!(parsed, 3, "{problems:?}");
    assert!(
        problems.len() == 2 && problems[0].contains("1x") && problems[1].contains("2x"),
        "{problems:?}"
    );
    assert_eq!(without_comment("a '#b' c # d"), "a '#b' c ");
}
