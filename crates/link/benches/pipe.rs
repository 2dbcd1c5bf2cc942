//! Per-frame cost of the emulator's hot path: one frame into a pipe and, when due, out of it,
//! against the link model alone (the fate without the frame). Benchmark ids carry the frame
//! size and the frames held, e.g. `pipe/through/64B/held500`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use latlab_link::{Fate, Link, LinkConfig, Pipe};

const SIZES: [usize; 2] = [64, 1500];
/// Frames held in the queue in steady state: none (no delay), 500 or 20,000 (the delay is that
/// many gaps: 2.5 ms and 100 ms).
const HELD: [u64; 3] = [0, 500, 20_000];
/// Time between arrivals: 5 µs, 200 kpps.
const GAP_NS: u64 = 5_000;

fn config(held: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: held * GAP_NS,
        // Room for every frame the delay holds (the default limit is netem's 1,000).
        limit_frames: Some(2 * held as usize + 1_000),
        ..LinkConfig::default()
    }
}

fn through_pipe(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipe/through");
    for size in SIZES {
        for held in HELD {
            let frame = vec![0x5au8; size];
            let mut pipe = Pipe::new(config(held), 0).unwrap();
            let mut now = 0;
            group.throughput(Throughput::Elements(1));
            group.bench_with_input(
                BenchmarkId::from_parameter(format!("{size}B/held{held}")),
                &frame,
                |b, frame| {
                    b.iter(|| {
                        now += GAP_NS;
                        pipe.handle_arrival(now, black_box(frame));
                        while let Some(departure) = pipe.poll_departure(now) {
                            black_box(departure.frame());
                        }
                    })
                },
            );
        }
    }
    group.finish();
}

fn link_alone(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipe/link_alone");
    for size in SIZES {
        let mut link = Link::new(config(0), 0).unwrap();
        let mut now = 0;
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{size}B")),
            &size,
            |b, &size| {
                b.iter(|| {
                    now += GAP_NS;
                    if let Fate::Deliver { .. } = link.handle_arrival(now, black_box(size)) {
                        link.handle_departure(now, size);
                    }
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, through_pipe, link_alone);
criterion_main!(benches);
