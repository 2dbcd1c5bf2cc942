use latlab_lab::gate::Verdict;
use latlab_lab::results::{ccdf_csv, histograms_bytes, summary_json, RunSummary};
use latlab_stats::LatencyHistogram;

use super::*;

/// A `gen --out` folder at `dir` of `n` round trips of `factor` µs to `n·factor` µs.
fn gen_folder(dir: &Path, n: u64, factor: f64) {
    let mut latency = LatencyHistogram::new();
    for i in 1..=n {
        latency.record((i as f64 * 1_000.0 * factor) as u64);
    }
    let summary = RunSummary::synthetic("1000 pps", &latency, n, 1_000.0);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("summary.json"), summary_json(&summary)).unwrap();
    std::fs::write(dir.join("ccdf.csv"), ccdf_csv(&latency).unwrap()).unwrap();
    let histograms = RunHistograms {
        latency,
        ..RunHistograms::default()
    };
    std::fs::write(
        dir.join(HISTOGRAMS),
        histograms_bytes(&histograms, 0, "test").unwrap(),
    )
    .unwrap();
}

fn options(base: &Path, new: &Path, gates: &[&str]) -> CompareOptions {
    CompareOptions {
        base: base.to_path_buf(),
        new: new.to_path_buf(),
        assertions: gates.iter().map(|g| g.parse().unwrap()).collect(),
        plot: None,
        junit: None,
        draws: 1_000,
        seed: 1,
    }
}

#[test]
fn a_slower_run_is_a_regression_and_a_like_one_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, same, slower) = (
        tmp.path().join("base"),
        tmp.path().join("same"),
        tmp.path().join("slower"),
    );
    gen_folder(&base, 20_000, 1.0);
    gen_folder(&same, 20_000, 1.0);
    gen_folder(&slower, 20_000, 1.25);
    let mut o = options(&base, &slower, &["p99<=+10%", "p50<=+50%"]);
    o.plot = Some(tmp.path().join("both.svg"));
    let c = run(&o).unwrap();
    assert_eq!(c.rows.len(), 7);
    let p99 = c.rows.iter().find(|r| r.quantile.key == "p99").unwrap();
    assert!(
        p99.line().starts_with("NEW's p99 is 25.0% ["),
        "{}",
        p99.line()
    );
    let verdicts: Vec<_> = c.verdicts.iter().map(|v| v.verdict).collect();
    assert_eq!(verdicts, [Verdict::Fail, Verdict::Pass]);
    let svg = std::fs::read_to_string(tmp.path().join("both.svg")).unwrap();
    assert!(svg.contains("BASE: 1000 pps") && svg.contains("NEW: 1000 pps"));
    // The same distribution again: no change, the gate passes.
    let c = run(&options(&base, &same, &["p99<=+10%"])).unwrap();
    assert_eq!(
        c.verdicts[0].verdict,
        Verdict::Pass,
        "{}",
        c.verdicts[0].message
    );
    // p99.99 of 20 000 samples cannot be compared.
    assert!(matches!(
        c.rows
            .iter()
            .find(|r| r.quantile.key == "p99_99")
            .unwrap()
            .comparison,
        Comparison::TooFewSamples { .. }
    ));
}

#[test]
fn folders_of_other_kinds_or_versions_are_refused_naming_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    gen_folder(&base, 1_000, 1.0);
    let nothing = tmp.path().join("nothing");
    std::fs::create_dir_all(&nothing).unwrap();
    let e = run(&options(&base, &nothing, &[])).unwrap_err();
    assert!(e.is_usage());
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a gen --out, demo or stream send --out folder (no summary.json or \
             stream.json)",
            nothing.display()
        )
    );
    let old = tmp.path().join("old");
    gen_folder(&old, 1_000, 1.0);
    let text = std::fs::read_to_string(old.join("summary.json")).unwrap();
    let text = text.replace(env!("CARGO_PKG_VERSION"), "0.0.1");
    std::fs::write(old.join("summary.json"), text).unwrap();
    let e = run(&options(&base, &old, &[])).unwrap_err();
    assert!(e.is_usage());
    assert!(
        e.to_string().starts_with(&format!(
            "{}: written by latlab 0.0.1, BASE {} by latlab {}",
            old.display(),
            base.display(),
            env!("CARGO_PKG_VERSION")
        )),
        "{e}"
    );
}
