//! Per-frame cost of each queue discipline at a saturated bottleneck: one frame into a pipe and
//! every departure due out of it, arrivals at twice the rate (a frame every 5 µs, 1000-byte
//! frames taking 10 µs on the wire), so the queue is always full and the discipline drops.
//! Eight UDP flows take turns (FQ-CoDel hashes them apart). Ids carry the discipline and ECN:
//! `aqm/saturated/codel`, `aqm/saturated/pie+ecn`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latlab_link::{Aqm, Discipline, LinkConfig, Pipe};

/// Time between arrivals: 5 µs, 200 kpps.
const GAP_NS: u64 = 5_000;
/// (1000 + 24) bytes · 8 in 10 µs.
const RATE_BPS: u64 = 819_200_000;
const FLOWS: u16 = 8;

/// An Ethernet + IPv4 + UDP frame of 1000 bytes from port `sport`, ECT(0) if `ect`.
fn frame(sport: u16, ect: bool) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend([0x08, 0x00, 0x45, if ect { 0x02 } else { 0 }, 0x03, 0xda]);
    f.extend([0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(sport.to_be_bytes());
    f.extend([0x69, 0x87, 0x03, 0xc6, 0, 0]);
    f.resize(1000, 0x5a);
    f
}

fn saturated(c: &mut Criterion) {
    let mut group = c.benchmark_group("aqm/saturated");
    let disciplines = [
        Discipline::Tail,
        Discipline::Codel,
        Discipline::FqCodel,
        Discipline::Pie,
    ];
    for (discipline, ecn) in disciplines
        .into_iter()
        .map(|d| (d, false))
        .chain([(Discipline::Codel, true), (Discipline::Pie, true)])
    {
        let config = LinkConfig {
            rate_bps: Some(RATE_BPS),
            aqm: Aqm {
                discipline,
                ecn,
                ..Aqm::default()
            },
            ..LinkConfig::default()
        };
        let frames: Vec<Vec<u8>> = (0..FLOWS).map(|i| frame(1000 + i, ecn)).collect();
        let mut pipe = Pipe::new(config, 0).unwrap();
        let mut now = 0;
        let mut i = 0;
        let name = format!("{}{}", discipline.name(), if ecn { "+ecn" } else { "" });
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                now += GAP_NS;
                i += 1;
                pipe.handle_arrival(now, black_box(&frames[i % frames.len()]));
                while let Some(departure) = pipe.poll_departure(now) {
                    black_box(departure.frame());
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, saturated);
criterion_main!(benches);
