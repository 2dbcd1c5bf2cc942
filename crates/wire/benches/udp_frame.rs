//! Per-packet costs of Ethernet + IPv4 + UDP framing on the AF_XDP paths: parsing a received
//! frame, writing a reply (headers, payload copy, both checksums) and refilling the UDP
//! checksum after a stamp. Benchmark ids carry the UDP payload size, e.g.
//! `udp_frame/parse/64B`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latlab_wire::ethernet::Address;
use latlab_wire::udp_frame::{Frame, Repr};

/// A probe's payload and the largest one a 1518-byte frame carries.
const SIZES: [usize; 2] = [64, 1472];

fn sample_repr(payload_len: usize) -> Repr {
    Repr {
        src_mac: Address([2, 0, 0, 0, 0, 1]),
        dst_mac: Address([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1:4000".parse().unwrap(),
        dst: "198.18.0.2:7777".parse().unwrap(),
        payload_len,
    }
}

fn sample_frame(payload_len: usize) -> Vec<u8> {
    let repr = sample_repr(payload_len);
    let mut buf = vec![0u8; repr.buffer_len()];
    let payload = vec![0xa5; payload_len];
    repr.emit_into(&mut buf, &payload).unwrap();
    buf
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("udp_frame/parse");
    for size in SIZES {
        let buf = sample_frame(size);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(format!("{size}B")), |b| {
            b.iter(|| {
                let frame = Frame::new_unchecked(black_box(&buf[..]));
                let repr = Repr::parse(&frame);
                black_box((repr, repr.is_ok().then(|| frame.payload())))
            })
        });
    }
    group.finish();
}

fn emit_into(c: &mut Criterion) {
    let mut group = c.benchmark_group("udp_frame/emit_into");
    for size in SIZES {
        let repr = sample_repr(size);
        let payload = vec![0xa5; size];
        let mut out = vec![0u8; 2048];
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(format!("{size}B")), |b| {
            b.iter(|| black_box(repr).emit_into(black_box(&mut out), black_box(&payload)))
        });
    }
    group.finish();
}

fn refill(c: &mut Criterion) {
    let mut group = c.benchmark_group("udp_frame/fill_udp_checksum");
    for size in SIZES {
        let mut buf = sample_frame(size);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(format!("{size}B")), |b| {
            b.iter(|| Frame::new_unchecked(black_box(&mut buf[..])).fill_udp_checksum())
        });
    }
    group.finish();
}

criterion_group!(benches, parse, emit_into, refill);
criterion_main!(benches);
