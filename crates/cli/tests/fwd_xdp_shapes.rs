//! Issue 25, bad input: frames of any shape through `latlab fwd --io xdp-redirect` are
//! forwarded or counted by cause. Raw AF_PACKET frames from the client's namespace of a
//! `client — fwd — server` lab (the client's side carries 3,000-byte frames, the server's
//! 1,500): runts, frames up to the server side's limit with no tag, one 802.1Q tag or an
//! 802.1ad tag over an 802.1Q one, and jumbo frames over the server side's MTU. Each frame that
//! fits arrives at the server's veth as it was sent, each that does not is counted
//! `too_long`, and the counts are exactly these (root; must run under CI=true).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use latlab_io::netns::run_in;
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_lab::topology::{ip, ClientEmuServer};

/// An EtherType for local experiments (IEEE 802 "local experimental 1"): no host's stack
/// answers or sends one.
const EXPERIMENTAL: u16 = 0x88b5;

/// The client side's MTU: larger than the server side's, so jumbo frames reach the forwarder.
const CLIENT_MTU: u32 = 3000;

/// Frame `index` of `len` bytes: broadcast, from a source address that names it
/// (02:4c:4c:00:00:index), with `tags` (TPID, VLAN id) after the addresses, then the
/// experimental EtherType and the index repeated to the end.
fn frame(index: u8, len: usize, tags: &[(u16, u16)]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0x4c, 0x4c, 0x00, 0x00, index]);
    for (tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&EXPERIMENTAL.to_be_bytes());
    assert!(f.len() <= len, "frame {index}: {len} bytes hold no header");
    f.resize(len, index);
    f
}

/// Whether both of the forwarder's programs are on the middle's veths.
fn attached(lab: &ClientEmuServer) -> bool {
    ["emu-a", "emu-b"]
        .iter()
        .all(|dev| common::xdp_program_on(lab.emu.name(), dev))
}

#[test]
fn runts_vlan_tagged_and_jumbo_frames_are_forwarded_or_counted_too_long() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let (c, e, s) = (lab.client.name(), lab.emu.name(), lab.server.name());
    // Only the test's frames cross: no IPv6 (router solicitations, MLD) from the client.
    for conf in ["all", "default", "veth0"] {
        common::succeeds(Command::new("ip").args([
            "netns",
            "exec",
            c,
            "sh",
            "-c",
            &format!("echo 1 > /proc/sys/net/ipv6/conf/{conf}/disable_ipv6"),
        ]));
    }
    let mtu = CLIENT_MTU.to_string();
    ip(&["-n", c, "link", "set", "veth0", "mtu", &mtu]).unwrap();
    ip(&["-n", e, "link", "set", "emu-a", "mtu", &mtu]).unwrap();
    // What a redirect into a veth needs: NAPI on the target's peer (GRO on).
    for ns in [c, s] {
        run_in(ns, || latlab_io::ethtool::set_gro("veth0", true))
            .unwrap()
            .unwrap();
    }
    let slots = PacketOptions {
        frame_size: 4096,
        ..PacketOptions::default()
    };
    let mut sender = run_in(c, {
        let slots = slots.clone();
        move || PacketSocket::open("veth0", &slots)
    })
    .unwrap()
    .unwrap();
    // The sink hands frames over as they were on the wire: VLAN tags put back in place.
    let mut sink = run_in(s, move || {
        PacketSocket::open(
            "veth0",
            &PacketOptions {
                wire_frames: true,
                ..slots
            },
        )
    })
    .unwrap()
    .unwrap();

    // The server side's limit: its MTU (1500) + 14 + 4, tagged or not, as the kernel's.
    let (q, ad) = (0x8100u16, 0x88a8u16);
    let fits = [
        frame(1, 14, &[]),                  // a header and nothing else
        frame(2, 42, &[]),                  // a runt: below Ethernet's 60 bytes
        frame(3, 59, &[(q, 7)]),            // a tagged runt
        frame(4, 1514, &[]),                // the MTU's frame
        frame(5, 1518, &[(q, 7)]),          // the MTU's frame with its tag
        frame(6, 1518, &[(ad, 5), (q, 7)]), // two tags, at the limit
        frame(7, 1518, &[]),                // no tag, at the limit
    ];
    let too_long = [
        frame(20, 1519, &[]),                // one byte over
        frame(21, 1522, &[(ad, 5), (q, 7)]), // two tags on the MTU's payload
        frame(22, 3014, &[]),                // the client side's jumbo frame
        frame(23, 3018, &[(q, 7)]),          // and tagged
    ];

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fwd.json");
    let fwd = common::Reaped::new(
        common::in_ns(e)
            .args(["fwd", "--iface-a", "emu-a", "--iface-b", "emu-b"])
            .args(["--io", "xdp-redirect", "--json"])
            .arg(&json)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let asked = Instant::now();
    while !attached(&lab) {
        assert!(asked.elapsed() < Duration::from_secs(30), "never attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    for f in fits.iter().chain(&too_long) {
        assert!(sender.queue_tx(f).unwrap(), "{} bytes not queued", f.len());
        sender.flush_tx().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sender.statistics().unwrap().tx_refused, 0);

    // Every frame of ours the server's veth received, by its index: until every frame that
    // fits came (at most 30 s), then half a second more for any that should not come, sent
    // after them.
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut until = give_up;
    while Instant::now() < until {
        if until == give_up && fits.iter().all(|f| seen.contains(f)) {
            until = Instant::now() + Duration::from_millis(500);
        }
        sink.wait_readable(Some(Duration::from_millis(50))).unwrap();
        sink.recv_batch(|f, _, truncated| {
            assert!(!truncated, "a {}-byte frame was cut", f.len());
            if f.len() >= 12 && f[6..11] == [0x02, 0x4c, 0x4c, 0x00, 0x00] {
                seen.push(f.to_vec());
            }
        })
        .unwrap();
    }
    common::signal_pid(fwd.id(), "TERM");
    let out = fwd.into_inner().wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for f in &fits {
        let copies = seen.iter().filter(|g| *g == f).count();
        assert_eq!(
            copies,
            1,
            "frame {} ({} bytes) arrived {copies} times",
            f[11],
            f.len()
        );
    }
    for f in &too_long {
        assert!(
            !seen.iter().any(|g| g[11] == f[11]),
            "frame {} ({} bytes) over the limit arrived",
            f[11],
            f.len()
        );
    }
    assert_eq!(seen.len(), fits.len(), "frames of ours that arrived");
    let report = common::read_json(&json);
    let a_to_b = &report["a_to_b"];
    assert_eq!(a_to_b["forwarded"], fits.len() as u64, "{report}");
    assert_eq!(
        a_to_b["dropped"]["too_long"],
        too_long.len() as u64,
        "{report}"
    );
    assert_eq!(a_to_b["dropped"]["no_target"], 0, "{report}");
    // Everything handed to the target left it: what arrived is forwarded − refused_by_target.
    assert_eq!(a_to_b["dropped"]["refused_by_target"], 0, "{report}");
}
