//! The nemesis: injects faults into a running topology on a schedule, heals them, and records
//! every fault as a window ([`FaultWindow`](crate::history::FaultWindow), stamped on the run's
//! [`RunClock`](crate::history::RunClock)) for the history.
//!
//! | file | what |
//! |---|---|
//! | [`step`] | the vocabulary: [`FaultStep`] = [`FaultKind`] on a [`Target`] at an offset, with its parameters ([`PartitionMode`], [`Link`], [`FailoverMethod`], durations) |
//! | [`catalogue`] | every fault kind: targets, parameters, topologies, one line on what it does |
//! | [`check`] | [`FaultStep::check`]: a step against its test (run length, parameters, targets, topology) |
//! | [`client_controls`] | [`ClientControls`]: per-client hooks the client faults pull (pause, slow work, crash while holding, absence); the driver's clients obey them |
//! | [`faults`] | [`Nemesis`]: dispatch each [`FaultKind`] to its family, keep its window open, heal |
//! | `network` | `latency`, `partition` of proxies (nodes', clients' own, a worker's): Toxiproxy toxics or disabled proxies |
//! | `process` | `kill`, `pause-node`, and a worker process's `client-pause` / `client-crash` (signals); [`WorkerProcess`] |
//! | [`clock`] | `clock-jump` (shorten every key's TTL by Δ in one Lua script) |
//! | `client` | `client-pause`, `slow-work`, `client-crash`, `client-absent` on [`ClientControls`] |
//! | `failover` | `failover` by kill, `SENTINEL FAILOVER` or `CLUSTER FAILOVER` |
//! | `cluster` | `partition` `link=bus` (nft cut of the cluster bus, measured) and `migrate-slot` |
//! | `resolve` | targets → nodes, clients, worker, proxies |
//! | [`bus_probe`] | [`bus_probe::BusProbe`]: while a cluster-bus partition lasts, until when the cut primaries accept `SET NX` and when the other side promotes a replica |
//! | [`migration`] | the `migrate-slot` method (a Redis Cluster slot moved as `redis-cli --cluster reshard` moves it) |
//!
//! Adding a fault: a [`FaultKind`] (and any new [`Param`]) in [`step`], its row in
//! [`catalogue`], its inject (and undo) in its family's file, one arm in
//! [`Nemesis::inject`].
//! | [`schedule`] | [`run_schedule`]: run a scenario's `[[nemesis]]` steps at their offsets |
//!
//! Faults act on a [`ProxiedTopology`](crate::topology::ProxiedTopology): every node (and each
//! replica's replication link) behind a Toxiproxy proxy.
//!
//! Network faults go only through the Toxiproxy HTTP API ([`crate::toxiproxy::ToxiproxyClient`]),
//! so the same code drives the embedded server and Shopify's Toxiproxy. Process faults (kill,
//! restart, SIGSTOP) need local nodes; client faults act on [`ClientControls`].

pub mod bus_probe;
pub mod catalogue;
pub mod check;
mod client;
pub mod client_controls;
pub mod clock;
mod cluster;
mod failover;
pub mod faults;
pub mod migration;
mod network;
mod process;
mod resolve;
pub mod schedule;
pub mod step;

pub use check::{StepContext, StepProblem};
pub use client_controls::{ClientControl, ClientControls};
pub use faults::Nemesis;
pub use process::WorkerProcess;
pub use schedule::run_schedule;
pub use step::{
    ClientSide, FailoverMethod, FaultKind, FaultStep, Link, Param, PartitionMode, Target,
};

use crate::topology::TopologyError;
use crate::toxiproxy::{ToxiproxyClientError, ToxiproxyError};

/// Errors of the nemesis.
#[derive(Debug, thiserror::Error)]
pub enum NemesisError {
    /// The Toxiproxy API refused or could not be reached.
    #[error("toxiproxy: {0}")]
    Toxiproxy(#[from] ToxiproxyClientError),
    /// The embedded Toxiproxy server did not start.
    #[error("embedded toxiproxy: {0}")]
    ToxiproxyServer(#[from] ToxiproxyError),
    /// A node operation (kill, restart, pause) failed.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A Redis command of the nemesis (clock jump, `SENTINEL FAILOVER`) failed.
    #[error("{node}: {source}")]
    Redis {
        /// Node or Sentinel name.
        node: String,
        /// The error.
        source: redis::RedisError,
    },
    /// A target that does not name anything in this topology.
    #[error("fault target {target}: {reason}")]
    Target {
        /// The target as written.
        target: String,
        /// What is wrong.
        reason: String,
    },
    /// A fault that cannot run on this topology or with these parameters.
    #[error("{fault}: {reason}")]
    Unsupported {
        /// Fault kind.
        fault: String,
        /// Why.
        reason: String,
    },
    /// A bounded wait ran out (e.g. no new primary after a failover).
    #[error("{what}: not within {waited_ms} ms")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited_ms: u128,
    },
    /// A signal to a worker process failed (`client-pause` / `client-crash` on `worker:I`,
    /// or the `SIGCONT` of its heal).
    #[error("{fault}: {signal} to worker process {pid}: {source}")]
    Signal {
        /// The fault and its target (`client-pause worker:1`).
        fault: String,
        /// `SIGSTOP`, `SIGKILL` or `SIGCONT`.
        signal: &'static str,
        /// The worker's process id.
        pid: u32,
        /// What kill(2) answered.
        source: std::io::Error,
    },
    /// The last sweep of a `migrate-slot`'s keys, at its heal, failed (the slot was still
    /// assigned to the target on every primary that answered).
    #[error("migrate-slot: last sweep of slot {slot}: {source}")]
    Sweep {
        /// The hash slot.
        slot: u16,
        /// What failed.
        source: Box<NemesisError>,
    },
    /// A step could not be injected: which one, and why (nothing of it stays injected).
    #[error("injecting {step}: {source}")]
    Inject {
        /// The step ([`FaultStep::describe`]: `partition on n1 at 2s`).
        step: String,
        /// What failed.
        source: Box<NemesisError>,
    },
    /// An injected fault could not be healed: which window, and why (the window is closed).
    #[error("healing {fault}: {source}")]
    Heal {
        /// The window: its id, kind and targets (`fault 3, partition n1`).
        fault: String,
        /// What failed.
        source: Box<NemesisError>,
    },
    /// The task running a schedule panicked or was cancelled.
    #[error("the schedule task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl NemesisError {
    /// `source` as the failed heal of `window`.
    pub(crate) fn healing(window: &crate::history::FaultWindow, source: NemesisError) -> Self {
        NemesisError::Heal {
            fault: format!(
                "fault {}, {} {}",
                window.id,
                window.kind,
                window.targets.join(",")
            ),
            source: Box::new(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_kebab_case() {
        assert_eq!(FaultKind::PauseNode.to_string(), "pause-node");
        assert_eq!(FaultKind::ClockJump.to_string(), "clock-jump");
        assert_eq!(FaultKind::Latency.to_string(), "latency");
        crate::variant_names::assert_names_match_serde::<FaultKind>();
    }
}
