//! Hot-path costs of the probe header: emit into a buffer, parse, stamp in
//! place. Benchmark ids carry the datagram size, e.g. `probe/emit/64B`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latlab_wire::probe;

const SIZES: [usize; 2] = [64, 1472];

fn sample_repr() -> probe::Repr {
    probe::Repr {
        run_id: 0xdead_beef,
        flow: 3,
        seq: 1_000_000,
        intended_send_ns: 1_700_000_000_000_000_000,
        actual_send_ns: 1_700_000_000_000_000_250,
        responder: None,
        responder_clock: probe::ResponderClock::NotAsked,
    }
}

fn sample_datagram(size: usize) -> Vec<u8> {
    let mut buf = vec![0u8; size];
    sample_repr().emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
    buf
}

fn emit(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe/emit");
    for size in SIZES {
        let mut buf = vec![0u8; size];
        let repr = sample_repr();
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{size}B")),
            &repr,
            |b, repr| {
                b.iter(|| {
                    let mut packet = probe::Packet::new_unchecked(black_box(&mut buf[..]));
                    black_box(repr).emit(&mut packet);
                })
            },
        );
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe/parse");
    for size in SIZES {
        let buf = sample_datagram(size);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{size}B")),
            &buf,
            |b, buf| {
                b.iter(|| {
                    let bytes = black_box(&buf[..]);
                    let repr =
                        probe::Packet::new_checked(bytes).and_then(|p| probe::Repr::parse(&p));
                    black_box(repr)
                })
            },
        );
    }
    group.finish();
}

fn stamp(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe/stamp");
    for size in SIZES {
        let mut buf = sample_datagram(size);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(format!("{size}B")), |b| {
            let mut t = 1_700_000_000_000_000_000u64;
            b.iter(|| {
                t = t.wrapping_add(1);
                if let Ok(mut packet) = probe::Packet::new_checked(black_box(&mut buf[..])) {
                    packet.set_actual_send_ns(black_box(t));
                    packet.set_responder_stamps(black_box(t + 10), black_box(t + 20));
                }
            })
        });
    }
    group.finish();
}

fn is_probe(c: &mut Criterion) {
    let mut group = c.benchmark_group("probe/is_probe");
    let buf = sample_datagram(64);
    group.bench_function("64B", |b| b.iter(|| probe::is_probe(black_box(&buf[..]))));
    group.finish();
}

criterion_group!(benches, emit, parse, stamp, is_probe);
criterion_main!(benches);
