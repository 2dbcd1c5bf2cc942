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

/// A namespace of the test's own holding the veth pair `veth-a` — `veth-b`; `None` (the
/// precondition said missing) where namespaces cannot be made.
fn veth_namespace(what: &str) -> Option<Namespace> {
    let name = format!("latlab-iotest-{}-{what}", std::process::id());
    if !ip(&["netns", "add", &name]) {
        latlab_io::precondition::missing("cannot make a network namespace (not root?)");
        return None;
    }
    let ns = Namespace(name);
    assert!(ip(&[
        "-n", &ns.0, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b"
    ]));
    Some(ns)
}

#[test]
fn offloads_of_a_veth_can_be_turned_off() {
    let Some(ns) = veth_namespace("ethtool") else {
        return;
    };
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

#[test]
fn a_veths_driver_statistics_name_its_xdp_transmit_errors() {
    let Some(ns) = veth_namespace("ethstats") else {
        return;
    };
    let (stats, errors) = latlab_io::netns::run_in(&ns.0, || -> std::io::Result<_> {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
        Ok((
            latlab_io::ethtool::driver_stats("veth-a")?,
            latlab_io::ethtool::xdp_xmit_errors(&socket, "veth-a")?,
        ))
    })
    .unwrap()
    .unwrap();
    let names: Vec<&str> = stats.iter().map(|(n, _)| n.as_str()).collect();
    // The peer's index, and per queue what XDP redirects handed it and it could not pass on.
    assert!(names.contains(&"peer_ifindex"), "{names:?}");
    assert!(
        names.iter().any(|n| n.ends_with("xdp_xmit_errors")),
        "{names:?}"
    );
    assert_eq!(errors, Some(0), "a fresh veth refused nothing");
    // The interface is looked up in the socket's namespace, not the caller's.
    let here = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    let err = latlab_io::ethtool::xdp_xmit_errors(&here, "veth-a").unwrap_err();
    assert!(err.to_string().contains("veth-a"), "{err}");
}
