//! Issue 25, bad input for `latlab fwd --io xdp-redirect`: an interface that already has an
//! XDP program is refused with one line, and the programs go away whatever ends latlab: its
//! duration, SIGINT, SIGTERM, SIGHUP, and `kill -9` (after which `latlab clean` finds nothing
//! left). Root; must run under CI=true.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use latlab_lab::topology::ClientEmuServer;

/// `latlab fwd --io xdp-redirect` between the lab's middle veths for `secs` seconds.
fn forwarder(lab: &ClientEmuServer, secs: u64) -> Child {
    // SIGHUP at its default whatever the runner's: the SIGHUP below tests latlab's handling.
    let mut cmd = common::in_ns_with_default_sighup(lab.emu.name());
    cmd.args(["fwd", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--io", "xdp-redirect", "--duration", &format!("{secs}s")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// Whether either middle veth has an XDP program on it.
fn programs_attached(lab: &ClientEmuServer) -> bool {
    ["emu-a", "emu-b"]
        .iter()
        .any(|dev| common::xdp_program_on(lab.emu.name(), dev))
}

/// Waits until the forwarder's programs are on the veths (at most a minute).
fn wait_attached(lab: &ClientEmuServer) {
    for _ in 0..1200 {
        if programs_attached(lab) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the forwarder's programs never appeared");
}

#[test]
fn a_second_forwarder_is_refused_with_one_line_and_every_end_removes_the_programs() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();

    // A program already on the interface: refused, naming it, in one line; the first stays.
    let mut first = forwarder(&lab, 30);
    wait_attached(&lab);
    let second = common::in_ns(lab.emu.name())
        .args(["fwd", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--io", "xdp-redirect", "--duration", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second forwarder ran: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("emu-a") && stderr.contains("an XDP program is already attached"),
        "{stderr}"
    );
    assert!(
        programs_attached(&lab),
        "the refusal took the first's programs"
    );

    // kill -9: nothing runs to detach them; the kernel does, as the links' owner dies.
    first.kill().unwrap();
    first.wait().unwrap();
    // The kernel may detach them a moment later (half a minute at most).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while programs_attached(&lab) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!programs_attached(&lab), "kill -9 left a program");
    common::succeeds(Command::new(cargo_bin("latlab")).arg("clean"));

    // Every stopping signal, and the end of its duration.
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let fwd = forwarder(&lab, 30);
        wait_attached(&lab);
        common::succeeds(Command::new("kill").args([&format!("-{signal}"), &fwd.id().to_string()]));
        let out = fwd.wait_with_output().unwrap();
        // Stopped by the signal, not killed by it: 128 + its number, after cleaning up.
        assert_eq!(
            out.status.code(),
            Some(128 + number),
            "SIG{signal}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!programs_attached(&lab), "SIG{signal} left a program");
    }
    let mut fwd = forwarder(&lab, 1);
    wait_attached(&lab);
    assert!(fwd.wait().unwrap().success());
    assert!(
        !programs_attached(&lab),
        "the end of --duration left a program"
    );
}
