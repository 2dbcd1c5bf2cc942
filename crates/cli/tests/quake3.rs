//! `latlab gen --protocol quake3` against OpenArena's dedicated server (ioquake3's engine) in a
//! namespace: under the engine's getinfo rate limit, over it, and killed mid-run.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use common::servers::quake3::Quake3;
use latlab_lab::topology::ClientServer;

/// The namespaces of a client—server topology and the server started in it, or `None`
/// (skipped) when there are no namespaces or no server.
fn server() -> Option<(ClientServer, String, Quake3)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let topo = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces { client, server, .. } = &topo else {
        unreachable!("namespaces() builds namespaces")
    };
    let client = client.name().to_string();
    let q3 = Quake3::start(server.name(), Ipv4Addr::new(198, 18, 0, 2), 27960)?;
    Some((topo, client, q3))
}

fn gen_args(rate: &str, duration: &str, out: &Path) -> Vec<String> {
    [
        "--protocol",
        "quake3",
        "--rate",
        rate,
        "--duration",
        duration,
    ]
    .into_iter()
    .chain(["--poll", "block", "--out"])
    .map(String::from)
    .chain([out.display().to_string()])
    .collect()
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a count"))
}

/// Checks what every run shares: each request answered or not, nothing else came back.
fn nothing_but_answers(summary: &serde_json::Value) {
    let p = &summary["protocol"];
    assert_eq!(p["name"], "quake3");
    assert_eq!(
        n(&p["answered"]) + n(&p["unanswered"]),
        n(&summary["sent"]),
        "{p}"
    );
    for key in ["late", "duplicate", "wrong_id", "wrong_source"] {
        assert_eq!(n(&p[key]), 0, "{key}: {p}");
    }
    assert!(
        p.get("malformed").is_none() && p.get("mismatch").is_none(),
        "{p}"
    );
}

#[test]
fn under_the_engines_limit_every_query_is_answered_with_its_challenge() {
    let Some((_topo, client, q3)) = server() else {
        return;
    };
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let text = common::gen_in(&client, &q3.addr.to_string(), &gen_args("1", "2s", &out));
    let summary = common::read_json(&out.join("summary.json"));
    nothing_but_answers(&summary);
    let p = &summary["protocol"];
    let sent = n(&summary["sent"]);
    assert!(sent > 0);
    assert_eq!(n(&p["answered"]), sent, "{text}\n{}", q3.log());
    // Every answer (warm-up included) echoed a challenge of this run: an info outcome.
    let warmup = n(&summary["warmup"]["received"]);
    assert_eq!(n(&p["outcomes"]["info"]), sent + warmup, "{p}");
    assert_eq!(n(&p["outcomes"]["info, server full"]), 0, "{p}");
    assert!(p.get("limit").is_none(), "{p}");
    assert!(!text.contains("limit:"), "{text}");
}

#[test]
fn over_the_engines_limit_the_report_names_its_limiter_for_the_drops() {
    let Some((_topo, client, q3)) = server() else {
        return;
    };
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let text = common::gen_in(&client, &q3.addr.to_string(), &gen_args("20", "2s", &out));
    let summary = common::read_json(&out.join("summary.json"));
    nothing_but_answers(&summary);
    let p = &summary["protocol"];
    let limit = p["limit"]
        .as_str()
        .unwrap_or_else(|| panic!("no limit note: {p}"));
    assert!(limit.contains("SVC_RateLimitAddress"), "{limit}");
    assert!(limit.contains("not loss on the path"), "{limit}");
    assert!(text.contains(&format!("  {limit}")), "{text}");
    // The engine answered its burst of 10 and about one a second; the rest it dropped.
    let answered_all = n(&p["outcomes"]["info"]);
    assert!(answered_all >= 1, "{p}");
    assert!(
        answered_all <= 10 + 4,
        "more answered than the limiter lets through: {p}"
    );
    assert!(n(&p["unanswered"]) > 0, "{p}");
}

#[test]
fn the_server_killed_mid_run_leaves_the_rest_unanswered_and_nothing_else() {
    let Some((_topo, client, q3)) = server() else {
        return;
    };
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut cmd = common::in_ns(&client);
    cmd.args(["gen", "--target", &q3.addr.to_string()])
        .args(gen_args("1", "2s", &out))
        .stdout(std::process::Stdio::piped());
    // The run starts once the check before it had an answer: the server answered.
    let gen = common::started(cmd, "latlab gen:");
    std::thread::sleep(Duration::from_millis(500));
    common::signal_pid(q3.id(), "KILL");
    let (status, stdout, stderr) = gen.wait_output();
    assert!(status.success(), "{stderr}");
    let summary = common::read_json(&out.join("summary.json"));
    nothing_but_answers(&summary);
    assert!(n(&summary["protocol"]["unanswered"]) > 0, "{stdout}");
}
