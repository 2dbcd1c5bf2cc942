//! Cost of the hot-path operations: recording one sample and merging per-thread histograms.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use latlab_stats::LatencyHistogram;

fn record(c: &mut Criterion) {
    let mut group = c.benchmark_group("histogram/record/3sigfig");
    group.throughput(Throughput::Elements(1));
    let mut h = LatencyHistogram::new();
    group.bench_function("fixed_value", |b| {
        b.iter(|| h.record(black_box(12_345)));
    });
    let mut h = LatencyHistogram::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    group.bench_function("varying_value", |b| {
        b.iter(|| {
            // xorshift: values spread over 1 ns ..= ~16 ms, many buckets
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h.record(black_box(x >> 40));
        });
    });
    group.finish();
}

fn merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("histogram/merge/3sigfig");
    let mut other = LatencyHistogram::new();
    for i in 0..100_000u64 {
        other.record(1_000 + i * i % 50_000_000);
    }
    let mut target = LatencyHistogram::new();
    target.record(1_000);
    group.bench_function("two_populated", |b| {
        b.iter(|| {
            target
                .merge(black_box(&other))
                .expect("same precision: merge cannot fail");
        });
    });
    group.finish();
}

criterion_group!(benches, record, merge);
criterion_main!(benches);
