//! `latlab check DIR --assert EXPR` on results folders built here: one test per exit code
//! (0 every gate passed, 3 one failed, 4 none failed but one was inconclusive, 2 a gate the
//! folder cannot answer or that does not parse), and the JUnit file; an `rfc2544` folder's
//! rates; `latlab compare`'s regression gate and its refusal of folders of different kinds.

mod common;

use std::path::Path;

use assert_cmd::Command;
use latlab_lab::results::{
    ccdf_csv, histograms_bytes, summary_json, RunHistograms, RunSummary, HISTOGRAMS,
};
use latlab_stats::LatencyHistogram;
use predicates::str::contains;

/// A `gen --out` folder at `dir`: `n` round trips of 1 µs to `n` µs, all `n` probes answered,
/// at 1000 probes per second.
fn gen_folder(dir: &Path, n: u64) {
    scaled_folder(dir, n, 1_000);
}

/// A `gen --out` folder of `n` round trips of `step` ns to `n·step` ns.
fn scaled_folder(dir: &Path, n: u64, step: u64) {
    let mut h = LatencyHistogram::new();
    for i in 1..=n {
        h.record(i * step);
    }
    let summary = RunSummary::synthetic("1000 pps to test", &h, n, 1_000.0);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("summary.json"), summary_json(&summary)).unwrap();
    std::fs::write(dir.join("ccdf.csv"), ccdf_csv(&h).unwrap()).unwrap();
    let histograms = RunHistograms {
        latency: h,
        ..RunHistograms::default()
    };
    std::fs::write(
        dir.join(HISTOGRAMS),
        histograms_bytes(&histograms, 0, "test").unwrap(),
    )
    .unwrap();
}

fn check(dir: &Path, gates: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("latlab").unwrap();
    cmd.arg("check").arg(dir);
    for g in gates {
        cmd.args(["--assert", g]);
    }
    cmd.assert()
}

#[test]
fn every_gate_passed_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    gen_folder(tmp.path(), 10_000); // p99 about 9.9 ms
    check(
        tmp.path(),
        &["p99<=10ms", "max<=20ms", "loss<=1%", "achieved>=999"],
    )
    .code(0)
    .stdout(contains("PASS p99<=10ms: p99 9."))
    .stdout(contains(
        "PASS loss<=1%: loss 0.000% [0.000%, 0.038%] (95% Wilson interval)",
    ));
}

#[test]
fn one_failed_gate_exits_3_whatever_else_is_inconclusive() {
    let tmp = tempfile::tempdir().unwrap();
    gen_folder(tmp.path(), 10_000);
    check(tmp.path(), &["p99<=10ms", "p99<=9.9ms", "p50<=1ms"])
        .code(3)
        .stdout(contains("INCONCLUSIVE p99<=9.9ms"))
        .stdout(contains("FAIL p50<=1ms: p50 5."))
        .stderr(contains("gates: 1 of 3 failed, 1 inconclusive"));
}

#[test]
fn an_inconclusive_gate_and_none_failed_exits_4() {
    let tmp = tempfile::tempdir().unwrap();
    gen_folder(tmp.path(), 1_000);
    // p99.9 of 1000 samples cannot be bounded: never a pass, however loose the limit.
    check(tmp.path(), &["p50<=1s", "p99.9<=1h"])
        .code(4)
        .stdout(contains(
        "INCONCLUSIVE p99.9<=1h: p99.9: too few samples, 1000 samples; about 3838 samples in all",
    ));
}

#[test]
fn a_gate_that_cannot_be_answered_or_read_exits_2_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    gen_folder(tmp.path(), 1_000);
    check(tmp.path(), &["forward.p99<=1ms"])
        .code(2)
        .stdout("")
        .stderr(contains(
            "--assert \"forward.p99<=1ms\": one-way delays need a shared clock",
        ));
    check(tmp.path(), &["p98<=1ms"])
        .code(2)
        .stderr(contains("unknown statistic \"p98\""));
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    check(&mine, &["p99<=1ms"])
        .code(2)
        .stderr(contains("not a latlab results folder"));
    check(&tmp.path().join("nothing"), &["p99<=1ms"])
        .code(2)
        .stderr(contains("nothing: does not exist"));
}

#[test]
fn report_and_check_say_a_folder_that_is_not_there_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let gone = tmp.path().join("gone");
    let gone = gone.to_str().unwrap();
    common::one_line_error(&["report", gone], &format!("{gone}: does not exist"));
    common::one_line_error(
        &["check", gone, "--assert", "p99<=1ms"],
        &format!("{gone}: does not exist"),
    );
}

/// The folder kinds `check --help` and `compare --help` list are the command summary's (`docs/commands.md`).
#[test]
fn check_and_compare_help_list_the_folder_kinds_the_command_summary_gives() {
    let help = |cmd: &str| {
        let out = Command::cargo_bin("latlab")
            .unwrap()
            .args([cmd, "--help"].iter().filter(|a| !a.is_empty()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/commands.md"
    ))
    .unwrap()
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    let check = "gen --out, demo, stream send --out, rfc2544 or a study";
    let compare = "gen --out, demo or stream send --out";
    let long = help("check");
    assert!(long.contains(check), "check --help: {long}");
    assert!(help("compare").contains(compare), "compare --help");
    let short = help("");
    assert!(
        short.contains(&format!("({check})")),
        "latlab --help: {short}"
    );
    assert!(
        short.contains(&format!("({compare})")),
        "latlab --help: {short}"
    );
    assert!(
        readme.contains(&format!("gates on a {check} folder")),
        "docs/commands.md's check line"
    );
}

#[test]
fn the_junit_file_has_a_test_case_per_gate() {
    let tmp = tempfile::tempdir().unwrap();
    gen_folder(&tmp.path().join("run"), 10_000);
    let xml = tmp.path().join("gates.xml");
    let mut cmd = Command::cargo_bin("latlab").unwrap();
    cmd.arg("check")
        .arg(tmp.path().join("run"))
        .args([
            "--assert",
            "p99<=10ms",
            "--assert",
            "p99<9.9ms",
            "--assert",
            "p50<1ms",
        ])
        .arg("--junit")
        .arg(&xml)
        .assert()
        .code(3);
    let text = std::fs::read_to_string(&xml).unwrap();
    assert!(
        text.contains(r#"tests="3" failures="1" errors="0" skipped="1""#),
        "{text}"
    );
    assert!(text.contains(r#"name="p99&lt;=10ms""#), "{text}");
    assert!(
        text.contains("<failure type=\"assertion\" message=\"p50 5."),
        "{text}"
    );
    assert!(
        text.contains("<skipped message=\"inconclusive: p99 9."),
        "{text}"
    );
    // A JUnit file that cannot be written is found before anything is decided.
    let mut cmd = Command::cargo_bin("latlab").unwrap();
    cmd.arg("check")
        .arg(tmp.path().join("run"))
        .args([
            "--assert",
            "p99<=10ms",
            "--junit",
            "/no/such/folder/gates.xml",
        ])
        .assert()
        .code(1)
        .stdout("")
        .stderr(contains(
            "/no/such/folder/gates.xml: folder /no/such/folder does not exist",
        ));
}

#[test]
fn compare_fails_a_regression_gate_on_a_slower_run_and_refuses_other_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, new) = (tmp.path().join("base"), tmp.path().join("new"));
    scaled_folder(&base, 20_000, 1_000);
    scaled_folder(&new, 20_000, 1_200); // every round trip 20 % slower
    let plot = tmp.path().join("both.svg");
    Command::cargo_bin("latlab")
        .unwrap()
        .arg("compare")
        .args([&base, &new])
        .args(["--assert", "p99<=+10%", "--plot"])
        .arg(&plot)
        .assert()
        .code(3)
        .stdout(contains("NEW's p50 is 20.0% ["))
        .stdout(contains("FAIL p99<=+10%: NEW's p99 is 20.0% ["));
    assert!(std::fs::read_to_string(&plot)
        .unwrap()
        .contains("NEW: 1000 pps to test"));
    // A study's folder is not a run to compare: refused naming it.
    let study = tmp.path().join("study");
    std::fs::create_dir_all(&study).unwrap();
    std::fs::write(
        study.join("study.json"),
        r#"{"kind":"emulator","topology":"t","latlab_version":"0.1.0"}"#,
    )
    .unwrap();
    Command::cargo_bin("latlab")
        .unwrap()
        .arg("compare")
        .args([&base, &study])
        .assert()
        .code(2)
        .stderr(contains(format!(
            "{}: a study's folder (emulator)",
            study.display()
        )));
}

#[test]
fn check_decides_rfc2544_rates_per_frame_size_and_refuses_its_percentiles() {
    use latlab_forwarding::rfc2544::SizeResult;
    let tmp = tempfile::tempdir().unwrap();
    let sizes = vec![
        SizeResult {
            frame_size: 64,
            ndr_pps: Some(450_000),
            pdr_pps: Some(470_000),
            ..SizeResult::default()
        },
        SizeResult {
            frame_size: 1518,
            ndr_pps: Some(200_000),
            pdr_pps: Some(200_000),
            ..SizeResult::default()
        },
    ];
    let json = serde_json::json!({ "sizes": sizes });
    std::fs::write(tmp.path().join("rfc2544.json"), json.to_string()).unwrap();
    check(tmp.path(), &["ndr>=150k"])
        .code(0)
        .stdout(contains(
            "PASS ndr>=150k [64 B]: ndr 450.0 kpps (found by the search)",
        ))
        .stdout(contains("PASS ndr>=150k [1518 B]"));
    check(tmp.path(), &["ndr>=150k", "pdr>=300k"])
        .code(3)
        .stdout(contains("FAIL pdr>=300k [1518 B]: pdr 200.0 kpps"));
    check(tmp.path(), &["p99<=1ms"])
        .code(2)
        .stderr(contains("rfc2544 gates its rates only"));
}
