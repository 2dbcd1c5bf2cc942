//! The XDP forwarder (`XdpForward`) between two veths of a middle namespace: `a` — `mid` — `b`
//! (root only; skipped with the reason elsewhere, but a failure under CI=true). UDP datagrams
//! from `a` to `b` and back cross the middle without leaving the kernel, each counted once by
//! the program of the interface it came in on; a frame longer than the target takes is counted
//! `too_long` (the limit following the target's MTU); the programs go when the forwarder is
//! dropped.

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use latlab_io::netns;
use latlab_io::xdp::XdpForward;

struct Lab {
    names: [String; 3],
}

impl Drop for Lab {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = netns::delete(name);
        }
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

/// `a` (veth0, 198.18.8.1) — `mid` (m-a, m-b) — `b` (veth0, 198.18.8.2), static neighbours,
/// checksum offload off and GRO on at both ends (a redirect into a veth arrives only where its
/// peer runs NAPI).
fn lab() -> Option<Lab> {
    let base = format!("latlab-xdpfwd-{}", std::process::id());
    let names = [
        format!("{base}-a"),
        format!("{base}-mid"),
        format!("{base}-b"),
    ];
    if !ip(&["netns", "add", &names[0]]) {
        latlab_io::precondition::missing("cannot make a network namespace (not root?)");
        return None;
    }
    let lab = Lab { names };
    let [a, mid, b] = &lab.names;
    for ns in [mid, b] {
        assert!(ip(&["netns", "add", ns]));
    }
    for (ns, end, addr) in [(a, "m-a", "198.18.8.1/24"), (b, "m-b", "198.18.8.2/24")] {
        assert!(ip(&[
            "-n", ns, "link", "add", "veth0", "type", "veth", "peer", "name", end, "netns", mid
        ]));
        assert!(ip(&["-n", ns, "addr", "add", addr, "dev", "veth0"]));
        assert!(ip(&["-n", ns, "link", "set", "veth0", "up"]));
        assert!(ip(&["-n", mid, "link", "set", end, "up"]));
        // Finished checksums (a redirected frame loses the sender's "checksum left to the
        // device"), and GRO on for NAPI.
        netns::run_in(ns, || {
            latlab_io::ethtool::disable_offloads("veth0")?;
            latlab_io::ethtool::set_gro("veth0", true)
        })
        .unwrap()
        .unwrap();
    }
    let mac = |ns: &str| {
        let out = Command::new("ip")
            .args(["-n", ns, "-o", "link", "show", "veth0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .unwrap()
            .to_string()
    };
    let (mac_a, mac_b) = (mac(a), mac(b));
    assert!(ip(&[
        "-n",
        a,
        "neigh",
        "replace",
        "198.18.8.2",
        "lladdr",
        &mac_b,
        "dev",
        "veth0",
        "nud",
        "permanent"
    ]));
    assert!(ip(&[
        "-n",
        b,
        "neigh",
        "replace",
        "198.18.8.1",
        "lladdr",
        &mac_a,
        "dev",
        "veth0",
        "nud",
        "permanent"
    ]));
    Some(lab)
}

#[test]
fn frames_cross_the_middle_by_redirect_and_are_counted_once_each_way() {
    let Some(lab) = lab() else {
        return;
    };
    let [a, mid, b] = lab.names.clone();
    let forwarders = netns::run_in(&mid, || -> std::io::Result<_> {
        Ok((
            XdpForward::attach("m-a", "m-b")?,
            XdpForward::attach("m-b", "m-a")?,
        ))
    })
    .unwrap();
    let (to_b, to_a) = match forwarders {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            latlab_io::precondition::missing(format_args!("bpf() is not allowed here: {e}"));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(to_b.interfaces(), ("m-a", "m-b"));
    // A second program on the same interface is refused, and the first stays.
    let again = netns::run_in(&mid, || XdpForward::attach("m-a", "m-b").map(|_| ())).unwrap();
    assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);

    let server = netns::run_in(&b, || UdpSocket::bind("198.18.8.2:9000"))
        .unwrap()
        .unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let client = netns::run_in(&a, || UdpSocket::bind("198.18.8.1:0"))
        .unwrap()
        .unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    const N: u64 = 200;
    let mut buf = [0u8; 2048];
    for i in 0..N {
        let payload = i.to_be_bytes();
        client.send_to(&payload, "198.18.8.2:9000").unwrap();
        let (n, from) = server
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("datagram {i}: {e}; forwarded {:?}", to_b.counts()));
        assert_eq!(&buf[..n], &payload);
        server.send_to(&buf[..n], from).unwrap();
        let (n, _) = client.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &payload);
    }
    let (ab, ba) = (to_b.counts().unwrap(), to_a.counts().unwrap());
    // Only the datagrams crossed (the neighbours are static: no ARP, and nothing else was
    // sent, IPv6 router solicitations aside, which are forwarded too).
    assert!(ab.forwarded >= N && ab.forwarded < N + 10, "{ab:?}");
    assert!(ba.forwarded >= N && ba.forwarded < N + 10, "{ba:?}");
    assert_eq!((ab.no_target, ba.no_target), (0, 0));
    // Every datagram came back: the targets passed on all they were handed.
    assert_eq!((ab.refused_by_target, ba.refused_by_target), (0, 0));
    // A handle read from another thread sees the same counts.
    let counter = to_b.counter().unwrap();
    let seen = std::thread::spawn(move || counter.read().unwrap())
        .join()
        .unwrap();
    assert_eq!(seen.forwarded, to_b.counts().unwrap().forwarded);

    // A frame longer than the target takes is counted, not forwarded, and the limit follows
    // the target's MTU (the MTU + 18 bytes, the kernel's rule), read through the namespace the
    // forwarder was made in whichever thread asks.
    assert_eq!(to_b.limit(), 1518);
    assert!(ip(&["-n", &mid, "link", "set", "m-b", "mtu", "1400"]));
    assert_eq!(to_b.refresh_limit().unwrap(), 1418);
    let before = to_b.counts().unwrap();
    // 1,400 bytes of UDP: a 1,442-byte frame.
    client.send_to(&[7u8; 1400], "198.18.8.2:9000").unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        server.recv_from(&mut buf).is_err(),
        "a frame over the target's limit arrived"
    );
    let after = to_b.counts().unwrap();
    assert_eq!(after.too_long - before.too_long, 1, "{after:?}");
    // 1,376 bytes of UDP, a 1,418-byte frame: at the limit, forwarded.
    client.send_to(&[8u8; 1376], "198.18.8.2:9000").unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (n, _) = server.recv_from(&mut buf).expect("a frame at the limit");
    assert_eq!(n, 1376);
    assert_eq!(to_b.counts().unwrap().too_long, after.too_long);

    // Dropped: the programs are gone, and with them the only path between a and b.
    drop((to_b, to_a));
    let shown = Command::new("ip")
        .args(["-n", &mid, "-d", "link", "show", "m-a"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("prog/xdp"));
    client.send_to(b"after", "198.18.8.2:9000").unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        server.recv_from(&mut buf).is_err(),
        "nothing forwards without the program"
    );
}
