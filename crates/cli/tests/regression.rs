//! Regression tests: each is named after what it prevents (the inputs of the hardening issue:
//! rates no schedule keeps, bad files, outputs that cannot be written, a closed stdout,
//! `--resume` over other parameters).

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// Runs latlab with `args`; expects exit code `code`, one stderr line containing every one of
/// `needles`, no panic, and an end within `within`.
fn fails_at_once(args: &[&str], code: i32, needles: &[&str], within: Duration) {
    let began = Instant::now();
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(args)
        .timeout(within + Duration::from_secs(10))
        .output()
        .unwrap();
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?} printed:\n{stderr}"
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {stderr:?} lacks {needle:?}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(took < within, "{args:?} took {took:?}");
}

/// How long a refusal may take: far more than any machine needs to parse its arguments and
/// fail, and still half the 60 s `--duration` a command that ran instead would take.
const AT_ONCE: Duration = Duration::from_secs(30);

#[test]
fn a_rate_no_schedule_can_keep_is_refused_instead_of_running_forever() {
    // --rate 1e12 used to run for more than 9 minutes; 1e30 sent nothing and exited 0.
    let gen = ["gen", "--target", "127.0.0.1:9", "--duration", "200ms"];
    for rate in ["1e12", "1e30", "2G"] {
        fails_at_once(
            &[&gen[..], &["--rate", rate]].concat(),
            2,
            &["--rate", "1G (10^9) packets per second", "nanoseconds"],
            AT_ONCE,
        );
    }
}

#[test]
fn an_emulator_config_that_does_not_read_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "delay = \"1ms\"\nloss = = 3\n").unwrap();
    let bad = bad.to_str().unwrap();
    let emu = [
        "emu",
        "--iface-a",
        "latlab-none0",
        "--iface-b",
        "latlab-none1",
    ];
    fails_at_once(
        &[&emu[..], &["--config", bad]].concat(),
        2,
        &["--config", bad, "line 2, column"],
        AT_ONCE,
    );
    let value = dir.path().join("value.toml");
    std::fs::write(&value, "[a_to_b]\nloss = \"120%\"\n").unwrap();
    let value = value.to_str().unwrap();
    fails_at_once(
        &[&emu[..], &["--config", value]].concat(),
        2,
        &[value, "line 2: [a_to_b] loss: "],
        AT_ONCE,
    );
    fails_at_once(
        &[&emu[..], &["--config", "/nonexistent/link.toml"]].concat(),
        2,
        &["--config /nonexistent/link.toml"],
        AT_ONCE,
    );
    fails_at_once(
        &[&emu[..], &["--loss", "120%"]].concat(),
        2,
        &["--loss"],
        AT_ONCE,
    );
}

#[test]
fn a_bad_or_empty_schedule_file_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let emu = [
        "emu",
        "--iface-a",
        "latlab-none0",
        "--iface-b",
        "latlab-none1",
    ];
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "0s 10ms 0.1% 100mbit\n5s 5ms 1% 10mbt\n").unwrap();
    let bad = bad.to_str().unwrap();
    fails_at_once(
        &[&emu[..], &["--schedule", bad]].concat(),
        2,
        &["--schedule", bad, "line 2", "RATE"],
        AT_ONCE,
    );
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "# TIME DELAY LOSS RATE\n\n").unwrap();
    let empty = empty.to_str().unwrap();
    fails_at_once(
        &[&emu[..], &["--schedule", empty]].concat(),
        2,
        &["--schedule", empty, "at least one"],
        AT_ONCE,
    );
}

#[test]
fn the_same_interface_on_both_sides_of_the_bridge_is_refused() {
    fails_at_once(
        &["emu", "--iface-a", "lo", "--iface-b", "lo"],
        2,
        &["--iface-a and --iface-b are both lo"],
        AT_ONCE,
    );
}

#[test]
fn an_output_that_cannot_be_written_fails_before_the_run_not_after_it() {
    // /proc takes no new files or folders, even from root. Each command would otherwise run
    // for its whole --duration first.
    let json = "/proc/latlab-regression.json";
    for args in [
        &[
            "echo",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "60s",
            "--json",
            json,
        ][..],
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "60s",
            "--json",
            json,
        ][..],
        &[
            "emu",
            "--iface-a",
            "latlab-none0",
            "--iface-b",
            "latlab-none1",
            "--duration",
            "60s",
            "--json",
            json,
        ][..],
        &[
            "gen",
            "--target",
            "127.0.0.1:9",
            "--rate",
            "1k",
            "--duration",
            "60s",
            "--no-check",
            "--hlog",
            "/proc/latlab-regression.hlog",
        ][..],
    ] {
        fails_at_once(args, 1, &["/proc/latlab-regression"], AT_ONCE);
    }
    for args in [
        &["demo", "--loopback", "--out", "/proc/latlab-regression"][..],
        &[
            "study",
            "game-server",
            "--loopback",
            "--out",
            "/proc/latlab-regression",
        ][..],
    ] {
        fails_at_once(args, 1, &["/proc/"], AT_ONCE);
    }
}

#[test]
fn printing_to_a_closed_pipe_ends_quietly_instead_of_panicking() {
    let _turn = common::engines();
    // `latlab serve … | head -0`: the reader is gone before the report is printed.
    let mut child = Command::new(cargo_bin("latlab"))
        .args(["serve", "--listen", "127.0.0.1:0", "--poll", "block"])
        .args(["--duration", "300ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// A game-server study folder whose `study.json` says it was measured with `--duration 2s`.
fn measured_with_two_seconds(out: &Path) {
    std::fs::create_dir_all(out.join("points")).unwrap();
    std::fs::write(
        out.join("study.json"),
        r#"{
  "kind": "game-server",
  "topology": "loopback 127.0.0.1 (test)",
  "latlab_version": "0.1.0",
  "parameters": {"--duration": "2s", "--work-cycles": "150", "payload bytes": "128"}
}
"#,
    )
    .unwrap();
}

#[test]
fn resume_refuses_points_measured_with_other_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    measured_with_two_seconds(&out);
    let out = out.to_str().unwrap();
    let study = [
        "study",
        "game-server",
        "--loopback",
        "--resume",
        "--out",
        out,
    ];
    fails_at_once(
        &[&study[..], &["--duration", "1s"]].concat(),
        2,
        &["--resume: the folder was measured with --duration 2s, not 1s"],
        AT_ONCE,
    );
    fails_at_once(
        &[&study[..], &["--duration", "2s", "--work-cycles", "300"]].concat(),
        2,
        &["--resume: the folder was measured with --work-cycles 150, not 300"],
        AT_ONCE,
    );
    let emulator = dir.path().join("emulator");
    std::fs::create_dir_all(&emulator).unwrap();
    std::fs::write(
        emulator.join("study.json"),
        r#"{"kind": "emulator", "topology": "namespaces", "latlab_version": "0.1.0"}"#,
    )
    .unwrap();
    fails_at_once(
        &[
            "study",
            "game-server",
            "--loopback",
            "--resume",
            "--out",
            emulator.to_str().unwrap(),
        ],
        2,
        &["--resume: the folder holds a study of `latlab study emulator`, not of `study game-server`"],
        AT_ONCE,
    );
}

#[test]
fn the_emulator_study_resumes_only_its_own_folder_with_its_own_parameters() {
    // --resume, like --out and --shard, is one flag of every study (StudyFolderArgs); the
    // emulator study checks the folder before it builds its lab.
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let game = dir.path().join("game");
    measured_with_two_seconds(&game);
    fails_at_once(
        &["study", "emulator", "--resume", "--out", game.to_str().unwrap()],
        2,
        &["--resume: the folder holds a study of `latlab study game-server`, not of `study emulator`"],
        AT_ONCE,
    );
    let emulator = dir.path().join("emulator");
    std::fs::create_dir_all(&emulator).unwrap();
    std::fs::write(
        emulator.join("study.json"),
        r#"{"kind": "emulator", "topology": "namespaces", "latlab_version": "0.1.0",
            "parameters": {"--duration": "3s", "--rates": "1000,50000",
                           "--delays": "10000ns,100000ns,1000000ns,100000000ns",
                           "--rate-duration": "2s"}}"#,
    )
    .unwrap();
    fails_at_once(
        &[
            "study",
            "emulator",
            "--resume",
            "--out",
            emulator.to_str().unwrap(),
            "--duration",
            "1s",
        ],
        2,
        &["--resume: the folder was measured with --duration 3s, not 1s"],
        AT_ONCE,
    );
    // Without --out there is nothing to continue.
    fails_at_once(&["study", "emulator", "--resume"], 2, &["--out"], AT_ONCE);
}
