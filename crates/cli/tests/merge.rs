//! `latlab merge`: the runs of several generators made one, exactly.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use latlab_stats::hlog::{merge_intervals, read_hlog};
use latlab_stats::{LatencyHistogram, Summary};

/// Starts `latlab echo` on a free loopback port; returns it and its address.
fn echo() -> (std::process::Child, SocketAddr) {
    let mut child = Command::new(cargo_bin("latlab"))
        .args(["echo", "--listen", "127.0.0.1:0", "--poll", "block"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split_whitespace()
        .skip_while(|w| *w != "on")
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, addr)
}

fn gen(target: SocketAddr, rate: &str, out: &Path) {
    let status = Command::new(cargo_bin("latlab"))
        .args(["gen", "--target", &target.to_string(), "--rate", rate])
        .args(["--duration", "1200ms", "--poll", "block", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Every sample of a run folder: the union of its per-second intervals.
fn all_intervals(dir: &Path) -> LatencyHistogram {
    let log = read_hlog(std::fs::File::open(dir.join("latency.hlog")).unwrap()).unwrap();
    merge_intervals(&log, None).unwrap()
}

fn merge(args: &[&Path]) -> std::process::Output {
    Command::new(cargo_bin("latlab"))
        .arg("merge")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn three_runs_merged_are_one_histogram_of_all_their_samples() {
    let _turn = common::engines();
    let (mut reflector, target) = echo();
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = ["1k", "2k", "500"]
        .iter()
        .enumerate()
        .map(|(i, rate)| {
            let out = dir.path().join(format!("host{i}"));
            gen(target, rate, &out);
            out
        })
        .collect();
    let _ = reflector.kill();
    let _ = reflector.wait();
    let merged = dir.path().join("merged");
    let out = merge(&[&runs[0], &runs[1], &runs[2], Path::new("--out"), &merged]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Every sample of the three runs, from their per-second logs: the merged whole-run
    // histogram holds exactly these, and so does the merged interval log.
    let mut all = LatencyHistogram::new();
    for run in &runs {
        all.merge(&all_intervals(run)).unwrap();
    }
    let log = read_hlog(std::fs::File::open(merged.join("histograms.hlog")).unwrap()).unwrap();
    let whole = merge_intervals(&log, Some("latency")).unwrap();
    assert_eq!(whole, all);
    assert_eq!(all_intervals(&merged), all);

    let summary = common::read_json(&merged.join("summary.json"));
    let expected: serde_json::Value = serde_json::to_value(Summary::from_histogram(&all)).unwrap();
    assert_eq!(summary["latency_ns"], expected);
    let sum = |key: &str| -> u64 {
        runs.iter()
            .map(|r| {
                common::read_json(&r.join("summary.json"))[key]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    for key in ["sent", "received", "lost"] {
        assert_eq!(summary[key].as_u64().unwrap(), sum(key), "{key}");
    }
    assert_eq!(summary["received"].as_u64().unwrap(), all.len());
    let listed = summary["merged_from"].as_array().unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed
        .iter()
        .all(|r| r["run_id"].is_u64() && r["host"].is_string()));
    assert!((summary["offered_pps"].as_f64().unwrap() - 3500.0).abs() < 1e-6);

    // latlab report reads the merged folder as any run, and a merge of merges is flat.
    let report = Command::new(cargo_bin("latlab"))
        .arg("report")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(report.status.success());
    assert!(String::from_utf8_lossy(&report.stdout).contains("3 runs merged"));
    let again = dir.path().join("again");
    let out = merge(&[&merged, &runs[0], Path::new("--out"), &again]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = common::read_json(&again.join("summary.json"));
    assert_eq!(summary["merged_from"].as_array().unwrap().len(), 4);
}

#[test]
fn folders_that_cannot_be_merged_are_named() {
    let _turn = common::engines();
    let (mut reflector, target) = echo();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    gen(target, "1k", &a);
    gen(target, "1k", &b);
    let _ = reflector.kill();
    let _ = reflector.wait();
    let out_dir = dir.path().join("out");
    let fails = |args: &[&Path], needle: &str| {
        let out = merge(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{stderr:?} lacks {needle:?}");
        assert!(!out_dir.exists(), "nothing is written");
    };
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(
        &[&a, &empty, Path::new("--out"), &out_dir],
        "empty: not a run folder",
    );
    fails(&[&a, &a, Path::new("--out"), &out_dir], "the same run");

    // Another version's run.
    let summary_path = b.join("summary.json");
    let mut summary = common::read_json(&summary_path);
    summary["latlab_version"] = "0.0.1".into();
    std::fs::write(&summary_path, summary.to_string()).unwrap();
    fails(
        &[&a, &b, Path::new("--out"), &out_dir],
        "b: written by latlab 0.0.1",
    );

    // A run without its whole-run histograms.
    summary["latlab_version"] =
        common::read_json(&a.join("summary.json"))["latlab_version"].clone();
    std::fs::write(&summary_path, summary.to_string()).unwrap();
    std::fs::remove_file(b.join("histograms.hlog")).unwrap();
    fails(
        &[&a, &b, Path::new("--out"), &out_dir],
        "b: has no histograms.hlog",
    );
}
