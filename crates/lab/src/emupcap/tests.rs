use pcap_file::pcapng::{Block, PcapNgReader};

use super::*;

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
    let written = write(&path, ["emu-a", "emu-b"], consumer, &done).unwrap();
    assert_eq!(written.frames, [1, 2]);
    assert!(!partial_path(&path).exists());

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
