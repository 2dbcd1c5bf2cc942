use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, TsResolution};

use super::*;

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// An IPv4 packet carrying UDP (17) or TCP (6) with `payload` bytes (a 20-byte TCP header).
fn ipv4(proto: u8, src: SocketAddr, dst: SocketAddr, payload: usize) -> Vec<u8> {
    let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
        panic!("IPv4 only")
    };
    let l4 = if proto == 17 { 8 } else { 20 };
    let total = 20 + l4 + payload;
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&s.ip().octets());
    p.extend_from_slice(&d.ip().octets());
    p.extend_from_slice(&s.port().to_be_bytes());
    p.extend_from_slice(&d.port().to_be_bytes());
    if proto == 17 {
        p.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
    } else {
        p.extend_from_slice(&[0; 8]);
        p.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    }
    p.extend(std::iter::repeat_n(0xab, payload));
    p
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

fn sll(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// The test's traffic: (time ns, IP packet). Stream 1: UDP client → server with payloads
/// 100, 40, 1200, 60 at gaps 50, 30, 120 ms, and two answers of 20 and 30 bytes 70 ms apart;
/// stream 2: TCP, a 500-byte segment, a bare ACK back, a 700-byte segment 10 ms later.
fn traffic() -> Vec<(u64, Vec<u8>)> {
    let (c, s) = (addr("10.0.0.1:4000"), addr("10.0.0.2:7000"));
    let (tc, ts) = (addr("10.0.0.1:5000"), addr("10.0.0.3:80"));
    vec![
        (T0, ipv4(17, c, s, 100)),
        (T0 + 5 * MS, ipv4(17, s, c, 20)),
        (T0 + 6 * MS, ipv4(6, tc, ts, 500)),
        (T0 + 7 * MS, ipv4(6, ts, tc, 0)),
        (T0 + 16 * MS, ipv4(6, tc, ts, 700)),
        (T0 + 50 * MS, ipv4(17, c, s, 40)),
        (T0 + 75 * MS, ipv4(17, s, c, 30)),
        (T0 + 80 * MS, ipv4(17, c, s, 1200)),
        (T0 + 200 * MS, ipv4(17, c, s, 60)),
    ]
}

fn pcap_of(frames: &[(u64, Vec<u8>)], datalink: DataLink) -> Vec<u8> {
    let header = PcapHeader {
        datalink,
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (ts, frame) in frames {
        let packet = PcapPacket::new(Duration::from_nanos(*ts), frame.len() as u32, frame);
        w.write_packet(&packet).unwrap();
    }
    w.into_writer()
}

/// A pcapng file; `tsresol` None leaves the option out (microseconds).
fn pcapng_of(frames: &[(u64, Vec<u8>)], linktype: DataLink, tsresol: Option<u8>) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let options = tsresol
        .map(|r| vec![InterfaceDescriptionOption::IfTsResol(r)])
        .unwrap_or_default();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype,
        snaplen: 65535,
        options,
    })
    .unwrap();
    let divisor = if tsresol.is_some() { 1 } else { 1000 };
    for (ts, frame) in frames {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            // pcap-file 2 writes this count as is: in units of the interface's resolution.
            timestamp: Duration::from_nanos(ts / divisor),
            original_len: frame.len() as u32,
            data: Cow::Borrowed(frame),
            options: vec![],
        })
        .unwrap();
    }
    w.into_inner()
}

fn ethernet_frames() -> Vec<(u64, Vec<u8>)> {
    let mut frames: Vec<(u64, Vec<u8>)> = traffic()
        .into_iter()
        .map(|(t, ip)| (t, ethernet(&ip)))
        .collect();
    // An ARP frame: counted and skipped.
    frames.insert(
        1,
        (
            T0 + MS,
            vec![0xff; 12]
                .into_iter()
                .chain([0x08, 0x06, 0, 1])
                .collect(),
        ),
    );
    frames
}

/// The statistics every encoding of `traffic()` must give, with `wire` bytes of link header.
fn check_stats(capture: &Capture, link_header: usize, skipped: u64) {
    assert_eq!(capture.skipped, skipped);
    let rows = stats_of(capture);
    // Stream 1 both ways; stream 2 one way (its only packet back is a bare ACK).
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let up = &rows[0];
    assert_eq!((up.stream, up.protocol), (1, Protocol::Udp));
    assert_eq!(
        (up.from.as_str(), up.to.as_str()),
        ("10.0.0.1:4000", "10.0.0.2:7000")
    );
    assert_eq!(up.packets, 4);
    assert_eq!(up.size_avg, 350.0);
    assert_eq!((up.size_min, up.size_max), (40, 1200));
    // Gaps 50, 30 and 120 ms.
    assert!((up.gap_avg_ms.unwrap() - 200.0 / 3.0).abs() < 1e-9);
    assert_eq!(up.gap_median_ms, Some(50.0));
    assert_eq!(up.gap_min_ms, Some(30.0));
    assert_eq!(up.gap_max_ms, Some(120.0));
    assert_eq!(up.gap_p1_ms, Some(30.0));
    assert_eq!(up.gap_p99_ms, Some(120.0));
    assert_eq!(up.pps, Some(15.0));
    // The three frames after the first, over 0.2 s: payload + 28 bytes of IP/UDP + link.
    let bits = (40 + 1200 + 60 + 3 * (28 + link_header)) as f64 * 8.0;
    assert!((up.bps.unwrap() - bits / 0.2).abs() < 1e-6);
    let down = &rows[1];
    assert_eq!((down.stream, down.packets), (1, 2));
    assert_eq!(down.size_avg, 25.0);
    assert_eq!(down.gap_avg_ms, Some(70.0));
    let tcp = &rows[2];
    assert_eq!(
        (tcp.stream, tcp.protocol, tcp.packets),
        (2, Protocol::Tcp, 2)
    );
    assert_eq!((tcp.size_min, tcp.size_max), (500, 700));
    assert_eq!(tcp.gap_avg_ms, Some(10.0));
}

#[test]
fn a_pcap_written_with_known_sizes_and_gaps_gives_exactly_those_statistics() {
    let capture = capture::parse_capture(&pcap_of(&ethernet_frames(), DataLink::ETHERNET)).unwrap();
    assert_eq!(capture.frames, 10);
    check_stats(&capture, 14, 1);
}

#[test]
fn pcapng_linux_cooked_and_raw_ip_captures_give_the_same_statistics() {
    let cooked: Vec<(u64, Vec<u8>)> = traffic().into_iter().map(|(t, ip)| (t, sll(&ip))).collect();
    let ng = pcapng_of(&cooked, DataLink::LINUX_SLL, Some(9));
    check_stats(&capture::parse_capture(&ng).unwrap(), 16, 0);
    // Without if_tsresol the counts are microseconds.
    let ng_us = pcapng_of(&cooked, DataLink::LINUX_SLL, None);
    check_stats(&capture::parse_capture(&ng_us).unwrap(), 16, 0);
    let raw = pcap_of(&traffic(), DataLink::RAW);
    check_stats(&capture::parse_capture(&raw).unwrap(), 0, 0);
    let ng_eth = pcapng_of(&ethernet_frames(), DataLink::ETHERNET, Some(9));
    check_stats(&capture::parse_capture(&ng_eth).unwrap(), 14, 1);
}

#[test]
fn a_truncated_capture_names_the_byte_where_it_broke() {
    let whole = pcap_of(&ethernet_frames(), DataLink::ETHERNET);
    // The last record: a 16-byte record header and the frame of a 60-byte UDP payload.
    let last_record = whole.len() - (16 + 14 + 28 + 60);
    let cut = &whole[..whole.len() - 10];
    assert_eq!(
        capture::parse_capture(cut).unwrap_err(),
        ParseError::Broken {
            offset: last_record,
            reason: "the record is cut short (truncated file)".into()
        }
    );
    assert!(matches!(
        capture::parse_capture(&whole[..10]).unwrap_err(),
        ParseError::Broken { offset: 0, .. }
    ));
    let ng = pcapng_of(&ethernet_frames(), DataLink::ETHERNET, Some(9));
    match capture::parse_capture(&ng[..ng.len() - 3]).unwrap_err() {
        ParseError::Broken { offset, .. } => assert!(offset > 0 && offset < ng.len() - 3),
        other => panic!("{other}"),
    }
    assert_eq!(
        capture::parse_capture(b"hello, world").unwrap_err(),
        ParseError::NotACapture(b"hell".to_vec())
    );
}

#[test]
fn the_error_line_names_the_file_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.pcap");
    let whole = pcap_of(&ethernet_frames(), DataLink::ETHERNET);
    std::fs::write(&path, &whole[..whole.len() - 10]).unwrap();
    let err = read_capture(&path).unwrap_err();
    assert!(err.is_usage());
    let offset = whole.len() - (16 + 14 + 28 + 60);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: broken at byte {offset}: the record is cut short (truncated file)",
            path.display()
        )
    );
}

#[test]
fn other_link_types_are_named() {
    let usb = pcap_of(&ethernet_frames(), DataLink::USB_LINUX);
    assert_eq!(
        capture::parse_capture(&usb).unwrap_err(),
        ParseError::LinkType(189)
    );
    assert!(ParseError::LinkType(189)
        .to_string()
        .contains("link type 189"));
}

#[test]
fn corrupted_captures_never_panic() {
    // A deterministic stand-in for the fuzz target: every single-byte change and every cut
    // of a small capture, and runs of random bytes after a valid header.
    let pcap = pcap_of(&ethernet_frames()[..4], DataLink::ETHERNET);
    let ng = pcapng_of(&ethernet_frames()[..4], DataLink::ETHERNET, Some(9));
    for file in [&pcap, &ng] {
        for i in 0..file.len() {
            for value in [0x00, 0xff, 0x7f, file[i] ^ 0x40] {
                let mut bad = file.clone();
                bad[i] = value;
                let _ = capture::parse_capture(&bad).map(|c| stats_of(&c));
            }
            let _ = capture::parse_capture(&file[..i]);
        }
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for n in 0..2000 {
        let mut bad = if n % 2 == 0 {
            pcap[..24].to_vec()
        } else {
            ng[..28].to_vec()
        };
        for _ in 0..(n % 300) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bad.push(state as u8);
        }
        let _ = capture::parse_capture(&bad).map(|c| stats_of(&c));
    }
}

#[test]
fn replay_takes_the_busiest_stream_in_its_busier_direction() {
    let capture = capture::parse_capture(&pcap_of(&traffic(), DataLink::RAW)).unwrap();
    let path = Path::new("game.pcap");
    let r = replay(path, &capture, None, 1.0).unwrap();
    let sizes: Vec<(usize, u64)> = r.messages.iter().map(|m| (m.size, m.gap_ns)).collect();
    assert_eq!(
        sizes,
        vec![(100, 0), (40, 50 * MS), (1200, 30 * MS), (60, 120 * MS)]
    );
    assert_eq!(r.name, "game.pcap stream 1 10.0.0.1:4000→10.0.0.2:7000 x1");
    let fast = replay(path, &capture, Some(2), 2.0).unwrap();
    let tcp: Vec<(usize, u64)> = fast.messages.iter().map(|m| (m.size, m.gap_ns)).collect();
    assert_eq!(tcp, vec![(500, 0), (700, 5 * MS)]);
    let err = |s, x| replay(path, &capture, s, x).unwrap_err().to_string();
    assert_eq!(
        err(Some(3), 1.0),
        "--stream 3: game.pcap has streams 1 to 2 (see latlab trace-stats)"
    );
    assert_eq!(err(None, 0.0), "--speed must be a number above 0, not 0");
}

#[test]
fn csv_and_json_hold_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.pcap");
    std::fs::write(&file, pcap_of(&ethernet_frames(), DataLink::ETHERNET)).unwrap();
    let command = TraceStatsCommand {
        file,
        csv: Some(dir.path().join("t.csv")),
        json: Some(dir.path().join("t.json")),
    };
    let report = run(&command).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("t.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("stream,protocol,from,to,packets,size_avg"));
    assert!(lines[1].starts_with("1,udp,10.0.0.1:4000,10.0.0.2:7000,4,350.0,40,1200,66.667,50.000,30.000,120.000,30.000,120.000,15.000,"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    assert_eq!(json["frames"], 10);
    assert_eq!(json["skipped"], 1);
    assert_eq!(json["directions"][2]["protocol"], "tcp");
    assert_eq!(json["directions"][0]["gap_median_ms"], 50.0);
    let text = report.text();
    assert!(text.contains("10.0.0.1:4000"));
    assert!(text.contains("10 frames, 2 streams, 1 frames not UDP/TCP over IP"));
}

/// Writes the seed corpus of the `capture` fuzz target (`fuzz/corpus/capture/seed-*`) from
/// the captures these tests build, each checked to parse first. Run by hand when they change:
/// `cargo test -p latlab-lab --lib write_fuzz_seeds -- --ignored`.
#[test]
#[ignore = "writes fuzz/corpus/capture"]
fn write_fuzz_seeds() {
    let cooked: Vec<(u64, Vec<u8>)> = traffic().into_iter().map(|(t, ip)| (t, sll(&ip))).collect();
    let seeds = [
        (
            "pcap-ethernet",
            pcap_of(&ethernet_frames(), DataLink::ETHERNET),
        ),
        ("pcap-raw", pcap_of(&traffic(), DataLink::RAW)),
        (
            "pcapng-sll-ns",
            pcapng_of(&cooked, DataLink::LINUX_SLL, Some(9)),
        ),
        (
            "pcapng-ethernet-us",
            pcapng_of(&ethernet_frames(), DataLink::ETHERNET, None),
        ),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/capture");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in seeds {
        assert!(!stats_of(&capture::parse_capture(&bytes).unwrap()).is_empty());
        std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
    }
}

#[test]
fn a_clock_that_runs_back_and_forth_gives_statistics_not_an_overflow() {
    // Found by the capture fuzz target: a pcapng file whose timestamps jump between 0 and
    // near u64::MAX ns made the sum of the gaps overflow a u64.
    let frame = ipv4(17, addr("10.0.0.1:4000"), addr("10.0.0.2:7000"), 10);
    let frames: Vec<(u64, Vec<u8>)> = [0, u64::MAX - 1, 0, u64::MAX - 1]
        .iter()
        .map(|&ts| (ts, frame.clone()))
        .collect();
    let stream = Stream {
        number: 1,
        protocol: Protocol::Udp,
        a: addr("10.0.0.1:4000"),
        b: addr("10.0.0.2:7000"),
        directions: [
            frames.iter().map(|(ts, f)| (*ts, 10, f.len())).collect(),
            Vec::new(),
        ],
    };
    let row = DirectionStats::of(&stream, 0).unwrap();
    let span_ms = 2.0 * (u64::MAX - 1) as f64 / 1e6;
    assert_eq!(row.packets, 4);
    assert_eq!(row.gap_min_ms, Some(0.0));
    assert_eq!(row.gap_max_ms, Some((u64::MAX - 1) as f64 / 1e6));
    assert!((row.gap_avg_ms.unwrap() - span_ms / 3.0).abs() / (span_ms / 3.0) < 1e-9);
    assert!(row.pps.unwrap() > 0.0 && row.pps.unwrap() < 1e-9);
    assert!(DirectionStats::of(&stream, 1).is_none());
    // The fuzz target's input itself parses and gives rows.
    let found = include_bytes!("../../../../fuzz/corpus/capture/seed-crash-gap-sum-overflow");
    let capture = capture::parse_capture(found).unwrap();
    assert!(!stats_of(&capture).is_empty());
}
