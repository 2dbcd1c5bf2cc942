use super::*;

const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

/// An Ethernet + IPv4 + TCP (or UDP) frame as an offloading sender hands it over: lengths for
/// the whole payload, the transport checksum holding only the pseudo-header's sum.
fn unfinished_v4(proto: u8, payload_len: usize, flags: u8) -> Vec<u8> {
    let l4_header = if proto == PROTO_TCP { 20 } else { 8 };
    let mut f = MACS.to_vec();
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let total = 20 + l4_header + payload_len;
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    let sum = checksum::internet(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    push_transport(&mut f, proto, l4_header + payload_len, flags);
    let pseudo = pseudo_header(&f, 14, ETHERTYPE_IPV4, proto, l4_header + payload_len).unwrap();
    let at = 34 + if proto == PROTO_TCP { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
    f
}

/// The same over IPv6.
fn unfinished_v6(proto: u8, payload_len: usize, flags: u8) -> Vec<u8> {
    let l4_header = if proto == PROTO_TCP { 20 } else { 8 };
    let mut f = MACS.to_vec();
    f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
    let mut ip = vec![0x60, 0, 0, 0, 0, 0, proto, 64];
    ip[4..6].copy_from_slice(&((l4_header + payload_len) as u16).to_be_bytes());
    ip.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&ip);
    push_transport(&mut f, proto, l4_header + payload_len, flags);
    let pseudo = pseudo_header(&f, 14, ETHERTYPE_IPV6, proto, l4_header + payload_len).unwrap();
    let at = 54 + if proto == PROTO_TCP { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
    f
}

fn push_transport(f: &mut Vec<u8>, proto: u8, len: usize, flags: u8) {
    if proto == PROTO_TCP {
        // Ports 40000 → 5201, seq 0xfffff000 (wraps while segmenting), ack 1, 20-byte header.
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0xff, 0xff, 0xf0, 0x00, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x50, flags, 0x01, 0xf6, 0, 0, 0, 0]);
        f.extend((0..len - 20).map(|i| (i % 251) as u8));
    } else {
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
        f.extend_from_slice(&(len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend((0..len - 8).map(|i| (i % 251) as u8));
    }
}

fn tcp_flags(frame: &[u8], l4: usize) -> u8 {
    frame[l4 + 13]
}

fn seq(frame: &[u8], l4: usize) -> u32 {
    u32::from_be_bytes(frame[l4 + 4..l4 + 8].try_into().unwrap())
}

/// Every checksum of the frame verifies (IPv4 header, transport).
fn verifies(frame: &[u8]) -> bool {
    let mut copy = frame.to_vec();
    let ip_ok = match be16(frame, 12).unwrap() {
        ETHERTYPE_IPV4 => checksum::data(&frame[14..34]) == 0xffff,
        _ => true,
    };
    ip_ok && finish_unfinished_checksum(&mut copy) == ChecksumState::Valid
}

fn finish_all(
    frame: &[u8],
    tag: Option<VlanTag>,
    offload: Offload,
) -> (Result<Finished>, Vec<Vec<u8>>) {
    let mut out = Vec::new();
    let done = Finisher::new().finish(frame, tag, offload, |f| out.push(f.to_vec()));
    (done, out)
}

const TCP_ACK_PSH_FIN: u8 = 0x10 | 0x08 | 0x01;

#[test]
fn a_virtio_net_hdr_is_read_little_endian() {
    // NEEDS_CSUM, GSO TCPV4 with ECN, hdr_len 66, gso_size 1448, csum_start 34, offset 16.
    let hdr = [0x01, 0x81, 66, 0, 0xa8, 0x05, 34, 0, 16, 0];
    let offload = Offload::from_virtio(&hdr).unwrap();
    assert_eq!(
        offload.checksum,
        Some(ChecksumAt {
            start: 34,
            offset: 16
        })
    );
    assert_eq!(offload.segmentation, Some((Segmentation::Tcp4, 1448)));
    assert!(Offload::from_virtio(&[0; VNET_HDR_LEN]).unwrap().is_none());
    assert_eq!(Offload::from_virtio(&hdr[..9]), Err(Error::Truncated));
    // UFO and a zero segment size cannot be done.
    assert_eq!(
        Offload::from_virtio(&[1, 3, 0, 0, 1, 0, 34, 0, 6, 0]),
        Err(Error::Malformed)
    );
    assert_eq!(
        Offload::from_virtio(&[1, 1, 0, 0, 0, 0, 34, 0, 16, 0]),
        Err(Error::Malformed)
    );
}

#[test]
fn an_unfinished_udp_checksum_is_finished_at_the_place_the_metadata_names() {
    let frame = unfinished_v4(PROTO_UDP, 100, 0);
    assert!(!verifies(&frame));
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 6,
        }),
        segmentation: None,
    };
    let (done, out) = finish_all(&frame, None, offload);
    assert_eq!(done.unwrap().frames, 1);
    assert_eq!(out.len(), 1);
    assert!(verifies(&out[0]));
    assert_eq!(out[0][..40], frame[..40], "only the checksum changed");
}

#[test]
fn a_tcp_v4_super_frame_becomes_mss_segments_with_their_own_headers() {
    let frame = unfinished_v4(PROTO_TCP, 3000, TCP_ACK_PSH_FIN);
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 16,
        }),
        segmentation: Some((Segmentation::Tcp4, 1448)),
    };
    let (done, out) = finish_all(&frame, None, offload);
    let done = done.unwrap();
    assert!(done.segmented && done.checksummed && !done.tagged);
    assert_eq!(done.frames, 3);
    let lens: Vec<usize> = out.iter().map(Vec::len).collect();
    assert_eq!(lens, [54 + 1448, 54 + 1448, 54 + 104]);
    for (i, seg) in out.iter().enumerate() {
        assert!(verifies(seg), "segment {i}");
        assert_eq!(
            be16(seg, 16).unwrap() as usize,
            seg.len() - 14,
            "IPv4 total length"
        );
        assert_eq!(be16(seg, 18).unwrap(), 0x1234 + i as u16, "IPv4 id");
        assert_eq!(seq(seg, 34), 0xffff_f000u32.wrapping_add(1448 * i as u32));
        let last = i == 2;
        assert_eq!(
            tcp_flags(seg, 34) & 0x09 != 0,
            last,
            "PSH/FIN on the last only"
        );
        assert_eq!(
            seg[54..],
            frame[54 + 1448 * i..(54 + 1448 * (i + 1)).min(frame.len())]
        );
    }
}

#[test]
fn a_tcp_v6_super_frame_becomes_segments_and_cwr_stays_on_the_first() {
    let frame = unfinished_v6(PROTO_TCP, 2000, 0x80 | 0x10);
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 54,
            offset: 16,
        }),
        segmentation: Some((Segmentation::Tcp6, 1000)),
    };
    let (done, out) = finish_all(&frame, None, offload);
    assert_eq!(done.unwrap().frames, 2);
    for (i, seg) in out.iter().enumerate() {
        assert!(verifies(seg));
        assert_eq!(be16(seg, 18).unwrap(), 1020, "IPv6 payload length");
        assert_eq!(tcp_flags(seg, 54) & 0x80 != 0, i == 0);
    }
}

#[test]
fn a_udp_gso_super_frame_becomes_one_datagram_per_segment() {
    let frame = unfinished_v4(PROTO_UDP, 2500, 0);
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 6,
        }),
        segmentation: Some((Segmentation::Udp, 1200)),
    };
    let (done, out) = finish_all(&frame, None, offload);
    assert_eq!(done.unwrap().frames, 3);
    let udp_lens: Vec<u16> = out.iter().map(|s| be16(s, 38).unwrap()).collect();
    assert_eq!(udp_lens, [1208, 1208, 108]);
    assert!(out.iter().all(|s| verifies(s)));
}

#[test]
fn a_vlan_tag_taken_out_of_band_goes_back_after_the_macs_and_offsets_follow_it() {
    let frame = unfinished_v4(PROTO_UDP, 64, 0);
    let tag = VlanTag {
        tpid: TPID_8021Q,
        tci: 100,
    };
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 6,
        }),
        segmentation: None,
    };
    let (done, out) = finish_all(&frame, Some(tag), offload);
    assert!(done.unwrap().tagged);
    let tagged = &out[0];
    assert_eq!(tagged.len(), frame.len() + 4);
    assert_eq!(tagged[12..16], [0x81, 0x00, 0x00, 100]);
    assert_eq!(tagged[16..38], frame[12..34]);
    assert!(verifies(tagged));
    // A QinQ frame keeps its inner tag in band; the outer one comes back in front of it.
    let mut qinq = MACS.to_vec();
    qinq.extend_from_slice(&[0x81, 0x00, 0x00, 0x07, 0x08, 0x06, 0xaa, 0xbb]);
    let outer = VlanTag {
        tpid: TPID_8021AD,
        tci: 4094,
    };
    let (_, out) = finish_all(&qinq, Some(outer), Offload::default());
    assert_eq!(
        out[0][12..20],
        [0x88, 0xa8, 0x0f, 0xfe, 0x81, 0x00, 0x00, 0x07]
    );
}

#[test]
fn metadata_that_does_not_fit_the_frame_is_refused_and_nothing_is_emitted() {
    let frame = unfinished_v4(PROTO_TCP, 100, 0);
    let bad = [
        Offload {
            checksum: Some(ChecksumAt {
                start: 60_000,
                offset: 16,
            }),
            segmentation: None,
        },
        Offload {
            checksum: Some(ChecksumAt {
                start: 34,
                offset: 16,
            }),
            segmentation: Some((Segmentation::Tcp6, 10)),
        },
        Offload {
            checksum: None,
            segmentation: Some((Segmentation::Tcp4, 10)),
        },
        Offload {
            checksum: Some(ChecksumAt {
                start: 140,
                offset: 16,
            }),
            segmentation: Some((Segmentation::Tcp4, 10)),
        },
    ];
    for offload in bad {
        let (done, out) = finish_all(&frame, None, offload);
        assert!(done.is_err(), "{offload:?}");
        assert!(out.is_empty());
    }
    assert_eq!(
        finish_all(&frame[..10], None, Offload::default()).0,
        Err(Error::Truncated)
    );
}

#[test]
fn without_metadata_only_a_checksum_holding_the_pseudo_header_sum_is_finished() {
    let mut frame = unfinished_v4(PROTO_TCP, 500, 0x10);
    assert_eq!(
        finish_unfinished_checksum(&mut frame),
        ChecksumState::Finished
    );
    assert!(verifies(&frame));
    assert_eq!(finish_unfinished_checksum(&mut frame), ChecksumState::Valid);
    // Damaged elsewhere: left as it is.
    frame[100] ^= 0xff;
    let before = frame.clone();
    assert_eq!(finish_unfinished_checksum(&mut frame), ChecksumState::Wrong);
    assert_eq!(frame, before);
    let mut v6 = unfinished_v6(PROTO_UDP, 30, 0);
    assert_eq!(finish_unfinished_checksum(&mut v6), ChecksumState::Finished);
    // A super-frame cut short by the receive path.
    let mut cut = unfinished_v4(PROTO_TCP, 3000, 0x10);
    cut.truncate(1514);
    assert_eq!(
        finish_unfinished_checksum(&mut cut),
        ChecksumState::LongerThanFrame
    );
    let mut arp = MACS.to_vec();
    arp.extend_from_slice(&[0x08, 0x06, 0, 1]);
    assert_eq!(
        finish_unfinished_checksum(&mut arp),
        ChecksumState::NotTransport
    );
}

#[test]
fn no_prefix_of_any_frame_and_no_metadata_panics() {
    let frames = [
        unfinished_v4(PROTO_TCP, 300, 0x18),
        unfinished_v6(PROTO_TCP, 300, 0x18),
        unfinished_v4(PROTO_UDP, 300, 0),
    ];
    let mut finisher = Finisher::new();
    for frame in &frames {
        for len in 0..frame.len() {
            let mut cut = frame[..len].to_vec();
            let _ = finish_unfinished_checksum(&mut cut);
            for (start, offset, kind) in [
                (34, 16, Segmentation::Tcp4),
                (54, 16, Segmentation::Tcp6),
                (34, 6, Segmentation::Udp),
                (13, 0xffff, Segmentation::Udp),
            ] {
                for segmentation in [None, Some((kind, 7))] {
                    let offload = Offload {
                        checksum: Some(ChecksumAt { start, offset }),
                        segmentation,
                    };
                    let _ = finisher.finish(&cut, None, offload, |_| {});
                }
            }
        }
    }
}

/// The fuzz target's layout: 10 bytes of `virtio_net_hdr`, 4 bytes of out-of-band VLAN tag
/// (used when its first byte is odd), then the frame.
fn fuzz_case(hex: &str) -> (Offload, Option<VlanTag>, Vec<u8>) {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let offload = Offload::from_virtio(&bytes[..10]).unwrap();
    let tag = (bytes[10] & 1 == 1).then(|| VlanTag {
        tpid: u16::from_be_bytes([bytes[10] & 0xfe, bytes[11]]),
        tci: u16::from_be_bytes([bytes[12], bytes[13]]),
    });
    (offload, tag, bytes[14..].to_vec())
}

/// The crash `cargo fuzz run offload` found: TCPv4 GSO metadata over a frame whose TCP data
/// offset says 8 bytes, so the flags (13) and the checksum (16..18) the segmenter rewrites lay
/// past the end of the 50-byte frame; `put16` indexed out of range.
#[test]
fn a_tcp_header_shorter_than_its_rewritten_fields_is_refused_not_a_panic() {
    let (offload, tag, frame) = fuzz_case(
        "010100ff0b00220010000000000002000100000202000000ffff08004501010000f40122001000000000\
         ffffffffffffff000000000108004243444546f690f7",
    );
    assert_eq!(frame.len(), 50);
    assert_eq!(offload.segmentation, Some((Segmentation::Tcp4, 11)));
    let (done, out) = finish_all(&frame, tag, offload);
    assert_eq!(done, Err(Error::BadLength));
    assert!(out.is_empty());
}

#[test]
fn a_tcp_data_offset_under_five_words_is_refused_whatever_the_frame_length() {
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 16,
        }),
        segmentation: Some((Segmentation::Tcp4, 100)),
    };
    let good = unfinished_v4(PROTO_TCP, 300, 0x10);
    assert_eq!(finish_all(&good, None, offload).1.len(), 3);
    for words in 0..5u8 {
        let mut short = good.clone();
        short[34 + 12] = words << 4;
        let (done, out) = finish_all(&short, None, offload);
        assert_eq!(done, Err(Error::BadLength), "data offset {words}");
        assert!(out.is_empty());
    }
    // An IPv4 header length under 20 bytes is refused too (the header checksum covers it).
    let mut ihl = good.clone();
    ihl[14] = 0x44;
    assert_eq!(finish_all(&ihl, None, offload).0, Err(Error::Malformed));
}

#[test]
fn a_super_frame_whose_segments_would_overflow_their_length_fields_emits_nothing() {
    // UDP GSO metadata over a frame longer than 64 KiB, one segment of all of it: the first
    // segment's lengths cannot be written, so nothing is emitted (not some segments, then an
    // error that makes the bridge hand on the original as well).
    let mut frame = unfinished_v4(PROTO_UDP, 1000, 0);
    frame.resize(70_000, 0);
    let offload = Offload {
        checksum: Some(ChecksumAt {
            start: 34,
            offset: 6,
        }),
        segmentation: Some((Segmentation::Udp, u16::MAX)),
    };
    let (done, out) = finish_all(&frame, None, offload);
    assert_eq!(done, Err(Error::BadLength));
    assert!(out.is_empty());
}
