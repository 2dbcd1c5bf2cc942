//! Fate files read back as written, refused when damaged, and replayed in virtual time.

use super::replay::{FlowNumbers, Replay};
use super::summary::{compare, summary};
use super::*;
use crate::{LinkConfig, LossModel, Pipe, Reorder};

const MS: u64 = 1_000_000;

fn header() -> Header {
    Header {
        directions: vec![
            DirectionHeader {
                name: "a_to_b".into(),
                rules: vec!["proto=udp dport=27015".into()],
            },
            DirectionHeader {
                name: "b_to_a".into(),
                rules: vec![],
            },
        ],
    }
}

fn every_kind_of_record() -> Vec<FrameRecord> {
    let udp = FlowId {
        ethertype: 0x0800,
        protocol: Some(17),
        number: 3,
    };
    let arp = FlowId {
        ethertype: 0x0806,
        protocol: None,
        number: 0,
    };
    let causes = [
        DropCause::Loss,
        DropCause::QueueFrames,
        DropCause::QueueBytes,
        DropCause::Runt,
        DropCause::Oversized,
        DropCause::Outage,
    ];
    let mut out: Vec<FrameRecord> = causes
        .iter()
        .enumerate()
        .map(|(i, &cause)| FrameRecord {
            direction: (i % 2) as u8,
            flow: udp,
            position: i as u64,
            arrival_ns: 1 << (7 * i),
            len: 60 + i as u32,
            fate: Recorded::Drop(cause),
        })
        .collect();
    out.push(FrameRecord {
        direction: 1,
        flow: arp,
        position: u64::MAX,
        arrival_ns: u64::MAX,
        len: u32::MAX,
        fate: Recorded::Deliver {
            transit_ns: 10 * MS,
            duplicate_transit_ns: Some(u64::MAX),
            corrupt_bit: Some(479),
            reordered: true,
        },
    });
    out.push(FrameRecord {
        direction: 0,
        flow: udp,
        position: 5,
        arrival_ns: 0,
        len: 0,
        fate: Recorded::Deliver {
            transit_ns: 0,
            duplicate_transit_ns: None,
            corrupt_bit: None,
            reordered: false,
        },
    });
    out
}

fn written(header: &Header, frames: &[FrameRecord], unqueued: u64) -> Vec<u8> {
    let mut w = FateWriter::new(Vec::new(), header).expect("a Vec takes every byte");
    for f in frames {
        w.frame(f).expect("a Vec takes every byte");
    }
    w.finish(unqueued).expect("a Vec takes every byte").0
}

#[test]
fn a_file_reads_back_as_written() {
    let frames = every_kind_of_record();
    let bytes = written(&header(), &frames, 7);
    assert_eq!(&bytes[..8], b"LATFATES");
    assert_eq!(bytes[8], VERSION);
    let file = FateFile::parse(&bytes).expect("what was written reads back");
    assert_eq!(file.header, header());
    assert_eq!(file.frames, frames);
    assert_eq!(file.unqueued, 7);
    // Any position replays, the last one too, once.
    let mut replay = Replay::new(&file);
    let all = frames.len() as u64;
    assert_eq!(replay.unused(), all);
    let last = *frames
        .iter()
        .find(|f| f.position == u64::MAX)
        .expect("a record at the last position");
    let taken = replay.take(usize::from(last.direction), last.flow, u64::MAX);
    assert_eq!(taken, Some(last.fate));
    assert_eq!(replay.take(1, last.flow, u64::MAX), None);
    assert_eq!(replay.unused(), all - 1);
}

#[test]
fn every_cut_of_a_file_is_refused_naming_an_offset_inside_it() {
    let bytes = written(&header(), &every_kind_of_record(), 0);
    for cut in 0..bytes.len() {
        let error = FateFile::parse(&bytes[..cut]).expect_err("a cut file is refused");
        assert!(error.offset <= cut, "cut at {cut}: {error}");
        if cut >= 9 {
            assert!(error.problem.contains("truncated"), "cut at {cut}: {error}");
        }
    }
}

#[test]
fn damaged_headers_and_records_are_refused_by_field() {
    let bytes = written(&header(), &every_kind_of_record(), 0);
    let refused = |bytes: &[u8]| FateFile::parse(bytes).expect_err("damaged").to_string();

    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        refused(&magic),
        "byte 0: magic: not a latlab fate file (it starts otherwise)"
    );
    let mut version = bytes.clone();
    version[8] = 2;
    assert_eq!(
        refused(&version),
        "byte 8: version: version 2; this latlab reads version 1"
    );
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(refused(&trailing).contains("trailer: bytes after the end"));
    // The trailer's count is the second-to-last byte here (both counts fit a byte).
    let mut count = bytes.clone();
    let at = count.len() - 2;
    count[at] += 1;
    assert!(refused(&count).starts_with(&format!("byte {at}: trailer frames")));
    // The first record's tag, then its direction.
    let first = 9 + 1 + 1 + 6 + 1 + 1 + 21 + 1 + 6 + 1;
    assert_eq!(bytes[first], TAG_FRAME);
    let mut tag = bytes.clone();
    tag[first] = 9;
    assert_eq!(
        refused(&tag),
        format!("byte {first}: record 0 tag: unknown tag 9")
    );
    let mut direction = bytes.clone();
    direction[first + 1] = 2;
    assert_eq!(
        refused(&direction),
        format!(
            "byte {}: record 0 direction: 2, and the header has 2 directions",
            first + 1
        )
    );
}

#[test]
fn arbitrary_bytes_never_panic_the_reader() {
    let bytes = written(&header(), &every_kind_of_record(), 3);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let mut damaged = bytes.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state % damaged.len() as u64) as usize;
            damaged[at] = (state >> 32) as u8;
        }
        let _ = FateFile::parse(&damaged);
    }
}

#[test]
fn a_run_whose_directions_or_rules_differ_is_told_which_field() {
    let mut other = header();
    other.directions[0].rules.clear();
    let why = other.mismatch(&header()).expect("the rules differ");
    assert!(why.starts_with("directions[0].rules (a_to_b)"), "{why}");
    other = header();
    other.directions[1].name = "down".into();
    let why = other.mismatch(&header()).expect("the names differ");
    assert!(why.starts_with("directions[1].name"), "{why}");
    assert_eq!(header().mismatch(&header()), None);
}

/// An Ethernet + IPv4 + UDP frame from `sport`, carrying `id`, 80 bytes long.
fn udp(sport: u16, id: u32) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend([0x08, 0x00, 0x45, 0, 0, 66, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(sport.to_be_bytes());
    f.extend([0x69, 0x87, 0, 46, 0, 0]);
    f.extend(id.to_be_bytes());
    f.resize(80, 0);
    f
}

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 12];
    f.extend([0x08, 0x06]);
    f.resize(60, 0);
    f
}

/// Everything NetEm does to a frame, with a seed.
fn model(seed: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: 10 * MS,
        jitter_ns: 3 * MS,
        loss: LossModel::GilbertElliott {
            p: 0.05,
            r: 0.3,
            one_minus_h: 0.8,
            one_minus_k: 0.01,
        },
        duplicate: 0.05,
        corrupt: 0.05,
        reorder: Some(Reorder {
            probability: 0.1,
            gap: None,
        }),
        seed,
        ..LinkConfig::default()
    }
}

/// One direction's run of `frames` (arriving 1 ms apart) through `pipe`: each frame's fate,
/// the model's or the replay's, recorded; and every departure with its frame.
fn run(
    pipe: &mut Pipe,
    frames: &[Vec<u8>],
    mut replay: Option<&mut Replay>,
) -> (FateFile, Vec<(u64, Vec<u8>)>) {
    let mut numbers = FlowNumbers::default();
    let mut records = Vec::new();
    let mut departures = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let now = i as u64 * MS;
        while let Some(d) = pipe.poll_departure(now) {
            departures.push((d.departure_ns(), d.frame().to_vec()));
        }
        let (flow, position) = numbers.name(frame);
        let recorded = replay.as_mut().and_then(|r| r.take(0, flow, position));
        let fate = match recorded {
            Some(recorded) => pipe.handle_recorded(now, frame, recorded),
            None => pipe.handle_arrival(now, frame),
        };
        records.push(FrameRecord {
            direction: 0,
            flow,
            position,
            arrival_ns: now,
            len: frame.len() as u32,
            fate: Recorded::of(&fate, now),
        });
    }
    while let Some(at) = pipe.poll_timeout() {
        let d = pipe.poll_departure(at).expect("due at its timeout");
        departures.push((d.departure_ns(), d.frame().to_vec()));
    }
    let header = Header {
        directions: vec![DirectionHeader {
            name: "a_to_b".into(),
            rules: vec![],
        }],
    };
    let bytes = written(&header, &records, 0);
    (FateFile::parse(&bytes).expect("reads back"), departures)
}

/// Two UDP flows (ports `ports`) interleaved, with ARP frames every `arp_every` frames.
fn traffic(ports: [u16; 2], arp_every: usize, n: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..n {
        if i as usize % arp_every == 0 {
            out.push(arp());
        }
        out.push(udp(ports[(i % 2) as usize], i));
    }
    out
}

#[test]
fn a_replay_with_another_seed_gives_every_frame_its_recorded_fate() {
    let first = traffic([40_000, 40_001], 50, 2000);
    let mut pipe = Pipe::new(model(1), 0).expect("valid");
    let (recorded, departed) = run(&mut pipe, &first, None);
    let c = *pipe.counters();
    assert!(c.dropped_loss > 20 && c.duplicated > 20 && c.corrupted > 20 && c.reordered > 20);

    // The model alone with another seed decides otherwise...
    let mut other = Pipe::new(model(2), 0).expect("valid");
    let (unreplayed, _) = run(&mut other, &first, None);
    assert!(compare(&recorded, &unreplayed, ["a", "b"]).differing > 0);

    // ...but replayed, new ephemeral ports and all, every frame gets its fate at its time.
    let second = traffic([51_000, 51_001], 50, 2000);
    let mut replay = Replay::new(&recorded);
    let mut pipe = Pipe::new(model(2), 0).expect("valid");
    let (applied, replayed) = run(&mut pipe, &second, Some(&mut replay));
    assert_eq!(replay.unused(), 0);
    let same = compare(&recorded, &applied, ["a", "b"]);
    assert_eq!(same.differing, 0, "{:?}", same.lines);
    assert_eq!(same.same_drops, c.dropped_loss);
    assert_eq!(*pipe.counters(), c);
    // The same departures, at the same times, with the same bits flipped; only the ports
    // (bytes 34..36) differ.
    let strip = |d: &[(u64, Vec<u8>)]| -> Vec<(u64, Vec<u8>)> {
        d.iter()
            .map(|(at, f)| {
                let mut f = f.clone();
                if f.len() > 36 {
                    f[34..36].fill(0);
                }
                (*at, f)
            })
            .collect()
    };
    assert_eq!(strip(&departed), strip(&replayed));
}

#[test]
fn arp_interleaving_differently_shifts_no_position_and_extra_frames_are_the_models() {
    let first = traffic([40_000, 40_001], 50, 1000);
    let mut pipe = Pipe::new(model(1), 0).expect("valid");
    let (recorded, _) = run(&mut pipe, &first, None);
    // ARP every 7 frames instead of 50, and 100 frames more than were recorded.
    let second = traffic([51_000, 51_001], 7, 1100);
    let mut replay = Replay::new(&recorded);
    let mut pipe = Pipe::new(model(2), 0).expect("valid");
    let (applied, _) = run(&mut pipe, &second, Some(&mut replay));
    assert_eq!(
        replay.unused(),
        0,
        "every recorded ARP frame and more came again"
    );
    let cmp = compare(&recorded, &applied, ["a", "b"]);
    let udp: Vec<&String> = cmp.lines.iter().filter(|l| l.contains("udp")).collect();
    assert_eq!(udp.len(), 2, "{:?}", cmp.lines);
    for line in udp {
        // Each UDP flow has 550 frames in the replay: the same fates up to 500, then the
        // first frame beyond the record.
        assert!(line.contains("first difference at position 500"), "{line}");
    }
    let s = summary(&recorded);
    assert!(
        s.starts_with("1020 frames recorded\na_to_b: 1020 frames in 3 flows\n"),
        "{s}"
    );
    assert!(s.contains("  ipv4/udp#0: 500 frames"), "{s}");
    assert!(s.contains("  arp: 20 frames"), "{s}");
}
