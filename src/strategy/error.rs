//! Errors of the strategy layer: bad options, and failures of connect and release.

use std::time::Duration;

use crate::lease::{join_failures, NodeFailure};

/// `factor` as a percentage without trailing zeros (0.01 → "1", 0.015 → "1.5").
fn percent(factor: f64) -> String {
    let s = format!("{:.4}", factor * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Failures of connect and release, and bad options.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StrategyError {
    /// A strategy name that does not exist.
    #[error("unknown strategy `{name}`: valid names are {valid}")]
    UnknownStrategy {
        /// What was given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// Options that cannot work.
    #[error("invalid strategy options: {0}")]
    InvalidOptions(String),
    /// A TTL so short that no lease can ever be valid: `ttl − (ttl × drift_factor + 2 ms)`
    /// leaves less than 1 ms even with zero latency (see `quorum::min_workable_ttl`).
    #[error(
        "TTL {ttl:?} leaves no validity (drift margin 2 ms + {} % of the TTL): use at least {min:?}",
        percent(*drift_factor)
    )]
    TtlTooShort {
        /// The TTL given.
        ttl: Duration,
        /// The smallest workable TTL for this drift factor.
        min: Duration,
        /// The clock-drift factor in force.
        drift_factor: f64,
    },
    /// No endpoint was given.
    #[error("no Redis endpoint configured: give at least one node")]
    NoEndpoints,
    /// A single-node strategy could not connect to its node.
    #[error("cannot connect to {node}: {message}")]
    Connect {
        /// Node display name and redacted URL.
        node: String,
        /// The underlying error.
        message: String,
    },
    /// The single node of a single-node strategy failed during release.
    #[error("release failed: {0}")]
    Node(NodeFailure),
    /// A lock-client adapter could not start or broke the protocol.
    #[error("adapter {adapter}: {message}")]
    Adapter {
        /// The adapter's name (`redis-py`).
        adapter: String,
        /// What went wrong, naming the command or the line.
        message: String,
    },
    /// A lock-client adapter cannot run the run's settings: it refused `init` (e.g. a TTL its
    /// library cannot express), or `--watchdog` asks for a renewal it does not have. Bad input:
    /// waiting longer or fewer clients would not help.
    #[error("adapter {adapter} refused the run's settings: {message}")]
    AdapterRefused {
        /// The adapter's name (`python-redis-lock`).
        adapter: String,
        /// Its own words (`init`'s error message), or what is missing.
        message: String,
    },
    /// Release reached no node at all.
    #[error(
        "release reached no node ({}); the key will expire after its TTL",
        join_failures(failures)
    )]
    AllNodesFailed {
        /// One failure per configured node.
        failures: Vec<NodeFailure>,
    },
}
