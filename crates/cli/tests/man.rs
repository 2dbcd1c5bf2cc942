//! `latlab man` and `latlab completions`: the pages and scripts the Debian package installs,
//! held against clap's definition of every command.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

/// Every command of clap's tree but `help`, as its page is named (`latlab-study-bufferbloat`),
/// with the long flags clap shows for it.
fn commands() -> Vec<(String, Vec<String>)> {
    fn walk(cmd: &clap::Command, name: String, out: &mut Vec<(String, Vec<String>)>) {
        let flags = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        out.push((name.clone(), flags));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{name}-{}", sub.get_name()), out);
        }
    }
    let mut root = latlab_cli::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, "latlab".to_string(), &mut out);
    out
}

/// The files in `dir`, by name.
fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A page's text with roff's escaped hyphens (`\-\-duration`) as typed.
fn page(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.1")))
        .unwrap_or_else(|e| panic!("{name}.1: {e}"))
        .replace("\\-", "-")
}

#[test]
fn man_writes_a_page_for_every_command_naming_each_of_its_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("made/by/man");
    let out = common::succeeds(Command::new(cargo_bin("latlab")).arg("man").arg(&dir));
    let commands = commands();
    let expected: BTreeSet<String> = commands.iter().map(|(n, _)| format!("{n}.1")).collect();
    assert_eq!(files(&dir), expected, "one page per command, no more");
    assert!(commands.len() > 25, "only {} commands", commands.len());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("wrote {} man pages to", commands.len())),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut flags = 0;
    for (name, long_flags) in &commands {
        let text = page(&dir, name);
        let title = format!(".TH {name} 1 ");
        assert!(
            text.lines().any(|l| l.starts_with(&title)),
            "{name}.1 has no {title:?} line"
        );
        for flag in long_flags {
            assert!(text.contains(flag.as_str()), "{name}.1 lacks {flag}");
            flags += 1;
        }
    }
    assert!(page(&dir, "latlab-gen").contains("--duration"));
    assert!(page(&dir, "latlab-study").contains("latlab-study-bufferbloat(1)"));
    assert!(flags > 300, "only {flags} flags on the pages");
}

#[test]
fn man_writes_into_the_current_folder_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    common::succeeds(
        Command::new(cargo_bin("latlab"))
            .arg("man")
            .current_dir(tmp.path()),
    );
    let names = files(tmp.path());
    assert!(
        names.contains("latlab.1") && names.contains("latlab-emu.1"),
        "{names:?}"
    );
}

#[test]
fn man_into_a_folder_it_cannot_make_ends_with_one_line_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let in_the_way = tmp.path().join("a-file");
    std::fs::write(&in_the_way, "not a folder").unwrap();
    let dir = in_the_way.join("man");
    common::one_line_error(
        &["man", dir.to_str().unwrap()],
        &format!("cannot write the man pages to {}", dir.display()),
    );
    common::one_line_error(
        &["man", in_the_way.to_str().unwrap()],
        &format!("cannot write the man pages to {}", in_the_way.display()),
    );
}

/// The script `latlab completions SHELL` prints.
fn completions(shell: &str) -> String {
    let out = common::succeeds(Command::new(cargo_bin("latlab")).args(["completions", shell]));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_bash_completions_parse_and_know_the_flags() {
    let script = completions("bash");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("latlab.bash");
    std::fs::write(&file, &script).unwrap();
    common::succeeds(Command::new("bash").arg("-n").arg(&file));
    for word in ["--duration", "--iface-a", "bufferbloat", "completions"] {
        assert!(script.contains(word), "the bash completions lack {word}");
    }
    assert!(script.contains("complete -F _latlab"), "no `complete` line");
}

#[test]
fn the_zsh_and_fish_completions_know_the_flags() {
    let zsh = completions("zsh");
    assert!(
        zsh.starts_with("#compdef latlab"),
        "{:?}",
        zsh.lines().next()
    );
    let fish = completions("fish");
    assert!(fish.contains("complete -c latlab"));
    // zsh spells a flag as typed, fish as `-l NAME`.
    for word in ["--duration", "--iface-a", "bufferbloat"] {
        assert!(zsh.contains(word), "the zsh completions lack {word}");
    }
    for word in ["-l duration", "-l iface-a", "bufferbloat"] {
        assert!(fish.contains(word), "the fish completions lack {word}");
    }
}

#[test]
fn an_unknown_shell_ends_with_one_line_naming_it() {
    common::one_line_error(&["completions", "tcsh"], "'tcsh'");
    common::one_line_error(&["completions"], "<SHELL>");
}
