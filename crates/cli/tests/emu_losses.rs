//! Issue 25, part 3: every frame `latlab emu` loses on its way through the DUT's CPU is counted
//! by cause in its `--json`, and the causes add up to what the client's veth sent less what
//! the server's received (root; must run under CI=true).

mod common;

use std::process::Stdio;
use std::time::Duration;

use latlab_lab::topology::ClientEmuServer;

/// A counter of `dev` in namespace `ns`, as its sysfs statistics say.
fn counter(ns: &str, dev: &str, name: &str) -> u64 {
    let out = common::succeeds(std::process::Command::new("ip").args([
        "netns",
        "exec",
        ns,
        "cat",
        &format!("/sys/class/net/{dev}/statistics/{name}"),
    ]));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Frames the client's veth handed towards the emulator (sent, and dropped because the
/// emulator's end could not take them), and frames the server's veth received from it.
fn ends(lab: &ClientEmuServer) -> (u64, u64) {
    let c = lab.client.name();
    let sent = counter(c, "veth0", "tx_packets") + counter(c, "veth0", "tx_dropped");
    (sent, counter(lab.server.name(), "veth0", "rx_packets"))
}

/// The emulator is stopped (SIGSTOP) in the middle of a 50 kpps stream until more frames
/// have left the client than its ring holds: the ring fills and the kernel drops the rest;
/// once it goes on, the backlog leaves in a burst. Every frame lost is in `lost_by_cause`,
/// and the causes add up to sent − received exactly (the ends' counters read before the
/// emulator started and after it stopped). The stall is measured in frames, not in time, so
/// the test does not depend on how fast the generator is.
#[test]
fn a_stalled_emulators_losses_add_up_to_sent_minus_received() {
    stalled_emulator_counts_every_loss("packet");
}

/// The same over AF_XDP.
#[test]
fn a_stalled_af_xdp_emulators_losses_add_up_to_sent_minus_received() {
    stalled_emulator_counts_every_loss("xdp");
}

fn stalled_emulator_counts_every_loss(io: &str) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    // No frame but the test's: without IPv6 the ends send nothing of their own, so the ends'
    // counters can be read before the emulator starts and after it stopped.
    for ns in [lab.client.name(), lab.emu.name(), lab.server.name()] {
        for conf in ["all", "default", "lo"] {
            common::set_in(
                ns,
                &format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"),
                "1",
            );
        }
    }
    let before = ends(&lab);
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    // Runs until the test stops it (SIGTERM), after the generator has ended: no frame of the
    // test's arrives after the emulator has gone.
    let mut cmd = common::in_ns(lab.emu.name());
    cmd.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--io", io, "--delay", "1ms"])
        .arg("--json")
        .arg(&emu_json)
        .stdout(Stdio::null());
    let emu = common::started(cmd, "bridging");
    let pid = emu.id();
    let client = lab.client.name().to_string();
    // More than twice the ring's slots (8,192 for AF_PACKET, 4,096 UMEM frames for AF_XDP)
    // leave the client while the emulator is stopped, whatever the generator's speed.
    let over_the_ring = 20_000;
    let stall = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        common::signal_pid(pid, "STOP");
        let at_stop = counter(&client, "veth0", "tx_packets");
        let mut during = 0;
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while during <= over_the_ring && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
            during = counter(&client, "veth0", "tx_packets") - at_stop;
        }
        common::signal_pid(pid, "CONT");
        during
    });
    let target = format!("{}:9", lab.server_addr);
    // Long enough to outlast the stall on a slow machine; at 50 kpps, 200,000 frames.
    let probes = [
        "--rate",
        "50k",
        "--duration",
        "4s",
        "--size",
        "64",
        "--no-check",
        "--grace",
        "10ms",
        "--poll",
        "block",
    ];
    common::gen_in(lab.client.name(), &target, &probes);
    let during_stall = stall.join().unwrap();
    // The backlog has left the emulator by the time the generator is done; stop it.
    std::thread::sleep(Duration::from_millis(200));
    emu.signal("TERM");
    let (status, stderr) = emu.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let after = ends(&lab);
    let report = common::read_json(&emu_json);
    let lost = &report["a_to_b"]["lost_by_cause"];
    let sent = after.0 - before.0;
    let received = after.1 - before.1;
    assert!(
        during_stall > over_the_ring,
        "the generator sent only {during_stall} frames while the emulator was stopped"
    );
    assert!(
        lost["socket_rx"].as_u64().unwrap() > 0,
        "{during_stall} frames sent while the emulator was stopped, and none lost at its ring: {lost}"
    );
    assert_eq!(
        sent - received,
        lost["total"].as_u64().unwrap(),
        "sent {sent}, received {received}, lost by cause {lost}, interfaces {}",
        report["interfaces"]
    );
    let causes: u64 = [
        "interface_rx",
        "socket_rx",
        "socket_tx",
        "link",
        "emulator",
        "queued_at_exit",
        "interface_tx",
    ]
    .iter()
    .map(|k| lost[k].as_u64().unwrap())
    .sum();
    assert_eq!(causes, lost["total"].as_u64().unwrap(), "{lost}");

    // The socket's losses by the kernel's own counters: AF_PACKET's full ring, AF_XDP's
    // empty fill ring and full RX ring, each frame counted once; the TX side refused none.
    let socket = &report["a_to_b"]["socket"];
    let counted = |k: &str| {
        socket[k]
            .as_u64()
            .unwrap_or_else(|| panic!("socket.{k}: {socket}"))
    };
    assert_eq!(
        counted("rx_dropped") + counted("rx_ring_full"),
        lost["socket_rx"].as_u64().unwrap(),
        "{socket}"
    );
    assert_eq!(counted("tx_invalid_descs"), 0, "{socket}");
    assert_eq!(lost["socket_tx"], 0, "{lost}");
    if io == "packet" {
        // AF_PACKET has no such rings: its full ring is rx_dropped.
        assert_eq!(counted("rx_ring_full"), 0, "{socket}");
        assert_eq!(counted("rx_fill_ring_empty_descs"), 0, "{socket}");
    }
}
