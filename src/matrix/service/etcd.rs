//! etcd in the matrix: a three-member cluster (`etcd`); a lock is a key on a lease, granted in
//! whole seconds and expired on the leader's monotonic clock.

use std::time::Duration;

use super::{NodeSet, ServiceShape, TopologyShape, Words};
use crate::strategy::LockService;
use crate::topology::TopologyKind;

pub(super) const SHAPE: ServiceShape = ServiceShape {
    service: LockService::Etcd,
    whole_second_leases: true,
    clock_jump_void: Some("etcd expires leases on the leader's monotonic clock"),
    session_lock: false,
    mid_acquire_crash: false,
    restarted: " (etcd members keep their data on disk)",
    // A resumed etcd majority takes ~2 s (measured) to grant leases again; with half a TTL of
    // gap the next episodes started late and piled up.
    resume_gap: Some(Duration::from_secs(2)),
    topology,
    topologies: &[TopologyKind::Etcd],
    failover,
    describe: |_, _, _| None,
};

/// A killed leader was back in 0.5–1 s (measured under load); a trial's set-up 2.5 s (release
/// build, loaded 2-core machine).
fn topology(_: TopologyKind) -> TopologyShape {
    TopologyShape {
        lock_nodes: NodeSet::Majority,
        lock_nodes_words: "a majority of the etcd members (2 of 3)",
        minority: Some("a minority (1 of 3 etcd members)"),
        session_nodes: "every node",
        failover_kills: NodeSet::Primary,
        restart_allowance: Duration::from_millis(1500),
        setup_allowance: Duration::from_millis(2500),
        shared_proxies: None,
        // A Raft cluster that survives one loss.
        servers: 3,
    }
}

fn failover(_: TopologyKind, w: &Words) -> String {
    format!(
        "{} the etcd leader is killed and restarted at once; the other two members elect a new leader",
        w.aimed
    )
}
