use latlab_stats::gate::Verdict;
use latlab_stats::LatencyHistogram;

use super::*;

fn runs(labels: &[&str]) -> Vec<RunSummary> {
    let mut h = LatencyHistogram::new();
    for i in 1..=1_000u64 {
        h.record(i * 1_000);
    }
    labels
        .iter()
        .map(|l| RunSummary::synthetic(l, &h, 1_000, 1_000.0))
        .collect()
}

#[test]
fn each_run_of_a_folder_is_decided_and_named_when_there_are_several() {
    let gates: Vec<Assertion> = vec!["p50<=1s".parse().unwrap(), "p99<=900us".parse().unwrap()];
    let one = decide(&gates, &runs(&["a"])).unwrap();
    assert_eq!(one.len(), 2);
    assert_eq!(one[0].run, None);
    assert_eq!(
        (one[0].verdict, one[1].verdict),
        (Verdict::Pass, Verdict::Fail)
    );
    let two = decide(&gates, &runs(&["1k", "10k"])).unwrap();
    let names: Vec<_> = two.iter().map(|v| v.run.as_deref().unwrap()).collect();
    assert_eq!(names, ["1k", "1k", "10k", "10k"]);
}

#[test]
fn one_way_gates_need_every_run_to_have_shared_a_clock() {
    let gates: Vec<Assertion> = vec!["forward.p50<=1s".parse().unwrap()];
    let mut both = runs(&["a", "b"]);
    both[0].clock = Some("shared".into());
    assert!(decide(&gates, &both).is_err());
    both[1].clock = Some("shared".into());
    assert!(decide(&gates, &both).is_ok());
}

#[test]
fn a_study_folder_gates_each_point_with_a_latency_summary_named_by_its_key() {
    use crate::points::{Existing, PointsDir};
    #[derive(serde::Serialize)]
    struct WithRun {
        path: String,
        run: RunSummary,
    }
    #[derive(serde::Serialize)]
    struct Rate {
        sent: u64,
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let point = WithRun {
        path: "emu".into(),
        run: runs(&["x"]).remove(0),
    };
    points.write("emu-d0ns-1000pps", &point, None).unwrap();
    let mut h = LatencyHistogram::new();
    for i in 1..=1_000u64 {
        h.record(i * 3_000);
    }
    points
        .write("cell-a", &Rate { sent: 5 }, Some((&h, "test")))
        .unwrap();
    points
        .write("rate-kernel-64", &Rate { sent: 9 }, None)
        .unwrap();
    crate::StudyFile::new(crate::StudyKind::Emulator, "lab")
        .write(&out)
        .unwrap();

    let options = CheckOptions {
        dir: out.clone(),
        assertions: vec!["p99<=2ms".parse().unwrap(), "loss<=1%".parse().unwrap()],
        junit: None,
    };
    let verdicts = run(&options, &[]).unwrap();
    let named: Vec<(&str, Verdict)> = verdicts
        .iter()
        .map(|v| (v.run.as_deref().unwrap(), v.verdict))
        .collect();
    // The .hlog point's p99 is about 2.97 ms: fail; its loss is not recorded.
    assert_eq!(
        named,
        [
            ("cell-a", Verdict::Fail),
            ("cell-a", Verdict::Inconclusive),
            ("emu-d0ns-1000pps", Verdict::Pass),
            ("emu-d0ns-1000pps", Verdict::Pass),
        ],
        "{verdicts:?}"
    );
    assert!(
        verdicts[0].line().contains("[cell-a]"),
        "{}",
        verdicts[0].line()
    );

    // A study with no point to gate says so, naming the folder and what to gate instead.
    std::fs::remove_file(out.join("points/cell-a.json")).unwrap();
    std::fs::remove_file(out.join("points/emu-d0ns-1000pps.json")).unwrap();
    let e = run(&options, &[]).unwrap_err().to_string();
    let expected = format!(
        "{}: latlab study emulator's points have no latency summary to gate",
        out.display()
    );
    assert!(e.starts_with(&expected), "{e}");
    assert!(e.contains("gate a gen --out or demo folder instead"), "{e}");
}
