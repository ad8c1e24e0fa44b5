//! Benches of the pure Redlock arithmetic in `lockbench::strategy::quorum` (no I/O).
//!
//! | bench | what one iteration does |
//! |---|---|
//! | `quorum/quorum/n=1..7` | `quorum(n)` for n = 1..=7 (seven calls) |
//! | `quorum/clock_drift` | `clock_drift(10 s, 0.01)` |
//! | `quorum/validity` | `validity(10 s, 30 ms, 0.01)` (Some) |
//! | `quorum/decide/acquired` | 5 nodes, 3 locked: quorum reached, validity left |
//! | `quorum/decide/quorum-not-reached` | 5 nodes, 2 locked, 3 held elsewhere |
//! | `quorum/decide/validity-exhausted` | 5 nodes, 5 locked, 60 ms spent of a 50 ms TTL |
//!
//! Run: `cargo bench --bench quorum`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use lockbench::strategy::quorum::{clock_drift, decide, quorum, validity, Tally};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn quorum_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("quorum");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(1));
    g.nresamples(10_000);

    g.bench_function("quorum/n=1..7", |b| {
        b.iter(|| {
            let mut sum = 0;
            for n in 1..=7usize {
                sum += quorum(black_box(n));
            }
            sum
        })
    });
    g.bench_function("clock_drift", |b| {
        b.iter(|| clock_drift(black_box(MS(10_000)), black_box(0.01)))
    });
    g.bench_function("validity", |b| {
        b.iter(|| validity(black_box(MS(10_000)), black_box(MS(30)), black_box(0.01)))
    });
    let cases = [
        ("acquired", 3, 0, 2, MS(1_000), MS(10)),
        ("quorum-not-reached", 2, 3, 0, MS(1_000), MS(10)),
        ("validity-exhausted", 5, 0, 0, MS(50), MS(60)),
    ];
    for (name, locked, held, failed, ttl, elapsed) in cases {
        let tally = Tally {
            locked,
            held,
            failed,
        };
        g.bench_function(format!("decide/{name}"), |b| {
            b.iter(|| {
                decide(
                    black_box(5),
                    black_box(tally),
                    black_box(ttl),
                    black_box(elapsed),
                    black_box(0.01),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, quorum_benches);

fn main() {
    common::register_plot_font();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
