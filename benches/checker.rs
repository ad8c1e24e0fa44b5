//! Checking a 1M-op history (plus its 1M-event ledger) must take < 2 s with bounded memory.
//!
//! `cargo bench --bench checker` writes a synthetic serial run (1M history ops, 250k sections,
//! 1M ledger events, 64 clients, 16 resources) once into a temp dir, then times
//! [`lockbench::checker::check`] on it. It also checks a 100k-op run and prints the process's
//! peak RSS after each size, so bounded memory shows as a peak that does not grow 10×.
//! `LOCKBENCH_BENCH_OPS` overrides the large size.
//!
//! `check_external` times the same check with rule 7 (`external` work): a `sink.sqlite` with
//! one charge per section of the 1M-op run (250k jobs), read on a third thread and judged
//! against the sections of the ledger's one pass; `LOCKBENCH_BENCH_JOBS` sets the jobs (4
//! history ops per job).

mod common;

use std::time::Duration;

use criterion::{criterion_group, Criterion};
use lockbench::checker::synthetic::{write_synthetic_run, write_synthetic_sink, SyntheticSpec};
use lockbench::checker::{check, check_with_sink, CheckOptions, Verdict};

fn peak_rss_mib() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

fn bench_check(c: &mut Criterion) {
    let big: u64 = std::env::var("LOCKBENCH_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let mut group = c.benchmark_group("check");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for ops in [100_000, big] {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = SyntheticSpec {
            ops,
            ..SyntheticSpec::default()
        };
        let run = write_synthetic_run(dir.path(), &spec).expect("synthetic run");
        let opts = CheckOptions::default();
        let report = check(&run.history_path, Some(&run.ledger_path), &opts).expect("check");
        assert_eq!(report.verdict, Verdict::Valid, "{:?}", report.anomalies);
        assert_eq!(report.stats.history_events, run.history_ops);
        assert_eq!(report.stats.ledger_events, run.ledger_events);
        group.bench_function(format!("{ops}_ops"), |b| {
            b.iter(|| check(&run.history_path, Some(&run.ledger_path), &opts).expect("check"))
        });
        eprintln!(
            "check {ops} ops: history {} MiB, ledger {} MiB, peak RSS so far {:.1} MiB",
            std::fs::metadata(&run.history_path).map_or(0, |m| m.len() >> 20),
            std::fs::metadata(&run.ledger_path).map_or(0, |m| m.len() >> 20),
            peak_rss_mib()
        );
    }
    group.finish();
}

fn bench_check_external(c: &mut Criterion) {
    let jobs: u64 = std::env::var("LOCKBENCH_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250_000);
    let mut group = c.benchmark_group("check_external");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = SyntheticSpec {
        ops: jobs * 4,
        ..SyntheticSpec::default()
    };
    let run = write_synthetic_run(dir.path(), &spec).expect("synthetic run");
    let sink = dir.path().join("sink.sqlite");
    let requests = write_synthetic_sink(&run.ledger_path, &sink, 0).expect("synthetic sink");
    assert_eq!(requests, jobs);
    let opts = CheckOptions::default();
    let report = check_with_sink(
        &run.history_path,
        Some(&run.ledger_path),
        Some(&sink),
        &opts,
    )
    .expect("check");
    assert_eq!(report.verdict, Verdict::Valid, "{:?}", report.anomalies);
    let effects = report.stats.effects.expect("rule 7 ran");
    assert_eq!((effects.charges, effects.jobs_charged), (jobs, jobs));
    group.bench_function(format!("{jobs}_jobs"), |b| {
        b.iter(|| {
            check_with_sink(
                &run.history_path,
                Some(&run.ledger_path),
                Some(&sink),
                &opts,
            )
            .expect("check")
        })
    });
    eprintln!(
        "check_external {jobs} jobs: sink {} MiB, peak RSS so far {:.1} MiB",
        std::fs::metadata(&sink).map_or(0, |m| m.len() >> 20),
        peak_rss_mib()
    );
    group.finish();
}

criterion_group!(benches, bench_check, bench_check_external);

fn main() {
    common::register_plot_font();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
