//! PostgreSQL in the matrix: one server (`postgres`), its advisory locks held by sessions.

use std::time::Duration;

use super::{NodeSet, ServiceShape, TopologyShape, Words};
use crate::matrix::fault::FaultClass;
use crate::strategy::LockService;
use crate::topology::TopologyKind;

pub(super) const SHAPE: ServiceShape = ServiceShape {
    service: LockService::Postgres,
    whole_second_leases: false,
    clock_jump_void: Some("advisory locks have no expiry"),
    session_lock: true,
    mid_acquire_crash: false,
    restarted:
        " (PostgreSQL recovers its data; every session, and so every advisory lock, is gone)",
    resume_gap: None,
    topology,
    topologies: &[TopologyKind::Postgres],
    failover,
    describe,
};

/// Crash recovery took 1.2–3.3 s (measured under load); a trial's set-up 0.8–1.6 s (release
/// build, loaded 2-core machine).
fn topology(_: TopologyKind) -> TopologyShape {
    TopologyShape {
        lock_nodes: NodeSet::FirstNode,
        lock_nodes_words: "the PostgreSQL server (n1)",
        minority: None,
        session_nodes: "n1",
        failover_kills: NodeSet::FirstNode,
        restart_allowance: Duration::from_secs(3),
        setup_allowance: Duration::from_millis(1500),
        shared_proxies: None,
        servers: 1,
    }
}

fn failover(_: TopologyKind, w: &Words) -> String {
    format!(
        "one PostgreSQL server has no failover; nearest equivalent: {} the server is killed and restarted at once (every session ends)",
        w.aimed
    )
}

fn describe(class: FaultClass, _: TopologyKind, w: &Words) -> Option<String> {
    (class == FaultClass::SessionLoss).then(|| {
        format!(
            "the client holding the lock stalls {} and {} later its connection is reset (the proxy refuses and drops every \
             connection for {}): the server ends its session and frees its lock",
            w.part(3, 2),
            w.part(1, 10),
            w.part(1, 2)
        )
    })
}
