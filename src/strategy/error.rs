//! Errors of the strategy layer: acquisition outcomes other than a lease, and failures of
//! connect/release.

use std::fmt;
use std::time::Duration;

/// Why one node did not answer a lock command usefully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node's display name (`n1`, …).
    pub node: String,
    /// What kind of failure it was.
    pub kind: NodeFailureKind,
    /// The underlying error text (never contains a password).
    pub message: String,
}

/// Coarse class of a [`NodeFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeFailureKind {
    /// No reply within the per-node timeout; the command may still be applied later.
    Timeout,
    /// Could not connect, or the connection dropped.
    Unreachable,
    /// The node replied with an error (e.g. `LOADING`, `OOM`, wrong type).
    Command,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            NodeFailureKind::Timeout => "timed out",
            NodeFailureKind::Unreachable => "unreachable",
            NodeFailureKind::Command => "command failed",
        };
        write!(f, "node {} {what}: {}", self.node, self.message)
    }
}

impl std::error::Error for NodeFailure {}

fn join_failures(failures: &[NodeFailure]) -> String {
    failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// `factor` as a percentage without trailing zeros (0.01 → "1", 0.015 → "1.5").
fn percent(factor: f64) -> String {
    let s = format!("{:.4}", factor * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Why an acquire (or extend) did not return a lease.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AcquireError {
    /// The lock is held by another owner (single-node strategies).
    #[error("lock on `{resource}` is held by another owner")]
    Held {
        /// The resource name.
        resource: String,
    },
    /// Fewer than a quorum of the configured nodes accepted the lock.
    #[error(
        "quorum not reached: {locked} of {needed} needed nodes locked \
         ({held} held by another owner, {failed} failed)"
    )]
    QuorumNotReached {
        /// Nodes that set our key.
        locked: usize,
        /// Quorum of the configured node count.
        needed: usize,
        /// Nodes where another owner holds the key.
        held: usize,
        /// Nodes that errored or timed out.
        failed: usize,
    },
    /// Quorum was reached but acquiring took so long that `ttl − elapsed − drift ≤ 0`.
    #[error(
        "lease validity exhausted: acquiring took {elapsed:?} of a {ttl:?} TTL \
         (raise the TTL or lower the latency)"
    )]
    ValidityExhausted {
        /// Time the successful-quorum attempt took.
        elapsed: Duration,
        /// The lease TTL.
        ttl: Duration,
    },
    /// The retry policy's acquire timeout passed without a lease.
    #[error("not acquired within {waited:?} ({attempts} attempts); last attempt: {last}")]
    Timeout {
        /// Time since the first attempt started.
        waited: Duration,
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt failed.
        last: Box<AcquireError>,
    },
    /// The single node of a single-node strategy failed.
    #[error("{0}")]
    Node(NodeFailure),
    /// Every configured node failed: no node answered at all.
    #[error(
        "no Redis node answered ({} of {} failed: {}); check that the nodes are running and reachable",
        failures.len(), failures.len(), join_failures(failures)
    )]
    AllNodesFailed {
        /// One failure per configured node.
        failures: Vec<NodeFailure>,
    },
    /// `single-wait`: the node set our key, but fewer replicas than `needed` acknowledged it
    /// within the `WAIT` timeout, so the lease does not count. The key was then deleted again
    /// (compare-and-delete) when `released`; otherwise the delete failed and the key stays
    /// until its TTL runs out, held by nobody.
    #[error(
        "no replica acknowledged the lock on `{resource}`: WAIT {needed} {}ms answered {acked}; \
         the key was {}",
        wait_timeout.as_millis(),
        if *released { "deleted again" } else { "left to expire (its delete failed)" }
    )]
    NoReplicaAck {
        /// The resource name.
        resource: String,
        /// Replicas that acknowledged (the reply of `WAIT`).
        acked: u32,
        /// Replicas asked for (1).
        needed: u32,
        /// The `WAIT` timeout.
        wait_timeout: Duration,
        /// Whether the key was deleted again.
        released: bool,
    },
    /// The caller's crash point fired inside a multi-request acquire (`setnx-expire`: after
    /// `SETNX` set the key, before `PEXPIRE` gave it an expiry). The client stops there, as a
    /// crashed process would: the key it set is left behind without expiry.
    #[error("client crashed inside the acquire of `{resource}`: after {done}, before {not_sent}")]
    Crashed {
        /// The resource name.
        resource: String,
        /// The last request that was applied.
        done: &'static str,
        /// The request that was never sent.
        not_sent: &'static str,
    },
    /// Extend only: the key is gone or belongs to another owner, so the lease cannot be renewed.
    #[error("lease on `{resource}` was lost: {reason}")]
    Lost {
        /// The resource name.
        resource: String,
        /// What was found instead of our key.
        reason: String,
    },
}

impl AcquireError {
    /// True when the attempt failed because another owner holds the lock (not because of
    /// node failures or timing). For a quorum strategy: the attempt would have reached quorum
    /// had the held nodes been free. For [`Timeout`](Self::Timeout): its last attempt.
    pub fn is_contention(&self) -> bool {
        match self {
            AcquireError::Held { .. } => true,
            AcquireError::QuorumNotReached {
                locked,
                needed,
                held,
                ..
            } => *held > 0 && locked + held >= *needed,
            AcquireError::Timeout { last, .. } => last.is_contention(),
            _ => false,
        }
    }

    /// True for [`Lost`](Self::Lost): renewal is pointless.
    pub fn is_lost(&self) -> bool {
        matches!(self, AcquireError::Lost { .. })
    }

    /// True when another attempt may succeed (everything except `Timeout`, `Lost` and
    /// `Crashed`).
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            AcquireError::Timeout { .. } | AcquireError::Lost { .. } | AcquireError::Crashed { .. }
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(node: &str) -> NodeFailure {
        NodeFailure {
            node: node.into(),
            kind: NodeFailureKind::Unreachable,
            message: "connection refused".into(),
        }
    }

    #[test]
    fn contention_is_told_apart_from_failures() {
        assert!(AcquireError::Held {
            resource: "r".into()
        }
        .is_contention());
        let q = |locked, held, failed| AcquireError::QuorumNotReached {
            locked,
            needed: 3,
            held,
            failed,
        };
        assert!(q(2, 3, 0).is_contention());
        assert!(q(1, 2, 2).is_contention());
        assert!(
            !q(1, 1, 3).is_contention(),
            "down nodes alone prevent quorum"
        );
        assert!(!q(2, 0, 3).is_contention());
        let all = AcquireError::AllNodesFailed {
            failures: vec![failure("n1"), failure("n2")],
        };
        assert!(!all.is_contention());
        let msg = all.to_string();
        assert!(
            msg.contains("no Redis node answered") && msg.contains("n2"),
            "{msg}"
        );
        let timeout = AcquireError::Timeout {
            waited: Duration::from_secs(2),
            attempts: 7,
            last: Box::new(q(2, 3, 0)),
        };
        assert!(timeout.is_contention());
        assert!(!timeout.is_retryable());
    }
}
