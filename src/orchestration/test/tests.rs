use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::driver::{HoldTime, Pacing, StopCondition, Workload};
use crate::nemesis::FaultStep;
use crate::node::TlsFiles;
use crate::strategy::StrategyKind;
use crate::topology::{Persistence, TopologyKind};

fn test() -> Test {
    Test {
        name: "t".into(),
        claim: None,
        description: String::new(),
        topology: TopologySpec {
            kind: TopologyKind::Single,
            urls: vec![],
            persistence: Persistence::None,
            key_prefix: defaults::KEY_PREFIX.into(),
            direct: false,
            pooler: None,
            pg_settings: Vec::new(),
            cluster: None,
            tls: TlsFiles::default(),
            cluster_seeds: Vec::new(),
        },
        strategies: vec![StrategyKind::Single],
        client: ClientSpec {
            node_timeout: Duration::from_millis(50),
            ..ClientSpec::with_ttl(Duration::from_secs(1))
        },
        workload: Workload {
            clients: 4,
            resources: 4,
            hold: HoldTime::Fixed(Duration::ZERO),
            stop: StopCondition::Duration(Duration::from_secs(2)),
            pacing: Pacing::Closed,
            seed: 1,
            shared_connection: false,
            in_flight: Workload::DEFAULT_IN_FLIGHT,
            adapter_processes: None,
            work: crate::driver::WorkKind::Row,
            idempotency_key: false,
        },
        nemesis: vec![],
        checker: CheckerSpec { audit: true },
        expect: BTreeMap::new(),
        workers: None,
        ledger: None,
        docker: None,
    }
}

#[test]
fn repeats_zero_retries_and_empty_external_prefix_are_rejected() {
    assert!(test().validate().is_ok());
    let mut c = test();
    c.strategies = vec![
        StrategyKind::Single,
        StrategyKind::Redlock,
        StrategyKind::Single,
    ];
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("--strategy lists single twice"), "{e}");
    let mut c = test();
    c.client.retry.attempts = 0;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--retry-attempts"));
    let mut c = test();
    c.topology.kind = TopologyKind::External;
    c.topology.urls = vec!["redis://127.0.0.1:6379".into()];
    c.topology.key_prefix = String::new();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--key-prefix"));
    // Local nodes are lockbench's own: an empty prefix is allowed there.
    let mut c = test();
    c.topology.key_prefix = String::new();
    assert!(c.validate().is_ok());
}

#[test]
fn config_json_never_holds_a_password() {
    let mut c = test();
    c.topology.kind = TopologyKind::External;
    c.topology.urls = vec!["redis://alice:hunter2@127.0.0.1:6379".into()];
    let text = serde_json::to_string(&c).unwrap();
    assert!(
        !text.contains("hunter2") && text.contains("alice:***"),
        "{text}"
    );
    // Read back, the redacted URL is refused with what to do.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, &text).unwrap();
    let e = Test::load(&path).unwrap_err().to_string();
    assert!(e.contains("never stores passwords"), "{e}");
}

#[test]
fn a_test_reads_back_equal_from_its_json() {
    let mut t = test();
    t.claim = Some("c".into());
    t.workload.pacing = Pacing::Open { rate_per_s: 250.0 };
    t.client.retry.acquire_timeout = Some(Duration::from_millis(700));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&t).unwrap()).unwrap();
    assert_eq!(Test::load(&path).unwrap(), t);
    std::fs::write(&path, "{\"name\": \"x\"}\n").unwrap();
    let e = Test::load(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: not a lockbench test", path.display())),
        "{e}"
    );
}

#[test]
fn each_strategy_gets_its_own_key_prefix_and_trials_their_own_seed() {
    let t = test();
    assert_eq!(
        t.strategy_options(StrategyKind::Redlock).key_prefix,
        "lockbench:redlock:"
    );
    assert_eq!(t.trial(1), t);
    assert_eq!(t.trial(3).workload.seed, 3);
}

#[test]
fn a_config_json_past_the_bounds_is_refused_naming_the_flag() {
    let huge = Duration::from_millis(u64::MAX);
    let mut t = test();
    t.client.ttl = huge;
    let e = t.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("--ttl ") && e.contains("longer than 24h"),
        "{e}"
    );
    let mut t = test();
    t.workload.stop = StopCondition::Duration(huge);
    let e = t.validate().unwrap_err().to_string();
    assert!(e.starts_with("--duration "), "{e}");
    let mut t = test();
    let mut step = FaultStep::new(
        crate::nemesis::FaultKind::ClientPause,
        crate::nemesis::Target::Clients(vec![0]),
    );
    step.duration = Some(huge);
    t.nemesis = vec![step];
    let e = t.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("nemesis[0] (client-pause): `duration` = ") && e.contains("24h"),
        "{e}"
    );
}

#[test]
fn a_client_crash_of_adapter_clients_sharing_one_process_is_refused() {
    let mut t = test();
    t.strategies = vec![StrategyKind::AdapterRedisPy];
    t.workload.shared_connection = true;
    let crash = FaultStep::new(
        crate::nemesis::FaultKind::ClientCrash,
        crate::nemesis::Target::Clients(vec![0]),
    );
    t.nemesis = vec![crash.clone()];
    let e = t.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("--shared-connection with adapter:redis-py and a client-crash"),
        "{e}"
    );
    // A pause would SIGSTOP the shared process, stalling every client: refused too.
    t.nemesis = vec![FaultStep::new(
        crate::nemesis::FaultKind::ClientPause,
        crate::nemesis::Target::Clients(vec![0]),
    )];
    let e = t.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("--shared-connection with adapter:redis-py and a client-pause"),
        "{e}"
    );
    t.nemesis = vec![crash.clone()];
    // Each client with its own process, or a built-in strategy: accepted.
    t.workload.shared_connection = false;
    assert!(t.validate().is_ok(), "{:?}", t.validate());
    t.workload.shared_connection = true;
    t.strategies = vec![StrategyKind::Single];
    assert!(t.validate().is_ok(), "{:?}", t.validate());
}

#[test]
fn faults_on_one_clients_process_are_refused_when_adapter_processes_serve_several() {
    let mut t = test();
    t.strategies = vec![StrategyKind::AdapterRedisPy];
    t.workload.adapter_processes = Some(2);
    for kind in [
        crate::nemesis::FaultKind::ClientCrash,
        crate::nemesis::FaultKind::ClientPause,
    ] {
        t.nemesis = vec![FaultStep::new(
            kind,
            crate::nemesis::Target::Clients(vec![0]),
        )];
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "--adapter-processes 2 with adapter:redis-py, 4 clients and a {}",
                kind.name()
            )),
            "{e}"
        );
    }
    // One process per client, a built-in strategy, or a fault on the nodes: accepted.
    t.workload.adapter_processes = Some(4);
    assert!(t.validate().is_ok(), "{:?}", t.validate());
    t.workload.adapter_processes = Some(2);
    t.strategies = vec![StrategyKind::Single];
    assert!(t.validate().is_ok(), "{:?}", t.validate());
    t.strategies = vec![StrategyKind::AdapterRedisPy];
    t.nemesis = vec![FaultStep::new(
        crate::nemesis::FaultKind::Kill,
        crate::nemesis::Target::AllNodes,
    )];
    assert!(t.validate().is_ok(), "{:?}", t.validate());
}

#[test]
fn direct_runs_take_no_faults() {
    let mut t = test();
    t.topology.direct = true;
    t.nemesis = vec![FaultStep::new(
        crate::nemesis::FaultKind::Kill,
        crate::nemesis::Target::AllNodes,
    )];
    let e = t.validate().unwrap_err().to_string();
    assert!(e.contains("--direct"), "{e}");
}

#[test]
fn warns_about_hold_past_ttl_or_run_and_tiny_rates() {
    assert!(test().warnings().is_empty());
    let mut c = test();
    c.workload.hold = HoldTime::Fixed(Duration::from_secs(3));
    let w = c.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("leases will expire inside the critical section"));
    assert!(w[1].contains("not shorter than the run"));
    c.client.watchdog = true;
    assert_eq!(c.warnings().len(), 1, "the watchdog renews: no TTL warning");
    let mut c = test();
    c.workload.pacing = Pacing::Open { rate_per_s: 0.5 };
    let w = c.warnings();
    assert!(w[0].contains("starts about 1 attempt(s)"), "{w:?}");
}

#[test]
fn no_in_flight_limit_for_thousands_of_clients_is_named() {
    let mut t = test();
    t.workload.in_flight = 0;
    assert!(t.warnings().is_empty(), "4 clients never queue");
    t.workload.clients = 5000;
    let w = t.warnings();
    assert!(
        w.iter()
            .any(|w| w.starts_with("--in-flight 0 lets all 5000 clients acquire at once")),
        "{w:?}"
    );
}

#[test]
fn persistence_on_a_server_that_is_not_redis_is_named() {
    let mut t = test();
    t.topology.persistence = Persistence::AofAlways;
    assert!(t.warnings().is_empty(), "redis nodes take it");
    t.topology.kind = TopologyKind::Postgres;
    t.strategies = vec![StrategyKind::PgAdvisory];
    let w = t.warnings();
    assert!(
        w.iter().any(|w| w
            .starts_with("--persistence aof-always applies to the Redis nodes lockbench starts; topology postgres ignores it")),
        "{w:?}"
    );
}

#[test]
fn a_watchdog_with_nothing_to_watch_is_named() {
    let mut t = test();
    t.strategies = vec![StrategyKind::NoTtl, StrategyKind::PgAdvisory];
    t.client.watchdog = true;
    let w = t.warnings();
    assert!(
        w.iter()
            .any(|w| w.starts_with("--watchdog with no-ttl: its lock has no TTL")),
        "{w:?}"
    );
    assert!(!w.iter().any(|w| w.contains("pg-advisory")), "{w:?}");
}

#[test]
fn workers_split_the_descriptor_budget_and_the_refusal_names_the_process_that_overflows() {
    let limit = crate::topology::limits::NofileLimit {
        soft: 20_000,
        hard: 20_000,
    };
    let mut t = test();
    t.topology.kind = TopologyKind::Single;
    t.strategies = vec![StrategyKind::Single];
    let check = |t: &Test, clients: u32, workers: u32| {
        let mut t = t.clone();
        t.workload.clients = clients;
        t.check_split_descriptor_budget(workers, limit)
            .map_err(|p| p.with_flag())
    };
    // Proxied: the coordinator's proxy holds 2 per client, (20,000 - 256) / 2 = 9,872.
    assert!(check(&t, 9_872, 6).is_ok());
    let e = check(&t, 9_873, 6).unwrap_err();
    assert!(
        e.contains("embedded proxy") && e.contains("at most 9872"),
        "{e}"
    );
    assert!(e.contains("--direct"), "{e}");
    // Direct: the node holds one per client, 20,000 - 32.
    t.topology.direct = true;
    assert!(check(&t, 19_968, 6).is_ok());
    let e = check(&t, 19_969, 6).unwrap_err();
    assert!(
        e.contains("a local node") && e.contains("at most 19968"),
        "{e}"
    );
    // External nodes: only the workers count: 6 x 19,744.
    t.topology.kind = TopologyKind::External;
    t.topology.urls = vec!["redis://10.0.0.1:6379".into()];
    assert!(check(&t, 118_464, 6).is_ok());
    let e = check(&t, 118_465, 6).unwrap_err();
    assert!(e.contains("each worker (19745 clients)"), "{e}");
}
