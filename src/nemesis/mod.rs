//! The nemesis: injects faults into a running topology on a schedule, heals them, and records
//! every fault as a window ([`FaultRecord`]) for the history.
//!
//! | file | what |
//! |---|---|
//! | [`proxied`] | [`ProxiedTopology`]: every node (and each replica's replication link) behind a Toxiproxy proxy |
//! | [`faults`] | [`Nemesis`]: inject and heal each [`FaultKind`], resolve targets |
//! | [`clock`] | the clock-jump method (shorten every key's TTL by Δ in one Lua script) |
//! | [`schedule`] | [`run_schedule`]: run a scenario's `[[nemesis]]` steps at their offsets |
//!
//! Network faults go only through the Toxiproxy HTTP API ([`crate::toxiproxy::ToxiproxyClient`]),
//! so the same code drives the embedded server and Shopify's Toxiproxy. Process faults (kill,
//! restart, SIGSTOP) need local nodes; client faults act on [`crate::driver::ClientControls`].

pub mod clock;
pub mod faults;
pub mod proxied;
pub mod schedule;

use std::time::Instant;

pub use faults::Nemesis;
pub use proxied::{ProxiedTopology, ProxyLink, ProxyOptions, ToxiproxySource};
pub use schedule::run_schedule;

pub use crate::orchestration::scenario::{FaultKind, FaultStep, Target};
use crate::topology::TopologyError;
use crate::toxiproxy::{ToxiproxyClientError, ToxiproxyError};

/// One fault window, as the history records it.
///
/// Delivered twice through the `on_record` callback: when the fault is injected (`end` =
/// `None`) and when it is healed (`end` = `Some`), with the same `id`. Instant faults (clock
/// jump, client crash, `SENTINEL FAILOVER`) are delivered once, already closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRecord {
    /// Unique within one [`Nemesis`], increasing in injection order.
    pub id: u64,
    /// The fault kind in kebab case (`latency`, `partition`, `kill`, `pause-node`, `failover`,
    /// `clock-jump`, `client-pause`, `slow-work`, `client-crash`).
    pub kind: String,
    /// What it acted on: node names (`n1`), proxy names (`n2-repl`) or `client:3`.
    pub targets: Vec<String>,
    /// When the fault took effect (after the inject call returned).
    pub start: Instant,
    /// When it was healed (`None` while active).
    pub end: Option<Instant>,
    /// Parameters and effects, e.g. `latency 50ms ± 10ms downstream`, `n1 -> n2`,
    /// `shortened 12 keys, deleted 3`.
    pub detail: String,
}

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
