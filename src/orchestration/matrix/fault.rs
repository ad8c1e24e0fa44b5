//! The matrix's fault classes. Each class is defined once, by what it does to a lock, and
//! turned into a nemesis schedule ([`FaultStep`]s) for the topology a strategy runs on:
//! single-node strategies on `single` (on `sentinel` for `failover`), Redlock on `five`, the
//! PostgreSQL strategies on `postgres`, `etcd-lease` on the three-member `etcd` cluster
//! (node faults there hit a minority or majority of members, like Redlock's five nodes).
//!
//! Timing is relative to the workload: `T` = lease TTL, `F` = fault start (offset from the
//! trial's start). The longest window ends at `F + 2T`; [`super::MatrixWorkload::validate`]
//! asks for at least one more TTL of run time after it, so the recovery is measured too.

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::nemesis::{FailoverMethod, FaultKind, FaultStep, Link, Target};
use crate::strategy::{LockService, StrategyKind};
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
    /// Added latency on every node: first below the node timeout, then near the TTL.
    Latency,
    /// Black hole to a minority of the nodes (shorter than the TTL on a one-node topology).
    PartitionMinority,
    /// Black hole between the clients (the holder among them) and every node, longer than the TTL.
    PartitionHolder,
    /// kill -9 of the node(s) holding the lock, restarted at once without data.
    CrashRestartEmpty,
    /// SIGSTOP of the node(s) holding the lock for longer than the TTL.
    NodePause,
    /// The node(s) holding the lock jump their clock forward by more than the TTL.
    ClockJump,
    /// GC-like stall of half the clients inside their critical section, longer than the TTL.
    ClientPause,
    /// The holder dies inside its critical section: no release, no renewal.
    ClientCrash,
    /// The holder's connection to the lock service is reset while it is inside.
    SessionLoss,
    /// Sentinel failover with replication lag; for Redlock, a node replaced by an empty one.
    Failover,
    /// Critical sections longer than the TTL with the watchdog renewing the lease.
    SlowWork,
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

    /// The kebab-case name used on the CLI and in result files.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Comma-separated names, for error messages.
    pub fn valid_names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// The topology `strategy` runs on under this fault: its default topology
    /// ([`TopologyKind::default_for`]: five nodes for Redlock, Sentinel for `single-wait`, its
    /// own server for PostgreSQL and etcd, one node otherwise), except that a single-node
    /// strategy's failover runs on Sentinel. On Sentinel the node faults act on `n1`, the
    /// primary (the node that holds the lock), as they act on the only node of `single`.
    pub fn topology(self, strategy: StrategyKind) -> TopologyKind {
        match TopologyKind::default_for(strategy) {
            TopologyKind::Single if self == FaultClass::Failover => TopologyKind::Sentinel,
            home => home,
        }
    }

    /// Whether the lease is renewed by the watchdog in this class (only `slow-work`: the
    /// point of that class is work longer than the TTL with renewal running).
    pub fn watchdog(self) -> bool {
        self == FaultClass::SlowWork
    }

    /// The nemesis schedule on `topology` for a workload of `clients` clients, TTL `ttl`,
    /// run time `duration`, with the fault starting at `fault_at`.
    pub fn schedule(
        self,
        topology: TopologyKind,
        clients: u32,
        ttl: Duration,
        duration: Duration,
        fault_at: Duration,
    ) -> Vec<FaultStep> {
        let five = matches!(topology, TopologyKind::Five | TopologyKind::Etcd);
        let nodes = |t: Target| {
            if five {
                t
            } else {
                Target::Nodes(vec!["n1".into()])
            }
        };
        let step = |fault: FaultKind, target: Target, at: Duration, dur: Option<Duration>| {
            let mut s = FaultStep::new(fault, target);
            s.at = at;
            s.duration = dur;
            s
        };
        let half_clients = Target::Clients((0..(clients / 2).max(1)).collect());
        match self {
            FaultClass::None => vec![],
            FaultClass::ClientCrash | FaultClass::SessionLoss => vec![],
            FaultClass::Latency => {
                let mut low = step(FaultKind::Latency, Target::AllNodes, fault_at, Some(ttl));
                low.latency = Some(ttl / 20);
                low.jitter = Some(ttl / 40);
                let mut high = step(
                    FaultKind::Latency,
                    Target::AllNodes,
                    fault_at + ttl,
                    Some(ttl),
                );
                high.latency = Some(ttl * 4 / 5);
                vec![low, high]
            }
            FaultClass::PartitionMinority => {
                let len = if five { ttl * 2 } else { ttl / 2 };
                vec![step(
                    FaultKind::Partition,
                    nodes(Target::Minority),
                    fault_at,
                    Some(len),
                )]
            }
            FaultClass::PartitionHolder => {
                vec![step(
                    FaultKind::Partition,
                    Target::AllNodes,
                    fault_at,
                    Some(ttl * 2),
                )]
            }
            FaultClass::CrashRestartEmpty => {
                vec![step(
                    FaultKind::Kill,
                    nodes(Target::Majority),
                    fault_at,
                    None,
                )]
            }
            FaultClass::NodePause => vec![step(
                FaultKind::PauseNode,
                nodes(Target::Majority),
                fault_at,
                Some(ttl * 3 / 2),
            )],
            FaultClass::ClockJump if !clock_applies(topology) => vec![],
            FaultClass::ClockJump => {
                let mut s = step(
                    FaultKind::ClockJump,
                    nodes(Target::Majority),
                    fault_at,
                    None,
                );
                s.delta = Some(ttl * 2);
                vec![s]
            }
            FaultClass::ClientPause => vec![step(
                FaultKind::ClientPause,
                half_clients,
                fault_at,
                Some(ttl * 3 / 2),
            )],
            FaultClass::Failover if topology == TopologyKind::Sentinel => {
                // Replication lags one TTL from the start, so the writes just before the kill
                // never reach the replica Sentinel promotes.
                let lag_from = (ttl / 5).min(fault_at / 2);
                let lag_until = duration.saturating_sub(ttl / 5);
                let mut lag = step(
                    FaultKind::Latency,
                    Target::Primary,
                    lag_from,
                    Some(lag_until.saturating_sub(lag_from)),
                );
                lag.link = Some(Link::Replication);
                lag.latency = Some(ttl);
                let mut kill = step(FaultKind::Failover, Target::Primary, fault_at, None);
                kill.method = Some(FailoverMethod::KillPrimary);
                vec![lag, kill]
            }
            FaultClass::Failover if topology == TopologyKind::Etcd => {
                vec![step(FaultKind::Kill, Target::Primary, fault_at, None)]
            }
            FaultClass::Failover => {
                vec![step(
                    FaultKind::Kill,
                    Target::Nodes(vec!["n1".into()]),
                    fault_at,
                    None,
                )]
            }
            FaultClass::SlowWork => {
                let mut s = step(
                    FaultKind::SlowWork,
                    half_clients,
                    fault_at,
                    Some(ttl * 3 / 2),
                );
                s.extra = Some(ttl * 3 / 2);
                vec![s]
            }
        }
    }

    /// What this class does on `topology`, in words, with targets and timing (for the report).
    pub fn describe(
        self,
        topology: TopologyKind,
        clients: u32,
        ttl: Duration,
        fault_at: Duration,
    ) -> String {
        let ms = |d: Duration| format!("{} ms", d.as_millis());
        let at = ms(fault_at);
        let five = matches!(topology, TopologyKind::Five | TopologyKind::Etcd);
        let lock_nodes = match topology {
            TopologyKind::Five => "a majority (3 of 5 nodes)",
            TopologyKind::Etcd => "a majority of the etcd members (2 of 3)",
            TopologyKind::Postgres => "the PostgreSQL server (n1)",
            TopologyKind::Sentinel => "n1 (the primary; its replicas n2, n3 untouched)",
            _ => "n1 (the only node)",
        };
        let half = (clients / 2).max(1);
        match self {
            FaultClass::None => "no fault (baseline)".into(),
            FaultClass::ClientCrash => "the holder dies inside its section (planned)".into(),
            FaultClass::SessionLoss => "the holder's connection is reset inside its section (planned)".into(),
            FaultClass::Latency => format!(
                "latency on every node's proxy from {at}: {} ± {} for {} (below the node timeout), then {} for {} (near the TTL {})",
                ms(ttl / 20), ms(ttl / 40), ms(ttl), ms(ttl * 4 / 5), ms(ttl), ms(ttl)
            ),
            FaultClass::PartitionMinority if topology == TopologyKind::Etcd => format!(
                "black hole (data dropped both ways) between the clients and a minority (1 of 3 etcd members) from {at} for {} (longer than the TTL)",
                ms(ttl * 2)
            ),
            FaultClass::PartitionMinority if five => format!(
                "black hole (data dropped both ways) to a minority (2 of 5 nodes) from {at} for {} (longer than the TTL)",
                ms(ttl * 2)
            ),
            FaultClass::PartitionMinority if topology == TopologyKind::Sentinel => format!(
                "black hole between the clients and n1 (the primary) from {at} for {} (shorter than the TTL); replication untouched",
                ms(ttl / 2)
            ),
            FaultClass::PartitionMinority => format!(
                "one node has no minority to lose: black hole to n1 from {at} for {} (shorter than the TTL)",
                ms(ttl / 2)
            ),
            FaultClass::PartitionHolder => format!(
                "black hole between the clients (the holder among them) and every node from {at} for {} (longer than the TTL); \
                 the proxies sit per node, so the holder is cut off together with the other clients",
                ms(ttl * 2)
            ),
            FaultClass::CrashRestartEmpty if topology == TopologyKind::Postgres => format!(
                "kill -9 of {lock_nodes} at {at}, restarted at once (PostgreSQL recovers its data; every session, and so every advisory lock, is gone)"
            ),
            FaultClass::CrashRestartEmpty if topology == TopologyKind::Etcd => format!(
                "kill -9 of {lock_nodes} at {at}, restarted at once (etcd members keep their data on disk)"
            ),
            FaultClass::CrashRestartEmpty => format!(
                "kill -9 of {lock_nodes} at {at}, restarted at once without persistence (empty)"
            ),
            FaultClass::NodePause => format!(
                "SIGSTOP of {lock_nodes} at {at} for {} (longer than the TTL), then SIGCONT",
                ms(ttl * 3 / 2)
            ),
            FaultClass::ClockJump if !clock_applies(topology) => format!(
                "no fault injected: a clock jump has nothing to act on here ({}), so this cell is the baseline again",
                if topology == TopologyKind::Postgres {
                    "advisory locks have no expiry"
                } else {
                    "etcd expires leases on the leader's monotonic clock"
                }
            ),
            FaultClass::ClockJump => format!(
                "clock of {lock_nodes} jumps forward {} at {at} (every key's TTL there shortened by that)",
                ms(ttl * 2)
            ),
            FaultClass::ClientPause => format!(
                "clients 0..{} (half) stall {} (longer than the TTL) at their next critical section from {at}; lease renewal frozen",
                half - 1,
                ms(ttl * 3 / 2)
            ),
            FaultClass::Failover if topology == TopologyKind::Sentinel => format!(
                "Sentinel (primary + 2 replicas + 3 sentinels): replication delayed {} from the start, primary killed at {at}, a replica promoted",
                ms(ttl)
            ),
            FaultClass::Failover if topology == TopologyKind::Etcd => format!(
                "the etcd leader killed at {at} and restarted at once; the other two members elect a new leader"
            ),
            FaultClass::Failover if topology == TopologyKind::Postgres => format!(
                "one PostgreSQL server has no failover; nearest equivalent: the server killed at {at} and restarted at once (every session ends)"
            ),
            FaultClass::Failover => format!(
                "Redlock has no failover; nearest equivalent: n1 killed at {at} and replaced at once by an empty node"
            ),
            FaultClass::SlowWork => format!(
                "clients 0..{} (half): critical sections {} longer (above the TTL) from {at} for {}; watchdog renews every TTL/3",
                half - 1,
                ms(ttl * 3 / 2),
                ms(ttl * 3 / 2)
            ),
        }
    }
}

/// Whether the clock-jump method (shorten every key's TTL on a node) has anything to act on:
/// Redis topologies only.
fn clock_applies(topology: TopologyKind) -> bool {
    topology.service() == Some(LockService::Redis)
}

impl FromStr for FaultClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Self::ALL
            .into_iter()
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
        assert_eq!(
            FaultClass::ALL.as_slice(),
            <FaultClass as strum::VariantArray>::VARIANTS
        );
        assert_eq!(" slow-work ".parse(), Ok(FaultClass::SlowWork));
    }
}
