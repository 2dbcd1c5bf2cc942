//! The datagram port over kernel UDP sockets, in both modes, on loopback: batches go round
//! with their stamps and sources, the transmit stamp is written as the datagram leaves, and a
//! datagram that cannot go to its destination is reported for itself while the rest of its
//! batch arrives.
//!
//! The test of an unroutable network runs in a network namespace of its own with only `lo` up
//! (root; "skipped" otherwise, except under CI=true, where it fails).

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::port::{
    flush_or_drop, DatagramPort, DatagramRx, DatagramTx, NoStamp, PortSizes, SendFailure,
    SendQueue, TimestampSource, UdpMode, UdpPort, Unsent,
};
use latlab_io::udp::{UdpOptions, UdpSocket};

fn stamped() -> UdpOptions {
    UdpOptions {
        rx_timestamps: true,
        ..UdpOptions::default()
    }
}

/// How long to wait for a datagram that normally comes in microseconds: long, because the
/// wait only runs out when something is broken, and a loaded guest can stall for a while.
const PATIENCE: Duration = Duration::from_secs(30);

fn bind() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &stamped()).unwrap()
}

/// Reads datagrams from `port` until `want` came: (payload, source, receive stamp).
fn read(port: &mut impl DatagramRx, want: usize) -> Vec<(Vec<u8>, SocketAddr, u64)> {
    let mut got = Vec::new();
    while got.len() < want {
        assert!(
            port.wait_readable(Some(PATIENCE)).unwrap(),
            "only {} of {want} datagrams came",
            got.len()
        );
        port.recv(|d| got.push((d.data.to_vec(), d.from, d.rx_ns)))
            .unwrap();
    }
    got
}

fn round_trip(mode: UdpMode) {
    let (a, b) = (bind(), bind());
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let mut client = UdpPort::new(&a, mode, PortSizes::new(8, 64));
    let mut server = UdpPort::new(&b, mode, PortSizes::new(8, 64));
    let before = now_ns();
    for i in 0..5u8 {
        client.queue().push(b_addr, 16).unwrap().fill(i);
    }
    // The transmit stamp goes into bytes 8..16 as each datagram leaves.
    let mut stamp = |payload: &mut [u8], t: u64| payload[8..16].copy_from_slice(&t.to_le_bytes());
    let flushed = client.flush(&mut stamp, |u| panic!("{u:?}")).unwrap();
    assert_eq!((flushed.sent, flushed.failed), (5, 0));
    assert!(client.queue().is_empty());
    // The server echoes each datagram from inside its receive call.
    let mut echoed = 0;
    while echoed < 5 {
        assert!(server.wait_readable(Some(PATIENCE)).unwrap());
        echoed += server
            .recv_with_queue(|d, queue| {
                assert_eq!(d.from, a_addr, "each datagram comes with its source");
                assert!(!d.truncated && !d.unparsed);
                queue
                    .push(d.from, d.data.len())
                    .unwrap()
                    .copy_from_slice(d.data);
            })
            .unwrap();
    }
    server.flush(&mut NoStamp, |u| panic!("{u:?}")).unwrap();
    let got = read(&mut client, 5);
    let after = now_ns();
    for (i, (data, from, rx_ns)) in got.iter().enumerate() {
        assert_eq!(*from, b_addr);
        assert_eq!(data[0], i as u8, "in order");
        let tx_ns = u64::from_le_bytes(data[8..16].try_into().unwrap());
        assert!(
            before <= tx_ns && tx_ns <= *rx_ns && *rx_ns <= after,
            "send {tx_ns} then receive {rx_ns}, within {before}..{after}"
        );
    }
}

#[test]
fn a_batch_goes_round_with_stamps_and_sources_one_datagram_per_call() {
    round_trip(UdpMode::Single);
    let a = bind();
    let port = UdpPort::new(&a, UdpMode::Single, PortSizes::new(8, 64));
    assert_eq!(port.timestamp_source(), TimestampSource::UserSpace);
}

#[test]
fn a_batch_goes_round_with_stamps_and_sources_in_mmsg_batches() {
    round_trip(UdpMode::Batched);
    let a = bind();
    let port = UdpPort::new(&a, UdpMode::Batched, PortSizes::new(8, 64));
    assert_eq!(port.timestamp_source(), TimestampSource::KernelSoftware);
    assert_eq!(port.kernel_drops(), Some(0));
}

/// Sends a batch of seven to `dests`, every other one a good one; returns what was reported
/// and what arrived.
fn batch_with_failures(mode: UdpMode, bad: [SocketAddr; 3]) -> (Vec<Unsent>, Vec<u8>) {
    let (a, b) = (bind(), bind());
    let good = b.local_addr().unwrap();
    let mut client = UdpPort::new(&a, mode, PortSizes::new(8, 64));
    let dests = [good, bad[0], good, bad[1], good, bad[2], good];
    for (i, to) in dests.iter().enumerate() {
        client.queue().push(*to, 8).unwrap().fill(i as u8);
    }
    let mut unsent = Vec::new();
    let (sent, dropped) =
        flush_or_drop(&mut client, 4, NoStamp, |u: Unsent| unsent.push(u)).unwrap();
    assert_eq!((sent, dropped), (4, 3));
    let mut server = UdpPort::new(&b, mode, PortSizes::new(8, 64));
    let got = read(&mut server, 4);
    (unsent, got.iter().map(|(d, _, _)| d[0]).collect())
}

fn port_zero_and_broadcast(mode: UdpMode) {
    let zero: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let broadcast: SocketAddr = "255.255.255.255:9".parse().unwrap();
    let (unsent, arrived) = batch_with_failures(mode, [zero, broadcast, zero]);
    assert_eq!(
        unsent,
        vec![
            Unsent {
                to: zero,
                failure: SendFailure::InvalidDestination
            },
            Unsent {
                to: broadcast,
                failure: SendFailure::NotPermitted
            },
            Unsent {
                to: zero,
                failure: SendFailure::InvalidDestination
            },
        ]
    );
    assert_eq!(arrived, vec![0, 2, 4, 6], "the others arrive, in order");
}

#[test]
fn a_send_to_port_zero_or_broadcast_is_reported_and_the_batch_goes_on_in_mmsg_batches() {
    port_zero_and_broadcast(UdpMode::Batched);
}

#[test]
fn a_send_to_port_zero_or_broadcast_is_reported_and_the_batch_goes_on_one_datagram_per_call() {
    port_zero_and_broadcast(UdpMode::Single);
}

/// A namespace with only `lo` up, deleted on drop.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn namespace() -> Option<Namespace> {
    let name = format!("latlab-porttest-{}", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        latlab_io::precondition::missing("cannot make a network namespace (not root?)");
        return None;
    }
    let ns = Namespace(name);
    assert!(Command::new("ip")
        .args(["-n", &ns.0, "link", "set", "dev", "lo", "up"])
        .status()
        .unwrap()
        .success());
    Some(ns)
}

#[test]
fn a_send_to_an_unroutable_network_is_reported_and_the_batch_goes_on() {
    let Some(ns) = namespace() else { return };
    // Inside, only lo has a route: 198.18.77.1 (a benchmarking address) is unreachable, and
    // nothing can leave the namespace.
    let unroutable: SocketAddr = "198.18.77.1:9".parse().unwrap();
    let zero: SocketAddr = "127.0.0.1:0".parse().unwrap();
    for mode in [UdpMode::Batched, UdpMode::Single] {
        let (unsent, arrived) = latlab_io::netns::run_in(&ns.0, move || {
            batch_with_failures(mode, [unroutable, zero, unroutable])
        })
        .unwrap();
        let failures: Vec<_> = unsent.iter().map(|u| (u.to, u.failure)).collect();
        assert_eq!(
            failures,
            vec![
                (unroutable, SendFailure::Unreachable),
                (zero, SendFailure::InvalidDestination),
                (unroutable, SendFailure::Unreachable),
            ],
            "{mode:?}"
        );
        assert_eq!(arrived, vec![0, 2, 4, 6], "{mode:?}");
    }
}

#[test]
fn split_halves_send_and_receive_on_one_socket() {
    let (a, b) = (bind(), bind());
    let b_addr = b.local_addr().unwrap();
    let mut client = UdpPort::new(&a, UdpMode::Batched, PortSizes::new(8, 64));
    let mut echo = UdpPort::new(&b, UdpMode::Batched, PortSizes::new(8, 64));
    let (mut tx, mut rx) = client.split();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..3u8 {
                tx.queue().push(b_addr, 4).unwrap().fill(i);
                tx.flush(&mut NoStamp, |u| panic!("{u:?}")).unwrap();
            }
        });
        s.spawn(|| {
            let mut n = 0;
            while n < 3 {
                assert!(echo.wait_readable(Some(PATIENCE)).unwrap());
                n += echo
                    .recv_with_queue(|d, q| q.push(d.from, 4).unwrap().copy_from_slice(d.data))
                    .unwrap();
                echo.flush(&mut NoStamp, |u| panic!("{u:?}")).unwrap();
            }
        });
        let got = read(&mut rx, 3);
        let first: Vec<u8> = got.iter().map(|g| g.0[0]).collect();
        assert_eq!(first, vec![0, 1, 2]);
    });
}
