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
//! | [`faults`] | [`Nemesis`]: inject and heal each [`FaultKind`], resolve targets |
//! | [`clock`] | the clock-jump method (shorten every key's TTL by Δ in one Lua script) |
//! | [`migration`] | the `migrate-slot` method (a Redis Cluster slot moved as `redis-cli --cluster reshard` moves it) |
//! | [`schedule`] | [`run_schedule`]: run a scenario's `[[nemesis]]` steps at their offsets |
//!
//! Faults act on a [`ProxiedTopology`](crate::topology::ProxiedTopology): every node (and each
//! replica's replication link) behind a Toxiproxy proxy.
//!
//! Network faults go only through the Toxiproxy HTTP API ([`crate::toxiproxy::ToxiproxyClient`]),
//! so the same code drives the embedded server and Shopify's Toxiproxy. Process faults (kill,
//! restart, SIGSTOP) need local nodes; client faults act on [`ClientControls`].

pub mod catalogue;
pub mod check;
pub mod client_controls;
pub mod clock;
pub mod faults;
pub mod migration;
pub mod schedule;
pub mod step;

pub use check::{StepContext, StepProblem};
pub use client_controls::{ClientControl, ClientControls};
pub use faults::Nemesis;
pub use schedule::run_schedule;
pub use step::{FailoverMethod, FaultKind, FaultStep, Link, Param, PartitionMode, Target};

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
