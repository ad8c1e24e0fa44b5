//! The end of a run and its progress, at the library level on a real redis-server: a critical
//! section still inside after the drain grace is counted as cut (and a run whose every section
//! was cut is `unknown`, not `valid`); a chaos scenario reports its progress (elapsed /
//! duration and the active faults) about once a second.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::node::start_topology;
use lockbench::checker::Verdict;
use lockbench::driver::{self, DriverContext, HoldTime, Pacing, StopCondition, Workload};
use lockbench::node::ConnectOptions;
use lockbench::orchestration::experiment::{self, Nemesis, NemesisStart};
use lockbench::orchestration::runner::{Progress, Runner};
use lockbench::orchestration::scenario::Scenario;
use lockbench::results::RunDir;
use lockbench::strategy::{StrategyKind, StrategyOptions};
use lockbench::topology::TopologyKind;

/// Pauses client 0 at the start and never resumes it: it stalls inside its first section.
fn pause_forever() -> Nemesis {
    Box::new(|n: NemesisStart| {
        Box::pin(async move {
            n.controls.set_paused(0, true);
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_section_stalled_past_the_grace_is_cut_counted_and_not_valid() {
    let dir = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Single, &dir.path().join("nodes")).await;
    let workload = Workload {
        clients: 1,
        resources: 1,
        hold: HoldTime::Fixed(Duration::from_millis(200)),
        stop: StopCondition::Duration(Duration::from_millis(300)),
        pacing: Pacing::Closed,
        seed: 1,
        shared_connection: false,
        in_flight: Workload::DEFAULT_IN_FLIGHT,
        adapter_processes: None,
        work: lockbench::driver::WorkKind::Row,
        idempotency_key: false,
    };
    assert_eq!(driver::drain_grace(&workload), Duration::from_secs(3));
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let ctx = DriverContext {
        endpoints: topology.endpoints(),
        client_endpoints: Vec::new(),
        connect: ConnectOptions::default(),
        workload,
        shutdown,
        connect_progress: None,
    };
    let mut opts = StrategyOptions::new(StrategyKind::Single, Duration::from_secs(5));
    opts.key_prefix = "cut:".into();
    let out = dir.path().join("run");
    let started = std::time::Instant::now();
    let exp = experiment::run(&ctx, &opts, &out, true, Some(pause_forever()), |_, _| {})
        .await
        .unwrap();
    let took = started.elapsed();
    topology.shutdown().await;
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(exp.run.cut_sections, 1);
    let report = exp.check.unwrap();
    assert_eq!(report.stats.sections, 1);
    assert_eq!(report.verdict, Verdict::Unknown, "{report:?}");
    assert!(
        report.unknown_reasons[0].contains("every critical section (1) was cut"),
        "{:?}",
        report.unknown_reasons
    );

    // Writing into the same directory again is refused before anything is touched.
    let history = std::fs::read(out.join("history.jsonl")).unwrap();
    let err = experiment::run(&ctx, &opts, &out, true, None, |_, _| {})
        .await
        .err()
        .expect("an occupied directory is refused")
        .to_string();
    assert!(err.contains("refusing to overwrite"), "{err}");
    assert_eq!(std::fs::read(out.join("history.jsonl")).unwrap(), history);
}

const PAUSE: &str = r#"claim = "progress shows the active fault"
topology = "single"
strategies = ["single"]

[workload]
clients = 2
resources = 1
hold = "5ms"
ttl = "2s"
duration = "3s"
retry_attempts = 1
retry_delay = "10ms"
retry_jitter = "5ms"

[[nemesis]]
at = "500ms"
duration = "2s"
fault = "client-pause"
target = "client:0"
"#;

/// What the progress callback saw, owned.
#[derive(Debug, Clone)]
enum Seen {
    Strategy(String),
    Tick {
        elapsed: Duration,
        duration: Duration,
        faults: Vec<String>,
    },
    Other,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_progress_names_elapsed_duration_and_active_faults() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = Scenario::parse(PAUSE, Path::new("pause.toml")).unwrap();
    let dir = RunDir::create(tmp.path(), &scenario.name).unwrap();
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let outcome = Runner::local(shutdown)
        .run(&scenario.to_test(), &dir, move |e| {
            let s = match e {
                Progress::Strategy(name) => Seen::Strategy(name.to_string()),
                Progress::Tick {
                    elapsed,
                    duration,
                    active_faults,
                    ..
                } => Seen::Tick {
                    elapsed,
                    duration: duration.expect("a timed run"),
                    faults: active_faults.to_vec(),
                },
                Progress::Containers(_) => Seen::Other,
            };
            sink.lock().unwrap().push(s);
        })
        .await
        .unwrap();
    assert!(!outcome.interrupted);
    let seen = seen.lock().unwrap().clone();
    assert!(
        matches!(&seen[0], Seen::Strategy(n) if n == "single"),
        "{seen:?}"
    );
    let ticks: Vec<(Duration, Duration, Vec<String>)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Tick {
                elapsed,
                duration,
                faults,
            } => Some((*elapsed, *duration, faults.clone())),
            _ => None,
        })
        .collect();
    assert!(ticks.len() >= 2, "{seen:?}");
    assert!(ticks
        .iter()
        .all(|(e, d, _)| *d == Duration::from_secs(3) && *e <= Duration::from_secs(4)));
    assert!(
        ticks
            .iter()
            .any(|(_, _, f)| f.iter().any(|x| x.starts_with("client-pause client:0"))),
        "no tick showed the pause: {ticks:?}"
    );
    let (last_elapsed, _, last_faults) = ticks.last().unwrap();
    assert!(*last_elapsed >= Duration::from_millis(2900), "{ticks:?}");
    assert!(
        last_faults.is_empty(),
        "healed faults still shown: {ticks:?}"
    );
}
