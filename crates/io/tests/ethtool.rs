//! Offloads on a veth pair in a namespace of the test's own (root only; under CI=true it must run).

use std::process::Command;

struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn offloads_of_a_veth_can_be_turned_off() {
    let name = format!("latlab-iotest-{}-ethtool", std::process::id());
    if !ip(&["netns", "add", &name]) {
        latlab_io::precondition::missing("cannot make a network namespace (not root?)");
        return;
    }
    let ns = Namespace(name);
    assert!(ip(&[
        "-n", &ns.0, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b"
    ]));
    let before = latlab_io::netns::run_in(&ns.0, || latlab_io::ethtool::offloads("veth-a"))
        .unwrap()
        .unwrap();
    assert!(
        before.iter().any(|(_, on)| *on),
        "a fresh veth has some offload on: {before:?}"
    );
    latlab_io::netns::run_in(&ns.0, || latlab_io::ethtool::disable_offloads("veth-a"))
        .unwrap()
        .unwrap();
    let after = latlab_io::netns::run_in(&ns.0, || latlab_io::ethtool::offloads("veth-a"))
        .unwrap()
        .unwrap();
    assert!(after.iter().all(|(_, on)| !on), "{after:?}");
}
