//! The alternatives to Redis against real servers (no mocks): `pg-advisory` and
//! `pg-advisory-fenced` on a PostgreSQL server lockbench starts, `etcd-lease` on a three-member
//! etcd cluster it starts. Acquire, release, contention, tokens, and the way each one loses a
//! lock: a PostgreSQL session that ends, an etcd lease that expires. The ledger's side of both
//! (a mutual-exclusion violation, a stale write rejected) is in `chaos/11a` and `chaos/12a`,
//! which `tests/chaos_scenarios.rs` runs.

mod common;

use std::time::Duration;

use common::nemesis::start_proxied;
use common::node::start_topology;
use common::wait::wait_for_async as within;
use lockbench::lease::{AcquireError, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::{Persistence, TopologyKind};

async fn client(
    topology_endpoints: &[lockbench::node::NodeEndpoint],
    kind: StrategyKind,
    ttl: Duration,
) -> LockClient {
    let mut opts = StrategyOptions::new(kind, ttl);
    opts.node_timeout = Duration::from_millis(500);
    LockClient::connect(topology_endpoints, opts, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: connect: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_advisory_excludes_a_second_session_and_release_hands_the_lock_over() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Postgres, tmp.path()).await;
    let endpoints = topology.endpoints();
    assert!(
        endpoints[0].url.starts_with("postgres://"),
        "{}",
        endpoints[0].url
    );
    for kind in [StrategyKind::PgAdvisory, StrategyKind::PgAdvisoryFenced] {
        let a = client(&endpoints, kind, Duration::from_secs(1)).await;
        let b = client(&endpoints, kind, Duration::from_secs(1)).await;
        let resource = format!("r-{kind}");
        let first = a.try_acquire(&resource).await.expect("free lock");
        assert!(
            first.remaining_validity() > Duration::from_secs(3600),
            "no expiry"
        );
        let refused = b.try_acquire(&resource).await.unwrap_err();
        assert!(matches!(refused, AcquireError::Held { .. }), "{refused:?}");
        // Other resources are independent.
        b.try_acquire(&format!("{resource}-other"))
            .await
            .expect("other resource");
        let released = a.release(&first).await.unwrap();
        assert_eq!(released.finding(), ReleaseFinding::Held);
        let second = b.try_acquire(&resource).await.expect("free after release");
        // Releasing again: this session does not hold it any more.
        assert_eq!(
            a.release(&first).await.unwrap().finding(),
            ReleaseFinding::Lost
        );
        if kind == StrategyKind::PgAdvisoryFenced {
            let (t1, t2) = (first.fencing_token.unwrap(), second.fencing_token.unwrap());
            assert!(t2 > t1, "tokens grow: {t1} then {t2}");
        } else {
            assert_eq!(first.fencing_token, None);
        }
        b.release(&second).await.unwrap();
    }
    topology.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_advisory_lock_dies_with_its_session_while_the_holder_still_believes_it() {
    let (proxied, _dir) = start_proxied(TopologyKind::Postgres, Persistence::None).await;
    let holder = client(
        &proxied.endpoints(),
        StrategyKind::PgAdvisoryFenced,
        Duration::from_secs(1),
    )
    .await;
    let direct = proxied.direct_endpoint("n1").unwrap().clone();
    let other = client(
        &[direct],
        StrategyKind::PgAdvisoryFenced,
        Duration::from_secs(1),
    )
    .await;
    let lease = holder
        .try_acquire("r")
        .await
        .expect("holder takes the lock");
    assert!(matches!(
        other.try_acquire("r").await,
        Err(AcquireError::Held { .. })
    ));
    // Reset the holder's connection: the proxy refuses and drops every connection.
    proxied.api().set_enabled("n1", false).await.unwrap();
    // The server ends the session and frees the lock; the holder has not been told.
    let taken = within(
        Duration::from_secs(5),
        "the lock freed by the server",
        || async { other.try_acquire("r").await.ok() },
    )
    .await;
    assert!(
        lease.is_valid(),
        "the holder's lease has no expiry: it still believes"
    );
    assert!(
        taken.fencing_token.unwrap() > lease.fencing_token.unwrap(),
        "the new holder's token is larger, so a fenced resource rejects the old holder"
    );
    proxied.api().set_enabled("n1", true).await.unwrap();
    // The holder learns it at its next renewal check or release, never as a success.
    let renewal = holder.extend(&lease).await;
    assert!(renewal.is_err(), "{renewal:?}");
    let after = holder.extend(&lease).await.unwrap_err();
    assert!(after.is_lost(), "{after:?}");
    assert_eq!(
        holder.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Lost
    );
    proxied.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lease_excludes_uses_revisions_as_tokens_and_expires_without_renewal() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Etcd, tmp.path()).await;
    let endpoints = topology.endpoints();
    assert_eq!(endpoints.len(), 3);
    let ttl = Duration::from_secs(1);
    let a = client(&endpoints, StrategyKind::EtcdLease, ttl).await;
    let b = client(&endpoints, StrategyKind::EtcdLease, ttl).await;
    let first = a.try_acquire("r").await.expect("free lock");
    assert!(first.remaining_validity() <= ttl);
    assert!(matches!(
        b.try_acquire("r").await,
        Err(AcquireError::Held { .. })
    ));
    // Renewal pushes the deadline out.
    let renewed = a.extend(&first).await.expect("keep-alive");
    assert!(renewed.validity_deadline >= first.validity_deadline);
    assert_eq!(
        a.release(&renewed).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    let second = b.try_acquire("r").await.expect("free after revoke");
    let (t1, t2) = (first.fencing_token.unwrap(), second.fencing_token.unwrap());
    assert!(t2 > t1, "revisions grow: {t1} then {t2}");
    // b stops renewing: etcd expires the lease (TTL 1 s, checked every 500 ms) and a takes over.
    let third = within(Duration::from_secs(5), "the lease to expire", || async {
        a.try_acquire("r").await.ok()
    })
    .await;
    assert!(third.fencing_token.unwrap() > t2);
    let lost = b.extend(&second).await.unwrap_err();
    assert!(lost.is_lost(), "{lost:?}");
    assert_eq!(
        b.release(&second).await.unwrap().finding(),
        ReleaseFinding::Lost
    );
    // A TTL etcd cannot express is refused up front.
    let bad = LockClient::connect(
        &endpoints,
        StrategyOptions::new(StrategyKind::EtcdLease, Duration::from_millis(1500)),
        &ConnectOptions::default(),
    )
    .await
    .err()
    .expect("1.5 s is not whole seconds");
    assert!(bad.to_string().contains("whole seconds"), "{bad}");
    topology.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lease_keeps_working_after_the_leader_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let mut topology = start_topology(TopologyKind::Etcd, tmp.path()).await;
    let leader = topology.current_primary().await.expect("a leader");
    assert!(["n1", "n2", "n3"].contains(&leader.as_str()), "{leader}");
    let endpoints = topology.endpoints();
    let a = client(&endpoints, StrategyKind::EtcdLease, Duration::from_secs(2)).await;
    let before = a.try_acquire("r").await.expect("lock");
    a.release(&before).await.unwrap();
    topology.node_mut(&leader).unwrap().kill().unwrap();
    // The client moves to another member; the two left elect a new leader.
    let after = within(
        Duration::from_secs(10),
        "a lock after the leader died",
        || async { a.try_acquire("r").await.ok() },
    )
    .await;
    assert!(after.fencing_token > before.fencing_token);
    let new_leader = topology.current_primary().await.expect("a new leader");
    assert_ne!(new_leader, leader);
    topology.shutdown().await;
}

#[test]
fn a_strategy_on_the_wrong_topology_is_refused_with_the_right_one() {
    let out = common::cli::run([
        "run",
        "--topology",
        "single",
        "-s",
        "pg-advisory",
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("pg-advisory locks on postgres")
            && stderr.contains("use topology `postgres`"),
        "{stderr}"
    );
}
