//! `latlab rfc2544` and `latlab study forwarding` end to end in namespaces (root; under
//! `CI=true` they must run): the kernel, testpmd and an external DUT, an AF_XDP source,
//! `--resume`, the study's tables, and bad flags.

mod common;

use std::process::Command;

use latlab_lab::topology::ClientEmuServer;

#[test]
fn rfc2544_through_the_kernel_finds_a_non_zero_ndr_with_short_trials() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544");
    common::succeeds(
        Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(["rfc2544", "--dut", "kernel", "--sizes", "64,512"])
            .args(["--trial", "150ms", "--max-trials", "6", "--no-loss-sweep"])
            .arg("--out")
            .arg(&out),
    );
    let results = common::read_json(&out.join("rfc2544.json"));
    assert_eq!(results["dut"], "kernel");
    assert!(results["receive_work"].as_str().unwrap().starts_with("RPS"));
    let sizes = results["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2);
    for s in sizes {
        let ndr = s["ndr_pps"].as_u64().unwrap();
        let pdr = s["pdr_pps"].as_u64().unwrap();
        assert!(ndr > 0 && pdr >= ndr, "{s}");
        assert!(
            ndr as f64 <= s["source_max_pps"].as_f64().unwrap() + 1.0,
            "{s}"
        );
        assert!(s["trials"].as_array().unwrap().len() >= 2, "{s}");
        // One back-to-back search, found within the bursts tried.
        let bursts = s["back_to_back"].as_array().unwrap();
        assert_eq!(bursts.len(), 1, "{s}");
        // RFC 8219 latency at 10, 50, 90 and 100% of the NDR, one way, from every frame.
        let latency = s["latency"].as_array().unwrap();
        let percents: Vec<u64> = latency
            .iter()
            .map(|l| l["percent_of_ndr"].as_u64().unwrap())
            .collect();
        assert_eq!(percents, [10, 50, 90, 100], "{s}");
        for l in latency {
            let f = &l["trials"][0];
            assert!(f["frames"].as_u64().unwrap() > 0, "{l}");
            let (min, median) = (f["min_ns"].as_u64().unwrap(), &f["median"]["Value"]);
            assert!(
                min > 0 && median["value_ns"].as_u64().unwrap() >= min,
                "{l}"
            );
        }
        // No trial counts frames of the one before: each ends when the sink is quiet and the
        // source's ring has sent everything.
        // The frames the source's veth dropped (the DUT's side full) are read for every trial
        // and are part of what the trial lost.
        for t in s["trials"].as_array().unwrap() {
            let (sent, received) = (t["sent"].as_u64().unwrap(), t["received"].as_u64().unwrap());
            assert!(received <= sent, "{t}");
            let entering = t["dropped_entering"].as_u64().expect("dropped_entering");
            let at_sink = t["dropped_at_sink"].as_u64().expect("dropped_at_sink");
            assert!(entering + at_sink <= sent - received, "{t}");
        }
    }
    let csv = std::fs::read_to_string(out.join("rfc2544.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("frame_size,source_max_pps,"));
    // The report: Table I's shape with both sizes, latency by load, the figures, conclusions.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for part in [
        "## Throughput (Table I's shape)",
        "## Latency by load (RFC 8219)",
        "## Conclusions",
        "| 64 | ",
        "| 10% |",
    ] {
        assert!(md.contains(part), "{part} missing:\n{md}");
    }
    // The worst case (p99.9) needs 3,838 frames in a trial: how many a 150 ms trial at 10% of
    // the NDR carries depends on the machine's speed, so latency.svg is drawn exactly when
    // some load had enough of them.
    let worst_cases = sizes
        .iter()
        .flat_map(|s| s["latency"].as_array().unwrap())
        .filter(|l| l["summary"]["worst_case_ns"].is_u64())
        .count();
    assert_eq!(
        out.join("latency.svg").exists(),
        worst_cases > 0,
        "{worst_cases} loads with a worst case"
    );
    for figure in ["fig2-throughput.svg", "latency.svg"] {
        if !out.join(figure).exists() {
            continue;
        }
        let svg = std::fs::read_to_string(out.join(figure)).unwrap();
        assert!(svg.starts_with("<svg"), "{figure}");
        assert!(md.contains(&format!("]({figure})")), "{md}");
    }
    assert!(out.join("fig2-throughput.svg").exists());
    // --no-loss-sweep: no sweep, no figure of it.
    assert!(!out.join("loss.svg").exists());
    // The saturation trial: the DUT's CPU sampled while frames went through, the kernel's
    // forwarding decision among its steps (Table II).
    let saturation = &results["saturation"];
    assert_eq!(saturation["frame_size"], 64, "{saturation}");
    assert!(saturation["received"].as_u64().unwrap() > 0, "{saturation}");
    let steps = saturation["profile"]["steps"].as_array().expect("sampled");
    let samples = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .and_then(|s| s["samples"].as_u64())
            .unwrap_or(0)
    };
    assert!(samples("Process") > 0 && samples("Rx") > 0, "{saturation}");
    assert!(
        md.contains("## Where the cycles go at saturation (Table II's shape)"),
        "{md}"
    );
    // `latlab report` draws the report and the figures again from rfc2544.json, byte for byte.
    let drawn: Vec<&str> = ["report.md", "fig2-throughput.svg", "latency.svg"]
        .into_iter()
        .filter(|f| out.join(f).exists())
        .collect();
    let before: Vec<Vec<u8>> = drawn
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap())
        .collect();
    for f in &drawn {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let report = Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .arg("report")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let after: Vec<Vec<u8>> = drawn
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap())
        .collect();
    assert!(before == after, "the redrawn files differ");
    assert!(!out.join("latency.svg").exists() || worst_cases > 0);
}

#[test]
fn rfc2544_through_dpdk_testpmd_finds_a_non_zero_ndr_and_leaves_no_testpmd_running() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for dut in ["testpmd", "testpmd-xdp"] {
        let out = dir.path().join(dut);
        let child = Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(["rfc2544", "--dut", dut, "--sizes", "64", "--source", "xdp"])
            // Enough halvings to reach a rate testpmd over AF_PACKET keeps up with (about a
            // tenth of the source's).
            .args(["--trial", "200ms", "--max-trials", "10", "--no-loss-sweep"])
            .args(["--b2b-repeats", "0", "--latency-trials", "0"])
            .arg("--out")
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // testpmd's EAL file prefix names the run that started it.
        let prefix = format!("latlab-{}-", child.id());
        let run = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{dut}: {stderr}");
        let results = common::read_json(&out.join("rfc2544.json"));
        let ndr = results["sizes"][0]["ndr_pps"].as_u64().unwrap();
        assert!(ndr > 0, "{dut}: {results}");
        // testpmd's own counters, read as it ended: it forwarded what the sink got, and more.
        let forwarded = results["dut_report"]["testpmd"]["tx_packets"]
            .as_u64()
            .unwrap();
        assert!(forwarded >= ndr / 10, "{dut}: {results}");
        // The testpmd this run started has ended: none with its prefix is left.
        let left = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .filter(|c| String::from_utf8_lossy(c).contains(&prefix))
            .count();
        assert_eq!(
            left, 0,
            "{dut}: a testpmd with prefix {prefix} is still running"
        );
        if dut == "testpmd-xdp" {
            assert!(
                results["receive_work"]
                    .as_str()
                    .unwrap()
                    .contains("threaded NAPI"),
                "{results}"
            );
        }
    }
}

#[test]
fn rfc2544_measures_an_external_dut_between_two_interfaces_of_its_namespace() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let (c, e, s) = (lab.client.name(), lab.emu.name(), lab.server.name());
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    };
    // The DUT, started by hand as a user would: a Linux bridge in the middle namespace (with
    // br_netfilter's iptables pass off, which drops the blaster's bridged frames).
    ip(&["-n", e, "link", "add", "br0", "type", "bridge"]);
    for dev in ["emu-a", "emu-b"] {
        ip(&["-n", e, "link", "set", dev, "master", "br0"]);
    }
    ip(&["-n", e, "link", "set", "br0", "up"]);
    let _ = Command::new("ip")
        .args(["netns", "exec", e, "sh", "-c"])
        .arg("[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && echo 0 > /proc/sys/net/bridge/bridge-nf-call-iptables")
        .status();
    // The tester's two interfaces in one namespace: the server's veth joins the client's.
    ip(&["-n", s, "link", "set", "veth0", "name", "veth1"]);
    ip(&["-n", s, "link", "set", "veth1", "netns", c]);
    ip(&["-n", c, "link", "set", "veth1", "up"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("external");
    common::succeeds(
        common::in_ns(c)
            .args(["rfc2544", "--dut", "external", "--iface-a", "veth0"])
            .args(["--iface-b", "veth1", "--sizes", "64", "--trial", "200ms"])
            .args(["--max-trials", "6", "--no-loss-sweep", "--b2b-repeats", "0"])
            .arg("--out")
            .arg(&out),
    );
    let results = common::read_json(&out.join("rfc2544.json"));
    assert_eq!(results["dut"], "external");
    assert_eq!(results["iface_a"], "veth0");
    assert!(results["topology"]
        .as_str()
        .unwrap()
        .contains("external DUT"));
    let size = &results["sizes"][0];
    assert!(size["ndr_pps"].as_u64().unwrap() > 0, "{size}");
    // Latency from every frame the sink on veth1 took for the blaster's.
    let at_ndr = size["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["percent_of_ndr"] == 100)
        .unwrap();
    assert!(
        at_ndr["trials"][0]["frames"].as_u64().unwrap() > 0,
        "{at_ndr}"
    );
    // An external DUT's CPU is not known: no saturation trial.
    assert!(results["saturation"].is_null(), "{results}");
}

#[test]
fn rfc2544_with_an_af_xdp_source_counts_only_frames_that_left_and_finds_a_non_zero_ndr() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544-xdp");
    common::succeeds(
        Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args([
                "rfc2544", "--dut", "kernel", "--sizes", "64", "--source", "xdp",
            ])
            .args(["--trial", "150ms", "--max-trials", "5", "--no-loss-sweep"])
            .args([
                "--b2b-repeats",
                "0",
                "--latency-trials",
                "0",
                "--assert",
                "ndr>=1",
            ])
            .arg("--out")
            .arg(&out),
    );
    let results = common::read_json(&out.join("rfc2544.json"));
    assert_eq!(results["source_io"], "xdp");
    // The gate's verdict is in the results (as summary.json has a gen run's) and the report.
    let gate = &results["assertions"][0];
    assert_eq!(
        (&gate["assertion"], &gate["run"], &gate["verdict"]),
        (&"ndr>=1".into(), &"64 B".into(), &"pass".into()),
        "{results}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Gates: pass\n\n"), "{report}");
    assert!(report.contains("\n- PASS ndr>=1 [64 B]: ndr "), "{report}");
    let s = &results["sizes"][0];
    assert!(s["ndr_pps"].as_u64().unwrap() > 0, "{s}");
    // The blaster counts only frames the kernel took, and every trial drains before the next
    // one: no trial receives more than it sent.
    for t in s["trials"].as_array().unwrap() {
        assert!(t["received"].as_u64() <= t["sent"].as_u64(), "{t}");
    }
}

#[test]
fn bad_rfc2544_flags_name_themselves() {
    common::one_line_error(&["rfc2544", "--dut", "ovs"], "--dut");
    common::one_line_error(&["rfc2544", "--dut", "external"], "--iface-a");
    common::one_line_error(
        &["rfc2544", "--dut", "kernel", "--iface-b", "veth1"],
        "--iface-b",
    );
    common::one_line_error(
        &[
            "rfc2544",
            "--dut",
            "external",
            "--iface-a",
            "x",
            "--iface-b",
            "x",
        ],
        "--iface-a",
    );
    common::one_line_error(
        &["rfc2544", "--dut", "external", "--dst-mac", "02:00:00"],
        "--dst-mac",
    );
    common::one_line_error(
        &["rfc2544", "--dut", "fwd", "--fwd-poll", "rate:0"],
        "--fwd-poll",
    );
    common::one_line_error(
        &["rfc2544", "--dut", "fwd", "--fwd-poll", "often"],
        "--fwd-poll",
    );
    common::one_line_error(&["study", "forwarding", "--polls", "busy,often"], "--polls");
    common::one_line_error(&["rfc2544", "--dut", "kernel", "--sizes", "63"], "--sizes");
    common::one_line_error(
        &["rfc2544", "--dut", "kernel", "--resolution", "0"],
        "--resolution",
    );
    common::one_line_error(&["rfc2544", "--dut", "kernel", "--trial", "1ms"], "--trial");
    common::one_line_error(&["rfc2544", "--dut", "kernel", "--out", "/"], "--out");
    common::one_line_error(
        &["rfc2544", "--dut", "kernel", "--search", "bisect"],
        "--search",
    );
    common::one_line_error(
        &[
            "rfc2544",
            "--dut",
            "kernel",
            "--search",
            "mlr",
            "--mlr-duration-sum",
            "1s",
        ],
        "--mlr-duration-sum",
    );
    common::one_line_error(
        &["rfc2544", "--dut", "kernel", "--mlr-exceed-ratio", "1"],
        "--mlr-exceed-ratio",
    );
    common::one_line_error(
        &["rfc2544", "--dut", "kernel", "--source", "socket"],
        "--source",
    );
}

/// Reads `child`'s stderr up to its first line (the "started" line), then drains the rest on
/// a thread so the pipe never fills.

#[test]
fn rfc2544_searches_by_mlrsearch_beside_the_binary_search_and_reports_both() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544");
    common::succeeds(
        Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(["rfc2544", "--dut", "kernel", "--sizes", "64"])
            .args(["--trial", "100ms", "--max-trials", "6", "--no-loss-sweep"])
            .args([
                "--b2b-repeats",
                "0",
                "--latency-trials",
                "0",
                "--no-saturation",
            ])
            .args(["--search", "both", "--mlr-duration-sum", "300ms"])
            .args(["--mlr-width", "5%", "--mlr-max-trials", "60"])
            .arg("--out")
            .arg(&out),
    );
    let results = common::read_json(&out.join("rfc2544.json"));
    assert_eq!(results["search"], "both");
    assert_eq!(results["mlr_duration_sum_s"], 0.3);
    let s = &results["sizes"][0];
    let mlr = &s["mlr"];
    let lower = mlr["ndr"]["relevant_lower_bound"].as_u64().unwrap();
    assert!(
        lower > 0 && lower as f64 <= s["source_max_pps"].as_f64().unwrap() + 1.0,
        "{s}"
    );
    // Every load was judged on more than half the duration sum (exceed ratio 0.5): at least two
    // trials of 100 ms.
    let mlr_trials = s["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["search"] == "mlr")
        .count();
    assert_eq!(mlr_trials as u64, mlr["trials"].as_u64().unwrap(), "{s}");
    assert!(mlr_trials >= 2, "{s}");
    assert!(s["binary_trial_time_s"].as_f64().unwrap() > 0.0, "{s}");
    assert!(
        s["ndr_pps"].as_u64().unwrap() > 0,
        "the binary search's NDR: {s}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## MLRsearch beside the binary search (RFC 9971)"),
        "{report}"
    );
    // The folder is drawn again from its data alone, byte for byte.
    std::fs::remove_file(out.join("report.md")).unwrap();
    common::succeeds(
        Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .arg("report")
            .arg(&out),
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        report
    );
}

#[test]
fn rfc2544_through_the_xdp_forwarder_counts_in_the_kernel_and_profiles_it() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544");
    common::succeeds(
        Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(["rfc2544", "--dut", "fwd-xdp-redirect", "--sizes", "64"])
            .args(["--trial", "150ms", "--max-trials", "5", "--no-loss-sweep"])
            .args(["--b2b-repeats", "0", "--latency-trials", "0"])
            .arg("--out")
            .arg(&out),
    );
    let results = common::read_json(&out.join("rfc2544.json"));
    assert_eq!(results["dut"], "fwd-xdp-redirect");
    let s = &results["sizes"][0];
    assert!(s["ndr_pps"].as_u64().unwrap() > 0, "{s}");
    // The programs counted what crossed, in the kernel: at least the saturation trial's
    // frames that arrived.
    let counted = &results["dut_report"]["xdp_redirect"]["a_to_b"];
    let received = results["saturation"]["received"].as_u64().unwrap();
    assert!(
        counted["forwarded"].as_u64().unwrap() >= received,
        "{counted} vs {received}"
    );
    assert_eq!(counted["no_target"], 0);
    // Table II from the DUT's CPU's profile.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Table II"), "{report}");
}

#[test]
fn rfc2544_resume_keeps_the_sizes_measured_and_measures_the_rest() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544");
    let rfc2544 = |sizes: &str, trial: &str, resume: bool| {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("latlab"));
        c.args(["rfc2544", "--dut", "kernel", "--sizes", sizes])
            .args(["--trial", trial, "--max-trials", "3", "--no-loss-sweep"])
            .args(["--b2b-repeats", "0", "--latency-trials", "0", "--out"])
            .arg(&out);
        if resume {
            c.arg("--resume");
        }
        c.output().unwrap()
    };
    let first = rfc2544("64", "100ms", false);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let before = common::read_json(&out.join("rfc2544.json"));
    // Other options than the folder's: refused in one line naming the flag, nothing touched.
    let other = rfc2544("64,128", "200ms", true);
    assert_eq!(other.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(
        stderr.contains("--trial") && stderr.trim_end().lines().count() == 1,
        "{stderr}"
    );
    assert_eq!(common::read_json(&out.join("rfc2544.json")), before);
    // The same options: 64 kept as it was, 128 measured.
    let again = rfc2544("64,128", "100ms", true);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        stderr.contains("kept the sizes measured before: 64 bytes"),
        "{stderr}"
    );
    let after = common::read_json(&out.join("rfc2544.json"));
    let sizes = after["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[0], before["sizes"][0], "64 bytes measured again");
    assert_eq!(sizes[1]["frame_size"], 128);
    assert!(sizes[1]["ndr_pps"].as_u64().unwrap() > 0, "{}", sizes[1]);
    let csv = std::fs::read_to_string(out.join("rfc2544.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    // Without --resume the folder is refused, and the line says how to continue it.
    let refused = rfc2544("64", "100ms", false);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--resume"));
}

#[test]
fn a_short_forwarding_study_writes_table_one_fig_two_and_table_two() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("forwarding");
    let study = |resume: bool| {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("latlab"));
        c.args([
            "study",
            "forwarding",
            "--duts",
            "kernel,fwd-xdp",
            "--batches",
            "4,32",
            "--polls",
            "rate:10000",
        ])
        .args([
            "--sizes",
            "64,256",
            "--trial",
            "150ms",
            // Enough halvings to reach what latlab fwd over AF_XDP keeps up with when its NAPI
            // pollers share its core (a quarter of the source's rate or less).
            "--max-trials",
            "5",
            "--out",
        ])
        .arg(&out);
        if resume {
            c.arg("--resume");
        }
        String::from_utf8_lossy(&common::succeeds(&mut c).stderr).into_owned()
    };
    study(false);
    for dut in ["kernel", "fwd-xdp"] {
        let point = common::read_json(&out.join(format!("points/dut-{dut}.json")));
        let sizes = point["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 2, "{point}");
        assert!(sizes[0]["ndr_pps"].as_u64().unwrap() > 0, "{point}");
    }
    // latlab fwd accounts its own cycles: Table II has its row.
    let fwd = common::read_json(&out.join("points/dut-fwd-xdp.json"));
    assert!(
        fwd["dut_report"]["cycles"]["per_packet"]["rx"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{fwd}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for part in [
        "## Table I",
        "| kernel | ",
        "1.00×",
        "## Fig. 2",
        "## Table II: cycles per packet by step, at saturation",
        "| fwd-xdp | ",
        "| IP forward | 453 | 463 | 101 | 292 | 757 |",
        "## Conclusions",
    ] {
        assert!(md.contains(part), "{part} missing:\n{md}");
    }
    assert!(std::fs::read_to_string(out.join("fig2-ndr.svg"))
        .unwrap()
        .starts_with("<svg"));
    // latlab fwd over AF_XDP at two batch sizes, 64-byte frames, in a table of its own.
    let batch = common::read_json(&out.join("points/batch-32.json"));
    assert_eq!(batch["fwd_batch"], 32);
    assert!(
        batch["sizes"][0]["ndr_pps"].as_u64().unwrap() > 0,
        "{batch}"
    );
    assert!(
        md.contains("## The batch size") && md.contains("| 4 | "),
        "{md}"
    );
    // The kernel's CPU sampled at saturation: its forwarding decision is in the profile.
    let kernel = common::read_json(&out.join("points/dut-kernel.json"));
    let process = kernel["saturation"]["profile"]["steps"]
        .as_array()
        .expect("sampled")
        .iter()
        .find(|s| s["step"] == "Process")
        .and_then(|s| s["samples"].as_u64());
    assert!(process > Some(0), "{kernel}");
    // And the poll series: latlab fwd over AF_XDP polling 10 000 times a second.
    let poll = common::read_json(&out.join("points/poll-rate-10000.json"));
    assert_eq!(poll["fwd_poll"], "rate:10000");
    assert!(
        md.contains("## The poll rate") && md.contains("| rate:10000 | "),
        "{md}"
    );
    let again = study(true);
    assert_eq!(again.matches("measured before, kept").count(), 5, "{again}");
    common::report_redraws_as_written(&out);
}
