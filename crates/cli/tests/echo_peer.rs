//! `gen --protocol echo` against a UDP echo server nobody here wrote: xinetd's RFC 862
//! `echo-dgram`, started by the test in a namespace it made. Root; must run under CI=true.

mod common;

use latlab_lab::topology::ClientServer;

fn lab() -> Option<(ClientServer, String, String, std::net::Ipv4Addr)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        client,
        server,
        server_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    let (c, s, a) = (
        client.name().to_string(),
        server.name().to_string(),
        *server_addr,
    );
    Some((lab, c, s, a))
}

#[test]
fn an_rfc_862_echo_server_answers_every_request_with_its_own_bytes() {
    let _turn = common::engines();
    let Some((_lab, client, server, addr)) = lab() else {
        return;
    };
    let Some(_echo) = common::servers::xinetd::Xinetd::start(&server, addr, 7) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("echo.json");
    let target = format!("{addr}:7");
    common::gen_in(
        &client,
        &target,
        &[
            "--protocol",
            "echo",
            "--rate",
            "500",
            "--duration",
            "1s",
            "--size",
            "200",
            "--flows",
            "2",
            "--poll",
            "block",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let run = common::read_json(&json);
    let p = &run["protocol"];
    assert_eq!(p["name"], "echo", "{run}");
    let answered = p["answered"].as_u64().unwrap();
    assert!(answered > 0, "{run}");
    assert_eq!(
        answered + p["unanswered"].as_u64().unwrap(),
        run["sent"].as_u64().unwrap()
    );
    assert_eq!(run["received"].as_u64().unwrap(), answered);
    // Every datagram that came back was a whole, unaltered request of this run.
    for key in ["wrong_id", "wrong_source", "duplicate", "late"] {
        assert_eq!(p[key], 0, "{key}: {run}");
    }
    assert!(
        p.get("malformed").is_none() && p.get("mismatch").is_none(),
        "{run}"
    );
    let warmup = run["warmup"]["received"].as_u64().unwrap();
    assert_eq!(p["outcomes"]["echoed"].as_u64().unwrap(), answered + warmup);
    // No stamps come back from an echo server: the report has no responder time.
    assert_eq!(run["responder_dwell_ns"]["count"], 0, "{run}");
}

#[test]
fn a_server_stopped_mid_run_leaves_the_rest_unanswered_and_the_run_ends() {
    let _turn = common::engines();
    let Some((_lab, client, server, addr)) = lab() else {
        return;
    };
    let Some(echo) = common::servers::xinetd::Xinetd::start(&server, addr, 7) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stopped.json");
    let mut cmd = common::in_ns(&client);
    cmd.args([
        "gen",
        "--protocol",
        "echo",
        "--target",
        &format!("{addr}:7"),
    ])
    .args(["--rate", "200", "--duration", "4s", "--poll", "block"])
    .arg("--json")
    .arg(&json)
    .stdout(std::process::Stdio::null());
    let gen = common::started(cmd, "latlab gen:");
    // Stopped once some requests were answered (the run's first second is under way).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    drop(echo);
    let (status, stderr) = gen.wait();
    assert!(status.success(), "{stderr}");
    let run = common::read_json(&json);
    let p = &run["protocol"];
    let (answered, unanswered) = (
        p["answered"].as_u64().unwrap(),
        p["unanswered"].as_u64().unwrap(),
    );
    assert!(answered > 0 && unanswered > 0, "{run}");
    assert_eq!(
        answered + unanswered,
        run["sent"].as_u64().unwrap(),
        "{run}"
    );
}
