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
