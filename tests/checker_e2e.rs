//! The checker against real Redis and the real ledger: faults the seeds describe must show up
//! as the anomalies docs/design.md names, and fenced strategies must come out valid.

mod common;

use std::path::Path;
use std::time::Duration;

use common::node::start_topology;
use lockbench::checker::{AnomalyKind, CheckReport, Liveness, Verdict};
use lockbench::driver::{DriverContext, HoldTime, Pacing, StopCondition, Workload};
use lockbench::node::ConnectOptions;
use lockbench::orchestration::experiment::{self, Nemesis, NemesisStart};
use lockbench::strategy::{RetryPolicy, StrategyKind, StrategyOptions};
use lockbench::topology::{Topology, TopologyKind};

struct Setup {
    _dir: tempfile::TempDir,
    topology: Option<Topology>,
    out: std::path::PathBuf,
}

impl Setup {
    async fn single() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let topology = start_topology(TopologyKind::Single, &dir.path().join("nodes")).await;
        let out = dir.path().join("run");
        Self {
            _dir: dir,
            topology: Some(topology),
            out,
        }
    }

    async fn run(
        &self,
        kind: StrategyKind,
        clients: u32,
        ttl: Duration,
        duration: Duration,
        nemesis: Nemesis,
    ) -> CheckReport {
        let (_tx, shutdown) = tokio::sync::watch::channel(false);
        let ctx = DriverContext {
            endpoints: self.topology.as_ref().unwrap().endpoints(),
            client_endpoints: Vec::new(),
            connect: ConnectOptions::default(),
            workload: Workload {
                clients,
                resources: 1,
                hold: HoldTime::Fixed(Duration::from_millis(10)),
                stop: StopCondition::Duration(duration),
                pacing: Pacing::Closed,
                seed: 7,
                shared_connection: false,
                in_flight: Workload::DEFAULT_IN_FLIGHT,
                adapter_processes: None,
                work: lockbench::driver::WorkKind::Row,
                idempotency_key: false,
            },
            shutdown,
            connect_progress: None,
        };
        let mut opts = StrategyOptions::new(kind, ttl);
        opts.key_prefix = format!("e2e:{kind}:");
        opts.retry = RetryPolicy {
            attempts: 1000,
            delay: Duration::from_millis(5),
            jitter: Duration::from_millis(5),
            acquire_timeout: Some(Duration::from_millis(500)),
        };
        let dir = self.out.join(kind.to_string());
        let outcome = experiment::run(&ctx, &opts, &dir, true, Some(nemesis), |_, _| {})
            .await
            .unwrap();
        assert!(dir.join("checker.json").exists());
        assert!(Path::new(&dir.join("ledger.sqlite")).exists());
        outcome.check.expect("audited run has a report")
    }

    async fn stop(mut self) {
        self.topology.take().unwrap().shutdown().await;
    }
}

/// Pauses `clients` (GC-like: they stall inside their next critical section and stop renewing)
/// from `at` for `length`.
fn pause(clients: &'static [usize], at: Duration, length: Duration) -> Nemesis {
    Box::new(move |n: NemesisStart| {
        Box::pin(async move {
            tokio::time::sleep_until(n.start + at).await;
            for &c in clients {
                n.controls.set_paused(c, true);
            }
            tokio::time::sleep(length).await;
            for &c in clients {
                n.controls.set_paused(c, false);
            }
        })
    })
}

fn crash(client: usize, at: Duration) -> Nemesis {
    Box::new(move |n: NemesisStart| {
        Box::pin(async move {
            tokio::time::sleep_until(n.start + at).await;
            n.controls.crash_while_holding(client);
        })
    })
}

fn count(r: &CheckReport, kind: AnomalyKind) -> usize {
    r.of_kind(kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_del_with_pauses_lets_three_holders_in() {
    let s = Setup::single().await;
    // Clients 0 and 1 stall while holding, one after the other, each past the 150 ms TTL;
    // client 2 then takes the lock too: three holders inside at once.
    let r = s
        .run(
            StrategyKind::NaiveDel,
            3,
            Duration::from_millis(150),
            Duration::from_secs(3),
            pause(
                &[0, 1],
                Duration::from_millis(200),
                Duration::from_millis(1300),
            ),
        )
        .await;
    s.stop().await;
    assert_eq!(r.verdict, Verdict::Invalid, "{:?}", r.stats);
    assert!(r.stats.mutex_violations > 0);
    assert!(
        r.stats.max_concurrent_holders >= 3,
        "max holders {}",
        r.stats.max_concurrent_holders
    );
    let v = r.of_kind(AnomalyKind::MutexViolation).next().unwrap();
    assert!(v.clients.len() >= 2 && v.holders.unwrap() >= 2, "{v:?}");
    assert!(
        r.stats.lost_updates > 0,
        "unfenced overlapping increments lose updates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ttl_with_crash_leaves_the_resource_stuck() {
    let s = Setup::single().await;
    let r = s
        .run(
            StrategyKind::NoTtl,
            2,
            Duration::from_millis(200),
            Duration::from_secs(3),
            crash(0, Duration::from_millis(300)),
        )
        .await;
    s.stop().await;
    assert_eq!(r.liveness, Liveness::Stuck, "{:?}", r.stats);
    assert_eq!(r.stats.stuck_resources, 1);
    assert_eq!(count(&r, AnomalyKind::StuckResource), 1);
    // Nothing unsafe happened: the lock simply never came back.
    assert_eq!(r.stats.mutex_violations, 0);
    assert!(
        r.stats.availability_pct < 80.0,
        "{}",
        r.stats.availability_pct
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_with_ttl_crash_recovers_and_stays_valid() {
    // Control for the test above: with a TTL the crashed holder's lock expires.
    let s = Setup::single().await;
    let r = s
        .run(
            StrategyKind::Single,
            2,
            Duration::from_millis(200),
            Duration::from_secs(2),
            crash(0, Duration::from_millis(300)),
        )
        .await;
    s.stop().await;
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
    assert_ne!(r.liveness, Liveness::Stuck);
    assert_eq!(r.stats.stuck_resources, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_past_ttl_breaks_single_but_fencing_rejects_the_stale_writes() {
    let s = Setup::single().await;
    // Client 0 stalls at its next critical section inside the window; the window is long
    // enough that it still stalls well past the 200 ms TTL even if it acquires late.
    let nemesis = || {
        pause(
            &[0],
            Duration::from_millis(300),
            Duration::from_millis(1200),
        )
    };
    let ttl = Duration::from_millis(200);
    let unfenced = s
        .run(
            StrategyKind::Single,
            2,
            ttl,
            Duration::from_millis(2500),
            nemesis(),
        )
        .await;
    let fenced = s
        .run(
            StrategyKind::SingleFenced,
            2,
            ttl,
            Duration::from_millis(2500),
            nemesis(),
        )
        .await;
    s.stop().await;

    assert_eq!(unfenced.verdict, Verdict::Invalid);
    assert!(unfenced.stats.mutex_violations > 0, "{:?}", unfenced.stats);
    assert_eq!(unfenced.stats.max_concurrent_holders, 2);

    assert_eq!(fenced.verdict, Verdict::Valid, "{:?}", fenced.anomalies);
    assert_eq!(fenced.stats.stale_writes_accepted, 0);
    assert!(
        fenced.stats.stale_writes_rejected >= 1,
        "{:?}",
        fenced.stats
    );
    assert_eq!(fenced.stats.mutex_violations, 0);
    assert_eq!(fenced.stats.lost_updates, 0);
    assert_eq!(
        count(&fenced, AnomalyKind::StaleWriteRejected) as u64,
        fenced.stats.stale_writes_rejected.min(100)
    );
}
