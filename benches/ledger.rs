//! The audit's cost per critical section: how long the ledger thread takes to apply and
//! commit one section (begin, read, write, end), without any lock or network in the way.
//!
//! `cargo bench --bench ledger` queues 50,000 sections (each [`Ledger::enter`] +
//! [`Ledger::leave`], the driver's calls) on a fresh ledger and times until
//! [`Ledger::close`] returns, i.e. every step committed. Two shapes: 100,000 resources (the
//! uncontended benchmark of `scripts/bench-compare.sh`: scattered pages in every commit)
//! and 8 resources (a contended workload), unfenced and fenced. Reported per iteration; divide
//! by 50,000 for µs per section (BENCHMARKS.md does).

mod common;

use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use lockbench::history::RunClock;
use lockbench::ledger::{FenceMode, Ledger, SectionRef};

const SECTIONS: u64 = 50_000;

/// Queues `SECTIONS` sections over `resources` resources and waits until all are committed.
fn one_run(resources: u64, mode: FenceMode) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger =
        Ledger::open(dir.path().join("ledger.sqlite"), mode, RunClock::start()).expect("ledger");
    // A fixed LCG: the same resource sequence in every iteration.
    let mut x: u64 = 1;
    let started = Instant::now();
    for id in 0..SECTIONS {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let section = SectionRef {
            section_id: id,
            client: (id % 64) as u32,
            resource: format!("r{}", (x >> 33) % resources),
            fencing_token: (mode == FenceMode::Fenced).then_some(id + 1),
            idempotency_key: None,
        };
        ledger.enter(&section);
        ledger.leave(&section);
    }
    ledger.close().expect("ledger closes");
    let took = started.elapsed();
    assert_eq!(ledger.failed_steps(), 0, "every step must commit");
    took
}

fn bench_ledger(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger_50k_sections");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, resources, mode) in [
        ("100k_resources_unfenced", 100_000, FenceMode::Unfenced),
        ("100k_resources_fenced", 100_000, FenceMode::Fenced),
        ("8_resources_unfenced", 8, FenceMode::Unfenced),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| one_run(resources, mode)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, bench_ledger);

fn main() {
    common::register_plot_font();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
