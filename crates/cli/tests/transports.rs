//! `latlab study transports` as a user runs it: a short study in namespaces writes its points,
//! figures and report, `--resume` measures nothing again, and `latlab report` draws it again
//! byte for byte (root; must run under CI=true).

mod common;

use assert_cmd::cargo::cargo_bin;

#[test]
fn bad_transport_study_options_name_themselves() {
    let study = ["study", "transports"];
    common::one_line_error(&[&study[..], &["--losses", "150%"]].concat(), "--losses");
    common::one_line_error(
        &[&study[..], &["--loss-models", "lumpy"]].concat(),
        "--loss-models",
    );
    common::one_line_error(
        &[&study[..], &["--transports", "sctp:fast"]].concat(),
        "--transports",
    );
    common::one_line_error(&[&study[..], &["--streams", "0"]].concat(), "--streams");
    common::one_line_error(&[&study[..], &["--rtts", "soon"]].concat(), "--rtts");
}

#[test]
fn a_short_transport_study_writes_every_artefact_and_resumes() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let study = |resume: bool| {
        let mut c = assert_cmd::Command::new(cargo_bin("latlab"));
        c.args([
            "study",
            "transports",
            "--rtts",
            "20ms",
            "--intervals",
            "20ms",
        ])
        .args(["--losses", "1%", "--loss-models", "random,bursty"])
        .args(["--transports", "udp,latlab:thin,enet", "--streams", "3"])
        .args(["--duration", "1s", "--out"])
        .arg(&out);
        if resume {
            c.arg("--resume");
        }
        let run = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success(), "{stderr}");
        stderr
    };
    study(false);
    for kind in ["random", "bursty"] {
        for t in ["udp", "latlab_thin_min-rto200000us_dupacks1", "enet"] {
            let key = format!("rtt20ms-ia20ms-loss1-{kind}-{t}");
            let point = common::read_json(&out.join(format!("points/{key}.json")));
            assert!(out.join(format!("points/{key}.hlog")).is_file(), "{key}");
            assert_eq!(point["streams"], 3, "{point}");
            // Three streams of a message every 20 ms for a second.
            let sent = point["sent"].as_u64().unwrap();
            assert!((140..=153).contains(&sent), "{key}: {sent} sent");
            assert_eq!(point["failed_streams"], 0, "{point}");
            if t != "udp" {
                assert_eq!(point["lost"], 0, "{key} is reliable: {point}");
            }
            if t.starts_with("latlab") {
                // latlab's transport tells which of its retransmissions were not needed.
                let wire = &point["wire"]["forward"];
                assert!(
                    wire["spurious_retransmissions"].as_u64().is_some(),
                    "{point}"
                );
            }
            // Nothing arrives sooner than half the round trip.
            let min = point["latency_ns"]["min"].as_u64().unwrap();
            assert!(min >= 10_000_000, "{key}: {min} ns");
            assert!(
                point["wire"]["bytes_ratio"].as_f64().unwrap() >= 0.95,
                "{point}"
            );
        }
        for f in [
            format!("fig2-{kind}-rtt20ms-ia20ms.svg"),
            format!("fig3-ccdf-{kind}-rtt20ms-ia20ms-loss1.svg"),
            format!("fig4-overhead-{kind}.svg"),
            format!("fig5-cost-{kind}-rtt20ms-ia20ms-loss1.svg"),
        ] {
            assert!(out.join(&f).is_file(), "{f} missing");
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Conclusions"), "{md}");
    assert!(md.contains("| 1% | latlab:thin:"), "{md}");
    let again = study(true);
    assert_eq!(again.matches("measured before, kept").count(), 2, "{again}");
    common::report_redraws_as_written(&out);
}

#[test]
fn a_virtual_study_cross_checks_one_cell_in_namespaces() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(["study", "transports", "--virtual", "--rtts", "20ms"])
        .args(["--intervals", "20ms", "--losses", "0.5%,1%"])
        .args(["--loss-models", "random", "--streams", "10"])
        .args(["--transports", "udp,latlab:thin,enet,quic"])
        .args([
            "--duration",
            "60s",
            "--checks",
            "1",
            "--check-duration",
            "1s",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("left out: enet: ENet's library keeps its own clock"),
        "{stderr}"
    );
    for loss in ["0.5", "1"] {
        for t in ["udp", "latlab_thin_min-rto200000us_dupacks1", "quic"] {
            let point = common::read_json(
                &out.join(format!("points/rtt20ms-ia20ms-loss{loss}-random-{t}.json")),
            );
            assert_eq!(point["clock"], "virtual", "{point}");
            // Ten streams of a message every 20 ms for 60 s of virtual time.
            assert_eq!(point["sent"], 30_000, "{point}");
        }
    }
    // One cross-check, on the last cell: its points measured in namespaces.
    let check = common::read_json(&out.join("points/rtt20ms-ia20ms-loss1-random-quic-check.json"));
    assert_eq!(check["clock"], "namespaces");
    assert_eq!(check["check"], true);
    assert!(!out
        .join("points/rtt20ms-ia20ms-loss0.5-random-quic-check.json")
        .exists());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Virtual time against namespaces"), "{md}");
    assert!(md.contains("Of 3 cross-checked points"), "{md}");
    common::report_redraws_as_written(&out);
}
