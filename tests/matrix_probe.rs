//! The uncontended probe ([`lockbench::matrix::probe::run_probe`]) on a real
//! local redis-server: one client, no hold, `single`'s home topology, through the one runner.

mod common;

use std::time::Instant;

use common::process::assert_none_running_under;
use lockbench::matrix::probe::{run_probe, PROBE_ACQUIRES};
use lockbench::orchestration::runner::Backend;
use lockbench::strategy::StrategyKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probing_single_measures_uncontended_acquires_on_one_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let p = run_probe(StrategyKind::Single, &Backend::Local, tmp.path(), shutdown).await;
    eprintln!("probe of single took {:?}: {p:?}", started.elapsed());
    assert_eq!(p.error, None);
    assert_eq!(
        (p.strategy.as_str(), p.topology.as_str()),
        ("single", "single")
    );
    assert_eq!(p.servers, 1);
    // One uncontended client: every attempt succeeds (a rare node timeout aside).
    assert!(
        p.acquires > PROBE_ACQUIRES * 9 / 10 && p.acquires <= PROBE_ACQUIRES,
        "{p:?}"
    );
    assert!(0 < p.p50_us && p.p50_us <= p.p99_us, "{p:?}");
    // An uncontended acquire on a local node is one round trip: far below the 100 ms node
    // timeout.
    assert!(p.p99_us < 100_000, "{p:?}");
    assert_eq!(p.dir, "probes/single");
    let dir = tmp.path().join(&p.dir);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed");
    let s = &summary["strategies"][0];
    assert_eq!(s["acquired"], p.acquires);
    assert_eq!(s["acquire_ok"]["p50_us"], p.p50_us);
    assert_eq!(s["acquire_ok"]["p99_us"], p.p99_us);
    assert_none_running_under(&dir);
}
