//! Each lock service's registration in the matrix: where an episode's node faults land on each
//! of its topologies, how long its nodes take to come back and a trial to set up, what its
//! lease and its clock make of the faults, and the words the report uses for the faults that
//! read differently on it. [`super::shape`] builds the episodes from these facts and
//! [`super::describe`] words them; neither names a service or a topology itself, except the
//! trials that only one topology has (Sentinel's failover, a cluster's own columns).
//!
//! One file per service (`redis`, `postgres`, `etcd`), each a [`ServiceShape`]; [`of`] and
//! [`topology`] are the matches that list them (`strategy::service` has the list of every
//! layer's registrations).

mod etcd;
mod postgres;
mod redis;

use std::time::Duration;

use super::fault::FaultClass;
use super::plan::MatrixWorkload;
use crate::nemesis::Target;
use crate::strategy::LockService;
use crate::topology::TopologyKind;

/// A set of nodes an episode's node fault is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSet {
    /// A majority of the nodes (Redlock's five, etcd's three members).
    Majority,
    /// The primary: Sentinel's, the lock's shard's on a cluster, etcd's leader.
    Primary,
    /// `n1`: the only node, the PostgreSQL server.
    FirstNode,
}

impl NodeSet {
    /// The nemesis target.
    pub fn target(self) -> Target {
        match self {
            NodeSet::Majority => Target::Majority,
            NodeSet::Primary => Target::Primary,
            NodeSet::FirstNode => Target::Nodes(vec!["n1".into()]),
        }
    }
}

/// What the matrix knows about one topology of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyShape {
    /// The nodes holding the lock: the target of `crash-restart-empty`, `node-pause`,
    /// `clock-jump` (and of `partition-minority` when there is no minority, [`minority`](Self::minority)).
    pub lock_nodes: NodeSet,
    /// The same, in words ("a majority (3 of 5 nodes)").
    pub lock_nodes_words: &'static str,
    /// A minority the clients can lose while the lock stays on a majority, in words; `None`
    /// when there is none (one node, or a cluster, whose lock lives on one shard).
    pub minority: Option<&'static str>,
    /// The nodes a session reset cuts, in words ("every node", "n1").
    pub session_nodes: &'static str,
    /// The node a `failover` episode kills, when it is not Sentinel's own failover trial.
    pub failover_kills: NodeSet,
    /// Planned time for a killed node to be back (restart until it answers).
    pub restart_allowance: Duration,
    /// Planned time a trial spends outside its run: starting the nodes and Toxiproxy,
    /// checking the history, tearing down.
    pub setup_allowance: Duration,
    /// Who tells the clients the nodes' addresses when the clients reach the nodes only
    /// through proxies every client shares ("Sentinel", "the cluster"), so that a client cannot
    /// be cut off alone; `None` when each client has proxies of its own.
    pub shared_proxies: Option<&'static str>,
    /// The server processes a team has to run (and monitor, upgrade, back up) for it: the
    /// cost side of the decision table ([`super::probe::servers_to_run`]).
    pub servers: u32,
}

/// The words [`ServiceShape::describe`] builds on: the TTL, the aimed opening, the workload.
pub struct Words<'a> {
    /// The lease TTL on this topology.
    pub ttl: Duration,
    /// "as soon as a client holds the lock, its section is stretched … and 1 ms later".
    pub aimed: String,
    /// The topology's facts.
    pub topology: TopologyShape,
    /// The workload of the matrix.
    pub workload: &'a MatrixWorkload,
}

impl Words<'_> {
    /// `d` in whole ms ("250 ms").
    pub fn ms(d: Duration) -> String {
        format!("{} ms", d.as_millis())
    }

    /// `n/d` of the TTL in words.
    pub fn part(&self, n: u32, d: u32) -> String {
        Self::ms(self.ttl * n / d)
    }
}

/// What the matrix knows about one lock service.
#[derive(Clone, Copy)]
pub struct ServiceShape {
    /// The service.
    pub service: LockService,
    /// Whether it grants leases in whole seconds (etcd: at least 1 s, a TTL rounded up).
    pub whole_second_leases: bool,
    /// Why a clock jump has nothing to act on here; `None` when it does (the clock-jump
    /// method shortens every key's TTL on a node: Redis).
    pub clock_jump_void: Option<&'static str>,
    /// Whether the lock ends with the holder's session rather than with a TTL (PostgreSQL):
    /// a `session-loss` stall then outlasts the TTL, and a `partition-holder` holder works on
    /// past the heal.
    pub session_lock: bool,
    /// Whether a strategy can crash between taking and expiring its key (Redis' `setnx-expire`).
    pub mid_acquire_crash: bool,
    /// What a killed and restarted node has lost, in words after "restarted at once".
    pub restarted: &'static str,
    /// Extra time after a `node-pause` heal before the next episode, when a resumed majority
    /// takes longer than half a TTL to grant leases again (etcd, ~2 s measured).
    pub resume_gap: Option<Duration>,
    /// The facts of one of its topologies (one of [`ServiceShape::topologies`]).
    pub topology: fn(TopologyKind) -> TopologyShape,
    /// The local topologies it runs on.
    pub topologies: &'static [TopologyKind],
    /// What a `failover` episode does on `topology`, in words (a service without failover
    /// names its nearest equivalent).
    pub failover: fn(TopologyKind, &Words) -> String,
    /// Its own words for another `class` on `topology`, or `None` for the common words of
    /// [`super::describe`].
    pub describe: fn(FaultClass, TopologyKind, &Words) -> Option<String>,
}

/// The matrix registration of `service`.
pub fn of(service: LockService) -> ServiceShape {
    match service {
        LockService::Redis => redis::SHAPE,
        LockService::Postgres => postgres::SHAPE,
        LockService::Etcd => etcd::SHAPE,
    }
}

/// The facts of `kind`, from its service's registration; `external` (which the matrix does
/// not run) gets those of one Redis node.
pub fn topology(kind: TopologyKind) -> TopologyShape {
    let service = of(kind.service().unwrap_or(LockService::Redis));
    (service.topology)(kind)
}

/// The registration of the service `kind` runs (Redis for `external`).
pub fn of_topology(kind: TopologyKind) -> ServiceShape {
    of(kind.service().unwrap_or(LockService::Redis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_registers_the_topologies_that_run_it() {
        for service in LockService::ALL {
            let shape = of(service);
            assert_eq!(shape.service, service);
            assert!(!shape.topologies.is_empty(), "{}", service.name());
            for &kind in shape.topologies {
                assert_eq!(kind.service(), Some(service), "{kind}");
                let t = (shape.topology)(kind);
                assert!(t.restart_allowance > Duration::ZERO, "{kind}");
                assert!(t.setup_allowance > Duration::ZERO, "{kind}");
                assert!(!t.lock_nodes_words.is_empty(), "{kind}");
            }
        }
        for &kind in <TopologyKind as strum::VariantArray>::VARIANTS {
            if let Some(service) = kind.service() {
                assert!(of(service).topologies.contains(&kind), "{kind}");
            }
        }
    }
}
