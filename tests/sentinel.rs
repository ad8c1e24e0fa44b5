//! The sentinel topology on real processes: replication through proxies, failover (kill and
//! `SENTINEL FAILOVER`) followed by a `single` LockClient, replication partitions.

mod common;

use std::time::Duration;

use common::nemesis::{
    assert_replicas_replicate_through_proxies, cut_and_heal_replication_of_n2, direct, exists_on,
    fail_over_n1, single_client_locking_on, step, wait_until_locks_land_on, NemesisRig,
};
use common::node::set;
use lockbench::nemesis::ClientControls;
use lockbench::nemesis::{FailoverMethod, FaultKind, Link};
use lockbench::topology::TopologyKind;

/// Heals, checks that three data nodes and three Sentinels ran, and tears the topology down
/// leaving no process.
async fn finish(mut rig: NemesisRig) {
    rig.heal_all().await;
    assert_eq!(rig.node_pids().len(), 3);
    let sentinels = rig.nemesis.proxied().topology().sentinel_endpoints();
    assert_eq!(sentinels.len(), 3);
    rig.finish().await;
}

async fn failover_is_followed(method: FailoverMethod) {
    let mut rig = NemesisRig::start(TopologyKind::Sentinel).await;
    let nemesis = &mut rig.nemesis;
    assert_eq!(nemesis.proxied().primary().await.unwrap(), "n1");
    // Replicas replicate through their n2-repl / n3-repl proxies.
    assert_replicas_replicate_through_proxies(nemesis).await;
    assert_eq!(nemesis.proxied().endpoints().len(), 1);
    let client = single_client_locking_on(nemesis, "n1").await;

    let new = fail_over_n1(nemesis, method).await;

    // The new primary accepts writes.
    set(&direct(nemesis, &new), "lockbench:after", "1").await;
    // The client follows: its next lock lands on the new primary (bounded; each acquire
    // within 15 s).
    wait_until_locks_land_on(
        &client,
        nemesis,
        &new,
        Duration::from_secs(30),
        Some(Duration::from_secs(15)),
    )
    .await;
    finish(rig).await;
}

#[tokio::test]
async fn kill_primary_failover_is_followed_by_a_single_client() {
    failover_is_followed(FailoverMethod::KillPrimary).await;
}

#[tokio::test]
async fn sentinel_failover_is_followed_by_a_single_client() {
    failover_is_followed(FailoverMethod::Sentinel).await;
}

#[tokio::test]
async fn replication_partition_cuts_the_replica_and_heal_restores_it() {
    let mut rig = NemesisRig::start(TopologyKind::Sentinel).await;
    let nemesis = &mut rig.nemesis;
    cut_and_heal_replication_of_n2(nemesis, Duration::from_secs(5), Duration::from_secs(10)).await;
    let controls = ClientControls::new(0);

    // Lag: with 500 ms latency on the replication links a fresh write is not yet on n3.
    let mut lag = step(FaultKind::Latency, "primary");
    lag.link = Some(Link::Replication);
    lag.latency = Some(Duration::from_millis(500));
    let rec = nemesis.inject(&lag, &controls).await.unwrap();
    assert_eq!(rec.targets, vec!["n2-repl", "n3-repl"]);
    set(&direct(nemesis, "n1"), "lockbench:lag", "1").await;
    assert!(
        !exists_on(nemesis, "n3", "lockbench:lag").await,
        "replicated without lag"
    );
    let nemesis_ref: &_ = nemesis;
    common::wait::wait_for_async(Duration::from_secs(5), "n3 to replicate", || async move {
        exists_on(nemesis_ref, "n3", "lockbench:lag")
            .await
            .then_some(())
    })
    .await;
    nemesis.heal(rec.id).await.unwrap();
    finish(rig).await;
}
