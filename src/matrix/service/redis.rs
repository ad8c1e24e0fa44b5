//! Redis in the matrix: one node (`single`), Redlock's five independent nodes (`five`), a
//! primary with replicas and Sentinels (`sentinel`, the `failover` column of single-node rows),
//! and a Redis Cluster (`cluster`; its own columns are in [`super::super::cluster_shape`]).

use std::time::Duration;

use super::{NodeSet, ServiceShape, TopologyShape, Words};
use crate::matrix::fault::FaultClass;
use crate::matrix::shape;
use crate::strategy::LockService;
use crate::topology::TopologyKind;

pub(super) const SHAPE: ServiceShape = ServiceShape {
    service: LockService::Redis,
    whole_second_leases: false,
    clock_jump_void: None,
    session_lock: false,
    mid_acquire_crash: true,
    restarted: " without persistence (empty)",
    resume_gap: None,
    topology,
    topologies: &[
        TopologyKind::Single,
        TopologyKind::Five,
        TopologyKind::Sentinel,
        TopologyKind::Cluster,
    ],
    failover,
    describe,
};

/// Restart times measured under load: a Redis node 25–40 ms (three in a row on `five`:
/// 80–130 ms); a restarted cluster node serves its slots once its cluster state is ok again,
/// 1.6 s after the restart, and the clients reconnect after that. Set-up (release build, loaded
/// 2-core machine): 0.3 s single, 0.3–0.8 s five, 3.4 s sentinel, a cluster 4.5 s (debug build).
fn topology(kind: TopologyKind) -> TopologyShape {
    let one_node = TopologyShape {
        lock_nodes: NodeSet::FirstNode,
        lock_nodes_words: "n1 (the only node)",
        minority: None,
        session_nodes: "n1",
        failover_kills: NodeSet::FirstNode,
        restart_allowance: Duration::from_millis(200),
        setup_allowance: Duration::from_millis(500),
        shared_proxies: None,
        servers: 1,
    };
    match kind {
        TopologyKind::Five => TopologyShape {
            lock_nodes: NodeSet::Majority,
            lock_nodes_words: "a majority (3 of 5 nodes)",
            minority: Some("a minority (n1, n2 of 5)"),
            session_nodes: "every node",
            restart_allowance: Duration::from_millis(400),
            setup_allowance: Duration::from_secs(1),
            servers: 5,
            ..one_node
        },
        TopologyKind::Sentinel => TopologyShape {
            lock_nodes_words: "n1 (the primary; its replicas n2, n3 untouched)",
            setup_allowance: Duration::from_millis(3500),
            shared_proxies: Some("Sentinel"),
            // A primary, two replicas and three Sentinels: the Sentinels are processes to
            // operate like any other, and failover needs a quorum of them.
            servers: 6,
            ..one_node
        },
        TopologyKind::Cluster => TopologyShape {
            lock_nodes: NodeSet::Primary,
            lock_nodes_words:
                "the primary of the lock's shard (its replica and the other shards untouched)",
            session_nodes: "every node",
            restart_allowance: Duration::from_millis(2500),
            setup_allowance: Duration::from_millis(4500),
            shared_proxies: Some("the cluster"),
            // 3 primaries and their replicas, the smallest cluster `redis-cli --cluster
            // create` makes.
            servers: 6,
            ..one_node
        },
        _ => one_node,
    }
}

fn failover(topology: TopologyKind, w: &Words) -> String {
    if topology == TopologyKind::Sentinel {
        format!(
            "Sentinel (primary + 2 replicas + 3 sentinels), TTL {} in this cell (a lease shorter than the failover would run \
             out anyway): the clients join after {}, replication lagging {} (all replicas; only n3 for single-wait, which \
             waits for a replica); as soon as a client holds the lock its section is stretched {} and 1 ms later the primary \
             is killed; a replica that never saw the holder's key is promoted",
            Words::ms(shape::FAILOVER_TTL),
            Words::ms(w.ttl),
            Words::ms(shape::FAILOVER_LAG),
            Words::ms(shape::FAILOVER_STRETCH)
        )
    } else {
        format!(
            "Redlock has no failover; nearest equivalent: {} n1 is killed and replaced at once by an empty node",
            w.aimed
        )
    }
}

fn describe(class: FaultClass, topology: TopologyKind, w: &Words) -> Option<String> {
    (class == FaultClass::PartitionMinority && topology == TopologyKind::Cluster).then(|| {
        format!(
            "the lock lives on one shard, a minority of the cluster's nodes is not what holds it: {} a black hole \
             between the clients and the primary of the lock's shard for {} (shorter than the TTL and the node timeout)",
            w.aimed,
            w.part(1, 2)
        )
    })
}
