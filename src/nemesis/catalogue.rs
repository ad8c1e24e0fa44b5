//! The fault catalogue: every [`FaultKind`], what it targets, which [`Param`]s it needs and
//! accepts, on which topologies it works, and one line on what it does.
//! [`FaultStep::check`](super::FaultStep::check) enforces it; `lockbench chaos --list-faults`
//! prints it.

use super::step::{FaultKind, Param};
use crate::topology::TopologyKind;

/// What a fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acts {
    /// Nodes: `n1`, `n1,n2`, `minority`, `majority`, `all`, `primary`.
    Nodes,
    /// Clients: `client:0`, `clients:0,1`, `holder`.
    Clients,
    /// Either: nodes, or clients (a network fault on the clients' own proxies to every node).
    NodesOrClients,
}

impl Acts {
    /// `nodes` or `clients`.
    pub fn name(self) -> &'static str {
        match self {
            Acts::Nodes => "nodes",
            Acts::Clients => "clients",
            Acts::NodesOrClients => "nodes/clients",
        }
    }
}

/// One fault of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct FaultSpec {
    /// The kind (its name in scenario files is [`FaultKind::name`]).
    pub kind: FaultKind,
    /// Node or client targets.
    pub acts: Acts,
    /// Parameters it must have.
    pub required: &'static [Param],
    /// Parameters it may have.
    pub optional: &'static [Param],
    /// Topologies it works on (`None` = all).
    pub topologies: Option<&'static [TopologyKind]>,
    /// What it does, one line.
    pub what: &'static str,
}

impl FaultSpec {
    /// Whether the fault takes `param` (required or optional).
    pub fn takes(&self, param: Param) -> bool {
        self.required.contains(&param) || self.optional.contains(&param)
    }
}

/// Every fault, in the order of docs/faults.md's table.
pub const FAULTS: [FaultSpec; 12] = [
    FaultSpec {
        kind: FaultKind::Latency,
        acts: Acts::Nodes,
        required: &[Param::Duration, Param::Latency],
        optional: &[Param::Jitter, Param::Link],
        topologies: None,
        what: "latency (± jitter) toxic on the targets' proxies; link = \"replication\" delays primary→replica instead",
    },
    FaultSpec {
        kind: FaultKind::Bandwidth,
        acts: Acts::Nodes,
        required: &[Param::Duration, Param::Rate],
        optional: &[Param::Link],
        topologies: None,
        what: "bandwidth toxic on the targets' proxies: at most `rate` KB/s (1 KB = 1000 bytes) from the node to its clients",
    },
    FaultSpec {
        kind: FaultKind::Partition,
        acts: Acts::NodesOrClients,
        required: &[Param::Duration],
        optional: &[Param::Mode, Param::Link, Param::WithClients],
        topologies: None,
        what: "cut the targets off: mode = \"blackhole\" (data dropped, default) or \"refuse\" (connections refused); a client target (`holder`, `client:N`) cuts only those clients off every node, through proxies of their own; link = \"bus\" (cluster) cuts the cluster bus between the target nodes and the others both ways, with_clients = \"client:0\" / \"holder\" / \"none\" puts those clients (the holder when the step starts) on the targets' side and cuts the rest off the targets",
    },
    FaultSpec {
        kind: FaultKind::Kill,
        acts: Acts::Nodes,
        required: &[],
        optional: &[Param::Duration, Param::RestartAfter],
        topologies: None,
        what: "kill -9 the targets, restart after max(duration, restart_after): empty unless persistence = \"aof-always\"",
    },
    FaultSpec {
        kind: FaultKind::PauseNode,
        acts: Acts::Nodes,
        required: &[Param::Duration],
        optional: &[],
        topologies: None,
        what: "SIGSTOP the targets, SIGCONT after duration",
    },
    FaultSpec {
        kind: FaultKind::Failover,
        acts: Acts::Nodes,
        required: &[],
        optional: &[Param::Duration, Param::Method],
        topologies: Some(&[TopologyKind::Sentinel, TopologyKind::Cluster]),
        what: "fail the primary over: method = \"kill-primary\" (default) or \"sentinel\" (SENTINEL FAILOVER; sentinel only) or \"cluster-failover\", \"cluster-failover-force\", \"cluster-failover-takeover\" (CLUSTER FAILOVER in its default, FORCE or TAKEOVER mode on the primary's replica; cluster only)",
    },
    FaultSpec {
        kind: FaultKind::ClockJump,
        acts: Acts::Nodes,
        required: &[Param::Delta],
        optional: &[],
        topologies: Some(&[TopologyKind::Single, TopologyKind::Five, TopologyKind::Sentinel]),
        what: "jump the targets' clocks forward by delta (every key's TTL shortened by delta; Redis nodes only)",
    },
    FaultSpec {
        kind: FaultKind::ClientPause,
        acts: Acts::Clients,
        required: &[Param::Duration],
        optional: &[],
        topologies: None,
        what: "stop-the-world stall of the target clients inside their critical section; lease renewal stalls too (a GC pause)",
    },
    FaultSpec {
        kind: FaultKind::SlowWork,
        acts: Acts::Clients,
        required: &[Param::Duration, Param::Extra],
        optional: &[],
        topologies: None,
        what: "critical sections of the target clients take `extra` longer; renewal keeps running",
    },
    FaultSpec {
        kind: FaultKind::ClientCrash,
        acts: Acts::Clients,
        required: &[],
        optional: &[],
        topologies: None,
        what: "the target clients stop while holding and never release (setnx-expire: inside its next acquire, after SETNX, before PEXPIRE)",
    },
    FaultSpec {
        kind: FaultKind::ClientAbsent,
        acts: Acts::Clients,
        required: &[Param::Duration],
        optional: &[],
        topologies: None,
        what: "the target clients start no acquire during the window (join late with at = \"0s\"); a lease held is released as usual",
    },
    FaultSpec {
        kind: FaultKind::MigrateSlot,
        acts: Acts::Nodes,
        required: &[],
        optional: &[Param::Duration, Param::Resource],
        topologies: Some(&[TopologyKind::Cluster]),
        what: "move the hash slot of `resource` (default r0: its lock key and fencing counter) to the target primary's shard as redis-cli --cluster reshard does: SETSLOT IMPORTING/MIGRATING, MIGRATE … KEYS in batches, then after duration SETSLOT NODE on every primary (ASK redirections in the window)",
    },
];

/// The catalogue entry of `kind`.
pub fn spec(kind: FaultKind) -> &'static FaultSpec {
    FAULTS
        .iter()
        .find(|f| f.kind == kind)
        .expect("every fault kind is in the catalogue")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once() {
        for f in &FAULTS {
            assert_eq!(FAULTS.iter().filter(|g| g.kind == f.kind).count(), 1);
            assert_eq!(spec(f.kind).kind, f.kind);
            for p in f.required {
                assert!(!f.optional.contains(p), "{}: {p}", f.kind);
            }
        }
    }
}
