//! The reflector names the clock it stamps with in every probe that asks (a header of 64
//! bytes), and in no other: a 56-byte header's next bytes are the sender's padding, and an
//! unstamped echo names nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_wire::probe::{self, ResponderClock};

const CLOCK: u64 = 0x5eed_c10c_0000_0001;

/// A blocking reflector on loopback with `config`, until the returned stop is raised.
fn reflector(config: ReflectorConfig) -> (SocketAddr, Arc<Stop>, std::thread::JoinHandle<()>) {
    let opts = UdpOptions {
        rx_timestamps: true,
        ..UdpOptions::default()
    };
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
    let addr = socket.local_addr().unwrap();
    let stop = Arc::new(Stop::new());
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        let counters = ReflectorCounters::default();
        reflector::run_udp(&socket, &config, &s, &counters).unwrap();
    });
    (addr, stop, thread)
}

/// A `len`-byte probe whose header says `clock`, padded with 0xa5, sent to `to`; its echo.
fn echo_of(to: SocketAddr, clock: ResponderClock, len: usize) -> Vec<u8> {
    let mut buf = vec![0xa5u8; len];
    probe::Repr {
        run_id: 0x0c10_c4ed,
        flow: 0,
        seq: 1,
        intended_send_ns: 1,
        actual_send_ns: 1,
        responder: None,
        responder_clock: clock,
    }
    .emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket.send_to(&buf, to).unwrap();
    let mut rx = vec![0u8; 2048];
    let (n, _) = socket.recv_from(&mut rx).expect("the reflector answers");
    rx.truncate(n);
    assert_eq!(n, len, "the echo is as long as the probe");
    rx
}

#[test]
fn the_reflector_names_its_clock_only_where_the_header_has_room_for_it() {
    let config = ReflectorConfig {
        poll: PollMode::Block,
        clock: Some(CLOCK),
        ..ReflectorConfig::default()
    };
    let (addr, stop, thread) = reflector(config);
    // Asked: bytes 56..64 and flag bit 1, the padding after them untouched.
    let echo = echo_of(addr, ResponderClock::Asked, 100);
    let repr = probe::Repr::parse(&probe::Packet::new_checked(&echo[..]).unwrap()).unwrap();
    assert_eq!(repr.responder_clock, ResponderClock::Named(CLOCK));
    assert!(repr.responder.is_some());
    assert!(echo[64..].iter().all(|&b| b == 0xa5));
    // A probe of the format before the field (a 56-byte header, 64 bytes long): stamped as
    // ever, its bytes 56..64 are padding and come back as sent.
    let echo = echo_of(addr, ResponderClock::NotAsked, 64);
    let packet = probe::Packet::new_checked(&echo[..]).unwrap();
    assert_eq!(packet.flags(), probe::FLAG_RESPONDER_STAMPED);
    assert_eq!(packet.responder_clock(), ResponderClock::NotAsked);
    assert!(packet.responder_stamps().is_some());
    assert!(echo[56..].iter().all(|&b| b == 0xa5));
    // The smallest probe of the old format.
    let echo = echo_of(addr, ResponderClock::NotAsked, 56);
    assert!(probe::Packet::new_checked(&echo[..])
        .unwrap()
        .responder_stamped());
    stop.raise();
    thread.join().unwrap();
}

#[test]
fn a_reflector_that_does_not_stamp_or_names_no_clock_leaves_the_question_open() {
    for config in [
        ReflectorConfig {
            poll: PollMode::Block,
            stamp: false,
            clock: Some(CLOCK),
            ..ReflectorConfig::default()
        },
        ReflectorConfig {
            poll: PollMode::Block,
            clock: None,
            ..ReflectorConfig::default()
        },
    ] {
        let stamp = config.stamp;
        let (addr, stop, thread) = reflector(config);
        let echo = echo_of(addr, ResponderClock::Asked, 72);
        let packet = probe::Packet::new_checked(&echo[..]).unwrap();
        assert_eq!(packet.responder_clock(), ResponderClock::Asked);
        assert_eq!(packet.responder_stamped(), stamp);
        assert_eq!(&echo[56..64], &[0; 8]);
        stop.raise();
        thread.join().unwrap();
    }
}
