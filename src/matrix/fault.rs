//! The matrix's fault classes. Each class is defined once, by what it does to a lock, and
//! turned into a nemesis schedule ([`FaultStep`]s) for the topology a strategy runs on:
//! single-node strategies on `single` (on `sentinel` for `failover`), Redlock on `five`, the
//! PostgreSQL strategies on `postgres`, `etcd-lease` on the three-member `etcd` cluster
//! (node faults there hit a minority or majority of members, like Redlock's five nodes).
//! A row on a Redis Cluster ([`RedisSetup::Cluster`]) runs every class on `cluster`, its node
//! faults aimed at the primary of the lock's shard, and has five columns of its own
//! ([`FaultClass::CLUSTER`]: the `CLUSTER FAILOVER` modes, a primary paused past the node
//! timeout and one cut off with the holder), which the other rows do not run.
//!
//! A trial cycles its class many times: a lead-in (baseline, one TTL), then episodes back to
//! back (fault → heal → recovery gap), each aimed at the lock's state. The episode shapes per
//! class and topology are in [`super::shape`].

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::plan::MatrixWorkload;
use super::setup::{MatrixRow, RedisSetup};
use crate::topology::TopologyKind;

/// One fault class of the matrix (a column of its table).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FaultClass {
    /// Baseline: no fault.
    None,
    /// Added latency on every node while acquires are in flight, alternating below the node
    /// timeout and near the TTL.
    Latency,
    /// Black hole to a minority of the nodes while a lease is live on them (shorter than the
    /// TTL on a one-node topology).
    PartitionMinority,
    /// The holder (watchdog on, working past the TTL) cut off from every node, longer than the
    /// TTL; only its own connections are cut (per-client proxies), the other clients go on.
    PartitionHolder,
    /// kill -9 of the node(s) holding a live lease, restarted at once without data.
    CrashRestartEmpty,
    /// SIGSTOP of the node(s) holding a live lease for longer than the TTL.
    NodePause,
    /// The node(s) holding a live lease jump their clock forward by more than the TTL.
    ClockJump,
    /// GC-like stall of the holder inside its critical section, longer than the TTL.
    ClientPause,
    /// The holder dies inside its critical section: no release, no renewal.
    ClientCrash,
    /// The holder's connection to the lock service is reset while it is inside.
    SessionLoss,
    /// Sentinel failover right after an acquire that has not reached the replicas; for Redlock
    /// a node replaced by an empty one, for PostgreSQL the server restarted, for etcd the
    /// leader killed.
    Failover,
    /// The holder's critical section longer than the TTL, the watchdog renewing the lease.
    SlowWork,
    /// Cluster rows only: `CLUSTER FAILOVER` (default mode) sent to the replica of the lock's
    /// shard while replication lags behind a holder's key: the replica catches up first.
    ClusterFailover,
    /// Cluster rows only: `CLUSTER FAILOVER FORCE` under the same lag: no catch-up.
    ClusterFailoverForce,
    /// Cluster rows only: `CLUSTER FAILOVER TAKEOVER` under the same lag: no catch-up and no
    /// election.
    ClusterFailoverTakeover,
    /// Cluster rows only: the primary of the lock's shard SIGSTOPped longer than the cluster
    /// node timeout (its replica is promoted meanwhile), then resumed.
    ClusterPause,
    /// Cluster rows only: the primary of the lock's shard cut off the cluster bus and off its
    /// replica for longer than the node timeout, with the holder on its side and every other
    /// client cut off it: the majority promotes the replica (claim 20g).
    ClusterMinorityPartition,
}

impl FaultClass {
    /// Every class, in the matrix's column order.
    pub const ALL: [FaultClass; 12] = [
        FaultClass::None,
        FaultClass::Latency,
        FaultClass::PartitionMinority,
        FaultClass::PartitionHolder,
        FaultClass::CrashRestartEmpty,
        FaultClass::NodePause,
        FaultClass::ClockJump,
        FaultClass::ClientPause,
        FaultClass::ClientCrash,
        FaultClass::SessionLoss,
        FaultClass::Failover,
        FaultClass::SlowWork,
    ];

    /// The columns only a Redis Cluster row runs, in column order (after [`FaultClass::ALL`]).
    pub const CLUSTER: [FaultClass; 5] = [
        FaultClass::ClusterFailover,
        FaultClass::ClusterFailoverForce,
        FaultClass::ClusterFailoverTakeover,
        FaultClass::ClusterPause,
        FaultClass::ClusterMinorityPartition,
    ];

    /// The kebab-case name used on the CLI and in result files.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Comma-separated names, for error messages.
    pub fn valid_names() -> String {
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether only a Redis Cluster row runs this class ([`FaultClass::CLUSTER`]).
    pub fn cluster_only(self) -> bool {
        Self::CLUSTER.contains(&self)
    }

    /// Whether `row` runs this class: only a cluster row runs the cluster ones, and a cluster
    /// row runs every other class but `clock-jump` (the nemesis' clock jump is a Lua script
    /// over a node's whole keyspace, which a cluster node refuses for keys of several slots).
    /// A matrix with both kinds of rows has no cell where a row does not run a class.
    pub fn applies(self, row: impl Into<MatrixRow>) -> bool {
        let cluster = row.into().redis == RedisSetup::Cluster;
        if cluster {
            self != FaultClass::ClockJump
        } else {
            !self.cluster_only()
        }
    }

    /// The topology `row` runs on under this fault: `cluster` for a cluster row; otherwise
    /// the strategy's default topology ([`TopologyKind::default_for`]: five nodes for Redlock,
    /// Sentinel for `single-wait`, its own server for PostgreSQL and etcd, one node
    /// otherwise), except that a single-node strategy's failover runs on Sentinel. On Sentinel
    /// the node faults act on `n1`, the primary (the node that holds the lock), as they act on
    /// the only node of `single`; on `cluster` they act on the primary of the lock's shard.
    pub fn topology(self, row: impl Into<MatrixRow>) -> TopologyKind {
        let row = row.into();
        match row.home_topology() {
            TopologyKind::Single if self == FaultClass::Failover => TopologyKind::Sentinel,
            home => home,
        }
    }

    /// Whether the lease is renewed by the watchdog in this class: `slow-work` (work longer
    /// than the TTL with renewal running) and `partition-holder` (the holder's work outlasts
    /// the TTL, its renewals cut off by the partition), as in claims 10a and 14.
    pub fn watchdog(self) -> bool {
        matches!(self, FaultClass::SlowWork | FaultClass::PartitionHolder)
    }

    /// What one episode of this class does on `topology` under workload `w`, in words, with
    /// targets and timing, and how many episodes a trial has (for the report); worded in
    /// [`super::describe`] from the service's registration.
    pub fn describe(self, topology: TopologyKind, w: &MatrixWorkload) -> String {
        super::describe::episode(self, topology, w)
    }
}

impl FromStr for FaultClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown fault class {s:?} (valid: {})", Self::valid_names()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_match_serde_and_every_class_is_a_column() {
        crate::variant_names::assert_names_match_serde::<FaultClass>();
        let columns: Vec<FaultClass> = FaultClass::ALL
            .into_iter()
            .chain(FaultClass::CLUSTER)
            .collect();
        assert_eq!(
            columns.as_slice(),
            <FaultClass as strum::VariantArray>::VARIANTS
        );
        assert_eq!(" slow-work ".parse(), Ok(FaultClass::SlowWork));
        assert_eq!(
            "cluster-failover-force".parse(),
            Ok(FaultClass::ClusterFailoverForce)
        );
        let err = "cluster-kill".parse::<FaultClass>().unwrap_err();
        assert!(err.contains("slow-work, cluster-failover, "), "{err}");
        assert!(err.ends_with("cluster-minority-partition)"), "{err}");
    }

    #[test]
    fn descriptions_say_what_one_episode_does_and_how_many_a_trial_has() {
        let w = MatrixWorkload::standard();
        let d = FaultClass::ClientPause.describe(TopologyKind::Single, &w);
        assert!(
            d.contains("stalls 750 ms") && d.contains("32 episodes per trial"),
            "{d}"
        );
        let d = FaultClass::ClientPause.describe(TopologyKind::Etcd, &w);
        assert!(
            d.contains("stalls 1500 ms"),
            "etcd leases are whole seconds: {d}"
        );
        let d = FaultClass::None.describe(TopologyKind::Single, &w);
        assert!(d.contains("42 episodes per trial"), "{d}");
        let d = FaultClass::Failover.describe(TopologyKind::Sentinel, &w);
        assert!(
            d.contains("one episode per trial") && d.contains("TTL 5000 ms"),
            "{d}"
        );
        let d = FaultClass::ClockJump.describe(TopologyKind::Postgres, &w);
        assert!(d.starts_with("no fault injected"), "{d}");
        let d = FaultClass::PartitionHolder.describe(TopologyKind::Single, &w);
        assert!(d.contains("that client alone is cut off"), "{d}");
        let d = FaultClass::PartitionHolder.describe(TopologyKind::Sentinel, &w);
        assert!(d.contains("every client"), "{d}");
        let d = FaultClass::CrashRestartEmpty.describe(TopologyKind::Five, &w);
        assert!(
            d.contains("stretched 300 ms") && d.contains("3 of 5"),
            "{d}"
        );
    }
}
