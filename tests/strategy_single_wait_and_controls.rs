//! The Redis strategies beyond the classic ones, against real redis-server processes (no
//! mocks): `single-wait` (SET NX PX + WAIT for a replica), and the negative controls
//! `setnx-expire` (SETNX, then PEXPIRE in a second request) and `unchecked-extend` (renewal by
//! plain PEXPIRE). Each test owns its nodes (started through `LocalNode`; dropping them kills
//! them).

mod common;

use std::time::Duration;

use common::cli::{expect_code, run_in};
use common::node::{get, inspect, pttl, start_nodes, wait_until_gone, Nodes};
use common::strategy::options;
use lockbench::lease::{AcquireError, Lease, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use redis::AsyncCommands;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A client of the first node (the primary).
async fn client(nodes: &Nodes, opts: StrategyOptions) -> LockClient {
    common::strategy::client(&nodes[..1], opts).await
}

/// `single-wait` options for a loaded test machine: a 1 s per-node timeout, so `WAIT` gives a
/// replica 500 ms to acknowledge (100 ms was not always enough with parallel tests on 2 cores).
fn wait_options(ttl: Duration) -> StrategyOptions {
    let mut o = options(StrategyKind::SingleWait, ttl);
    o.node_timeout = MS(1_000);
    o
}

/// A `single-wait` client of the primary whose connection waits long enough for a `WAIT`
/// that times out (its bound, 1.1 s, is above the default 500 ms response timeout).
async fn wait_client(nodes: &Nodes, opts: StrategyOptions) -> LockClient {
    let conn = ConnectOptions {
        response_timeout: MS(2_000),
        ..ConnectOptions::default()
    };
    LockClient::connect(&[nodes[0].endpoint()], opts, &conn)
        .await
        .expect("connect")
}

/// Makes nodes 2.. replicas of node 1 and waits (at most 15 s) until the primary counts them
/// online and every one acknowledges a write.
async fn replicate(nodes: &Nodes) {
    let primary = &nodes[0];
    for replica in &nodes[1..] {
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary.port())
            .query_async(&mut inspect(replica).await)
            .await
            .expect("REPLICAOF");
    }
    let want = nodes.len() - 1;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut inspect(primary).await)
            .await
            .expect("INFO");
        let connected = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let online = info.matches("state=online").count();
        if connected == want && online == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replicas not online within 15 s:\n{info}"
        );
        tokio::time::sleep(MS(20)).await;
    }
    // "online" is not enough: after a sync the primary starts the command stream only once
    // the replica has acknowledged (replicas acknowledge every second), so a write right after
    // it may wait up to a second for its acknowledgement. Wait until every replica
    // acknowledges a probe write.
    let mut conn = inspect(primary).await;
    loop {
        let _: () = conn.set("probe", "1").await.expect("SET probe");
        let acked: i64 = redis::cmd("WAIT")
            .arg(want)
            .arg(200)
            .query_async(&mut conn)
            .await
            .expect("WAIT");
        if acked == want as i64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{acked} of {want} replicas acknowledge within 15 s"
        );
    }
}

#[tokio::test]
async fn single_wait_reports_the_replica_acknowledgement_and_contends() {
    let nodes = start_nodes(3).await;
    replicate(&nodes).await;
    let opts = wait_options(MS(5_000));
    let key = opts.lock_key("res");
    let a = wait_client(&nodes, opts.clone()).await;
    let b = wait_client(&nodes, opts).await;

    let lease = a.acquire("res").await.expect("A acquires with replicas up");
    let acks = lease
        .replica_acks
        .expect("single-wait reports acknowledgements");
    assert!((1..=2).contains(&acks), "{acks} acknowledgements");
    assert!(lease.is_valid());
    // WAIT returned `acks`: at least that many replicas have our key now.
    let mut on_replicas = 0;
    for replica in &nodes[1..] {
        if get(replica, &key).await.as_deref() == Some(lease.owner.as_str()) {
            on_replicas += 1;
        }
    }
    assert!(
        on_replicas >= acks,
        "{on_replicas} replicas have the key, WAIT said {acks}"
    );

    let err = b.acquire("res").await.unwrap_err();
    assert!(matches!(err, AcquireError::Held { .. }), "{err:?}");
    assert!(err.is_contention());

    let out = a.release(&lease).await.unwrap();
    assert_eq!(out.finding(), ReleaseFinding::Held, "{out:?}");
    assert_eq!(get(&nodes[0], &key).await, None);
    let lease_b = b
        .acquire("res")
        .await
        .expect("B acquires after A's release");
    assert!(lease_b.replica_acks.unwrap_or(0) >= 1);
    // Other strategies report no acknowledgement.
    let single = client(&nodes, options(StrategyKind::Single, MS(2_000))).await;
    let plain = single.acquire("other").await.unwrap();
    assert_eq!(plain.replica_acks, None);
}

#[tokio::test]
async fn single_wait_fails_cleanly_when_no_replica_answers() {
    let mut nodes = start_nodes(3).await;
    replicate(&nodes).await;
    let opts = wait_options(MS(5_000));
    let key = opts.lock_key("res");
    let wait = opts.replica_wait();
    assert_eq!(wait, MS(500), "half the 1 s per-node timeout");
    let c = wait_client(&nodes, opts).await;

    // Both replicas stopped (SIGSTOP): the SET lands on the primary, nobody acknowledges it.
    nodes[1].pause().unwrap();
    nodes[2].pause().unwrap();
    let started = Instant::now();
    let err = c.acquire("res").await.unwrap_err();
    let took = started.elapsed();
    match &err {
        AcquireError::NoReplicaAck {
            acked,
            needed,
            wait_timeout,
            released,
            ..
        } => {
            assert_eq!((*acked, *needed), (0, 1));
            assert_eq!(*wait_timeout, wait);
            assert!(*released, "the unacknowledged key must be deleted again");
        }
        other => panic!("expected NoReplicaAck, got {other:?}"),
    }
    assert!(took >= wait, "WAIT returned after {took:?}");
    assert!(took < MS(2_000), "took {took:?}");
    assert!(!err.is_contention() && err.is_retryable());
    assert!(err.to_string().contains("no replica acknowledged"), "{err}");
    assert_eq!(get(&nodes[0], &key).await, None, "key left behind");

    // One replica back: the lease counts again, with that one acknowledgement.
    nodes[1].resume().unwrap();
    let lease = c.acquire("res").await.expect("acquires with n2 back");
    assert_eq!(lease.replica_acks, Some(1));
    c.release(&lease).await.unwrap();

    // That replica killed (the other still stopped): no acknowledgement again.
    nodes[1].kill().unwrap();
    let err = c.acquire("res").await.unwrap_err();
    assert!(
        matches!(err, AcquireError::NoReplicaAck { acked: 0, .. }),
        "{err:?}"
    );
    assert_eq!(get(&nodes[0], &key).await, None);
    nodes[2].resume().unwrap();
}

#[tokio::test]
async fn single_wait_on_a_lone_node_never_holds() {
    let nodes = start_nodes(1).await;
    let opts = options(StrategyKind::SingleWait, MS(1_000));
    let key = opts.lock_key("res");
    let c = client(&nodes, opts).await;
    let err = c.acquire("res").await.unwrap_err();
    assert!(
        matches!(
            err,
            AcquireError::NoReplicaAck {
                acked: 0,
                released: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(get(&nodes[0], &key).await, None);
}

#[tokio::test]
async fn setnx_expire_acquires_in_two_requests_and_releases() {
    let nodes = start_nodes(1).await;
    let ttl = MS(1_500);
    let opts = options(StrategyKind::SetnxExpire, ttl);
    let key = opts.lock_key("res");
    let a = client(&nodes, opts.clone()).await;
    let b = client(&nodes, opts).await;
    let lease = a.acquire("res").await.unwrap();
    let left = pttl(&nodes[0], &key).await;
    assert!(
        left > 0 && left <= 1_500,
        "PTTL {left} after SETNX + PEXPIRE"
    );
    assert_eq!(
        get(&nodes[0], &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    let err = b.acquire("res").await.unwrap_err();
    assert!(matches!(err, AcquireError::Held { .. }), "{err:?}");
    let out = a.release(&lease).await.unwrap();
    assert_eq!(out.finding(), ReleaseFinding::Held);
    let lease_b = b.acquire("res").await.expect("B after A's release");
    assert_ne!(lease_b.owner, lease.owner);
    // A crash that never fires behaves as a plain acquire.
    b.release(&lease_b).await.unwrap();
    let again = a.acquire_or_crash("res", &|| false).await.unwrap();
    assert!(pttl(&nodes[0], &key).await > 0);
    a.release(&again).await.unwrap();
}

#[tokio::test]
async fn setnx_expire_crash_between_the_requests_leaves_a_key_without_expiry() {
    let nodes = start_nodes(1).await;
    let ttl = MS(200);
    let opts = options(StrategyKind::SetnxExpire, ttl);
    let key = opts.lock_key("res");
    let crashing = client(&nodes, opts.clone()).await;
    let err = crashing
        .acquire_or_crash("res", &|| true)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AcquireError::Crashed {
                done: "SETNX",
                not_sent: "PEXPIRE",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    drop(crashing);
    assert_eq!(pttl(&nodes[0], &key).await, -1, "no expiry was set");
    // Five TTLs later the key is still there and nobody gets the lock.
    let other = client(&nodes, opts).await;
    let until = Instant::now() + ttl * 5;
    while Instant::now() < until {
        let err = other.acquire("res").await.unwrap_err();
        assert!(matches!(err, AcquireError::Held { .. }), "{err:?}");
        tokio::time::sleep(ttl / 4).await;
    }
    assert_eq!(pttl(&nodes[0], &key).await, -1);

    // `single` has no such point: its crash point is never asked, the key has its TTL.
    let single_opts = options(StrategyKind::Single, ttl);
    let single_key = single_opts.lock_key("res2");
    let single = client(&nodes, single_opts).await;
    let lease = single
        .acquire_or_crash("res2", &|| panic!("single has no mid-acquire crash point"))
        .await
        .unwrap();
    drop((single, lease));
    wait_until_gone(&nodes[0], &single_key, ttl * 5).await;
}

#[tokio::test]
async fn unchecked_extend_acquires_releases_and_contends_like_single() {
    let nodes = start_nodes(1).await;
    let opts = options(StrategyKind::UncheckedExtend, MS(1_000));
    let key = opts.lock_key("res");
    let a = client(&nodes, opts.clone()).await;
    let b = client(&nodes, opts).await;
    let lease = a.acquire("res").await.unwrap();
    let left = pttl(&nodes[0], &key).await;
    assert!(left > 0 && left <= 1_000, "PTTL {left}");
    let err = b.acquire("res").await.unwrap_err();
    assert!(matches!(err, AcquireError::Held { .. }), "{err:?}");
    let renewed = a.extend(&lease).await.unwrap();
    assert!(renewed.validity_deadline > lease.validity_deadline);
    assert_eq!(
        a.release(&renewed).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    assert_eq!(get(&nodes[0], &key).await, None);
    // Extending a key that is gone reports the loss.
    let err = a.extend(&lease).await.unwrap_err();
    assert!(err.is_lost(), "{err:?}");
}

/// Client A takes the lock on `kind`'s resource and stalls past its TTL; client B then takes
/// it. Returns A, B, their leases and the lock key.
async fn b_takes_over_from_stalled_a(
    nodes: &Nodes,
    kind: StrategyKind,
    ttl: Duration,
) -> (LockClient, LockClient, Lease, Lease, String) {
    let opts = options(kind, ttl);
    let key = opts.lock_key(kind.name());
    let a = client(nodes, opts.clone()).await;
    let b = client(nodes, opts).await;
    let lease_a = a.acquire(kind.name()).await.unwrap();
    wait_until_gone(&nodes[0], &key, ttl * 10).await;
    let lease_b = b.acquire(kind.name()).await.unwrap();
    (a, b, lease_a, lease_b, key)
}

#[tokio::test]
async fn unchecked_extend_renews_the_next_holders_key_and_single_does_not() {
    let nodes = start_nodes(1).await;
    let ttl = MS(300);
    for kind in [StrategyKind::UncheckedExtend, StrategyKind::Single] {
        // A stalls past its TTL; B takes the lock.
        let (a, _b, lease_a, lease_b, key) = b_takes_over_from_stalled_a(&nodes, kind, ttl).await;
        // B's key is short-lived: set it to 100 ms, then A renews.
        let _: bool = inspect(&nodes[0]).await.pexpire(&key, 100).await.unwrap();
        let renewal = a.extend(&lease_a).await;
        let left = pttl(&nodes[0], &key).await;
        if kind == StrategyKind::UncheckedExtend {
            let renewed = renewal.expect("unchecked renewal 'succeeds' on B's key");
            assert!(renewed.is_valid(), "A believes it holds the lock again");
            assert!(lease_b.is_valid(), "while B holds it too");
            assert!(left > 100, "B's key got A's TTL: PTTL {left}");
        } else {
            let err = renewal.unwrap_err();
            assert!(err.is_lost(), "{err:?}");
            assert!(err.to_string().contains("owned by another client"), "{err}");
            assert!(left <= 100, "single extended B's key: PTTL {left}");
        }
        assert_eq!(
            get(&nodes[0], &key).await.as_deref(),
            Some(lease_b.owner.as_str()),
            "{kind}: the key is B's"
        );
    }
}

#[tokio::test]
async fn unchecked_extend_watchdog_keeps_a_crashed_holders_key_alive() {
    let nodes = start_nodes(1).await;
    let ttl = MS(300);
    for kind in [StrategyKind::UncheckedExtend, StrategyKind::Single] {
        // A's watchdog starts after its lease passed to B (A was stalled); B then crashes:
        // it never releases and never renews.
        let (a, b, lease_a, lease_b, key) = b_takes_over_from_stalled_a(&nodes, kind, ttl).await;
        drop(b);
        let (_pause, paused) = tokio::sync::watch::channel(false);
        let wd = a.spawn_watchdog(lease_a, paused);
        // Four of B's TTLs later.
        tokio::time::sleep(ttl * 4).await;
        let owner = get(&nodes[0], &key).await;
        let report = wd.stop().await;
        if kind == StrategyKind::UncheckedExtend {
            assert_eq!(
                owner.as_deref(),
                Some(lease_b.owner.as_str()),
                "B's key outlives B"
            );
            assert!(report.lost.is_none(), "{report:?}");
            assert!(report.renewals >= 3, "{report:?}");
        } else {
            assert_eq!(owner, None, "single: B's key expired with B's TTL");
            assert!(
                report.lost.as_deref().unwrap_or("").contains("lost"),
                "{report:?}"
            );
            assert_eq!(report.renewals, 0);
        }
    }
}

/// `single-wait` on a topology without replicas is refused up front, by `run` and by a
/// scenario file (exit 2, bad input), with the reason and the topology to use.
#[test]
fn single_wait_without_replicas_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let run = run_in(
        [
            "run",
            "--topology",
            "single",
            "-s",
            "single,single-wait",
            "-d",
            "1s",
        ],
        &results,
    );
    let (_, stderr) = expect_code(&run, 2, "single-wait on single");
    assert!(
        stderr.contains("--strategy single-wait")
            && stderr.contains("topology single has no replicas")
            && stderr.contains("use topology sentinel"),
        "{stderr}"
    );
    assert!(!results.exists(), "a results directory was created");

    let file = tmp.path().join("wait-on-five.toml");
    std::fs::write(
        &file,
        "claim = \"x\"\ntopology = \"five\"\nstrategies = [\"single\", \"single-wait\"]\n\n\
         [workload]\nclients = 2\nresources = 1\nhold = \"1ms\"\nttl = \"1s\"\nduration = \"1s\"\n",
    )
    .unwrap();
    let chaos = run_in(["chaos", file.to_str().unwrap()], &results);
    let (_, stderr) = expect_code(&chaos, 2, "single-wait on five");
    // file:line:col of the offending name in `strategies`.
    assert!(
        stderr.contains(&format!("{}:3:", file.display()))
            && stderr.contains("topology five has no replicas"),
        "{stderr}"
    );
    assert!(!results.exists(), "a results directory was created");
}
