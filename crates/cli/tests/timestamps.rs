//! `latlab study timestamps` as a user runs it: a short study in namespaces writes every
//! artefact, `--resume` keeps the points it finished, and `latlab report` draws it again byte
//! for byte (root; must run under CI=true).

mod common;

use std::path::Path;

use assert_cmd::cargo::cargo_bin;

#[test]
fn bad_timestamp_study_options_name_themselves() {
    common::one_line_error(&["study", "timestamps", "--probes", "0"], "--probes");
    common::one_line_error(&["study", "timestamps", "--delay", "soon"], "--delay");
    common::one_line_error(
        &["study", "timestamps", "--out", "/tmp/x", "--shard", "4/3"],
        "--shard",
    );
}

#[test]
fn a_short_timestamp_study_writes_every_artefact_and_report_draws_it_again() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let study = |resume: bool| {
        let mut c = assert_cmd::Command::new(cargo_bin("latlab"));
        c.args(["study", "timestamps", "--probes", "400", "--rate", "2k"])
            .args(["--delay", "100us", "--out"])
            .arg(&out);
        if resume {
            c.arg("--resume");
        }
        let run = c.output().unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8_lossy(&run.stderr).into_owned()
    };
    study(false);
    let written = common::artefacts(&out);
    for f in [
        "study.json",
        "report.md",
        "methods-block.svg",
        "methods-busy.svg",
        "methods-xdp.svg",
        "settings-user-space.svg",
        "settings-kernel-rx.svg",
        "settings-kernel-tx-rx.svg",
        "forwarder-user-space.svg",
        "forwarder-kernel-rx.svg",
        "forwarder-kernel-tx-rx.svg",
    ] {
        assert!(written.contains_key(f), "{f} missing: {:?}", written.keys());
    }
    assert_eq!(
        common::read_json(&out.join("study.json"))["kind"],
        "timestamps"
    );
    // Each latlab prober's point places its lost probes (few or none), adding up to them.
    for entry in std::fs::read_dir(out.join("points")).unwrap() {
        let path = entry.unwrap().path();
        let point = common::read_json(&path);
        if point["prober_poll"] == "sockperf" || point["left_out"].is_string() {
            continue;
        }
        let lost = &point["lost_by_cause"];
        let n = |cause: &str| lost[cause].as_u64().unwrap_or(0);
        let answered = point["probes"].as_array().unwrap().len() as u64;
        assert_eq!(
            n("lost"),
            point["sent"].as_u64().unwrap() - answered,
            "{lost}"
        );
        let causes = [
            "sender",
            "path",
            "reflector_socket",
            "reflector",
            "unanswered",
        ];
        assert_eq!(causes.map(n).iter().sum::<u64>(), n("lost"), "{lost}");
        assert!(lost["path"].is_u64(), "{}: {lost}", path.display());
    }
    // Every probe carries every stamp: the kernel's transmit and receive stamps included.
    let point = common::read_json(&out.join("points/methods-prober-block.json"));
    let probes = point["probes"].as_array().unwrap();
    assert!(probes.len() >= 390, "{} of 400 answered", probes.len());
    for p in probes {
        let (tx, rx) = (
            p["kernel_tx"].as_u64().unwrap(),
            p["kernel_rx"].as_u64().unwrap(),
        );
        let (utx, urx) = (
            p["user_tx"].as_u64().unwrap(),
            p["user_rx"].as_u64().unwrap(),
        );
        assert!(utx <= tx && tx < rx && rx <= urx, "{p}");
        assert!(
            rx - tx >= 100_000,
            "the 100 µs delay is in every round trip: {p}"
        );
    }
    // The prober over AF_XDP: every answer carries the XDP program's stamp, between the
    // user-space clock's send and read, and the 100 µs delay is in it.
    let point = common::read_json(&out.join("points/methods-prober-xdp.json"));
    assert_eq!(point["prober_poll"], "xdp", "{point}");
    let probes = point["probes"].as_array().unwrap();
    assert!(
        probes.len() >= 390,
        "{} of 400 answered over AF_XDP",
        probes.len()
    );
    for p in probes {
        let (utx, xdp, urx) = (
            p["user_tx"].as_u64().unwrap(),
            p["xdp_rx"].as_u64().unwrap(),
            p["user_rx"].as_u64().unwrap(),
        );
        assert!(utx + 100_000 <= xdp && xdp <= urx, "{p}");
        assert!(p.get("kernel_rx").unwrap().is_null(), "{p}");
    }
    // Threaded NAPI on the reflector's veth and on the emulator's: measured wherever the
    // kernel has it (5.12 and later), else left out with the reason.
    for key in [
        "reflector-threaded-napi",
        "forwarder-threaded-napi",
        "forwarder-rps",
    ] {
        let point = common::read_json(&out.join(format!("points/{key}.json")));
        if Path::new("/sys/class/net/lo/threaded").exists() || key == "forwarder-rps" {
            assert!(point.get("left_out").is_none(), "{point}");
            let answered = point["probes"].as_array().unwrap().len();
            assert!(answered >= 390, "{key}: {answered} of 400 answered");
        } else {
            assert!(
                point["left_out"].as_str().unwrap().contains("NAPI"),
                "{point}"
            );
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Conclusions"), "{md}");
    assert!(md.contains("threaded NAPI"), "{md}");
    // sockperf, the outside view, is measured or left out with the reason.
    assert!(
        md.contains("| sockperf ping-pong | sockperf |")
            || md.contains("sockperf ping-pong left out: "),
        "{md}"
    );
    // A finished study resumed measures nothing again and draws the same report, but for
    // the lab it built (its namespaces have new names).
    let again = study(true);
    assert!(again.contains("measured before, kept"), "{again}");
    let resumed = common::artefacts(&out);
    let without_lab = |files: &std::collections::BTreeMap<String, Vec<u8>>| {
        files
            .iter()
            .filter(|(name, _)| *name != "study.json")
            .map(|(name, bytes)| {
                let text = String::from_utf8_lossy(bytes);
                let kept: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.starts_with("Topology: "))
                    .collect();
                (name.clone(), kept.join("\n"))
            })
            .collect::<Vec<_>>()
    };
    assert!(
        without_lab(&resumed) == without_lab(&written),
        "the resumed study drew other artefacts"
    );
    common::report_redraws_as_written(&out);
}

#[test]
fn a_timestamp_study_in_two_shards_fills_one_folder_and_the_last_draws_the_report() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let shard = |spec: &str| {
        let run = assert_cmd::Command::new(cargo_bin("latlab"))
            .args(["study", "timestamps", "--probes", "200", "--rate", "2k"])
            .args(["--shard", spec, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8_lossy(&run.stdout).into_owned()
    };
    let first = shard("1/2");
    assert!(first.contains("shards 2/2"), "{first}");
    assert!(
        !out.join("report.md").exists(),
        "drawn before every shard is done"
    );
    let second = shard("2/2");
    assert!(second.contains("report: "), "{second}");
    let points = std::fs::read_dir(out.join("points"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".json")
        })
        .count();
    assert_eq!(
        points, 18,
        "every point of the plan, from one shard or the other"
    );
    common::report_redraws_as_written(&out);
}
