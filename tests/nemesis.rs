//! The nemesis against real redis-server processes behind the embedded Toxiproxy: each fault
//! must actually happen, heal must undo it, and nothing may be left running.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::nemesis::{direct, step, NemesisRig};
use common::process::assert_none_running_under;
use lockbench::history::{FaultWindow, RunClock};
use lockbench::nemesis::ClientControls;
use lockbench::nemesis::{run_schedule, FaultKind, Link, Nemesis, PartitionMode};
use lockbench::node::{ConnectOptions, NodeEndpoint};
use lockbench::orchestration::scenario::Scenario;
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::{Persistence, TopologyKind};

fn opts(response_ms: u64) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_millis(1000),
        response_timeout: Duration::from_millis(response_ms),
    }
}

async fn ping(conn: &mut redis::aio::MultiplexedConnection) -> Result<Duration, redis::RedisError> {
    let t = Instant::now();
    let _: String = redis::cmd("PING").query_async(conn).await?;
    Ok(t.elapsed())
}

fn proxied_n1(n: &Nemesis) -> NodeEndpoint {
    n.proxied().node_endpoints()[0].clone()
}

#[tokio::test]
async fn latency_fault_slows_ping_and_heal_restores_it() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut conn = proxied_n1(&r.nemesis).connect(&opts(2000)).await.unwrap();
    let mut s = step(FaultKind::Latency, "n1");
    s.latency = Some(Duration::from_millis(50));
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    assert_eq!(rec.kind, "latency");
    assert_eq!(rec.targets, vec!["n1"]);
    assert!(rec.end_us.is_none());
    assert!(
        rec.detail.starts_with("latency = 50ms; latency 50ms"),
        "the window carries the step's parameters: {}",
        rec.detail
    );
    let slow = ping(&mut conn).await.unwrap();
    assert!(slow >= Duration::from_millis(50), "{slow:?}");
    let healed = r.nemesis.heal(rec.id).await.unwrap().unwrap();
    assert!(healed.end_us.is_some());
    let fast = ping(&mut conn).await.unwrap();
    assert!(fast < Duration::from_millis(10), "{fast:?}");
    assert!(r
        .nemesis
        .proxied()
        .api()
        .toxics("n1")
        .await
        .unwrap()
        .is_empty());
    r.finish().await;
}

/// A scenario whose one step is a 50 KB/s `bandwidth` on n1 (the step as a file writes it).
const BANDWIDTH_SCENARIO: &str = r#"claim = "a slow link"
topology = "single"
strategies = ["single"]

[workload]
clients = 1
resources = 1
hold = "1ms"
ttl = "500ms"
duration = "5s"

[[nemesis]]
at = "1s"
duration = "2s"
fault = "bandwidth"
target = "n1"
rate = 50
"#;

#[tokio::test]
async fn bandwidth_fault_slows_a_large_reply_and_heal_restores_it() {
    // The step comes from a scenario file, checked as every scenario is.
    let scenario = Scenario::parse(BANDWIDTH_SCENARIO, Path::new("bandwidth.toml")).unwrap();
    let s = scenario.nemesis[0].clone();
    assert_eq!((s.fault, s.rate), (FaultKind::Bandwidth, Some(50)));
    let zero = BANDWIDTH_SCENARIO.replace("rate = 50", "rate = 0");
    let e = Scenario::parse(&zero, Path::new("zero.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`rate` = 0"), "{e}");
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut conn = proxied_n1(&r.nemesis).connect(&opts(5000)).await.unwrap();
    let value = "x".repeat(50_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query_async(&mut conn)
        .await
        .unwrap();
    let get = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let t = Instant::now();
            let got: String = redis::cmd("GET")
                .arg("big")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(got.len(), 50_000);
            t.elapsed()
        }
    };
    let fast = get(&mut conn).await;
    assert!(fast < Duration::from_millis(300), "{fast:?}");
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    assert_eq!(
        (rec.kind.as_str(), rec.targets.clone()),
        ("bandwidth", vec!["n1".to_string()])
    );
    assert!(rec.end_us.is_none());
    assert_eq!(
        rec.detail, "duration = 2s, rate = 50; bandwidth 50 KB/s downstream",
        "the window carries the step's parameters"
    );
    let toxics = r.nemesis.proxied().api().toxics("n1").await.unwrap();
    assert_eq!(toxics.len(), 1, "{toxics:?}");
    // 50,000 bytes at 50 KB/s: about one second.
    let slow = get(&mut conn).await;
    assert!(slow >= Duration::from_millis(800), "{slow:?}");
    let healed = r.nemesis.heal(rec.id).await.unwrap().unwrap();
    assert!(healed.end_us.is_some());
    assert!(r
        .nemesis
        .proxied()
        .api()
        .toxics("n1")
        .await
        .unwrap()
        .is_empty());
    let fast = get(&mut conn).await;
    assert!(fast < Duration::from_millis(300), "{fast:?}");
    r.finish().await;
}

#[tokio::test]
async fn blackhole_partition_times_out_at_the_response_timeout() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut conn = proxied_n1(&r.nemesis).connect(&opts(300)).await.unwrap();
    ping(&mut conn).await.unwrap();
    let mut s = step(FaultKind::Partition, "n1");
    s.mode = Some(PartitionMode::Blackhole);
    s.duration = Some(Duration::from_secs(1));
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    let t = Instant::now();
    let err = ping(&mut conn).await.unwrap_err();
    let waited = t.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(800),
        "{waited:?}"
    );
    r.nemesis.heal(rec.id).await.unwrap();
    let mut fresh = proxied_n1(&r.nemesis).connect(&opts(300)).await.unwrap();
    ping(&mut fresh).await.unwrap();
    r.finish().await;
}

#[tokio::test]
async fn refuse_partition_refuses_connections_until_healed() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut s = step(FaultKind::Partition, "all");
    s.mode = Some(PartitionMode::Refuse);
    s.duration = Some(Duration::from_secs(1));
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    let err = proxied_n1(&r.nemesis)
        .connect(&opts(300))
        .await
        .expect_err("refused");
    assert!(err.is_connection_refusal(), "{err}");
    r.nemesis.heal(rec.id).await.unwrap();
    let mut conn = proxied_n1(&r.nemesis).connect(&opts(300)).await.unwrap();
    ping(&mut conn).await.unwrap();
    r.finish().await;
}

async fn kill_restart_keeps_key(persistence: Persistence) -> Option<String> {
    let mut r = NemesisRig::start_with(TopologyKind::Single, persistence).await;
    let controls = ClientControls::new(0);
    let n1 = direct(&r.nemesis, "n1");
    let mut conn = n1.connect(&opts(1000)).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockbench:k")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    let rec = r
        .nemesis
        .inject(&step(FaultKind::Kill, "n1"), &controls)
        .await
        .unwrap();
    assert!(!r
        .nemesis
        .proxied_mut()
        .topology_mut()
        .node_mut("n1")
        .unwrap()
        .is_running());
    r.nemesis.heal(rec.id).await.unwrap();
    assert!(r
        .nemesis
        .proxied_mut()
        .topology_mut()
        .node_mut("n1")
        .unwrap()
        .is_running());
    let mut conn = n1.connect(&opts(1000)).await.unwrap();
    let v: Option<String> = redis::cmd("GET")
        .arg("lockbench:k")
        .query_async(&mut conn)
        .await
        .unwrap();
    r.finish().await;
    v
}

#[tokio::test]
async fn kill_restart_loses_keys_without_persistence_and_keeps_them_with_aof() {
    assert_eq!(kill_restart_keeps_key(Persistence::None).await, None);
    assert_eq!(
        kill_restart_keeps_key(Persistence::AofAlways)
            .await
            .as_deref(),
        Some("v")
    );
}

#[tokio::test]
async fn paused_node_answers_only_after_resume() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut conn = proxied_n1(&r.nemesis).connect(&opts(5000)).await.unwrap();
    let mut s = step(FaultKind::PauseNode, "n1");
    s.duration = Some(Duration::from_secs(1));
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    let mut pending = Box::pin(async move { ping(&mut conn).await });
    assert!(
        tokio::time::timeout(Duration::from_millis(400), &mut pending)
            .await
            .is_err(),
        "a SIGSTOPped node answered"
    );
    r.nemesis.heal(rec.id).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(3), pending)
        .await
        .expect("answer after SIGCONT");
    answered.unwrap();
    r.finish().await;
}

#[tokio::test]
async fn clock_jump_shortens_leases_by_delta_and_expires_shorter_ones() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let n1 = direct(&r.nemesis, "n1");
    let mut conn = n1.connect(&opts(1000)).await.unwrap();
    // A real lease (10 s) and a short one (1 s).
    let mut o = StrategyOptions::new(StrategyKind::Single, Duration::from_secs(10));
    o.node_timeout = Duration::from_millis(500);
    let client = LockClient::connect(&r.nemesis.proxied().endpoints(), o, &opts(1000))
        .await
        .unwrap();
    let lease = client.acquire("r").await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockbench:short")
        .arg("x")
        .arg("PX")
        .arg(1000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockbench:forever")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before: i64 = redis::cmd("PTTL")
        .arg("lockbench:lock:r")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut s = step(FaultKind::ClockJump, "n1");
    s.delta = Some(Duration::from_secs(3));
    let rec = r.nemesis.inject(&s, &controls).await.unwrap();
    assert!(rec.end_us.is_some(), "clock jump is instant");
    assert!(rec.detail.contains("deleted 1"), "{}", rec.detail);
    let after: i64 = redis::cmd("PTTL")
        .arg("lockbench:lock:r")
        .query_async(&mut conn)
        .await
        .unwrap();
    let shrink = before - after;
    assert!((3000..3200).contains(&shrink), "PTTL {before} -> {after}");
    let short: i64 = redis::cmd("EXISTS")
        .arg("lockbench:short")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(short, 0);
    let forever: i64 = redis::cmd("PTTL")
        .arg("lockbench:forever")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(forever, -1, "keys without TTL are untouched");
    client.release(&lease).await.unwrap();
    r.finish().await;
}

async fn key_owner(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test]
async fn client_pause_freezes_renewal_but_slow_work_does_not() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(2);
    let ttl = Duration::from_millis(300);
    let mut o = StrategyOptions::new(StrategyKind::Single, ttl);
    o.node_timeout = Duration::from_millis(100);
    let client = LockClient::connect(&r.nemesis.proxied().endpoints(), o, &opts(500))
        .await
        .unwrap();
    let mut conn = direct(&r.nemesis, "n1").connect(&opts(1000)).await.unwrap();

    // Client 0 paused: its watchdog stops renewing and the lease expires.
    let paused_lease = client.acquire("paused").await.unwrap();
    let dog0 = client.spawn_watchdog(
        paused_lease.clone(),
        controls.get(0).unwrap().paused_receiver(),
    );
    // Client 1 slow: its watchdog keeps renewing.
    let slow_lease = client.acquire("slow").await.unwrap();
    let dog1 = client.spawn_watchdog(
        slow_lease.clone(),
        controls.get(1).unwrap().paused_receiver(),
    );

    let mut pause = step(FaultKind::ClientPause, "clients:0");
    pause.duration = Some(Duration::from_secs(1));
    let p = r.nemesis.inject(&pause, &controls).await.unwrap();
    let mut slow = step(FaultKind::SlowWork, "clients:1");
    slow.duration = Some(Duration::from_secs(1));
    slow.extra = Some(Duration::from_secs(1));
    let s = r.nemesis.inject(&slow, &controls).await.unwrap();
    assert!(controls.get(0).unwrap().is_paused());
    assert_eq!(
        controls.get(1).unwrap().extra_hold(),
        Duration::from_secs(1)
    );

    // Bounded poll: the paused client's key expires (no renewal).
    let deadline = Instant::now() + Duration::from_secs(3);
    while key_owner(&mut conn, "lockbench:lock:paused")
        .await
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "paused client's lease was renewed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // By now more than a TTL has passed: the slow client's lease is still its own.
    assert!(paused_lease.acquired_at.elapsed() > ttl);
    assert_eq!(
        key_owner(&mut conn, "lockbench:lock:slow").await.as_deref(),
        Some(slow_lease.owner.as_str())
    );
    assert!(dog1.renewals() >= 1);
    assert_eq!(dog0.renewals(), 0);

    r.nemesis.heal(p.id).await.unwrap();
    r.nemesis.heal(s.id).await.unwrap();
    assert!(!controls.get(0).unwrap().is_paused());
    assert_eq!(controls.get(1).unwrap().extra_hold(), Duration::ZERO);
    let report0 = dog0.stop().await;
    let report1 = dog1.stop().await;
    assert!(report1.lost.is_none(), "{:?}", report1.lost);
    assert!(report1.renewals >= 2);
    // The paused watchdog either saw the loss on resume or was stopped before its next tick.
    assert_eq!(report0.renewals, 0);
    r.finish().await;
}

#[tokio::test]
async fn heal_all_leaves_no_toxic_every_proxy_enabled_every_node_running() {
    let mut r = NemesisRig::start(TopologyKind::Five).await;
    let controls = ClientControls::new(2);
    let mut lat = step(FaultKind::Latency, "minority");
    lat.latency = Some(Duration::from_millis(20));
    lat.jitter = Some(Duration::from_millis(5));
    let mut bh = step(FaultKind::Partition, "n3");
    bh.mode = Some(PartitionMode::Blackhole);
    let mut refuse = step(FaultKind::Partition, "n4");
    refuse.mode = Some(PartitionMode::Refuse);
    let pause = step(FaultKind::PauseNode, "n5");
    let kill = step(FaultKind::Kill, "n2");
    let cp = step(FaultKind::ClientPause, "clients:0,1");
    let mut opened = Vec::new();
    for s in [&lat, &bh, &refuse, &pause, &kill, &cp] {
        opened.push(r.nemesis.inject(s, &controls).await.unwrap());
    }
    assert_eq!(opened[0].targets, vec!["n1", "n2"], "minority of 5 is 2");
    assert_eq!(r.nemesis.open_faults().len(), 6);
    let mut closed: Vec<FaultWindow> = Vec::new();
    r.nemesis.heal_all(|rec| closed.push(rec)).await.unwrap();
    assert_eq!(closed.len(), 6);
    assert!(closed
        .iter()
        .all(|c| c.end_us.is_some_and(|e| e >= c.start_us)));
    let mut ids: Vec<u64> = closed.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, opened.iter().map(|o| o.id).collect::<Vec<_>>());
    let proxies = r.nemesis.proxied().api().proxies().await.unwrap();
    assert_eq!(proxies.len(), 5);
    for p in proxies.values() {
        assert!(p.enabled, "{} disabled", p.name);
        assert!(p.toxics.is_empty(), "{} has {:?}", p.name, p.toxics);
    }
    for node in r.nemesis.proxied_mut().topology_mut().local_nodes_mut() {
        assert!(node.is_running() && !node.is_paused(), "{}", node.name());
    }
    assert!(!controls.get(0).unwrap().is_paused());
    for e in r.nemesis.proxied().node_endpoints() {
        let mut c = e.connect(&opts(500)).await.unwrap();
        ping(&mut c).await.unwrap();
    }
    r.finish().await;
}

#[tokio::test]
async fn schedule_opens_and_closes_windows_at_their_offsets() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(1);
    let mut lat = step(FaultKind::Latency, "n1");
    lat.at = Duration::from_millis(100);
    lat.duration = Some(Duration::from_millis(300));
    lat.latency = Some(Duration::from_millis(30));
    let mut jump = step(FaultKind::ClockJump, "n1");
    jump.at = Duration::from_millis(50);
    jump.delta = Some(Duration::from_secs(1));
    let mut crash = step(FaultKind::ClientCrash, "client:0");
    crash.at = Duration::from_millis(200);
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let clock = RunClock::start();
    let mut records = Vec::new();
    run_schedule(
        &mut r.nemesis,
        &[lat, jump, crash],
        &controls,
        clock,
        rx,
        |rec| records.push(rec),
    )
    .await
    .unwrap();
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["clock-jump", "latency", "client-crash", "latency"]);
    let (open, close) = (&records[1], &records[3]);
    assert_eq!(open.id, close.id);
    assert!(open.end_us.is_none());
    let at = Duration::from_micros(open.start_us);
    assert!(
        at >= Duration::from_millis(100) && at < Duration::from_millis(250),
        "{at:?}"
    );
    let held = Duration::from_micros(close.end_us.unwrap() - close.start_us);
    assert!(
        held >= Duration::from_millis(300) && held < Duration::from_millis(500),
        "{held:?}"
    );
    assert!(controls.get(0).unwrap().take_crash(), "crash was requested");
    assert!(r.nemesis.open_faults().is_empty());
    r.finish().await;
}

#[tokio::test]
async fn shutdown_signal_ends_the_schedule_and_heals() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(0);
    let mut pause = step(FaultKind::PauseNode, "n1");
    pause.duration = Some(Duration::from_secs(60));
    let mut late = step(FaultKind::Kill, "n1");
    late.at = Duration::from_secs(30);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut records = Vec::new();
    let clock = RunClock::start();
    let started = clock.origin();
    let steps = [pause, late];
    let sched = run_schedule(&mut r.nemesis, &steps, &controls, clock, rx, |rec| {
        records.push(rec)
    });
    let stop = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.send(true).unwrap();
    };
    let (res, ()) = tokio::join!(sched, stop);
    res.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records[1].end_us.is_some());
    let node = r
        .nemesis
        .proxied_mut()
        .topology_mut()
        .node_mut("n1")
        .unwrap();
    assert!(node.is_running() && !node.is_paused());
    r.finish().await;
}

#[tokio::test]
async fn wrong_targets_are_errors_not_panics() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(1);
    let mut lat = step(FaultKind::Latency, "n9");
    lat.latency = Some(Duration::from_millis(5));
    let e = r
        .nemesis
        .inject(&lat, &controls)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("n9") && e.contains("nodes: n1"), "{e}");
    let e = r
        .nemesis
        .inject(&step(FaultKind::ClientPause, "clients:4"), &controls)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("client:4"), "{e}");
    let e = r
        .nemesis
        .inject(&step(FaultKind::Failover, "primary"), &controls)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("sentinel"), "{e}");
    let mut repl = step(FaultKind::Partition, "n1");
    repl.link = Some(Link::Replication);
    let e = r
        .nemesis
        .inject(&repl, &controls)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("replication"), "{e}");
    assert!(r.nemesis.open_faults().is_empty());
    r.finish().await;
}

#[test]
fn every_shipped_chaos_scenario_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
    // load_all validates every file, including the anomaly names in [expect.*].
    let all = Scenario::load_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let mut experiments = std::collections::BTreeSet::new();
    for s in &all {
        let file = s.path.file_name().unwrap().to_string_lossy().into_owned();
        // `NN-name.toml`, or `NNa-` / `NNb-` for the two sides of one experiment's contrast.
        let number: u32 = file[..2]
            .parse()
            .unwrap_or_else(|_| panic!("{file}: no number"));
        experiments.insert(number);
        assert!(!s.claim.is_empty(), "{file}");
        assert!(!s.expect.is_empty(), "{file}: no [expect.*]");
        // 10 s at most, except the `single-wait` failover pair (05c, 05d): a lease there needs
        // a replica's acknowledgement after a failover, which on a loaded machine takes most
        // of 25-30 s (see their comments).
        let limit = if s.strategies.iter().any(|k| k.needs_replicas()) {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(10)
        };
        assert!(s.workload.duration <= limit, "{file}");
    }
    // Past 20, scenarios are numbered by the issue that added them (21, 22: cluster; 26:
    // faults per worker; 35: external side effects).
    let by_issue: Vec<u32> = experiments.iter().copied().filter(|&n| n > 20).collect();
    assert!(
        by_issue.iter().all(|n| [21, 22, 26, 35].contains(n)),
        "{by_issue:?}"
    );
    assert_eq!(
        experiments.into_iter().filter(|&n| n <= 20).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "one scenario (or a contrast pair) per claim of docs/claims.md, then the alternatives (11 PostgreSQL, 12 etcd), the negative controls (13, 14), PostgreSQL through PgBouncer (15), under a server timeout (16), a pooler's reset (17), a blocking acquire's late grant (18), an application-side pool (19), and Redis Cluster failovers (20)"
    );
}

/// Per-client proxies: a partition of `clients:0` refuses client 0's own proxy and leaves
/// client 1's alone; a node fault acts on the shared proxy and every client's own; without
/// client links a partition of clients is an error naming why.
#[tokio::test]
async fn a_partition_of_one_client_leaves_the_others_links_and_node_faults_reach_every_link() {
    let mut r = NemesisRig::start(TopologyKind::Single).await;
    let controls = ClientControls::new(2);
    let mut cut = step(FaultKind::Partition, "clients:0");
    cut.mode = Some(PartitionMode::Refuse);
    cut.duration = Some(Duration::from_secs(1));
    let e = r
        .nemesis
        .inject(&cut, &controls)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no proxies of its own"), "{e}");

    r.nemesis.proxied_mut().add_client_links(2).await.unwrap();
    let own = |i| r.nemesis.proxied().client_endpoints(i).unwrap()[0].clone();
    let (c0, c1) = (own(0), own(1));
    assert_ne!(c0.url, c1.url);
    assert_ne!(c0.url, proxied_n1(&r.nemesis).url);
    let names: Vec<&str> = r
        .nemesis
        .proxied()
        .links_of_client(1)
        .iter()
        .map(|l| l.proxy.as_str())
        .collect();
    assert_eq!(names, ["n1-c1"]);
    let mut conn1 = c1.connect(&opts(2000)).await.unwrap();

    let w = r.nemesis.inject(&cut, &controls).await.unwrap();
    assert_eq!(w.targets, ["client:0"]);
    let err = c0
        .connect(&opts(300))
        .await
        .expect_err("client 0 is cut off");
    assert!(err.is_connection_refusal(), "{err}");
    ping(&mut conn1).await.unwrap();
    c1.connect(&opts(300)).await.unwrap();
    r.nemesis.heal(w.id).await.unwrap();
    c0.connect(&opts(300)).await.unwrap();

    let mut lat = step(FaultKind::Latency, "n1");
    lat.latency = Some(Duration::from_millis(50));
    let w = r.nemesis.inject(&lat, &controls).await.unwrap();
    assert_eq!(w.targets, ["n1"], "the window names the node");
    let slow = ping(&mut conn1).await.unwrap();
    assert!(slow >= Duration::from_millis(50), "{slow:?}");
    for p in ["n1", "n1-c0", "n1-c1"] {
        let on = r.nemesis.proxied().api().toxics(p).await.unwrap();
        assert_eq!(on.len(), 1, "{p}: {on:?}");
    }
    r.nemesis.heal(w.id).await.unwrap();
    r.finish().await;
}

/// What one run of [`cut_run`] saw during its partition window.
struct CutSeen {
    /// The partition window's targets.
    targets: Vec<String>,
    /// The stretched holder (the slow-work window's target).
    holder: u32,
    /// Successful acquires and releases of the other clients inside the window.
    others_acquired: usize,
    others_released: usize,
    /// Successful operations of the holder inside the window (after its first ms).
    holder_ok: usize,
    /// Whether the run met `[expect.single]` (`invalid`, `mutex-violation`).
    damage_as_expected: Option<bool>,
}

/// Runs `single` on a one-node topology (3 clients, 1 resource, TTL 1 s, watchdog on): at 1 s
/// the holder's section is stretched 3 s, and 1 ms later a 1.5 s black hole on `target`.
async fn cut_run(target: &str) -> CutSeen {
    use lockbench::history::{read_history, HistoryEvent, OpFn, OpKind};
    use lockbench::orchestration::runner::Runner;
    use lockbench::results::RunDir;

    let text = format!(
        r#"
claim = "a partition of the holder cuts only the holder"
topology = "single"
strategies = ["single"]
seed = 7

[workload]
clients = 3
resources = 1
hold = "50ms"
ttl = "1s"
duration = "5s"
watchdog = true
retry_attempts = 1000
retry_delay = "20ms"
retry_jitter = "10ms"
node_timeout = "250ms"

[[nemesis]]
at = "1s"
duration = "150ms"
fault = "slow-work"
target = "holder"
extra = "3s"

[[nemesis]]
at = "1001ms"
duration = "1500ms"
fault = "partition"
target = "{target}"
mode = "blackhole"

[expect.single]
verdict = "invalid"
anomalies = ["mutex-violation"]
"#
    );
    let tmp = tempfile::tempdir().unwrap();
    let scenario = Scenario::parse(&text, &tmp.path().join("cut.toml")).unwrap();
    let test = scenario.to_test();
    let dir = RunDir::create_named(tmp.path(), "run").unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let outcome = Runner::local(shutdown)
        .run(&test, &dir, |_| {})
        .await
        .unwrap_or_else(|e| panic!("run: {e}"));
    assert_none_running_under(tmp.path());

    let mut ops = Vec::new();
    let mut windows: Vec<FaultWindow> = Vec::new();
    for event in read_history(dir.file("single").join("history.jsonl")).unwrap() {
        match event.unwrap() {
            HistoryEvent::Op(op) => ops.push(op),
            HistoryEvent::Fault(w) if w.end_us.is_some() => windows.push(w),
            _ => {}
        }
    }
    let slow = windows.iter().find(|w| w.kind == "slow-work").unwrap();
    let cut = windows.iter().find(|w| w.kind == "partition").unwrap();
    assert_eq!(slow.targets.len(), 1, "one resource, one holder: {slow:?}");
    let holder: u32 = slow.targets[0]
        .strip_prefix("client:")
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{slow:?}"));
    let (from, to) = (cut.start_us, cut.end_us.unwrap());
    let count = |who: &dyn Fn(u32) -> bool, f: Option<OpFn>, after: u64| {
        ops.iter()
            .filter(|o| who(o.client) && o.kind == OpKind::Ok && f.is_none_or(|f| o.f == f))
            .filter(|o| o.time_us > after && o.time_us < to)
            .count()
    };
    CutSeen {
        targets: cut.targets.clone(),
        holder,
        others_acquired: count(&|c| c != holder, Some(OpFn::Acquire), from),
        others_released: count(&|c| c != holder, Some(OpFn::Release), from),
        // A reply already on its way when the cut began may still arrive.
        holder_ok: count(&|c| c == holder, None, from + 1_000),
        damage_as_expected: outcome.expectations[0].met,
    }
}

/// A partition aimed at the holder on a one-node topology cuts only the holder: the run gives
/// every client its own proxy (`n1-cI`), the window names the holder, and while it is cut off
/// the other clients take the lock once its lease has run out and keep completing sections.
/// Its section stretched past the cut, the holder is still inside when they do: a
/// mutual-exclusion violation at the ledger, which is what `partition-holder` is meant to
/// expose. The same cut on the node (`n1`, what `partition-holder` did before) cuts every
/// client through the shared proxy: nobody completes anything while it lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_of_the_holder_cuts_only_the_holder() {
    let seen = cut_run("holder").await;
    assert_eq!(seen.targets, vec![format!("client:{}", seen.holder)]);
    assert!(
        seen.others_acquired >= 2 && seen.others_released >= 1,
        "the other clients kept taking the lock while client {} was cut off: {} acquires, {} \
         releases",
        seen.holder,
        seen.others_acquired,
        seen.others_released
    );
    assert_eq!(
        seen.holder_ok, 0,
        "the holder was cut off, yet completed an operation"
    );
    assert_eq!(seen.damage_as_expected, Some(true));

    let node = cut_run("n1").await;
    assert_eq!(node.targets, vec!["n1".to_string()]);
    assert_eq!(
        (node.others_acquired, node.holder_ok),
        (0, 0),
        "a cut of the node's shared proxy stops every client"
    );
}
