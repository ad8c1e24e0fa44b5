//! Strategy behaviour against real redis-server processes (no mocks), started through
//! `lockbench::topology::LocalNode` (each test owns its nodes; dropping them kills them).

mod common;

use std::time::Duration;

use common::node::{endpoints, exists, get, inspect, start_nodes, stopped_nodes, wait_until_gone};
use common::strategy::{client, options};
use lockbench::lease::{AcquireError, NodeFailureKind, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, RetryPolicy, StrategyError, StrategyKind, StrategyOptions};
use lockbench::topology::LocalNode;
use redis::AsyncCommands;
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Pauses every command of normal clients on `node` for `ms` (added latency, deterministic:
/// the pause is in force when this returns).
async fn pause_node(node: &LocalNode, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query_async(&mut inspect(node).await)
        .await
        .expect("CLIENT PAUSE");
}

#[tokio::test]
async fn owner_checked_release_never_deletes_another_owners_lease() {
    let nodes = start_nodes(1).await;
    for kind in [
        StrategyKind::Single,
        StrategyKind::SingleFenced,
        StrategyKind::GetThenDel,
    ] {
        let opts = options(kind, MS(150));
        let key = opts.lock_key("res");
        let a = client(&nodes, opts.clone()).await;
        let b = client(&nodes, opts).await;
        let lease_a = a.acquire("res").await.expect("A acquires");
        // A stalls past its TTL: the key expires, B takes the lock.
        wait_until_gone(&nodes[0], &key, MS(2_000)).await;
        let lease_b = b.acquire("res").await.expect("B acquires after expiry");
        let out = a.release(&lease_a).await.expect("A's late release");
        assert_eq!(out.released_nodes, 0, "{kind}: A deleted something");
        assert_eq!(out.finding(), ReleaseFinding::Lost, "{kind}: {out:?}");
        assert_eq!(
            get(&nodes[0], &key).await.as_deref(),
            Some(lease_b.owner.as_str()),
            "{kind}"
        );
        let out = b.release(&lease_b).await.unwrap();
        assert_eq!(out.released_nodes, 1, "{kind}");
        assert_eq!(out.finding(), ReleaseFinding::Held, "{kind}: {out:?}");
        // Released twice: the second finds nothing.
        let again = b.release(&lease_b).await.unwrap();
        assert_eq!(again.finding(), ReleaseFinding::Lost, "{kind}: {again:?}");
    }
}

#[tokio::test]
async fn naive_del_release_deletes_the_next_holders_lease() {
    let nodes = start_nodes(1).await;
    let opts = options(StrategyKind::NaiveDel, MS(150));
    let key = opts.lock_key("res");
    let a = client(&nodes, opts.clone()).await;
    let b = client(&nodes, opts.clone()).await;
    let c = client(&nodes, opts).await;
    let lease_a = a.acquire("res").await.expect("A acquires");
    wait_until_gone(&nodes[0], &key, MS(2_000)).await;
    let lease_b = b.acquire("res").await.expect("B acquires after expiry");
    let out = a.release(&lease_a).await.expect("A's late release");
    assert_eq!(out.released_nodes, 1, "plain DEL removed B's key");
    // naive-del cannot tell: it deleted a key, so its release counts as held.
    assert_eq!(out.finding(), ReleaseFinding::Held);
    let nothing = a.release(&lease_a).await.unwrap();
    assert_eq!(nothing.finding(), ReleaseFinding::Lost, "{nothing:?}");
    assert!(!exists(&nodes[0], &key).await);
    // B still believes it holds the lock, and C gets it too.
    assert!(lease_b.is_valid());
    let lease_c = c
        .acquire("res")
        .await
        .expect("C acquires while B is inside");
    assert_ne!(lease_c.owner, lease_b.owner);
}

#[tokio::test]
async fn redlock_survives_two_of_five_down_and_fails_cleanly_with_three_down() {
    let mut nodes = start_nodes(5).await;
    let opts = options(StrategyKind::Redlock, MS(5_000));
    let key = opts.lock_key("res");
    let redlock = client(&nodes, opts).await;
    nodes[0].kill().unwrap();
    nodes[1].kill().unwrap();
    let lease = redlock.acquire("res").await.expect("3 of 5 is a quorum");
    assert_eq!(lease.locked_nodes, 3);
    for node in &nodes[2..] {
        assert_eq!(get(node, &key).await.as_deref(), Some(lease.owner.as_str()));
    }
    let out = redlock.release(&lease).await.unwrap();
    assert_eq!((out.released_nodes, out.failed_nodes), (3, 2));

    nodes[2].kill().unwrap();
    let err = redlock
        .acquire("res")
        .await
        .expect_err("2 of 5 is not a quorum");
    match &err {
        AcquireError::QuorumNotReached {
            locked,
            needed,
            held,
            failed,
        } => assert_eq!((*locked, *needed, *held, *failed), (2, 3, 0, 3)),
        other => panic!("expected QuorumNotReached, got {other:?}"),
    }
    assert!(!err.is_contention());
    for node in &nodes[3..] {
        assert!(
            !exists(node, &key).await,
            "{} kept the failed attempt's key",
            node.name()
        );
    }
}

#[tokio::test]
async fn quorum_comes_from_configured_nodes_not_reachable_ones() {
    let mut nodes = start_nodes(3).await;
    nodes.push_stopped("n4").await;
    nodes.push_stopped("n5").await;
    let opts = options(StrategyKind::Redlock, MS(5_000));
    let key = opts.lock_key("res");
    let redlock = client(&nodes, opts).await; // two nodes down at start: tolerated
    assert_eq!(redlock.node_count(), 5);

    let lease = redlock.acquire("res").await.expect("3 of 5");
    assert_eq!(lease.locked_nodes, 3);
    redlock.release(&lease).await.unwrap();

    // Another owner holds one reachable node: 2 of the 3 reachable is a majority of those,
    // but not of the 5 configured.
    let _: () = inspect(&nodes[0])
        .await
        .set(&key, "someone-else")
        .await
        .unwrap();
    let err = redlock
        .acquire("res")
        .await
        .expect_err("2 of 5 is not a quorum");
    assert!(
        matches!(
            err,
            AcquireError::QuorumNotReached {
                locked: 2,
                needed: 3,
                held: 1,
                failed: 2
            }
        ),
        "{err:?}"
    );
    // Had the other owner not held n1, 3 nodes would have locked: this is contention.
    assert!(err.is_contention());

    // The missing nodes come up: the client reconnects and counts them.
    nodes[3].restart().await.unwrap();
    nodes[4].restart().await.unwrap();
    let lease = redlock.acquire("res").await.expect("4 of 5 after restart");
    assert_eq!(lease.locked_nodes, 4);
    assert_eq!(
        get(&nodes[4], &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
}

#[tokio::test]
async fn acquire_timeout_is_respected_while_the_lock_is_held() {
    let nodes = start_nodes(3).await;
    for kind in [StrategyKind::Single, StrategyKind::Redlock] {
        let mut opts = options(kind, MS(10_000));
        let delay = MS(300);
        opts.retry = RetryPolicy {
            attempts: 1_000,
            delay,
            jitter: Duration::ZERO,
            acquire_timeout: Some(MS(2_000)),
        };
        let holder = client(&nodes, opts.clone()).await;
        let waiter = client(&nodes, opts).await;
        let lease = holder.acquire("res").await.expect("holder");
        let start = Instant::now();
        let err = waiter.acquire("res").await.expect_err("held elsewhere");
        let waited = start.elapsed();
        assert!(
            matches!(err, AcquireError::Timeout { .. }),
            "{kind}: {err:?}"
        );
        assert!(err.is_contention(), "{kind}: {err}");
        assert!(
            waited >= MS(2_000),
            "{kind}: gave up early after {waited:?}"
        );
        assert!(waited <= MS(2_000) + delay, "{kind}: overran: {waited:?}");
        holder.release(&lease).await.unwrap();
    }
}

#[tokio::test]
async fn validity_is_counted_from_the_attempt_that_succeeded() {
    let nodes = start_nodes(3).await;
    let ttl = MS(500);
    let mut opts = options(StrategyKind::Redlock, ttl);
    opts.retry = RetryPolicy {
        attempts: 1_000,
        delay: MS(20),
        jitter: MS(10),
        acquire_timeout: Some(MS(5_000)),
    };
    let key = opts.lock_key("res");
    // Someone else holds the lock on every node for longer than our TTL.
    for node in &nodes {
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("someone-else")
            .arg("PX")
            .arg(700)
            .query_async(&mut inspect(node).await)
            .await
            .unwrap();
    }
    let redlock = client(&nodes, opts).await;
    let first_attempt = Instant::now();
    let lease = redlock
        .acquire("res")
        .await
        .expect("acquired after the holder expired");
    assert!(
        first_attempt.elapsed() >= MS(600),
        "cannot have been acquired before expiry"
    );
    assert!(
        lease.remaining_validity() > ttl / 2,
        "{:?}",
        lease.remaining_validity()
    );

    let mut min_pttl = i64::MAX;
    let mut counted = 0;
    for node in &nodes {
        let mut conn = inspect(node).await;
        let owner: Option<String> = conn.get(&key).await.unwrap();
        if owner.as_deref() == Some(lease.owner.as_str()) {
            counted += 1;
            let pttl: i64 = conn.pttl(&key).await.unwrap();
            assert!(pttl > 0);
            min_pttl = min_pttl.min(pttl);
        }
    }
    let now = Instant::now();
    assert_eq!(counted, lease.locked_nodes);
    assert!(
        lease.validity_deadline <= now + MS(min_pttl as u64),
        "deadline {:?} after now + smallest PTTL {min_pttl} ms",
        lease.validity_deadline - now
    );
}

#[tokio::test]
async fn short_ttl_with_added_latency_fails_cleanly_and_leaves_no_key() {
    let nodes = start_nodes(5).await;
    let ttl = MS(50);

    // Per-node timeout above the latency: the replies arrive, the validity check says no.
    let mut opts = StrategyOptions::new(StrategyKind::Redlock, ttl);
    opts.retry = RetryPolicy::no_retry();
    opts.node_timeout = MS(300);
    let key = opts.lock_key("slow");
    let redlock = client(&nodes, opts).await;
    for node in &nodes {
        pause_node(node, 60).await;
    }
    let err = redlock.acquire("slow").await.expect_err("no validity left");
    assert!(
        matches!(err, AcquireError::ValidityExhausted { .. }),
        "{err:?}"
    );
    for node in &nodes {
        // Served after the pause, and after the client's SET and clean-up on that node.
        assert!(!exists(node, &key).await, "{} kept a key", node.name());
    }

    // Default per-node timeout (TTL/10): the nodes time out. The client drops each timed-out
    // connection while the node is still paused, so the node frees it with its SET unrun
    // (a SET that did land later would stay until its TTL: the clean-up uses a new connection).
    let mut opts = StrategyOptions::new(StrategyKind::Redlock, ttl);
    opts.retry = RetryPolicy::no_retry();
    let redlock = client(&nodes, opts).await;
    for node in &nodes {
        pause_node(node, 60).await;
    }
    match redlock.acquire("slow").await {
        Err(AcquireError::AllNodesFailed { failures }) => {
            assert_eq!(failures.len(), 5);
            assert!(
                failures.iter().all(|f| f.kind == NodeFailureKind::Timeout),
                "{failures:?}"
            );
        }
        other => panic!("expected every node to time out, got {other:?}"),
    }
    for node in &nodes {
        assert!(!exists(node, &key).await, "{} kept a late key", node.name());
    }

    // A TTL that leaves no validity even at zero latency is refused before connecting.
    let mut opts = options(StrategyKind::Single, MS(2));
    opts.node_timeout = MS(1);
    let err = LockClient::connect(&endpoints(&nodes[..1]), opts, &ConnectOptions::default())
        .await
        .err()
        .expect("2 ms TTL refused");
    assert!(
        matches!(err, StrategyError::TtlTooShort { min, .. } if min == MS(4)),
        "{err:?}"
    );
    // The smallest workable TTL does give a lease on a local node.
    let mut opts = options(StrategyKind::Single, MS(4));
    opts.node_timeout = MS(2);
    let single = client(&nodes[..1], opts).await;
    let mut granted = 0;
    for _ in 0..20 {
        if let Ok(lease) = single.acquire("tiny").await {
            granted += 1;
            let _ = single.release(&lease).await;
        }
    }
    assert!(granted > 0, "a 4 ms TTL never gave a lease in 20 tries");
}

#[tokio::test]
async fn late_replies_after_the_node_timeout_are_cleaned_up() {
    let nodes = start_nodes(3).await;
    let mut opts = options(StrategyKind::Redlock, MS(5_000));
    opts.node_timeout = MS(30);
    let key = opts.lock_key("res");
    let redlock = client(&nodes, opts).await;
    // Two nodes answer only after 300 ms, far beyond the 30 ms per-node timeout.
    pause_node(&nodes[0], 300).await;
    pause_node(&nodes[1], 300).await;
    let err = redlock.acquire("res").await.expect_err("1 of 3");
    assert!(
        matches!(
            err,
            AcquireError::QuorumNotReached {
                locked: 1,
                needed: 2,
                held: 0,
                failed: 2
            }
        ),
        "{err:?}"
    );
    for node in &nodes {
        // Served after the pause. The timed-out SETs sat on connections the client dropped
        // during the pause, so the nodes freed them unrun; nothing is left behind.
        let mut conn = inspect(node).await;
        let keys: Vec<String> = conn.keys("lockbench:lock:*").await.unwrap();
        assert!(keys.is_empty(), "{} holds {keys:?}", node.name());
        assert!(!exists(node, &key).await);
    }
}

#[tokio::test]
async fn unreachable_nodes_give_an_error_distinct_from_held() {
    let mut down = stopped_nodes(3).await;
    let redlock = client(&down, options(StrategyKind::Redlock, MS(5_000))).await;
    let err = redlock.acquire("res").await.expect_err("nothing is up");
    let msg = err.to_string();
    assert!(
        matches!(err, AcquireError::AllNodesFailed { .. }),
        "{err:?}"
    );
    assert!(msg.contains("no Redis node answered"), "{msg}");
    assert!(!err.is_contention());

    // A single-node strategy refuses to start against a dead node, naming it (the CLI adds
    // what to change: it knows whether lockbench started the node).
    let e = LockClient::connect(
        &endpoints(&down[..1]),
        options(StrategyKind::Single, MS(5_000)),
        &ConnectOptions::default(),
    )
    .await
    .err()
    .expect("connect to a dead node");
    assert!(matches!(e, StrategyError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("cannot connect to"), "{e}");

    // A node that dies after connect yields a node error, then is used again after restart.
    down[0].restart().await.unwrap();
    let single = client(&down[..1], options(StrategyKind::Single, MS(5_000))).await;
    down[0].kill().unwrap();
    let err = single.acquire("res").await.expect_err("node died");
    assert!(
        matches!(&err, AcquireError::Node(f) if f.kind == NodeFailureKind::Unreachable),
        "{err:?}"
    );
    down[0].restart().await.unwrap();
    let lease = single.acquire("res").await.expect("reconnected");
    assert_eq!(single.release(&lease).await.unwrap().released_nodes, 1);
}

#[tokio::test]
async fn fencing_tokens_strictly_increase() {
    let nodes = start_nodes(3).await;
    let opts = options(StrategyKind::SingleFenced, MS(5_000));
    let a = client(&nodes[..1], opts.clone()).await;
    let b = client(&nodes[..1], opts.clone()).await;
    let mut last = 0;
    for i in 0..20 {
        let c = if i % 2 == 0 { &a } else { &b };
        let lease = c.acquire("res").await.unwrap();
        let token = lease.fencing_token.expect("single-fenced issues a token");
        assert!(token > last, "token {token} after {last}");
        last = token;
        c.release(&lease).await.unwrap();
    }
    let counter: u64 = inspect(&nodes[0])
        .await
        .get(opts.fence_key("res"))
        .await
        .unwrap();
    assert_eq!(counter, last);
    // A failed acquire issues no token.
    let lease = a.acquire("res").await.unwrap();
    assert!(b.acquire("res").await.unwrap_err().is_contention());
    let counter: u64 = inspect(&nodes[0])
        .await
        .get(opts.fence_key("res"))
        .await
        .unwrap();
    assert_eq!(counter, lease.fencing_token.unwrap());
}

#[tokio::test]
async fn redlock_fenced_tokens_increase_across_quorums_with_uneven_counters() {
    let mut nodes = start_nodes(3).await;
    let opts = options(StrategyKind::RedlockFenced, MS(5_000));
    let fence = opts.fence_key("res");
    let _: () = inspect(&nodes[0]).await.set(&fence, 100).await.unwrap();
    let redlock = client(&nodes, opts).await;

    let first = redlock.acquire("res").await.unwrap();
    assert_eq!(first.fencing_token, Some(101), "max over the quorum");
    for node in &nodes {
        let c: u64 = inspect(node).await.get(&fence).await.unwrap();
        assert_eq!(c, 101, "{} not raised to the issued token", node.name());
    }
    redlock.release(&first).await.unwrap();

    // The node with the high counter is gone; the remaining quorum still issues a larger token.
    nodes[0].kill().unwrap();
    let second = redlock.acquire("res").await.unwrap();
    assert_eq!(second.locked_nodes, 2);
    assert!(
        second.fencing_token.unwrap() > 101,
        "{:?}",
        second.fencing_token
    );
}

#[tokio::test]
async fn watchdog_keeps_the_lease_alive_and_a_pause_loses_it() {
    let nodes = start_nodes(1).await;
    let ttl = MS(300);
    let opts = options(StrategyKind::Single, ttl);
    let key = opts.lock_key("res");
    let c = client(&nodes, opts).await;
    let lease = c.acquire("res").await.unwrap();
    let (pause, paused) = tokio::sync::watch::channel(false);
    let wd = c.spawn_watchdog(lease.clone(), paused);

    // Slow work: three TTLs pass, the key is still ours.
    tokio::time::sleep(ttl * 3).await;
    assert_eq!(
        get(&nodes[0], &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    assert!(wd.renewals() >= 3, "{} renewals", wd.renewals());
    assert!(wd.current().validity_deadline > lease.validity_deadline);
    assert!(wd.current().is_valid());

    // The whole process pauses: no renewal, the key expires.
    pause.send(true).unwrap();
    let frozen = wd.renewals();
    wait_until_gone(&nodes[0], &key, ttl * 4).await;
    assert_eq!(wd.renewals(), frozen, "renewed while paused");
    assert!(wd.lost().is_none(), "a paused watchdog notices nothing");

    // It resumes and finds the lease lost (and does not resurrect it).
    pause.send(false).unwrap();
    let deadline = Instant::now() + ttl * 4;
    while wd.lost().is_none() {
        assert!(Instant::now() < deadline, "loss not reported");
        tokio::time::sleep(MS(5)).await;
    }
    let report = wd.stop().await;
    assert!(
        report.lost.as_deref().unwrap().contains("lost"),
        "{report:?}"
    );
    assert!(!exists(&nodes[0], &key).await);
}

#[tokio::test]
async fn watchdog_stops_renewing_after_stop_and_release() {
    let nodes = start_nodes(1).await;
    let ttl = MS(300);
    let opts = options(StrategyKind::Redlock, ttl);
    let key = opts.lock_key("res");
    let c = client(&nodes, opts).await;
    let lease = c.acquire("res").await.unwrap();
    let (_pause, paused) = tokio::sync::watch::channel(false);
    let wd = c.spawn_watchdog(lease.clone(), paused);
    tokio::time::sleep(ttl * 2).await;
    let report = wd.stop().await;
    assert!(report.lost.is_none(), "{report:?}");
    assert!(report.renewals >= 2, "{report:?}");
    assert!(report.lease.validity_deadline > lease.validity_deadline);
    // Stopped: the key's remaining TTL only goes down from now on.
    let mut conn = inspect(&nodes[0]).await;
    let pttl_now: i64 = conn.pttl(&key).await.unwrap();
    tokio::time::sleep(ttl / 2).await;
    let pttl_later: i64 = conn.pttl(&key).await.unwrap();
    assert!(
        pttl_later > 0 && pttl_later < pttl_now,
        "{pttl_now} -> {pttl_later} ms"
    );
    assert_eq!(c.release(&report.lease).await.unwrap().released_nodes, 1);
    assert!(!exists(&nodes[0], &key).await);
}

#[tokio::test]
async fn no_ttl_lock_never_expires_so_a_crashed_holder_blocks_everyone() {
    let nodes = start_nodes(1).await;
    let opts = options(StrategyKind::NoTtl, MS(100));
    let key = opts.lock_key("res");
    let crashed = client(&nodes, opts.clone()).await;
    let lease = crashed.acquire("res").await.unwrap();
    assert!(lease.remaining_validity() > Duration::from_secs(3600));
    drop(crashed); // the holder dies without releasing
    let pttl: i64 = inspect(&nodes[0]).await.pttl(&key).await.unwrap();
    assert_eq!(pttl, -1, "no-ttl must set no expiry");
    let other = client(&nodes, opts).await;
    let err = other.acquire("res").await.unwrap_err();
    assert!(matches!(err, AcquireError::Held { .. }), "{err:?}");
    assert_eq!(
        get(&nodes[0], &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    // Its owner-checked release still works, and extend keeps it without adding an expiry.
    let revived = client(&nodes, options(StrategyKind::NoTtl, MS(100))).await;
    let extended = revived.extend(&lease).await.unwrap();
    assert!(extended.remaining_validity() > Duration::from_secs(3600));
    assert_eq!(revived.release(&lease).await.unwrap().released_nodes, 1);
}

#[tokio::test]
async fn extend_renews_our_key_and_reports_a_lost_one() {
    let nodes = start_nodes(3).await;
    let opts = options(StrategyKind::Redlock, MS(400));
    let key = opts.lock_key("res");
    let c = client(&nodes, opts).await;
    let lease = c.acquire("res").await.unwrap();
    let extended = c.extend(&lease).await.unwrap();
    assert!(extended.validity_deadline > lease.validity_deadline);
    assert_eq!(extended.owner, lease.owner);
    assert_eq!(extended.locked_nodes, 3);
    // Another owner takes over on two of three nodes: no quorum can be extended.
    for node in &nodes[..2] {
        let _: () = inspect(node).await.set(&key, "someone-else").await.unwrap();
    }
    let err = c.extend(&lease).await.unwrap_err();
    assert!(err.is_lost(), "{err:?}");
}

#[tokio::test]
async fn redlock_release_says_whether_a_quorum_still_held_the_lease() {
    let mut nodes = start_nodes(3).await;
    let opts = options(StrategyKind::Redlock, MS(5_000));
    let key = opts.lock_key("res");
    let c = client(&nodes, opts).await;

    // Our key on all three: held.
    let lease = c.acquire("res").await.unwrap();
    let out = c.release(&lease).await.unwrap();
    assert_eq!((out.released_nodes, out.needed_nodes), (3, 2));
    assert_eq!(out.finding(), ReleaseFinding::Held);

    // Another owner took over on one node: two of three is still a quorum.
    let lease = c.acquire("res").await.unwrap();
    let _: () = inspect(&nodes[0])
        .await
        .set(&key, "someone-else")
        .await
        .unwrap();
    let out = c.release(&lease).await.unwrap();
    assert_eq!(out.released_nodes, 2);
    assert_eq!(out.finding(), ReleaseFinding::Held);
    let _: () = inspect(&nodes[0]).await.del(&key).await.unwrap();

    // On two nodes: our key survived on one only, the lease was lost.
    let lease = c.acquire("res").await.unwrap();
    for node in &nodes[..2] {
        let _: () = inspect(node).await.set(&key, "someone-else").await.unwrap();
    }
    let out = c.release(&lease).await.unwrap();
    assert_eq!(out.released_nodes, 1);
    assert_eq!(out.finding(), ReleaseFinding::Lost);
    for node in &nodes[..2] {
        assert_eq!(get(node, &key).await.as_deref(), Some("someone-else"));
        let _: () = inspect(node).await.del(&key).await.unwrap();
    }

    // One node taken, one down: the down node might still hold our key, so it is unknown.
    let lease = c.acquire("res").await.unwrap();
    let _: () = inspect(&nodes[0])
        .await
        .set(&key, "someone-else")
        .await
        .unwrap();
    nodes[1].kill().unwrap();
    let out = c.release(&lease).await.unwrap();
    assert_eq!((out.released_nodes, out.failed_nodes), (1, 1));
    assert_eq!(out.finding(), ReleaseFinding::Unknown);
}
