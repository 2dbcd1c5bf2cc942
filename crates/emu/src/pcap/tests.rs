use std::fs::File;

use pcap_file::pcapng::{Block, PcapNgReader};

use super::*;
use latlab_lab::results::temp_name;

fn record(direction: LinkDirection, seq: u8, len: usize, arrival_ns: u64) -> TapRecord {
    let mut data = [0u8; TAP_SNAP];
    data[0] = seq;
    let kept = len.min(TAP_SNAP);
    TapRecord {
        direction,
        arrival_ns,
        intended_ns: arrival_ns + 5_000_000,
        departure_ns: arrival_ns + 5_000_123,
        len: len as u32,
        kept: kept as u16,
        data,
    }
}

#[test]
fn the_capture_reads_back_with_one_interface_per_side_and_every_frames_times() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("emu.pcapng");
    let (mut producer, consumer) = latlab_engine::emulator::tap_ring(64);
    let t0 = 1_700_000_000_123_456_789;
    producer
        .push(record(LinkDirection::AToB, 1, 100, t0))
        .unwrap();
    producer
        .push(record(LinkDirection::BToA, 2, 60, t0 + 7))
        .unwrap();
    producer
        .push(record(LinkDirection::AToB, 3, 9000, t0 + 9))
        .unwrap();
    let done = AtomicBool::new(true);
    let written = write(&path, ["emu-a", "emu-b"], consumer, &done, &no_events).unwrap();
    assert_eq!(written.frames, [1, 2]);
    assert!(!temp_name(&path).exists());

    let mut reader = PcapNgReader::new(File::open(&path).unwrap()).unwrap();
    let mut idbs = Vec::new();
    let mut packets = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => idbs.push(idb.into_owned()),
            Block::EnhancedPacket(epb) => packets.push(epb.into_owned()),
            _ => {}
        }
    }
    assert_eq!(idbs.len(), 2);
    for (idb, name) in idbs.iter().zip(["emu-a", "emu-b"]) {
        assert_eq!(idb.linktype, DataLink::ETHERNET);
        assert!(idb
            .options
            .contains(&InterfaceDescriptionOption::IfTsResol(9)));
        assert!(idb
            .options
            .contains(&InterfaceDescriptionOption::IfName(Cow::Borrowed(name))));
    }
    let got: Vec<(u32, u8, u32, usize, u64)> = packets
        .iter()
        .map(|p| {
            let ts = p.timestamp.as_nanos() as u64;
            (p.interface_id, p.data[0], p.original_len, p.data.len(), ts)
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, 1, 100, 100, t0 + 5_000_123),
            (0, 2, 60, 60, t0 + 7 + 5_000_123),
            (1, 3, 9000, TAP_SNAP, t0 + 9 + 5_000_123),
        ]
    );
    let comment = format!("arrival_ns={t0} intended_ns={}", t0 + 5_000_000);
    assert_eq!(
        packets[0].options,
        [EnhancedPacketOption::Comment(Cow::Owned(comment))]
    );
}

fn no_events() -> (u64, [Vec<EventRecord>; 2]) {
    (0, [Vec::new(), Vec::new()])
}

#[test]
fn the_first_frame_of_a_direction_after_an_event_begins_or_ends_carries_it_with_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("emu.pcapng");
    let (mut producer, consumer) = latlab_engine::emulator::tap_ring(64);
    let start = 1_000_000_000;
    // A→B frames depart at start + 1 s, 2.5 s, 4 s (record() adds 5_000_123 ns).
    for (seq, at) in [
        (1, 1_000_000_000u64),
        (2, 2_500_000_000),
        (3, 4_000_000_000),
    ] {
        let arrival = start + at - 5_000_123;
        producer
            .push(record(LinkDirection::AToB, seq, 100, arrival))
            .unwrap();
    }
    producer
        .push(record(LinkDirection::BToA, 9, 60, start + 3_000_000_000))
        .unwrap();
    let outage = EventRecord {
        event: latlab_link::Event::Outage {
            length_ns: Some(1_000_000_000),
        },
        begin_ns: start + 2_000_000_000,
        end_ns: Some(start + 3_000_000_000),
        scheduled: true,
    };
    let events = move || (start, [vec![outage], Vec::new()]);
    let done = AtomicBool::new(true);
    write(&path, ["emu-a", "emu-b"], consumer, &done, &events).unwrap();
    let mut reader = PcapNgReader::new(File::open(&path).unwrap()).unwrap();
    let mut notes = Vec::new();
    while let Some(block) = reader.next_block() {
        if let Block::EnhancedPacket(epb) = block.unwrap() {
            let extra: Vec<String> = epb
                .options
                .iter()
                .skip(1)
                .map(|o| match o {
                    EnhancedPacketOption::Comment(c) => c.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            notes.push((epb.data[0], extra));
        }
    }
    let began = format!(
        "event: outage 1s began at 2.000000000 s (event_ns={})",
        start + 2_000_000_000
    );
    let ended = format!(
        "event: outage 1s ended at 3.000000000 s (event_ns={})",
        start + 3_000_000_000
    );
    assert_eq!(
        notes,
        [(1, vec![]), (2, vec![began]), (3, vec![ended]), (9, vec![]),]
    );
}

#[test]
fn the_capture_being_written_is_a_locked_partial_result_that_latlab_clean_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("emu.pcapng");
    let partial = temp_name(&path);
    assert_eq!(
        partial.file_name().unwrap().to_string_lossy(),
        format!(".emu.pcapng.partial-{}", std::process::id())
    );
    assert!(
        latlab_lab::clean::is_partial(&partial),
        "{}",
        partial.display()
    );
    let (mut producer, consumer) = latlab_engine::emulator::tap_ring(64);
    let done = AtomicBool::new(false);
    /// Raises `done` when dropped, so a failing assertion ends the writer instead of leaving the
    /// scope waiting for it.
    struct Raise<'a>(&'a AtomicBool);
    impl Drop for Raise<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    std::thread::scope(|s| {
        let writer = s.spawn(|| write(&path, ["emu-a", "emu-b"], consumer, &done, &no_events));
        let raise = Raise(&done);
        producer
            .push(record(LinkDirection::AToB, 1, 100, 1_000))
            .unwrap();
        let start = std::time::Instant::now();
        while !partial.exists() {
            assert!(start.elapsed() < Duration::from_secs(30), "no partial file");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Its writer holds the lock: neither `latlab clean` nor another owner can have it.
        let removed = latlab_lab::clean::remove_partials(dir.path()).unwrap();
        assert!(removed.partials.is_empty(), "{:?}", removed.partials);
        assert!(removed.failed.is_empty(), "{:?}", removed.failed);
        assert!(partial.exists());
        assert!(latlab_io::lock::OwnerLock::open(&partial)
            .unwrap()
            .is_none());
        // A second capture to the same file while the first runs is refused, not written over.
        let (_p, other) = latlab_engine::emulator::tap_ring(1);
        let refused = write(
            &path,
            ["emu-a", "emu-b"],
            other,
            &AtomicBool::new(true),
            &no_events,
        );
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert!(
            partial.exists(),
            "the refused writer removed the live one's file"
        );
        drop(raise);
        assert_eq!(writer.join().unwrap().unwrap().frames, [0, 1]);
    });
    assert!(path.is_file() && !partial.exists());
}
