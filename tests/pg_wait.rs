//! `pg-advisory-wait` (a blocking `pg_advisory_lock` under `lock_timeout`) and the truth of
//! PostgreSQL unlocks, against a real `postgres` lockbench starts: a contended acquire waits
//! in the server's queue and gets the lock when the holder releases; one still queued at the
//! `lock_timeout` comes back busy (the server cancelled it, nothing left queued); a lease whose
//! server session was terminated is released as lost, never as a release; pooled clients
//! (`--pg-pool`): a lock taken on one borrowed connection and released on another is a lost
//! lease, and the lock stays with its connection (fast recycling) or is freed when that
//! connection is lent again (clean recycling).

mod common;

use std::time::Duration;

use common::node::start_topology;
use common::wait::wait_for_async as within;
use lockbench::lease::{AcquireError, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{
    LockClient, PgPool, PgPoolRecycle, RetryPolicy, StrategyKind, StrategyOptions,
};
use lockbench::topology::TopologyKind;
use tokio::time::Instant;

/// A client of `kind` with a 200 ms node timeout, one attempt, and `acquire_timeout`.
async fn client(
    topology: &lockbench::topology::Topology,
    kind: StrategyKind,
    attempts: u32,
    acquire_timeout: Option<Duration>,
) -> LockClient {
    let mut opts = StrategyOptions::new(kind, Duration::from_secs(1));
    opts.node_timeout = Duration::from_millis(200);
    opts.retry = RetryPolicy {
        attempts,
        acquire_timeout,
        ..RetryPolicy::no_retry()
    };
    LockClient::connect(&topology.endpoints(), opts, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: connect: {e}"))
}

/// A direct session to the server, for looking at `pg_locks`.
async fn admin(topology: &lockbench::topology::Topology) -> tokio_postgres::Client {
    let url = &topology.data_endpoints()[0].url;
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db
}

/// Advisory lock requests the server has queued, not granted.
async fn queued(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_blocking_acquire_waits_and_gets_the_lock_when_the_holder_releases() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Postgres, tmp.path()).await;
    let db = admin(&topology).await;
    let holder = client(&topology, StrategyKind::PgAdvisory, 1, None).await;
    let waiter = client(
        &topology,
        StrategyKind::PgAdvisoryWait,
        1,
        Some(Duration::from_secs(10)),
    )
    .await;
    assert_eq!(waiter.options().lock_wait(), Duration::from_secs(10));
    let lease = holder.try_acquire("r").await.expect("free lock");
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire("r").await }
    });
    within(Duration::from_secs(5), "the waiter queued", || async {
        (queued(&db).await == 1).then_some(())
    })
    .await;
    assert!(!waiting.is_finished(), "granted while the holder held");
    let released_at = Instant::now();
    assert_eq!(
        holder.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    let granted = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("granted within 5 s of the release")
        .unwrap()
        .expect("the waiter's lease");
    assert!(
        granted.acquired_at < released_at,
        "one attempt, started before the release"
    );
    assert_eq!(queued(&db).await, 0);
    let refused = holder.try_acquire("r").await.unwrap_err();
    assert!(matches!(refused, AcquireError::Held { .. }), "{refused:?}");
    assert_eq!(
        waiter.release(&granted).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    holder.try_acquire("r").await.expect("free again");
    topology.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_acquire_still_queued_at_the_lock_timeout_is_busy() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Postgres, tmp.path()).await;
    let db = admin(&topology).await;
    let holder = client(&topology, StrategyKind::PgAdvisory, 1, None).await;
    let _lease = holder.try_acquire("r").await.expect("free lock");
    let wait = Duration::from_millis(300);
    // One attempt: the server's refusal itself.
    let once = client(&topology, StrategyKind::PgAdvisoryWait, 1, Some(wait)).await;
    let start = Instant::now();
    let refused = once.acquire("r").await.unwrap_err();
    let took = start.elapsed();
    assert!(matches!(refused, AcquireError::Held { .. }), "{refused:?}");
    assert!(
        took >= wait && took < wait + once.options().node_timeout,
        "answered by the server's lock_timeout: {took:?}"
    );
    assert_eq!(queued(&db).await, 0, "the server cancelled the request");
    // Retried under the policy: the acquire timeout ends it, busy (contention).
    let retried = client(&topology, StrategyKind::PgAdvisoryWait, 5, Some(wait)).await;
    match retried.acquire("r").await.unwrap_err() {
        e @ AcquireError::Timeout { .. } => {
            assert!(e.is_contention(), "{e:?}");
        }
        other => panic!("expected the acquire timeout, got {other:?}"),
    }
    // The refused sessions are intact: they take another resource at once.
    once.try_acquire("other")
        .await
        .expect("the session still works");
    topology.shutdown().await;
}

/// The server ends the holder's session (`pg_terminate_backend`, as an operator or a
/// session timeout would): the lock is free for others, and the holder's release says
/// lost, never released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_session_the_server_ended_is_released_as_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start_topology(TopologyKind::Postgres, tmp.path()).await;
    let db = admin(&topology).await;
    for kind in [StrategyKind::PgAdvisory, StrategyKind::PgAdvisoryWait] {
        let holder = client(&topology, kind, 1, Some(Duration::from_millis(100))).await;
        let other = client(&topology, StrategyKind::PgAdvisory, 1, None).await;
        let lease = holder.try_acquire("r").await.expect("free lock");
        let ended: bool = db
            .query_one(
                "SELECT pg_terminate_backend(pid) FROM pg_locks \
                 WHERE locktype = 'advisory' AND granted",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(ended);
        let taken = within(Duration::from_secs(5), "the lock freed", || async {
            other.try_acquire("r").await.ok()
        })
        .await;
        let released = holder.release(&lease).await.unwrap();
        assert_eq!(released.released_nodes, 0, "{kind}: {released:?}");
        assert_eq!(released.finding(), ReleaseFinding::Lost, "{kind}");
        other.release(&taken).await.unwrap();
    }
    topology.shutdown().await;
}

/// A client of `kind` borrowing from the pool of 2 connections with `recycle`.
async fn pooled(
    topology: &lockbench::topology::Topology,
    kind: StrategyKind,
    recycle: PgPoolRecycle,
) -> LockClient {
    let mut opts = StrategyOptions::new(kind, Duration::from_secs(1));
    opts.node_timeout = Duration::from_millis(500);
    opts.retry = RetryPolicy {
        acquire_timeout: Some(Duration::from_secs(10)),
        ..RetryPolicy::no_retry()
    };
    opts.pg_pool = Some(PgPool { size: 2, recycle });
    LockClient::connect(&topology.endpoints(), opts, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: pooled connect: {e}"))
}

/// The lock on `r` is taken on pooled connection C1; a blocking acquire of `z` (held past
/// the pool) then keeps C1 busy, so the release of `r` borrows C2, whose session holds
/// nothing: `false`, a lost lease. With fast recycling `r` stays with C1 (a client past the
/// pool is refused); with clean recycling lending C1 to the waiter ran
/// `pg_advisory_unlock_all()`, so `r` was freed under its lease already.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_lock_released_on_another_connection_is_a_lost_lease() {
    for (recycle, kept) in [(PgPoolRecycle::Fast, true), (PgPoolRecycle::Clean, false)] {
        let tmp = tempfile::tempdir().unwrap();
        let topology = start_topology(TopologyKind::Postgres, tmp.path()).await;
        let db = admin(&topology).await;
        let outsider = client(&topology, StrategyKind::PgAdvisory, 1, None).await;
        let other = client(&topology, StrategyKind::PgAdvisory, 1, None).await;
        let z = outsider.try_acquire("z").await.expect("free lock z");
        // Connect borrows and returns one connection (C1): the pool has one idle.
        let holder = pooled(&topology, StrategyKind::PgAdvisory, recycle).await;
        let waiter = pooled(&topology, StrategyKind::PgAdvisoryWait, recycle).await;
        let r = holder.try_acquire("r").await.expect("free lock r");
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move { waiter.acquire("z").await }
        });
        within(
            Duration::from_secs(5),
            "the waiter queued on C1",
            || async { (queued(&db).await == 1).then_some(()) },
        )
        .await;
        let released = holder.release(&r).await.unwrap();
        assert_eq!(released.released_nodes, 0, "{recycle}: {released:?}");
        assert_eq!(released.finding(), ReleaseFinding::Lost, "{recycle}");
        let seen = other.try_acquire("r").await;
        assert_eq!(
            matches!(seen, Err(AcquireError::Held { .. })),
            kept,
            "{recycle}: {seen:?}"
        );
        outsider.release(&z).await.unwrap();
        let granted = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter granted within 5 s")
            .unwrap();
        assert!(granted.is_ok(), "{recycle}: {granted:?}");
        drop((holder, waiter));
        topology.shutdown().await;
    }
}
