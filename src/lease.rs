//! The acquire/release contract every lock backend (Redis, PostgreSQL, etcd) keeps: what a
//! successful acquire returns ([`Lease`]), what a release found ([`ReleaseOutcome`],
//! [`ReleaseFinding`]), and why an acquire or extend returned no lease ([`AcquireError`],
//! made of [`NodeFailure`]s).

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// A lock held on `resource` by `owner`, believed valid until `validity_deadline`.
///
/// The deadline is on the client's monotonic clock (tokio's [`Instant`]) and is computed as
/// `start of the successful attempt + ttl − drift` (the strategy's quorum arithmetic), so it is
/// never later than the moment the nodes that counted expire the key. For `no-ttl` the key
/// never expires and the deadline is [`Lease::NO_EXPIRY`] after acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The locked resource name (the key is `{prefix}lock:{resource}`).
    pub resource: String,
    /// Random owner token (32 hex digits) stored as the key's value; release and extend compare it.
    pub owner: String,
    /// Fencing token for `single-fenced` / `redlock-fenced`; `None` otherwise.
    pub fencing_token: Option<u64>,
    /// When the successful attempt started.
    pub acquired_at: Instant,
    /// When the client must stop assuming it holds the lock.
    pub validity_deadline: Instant,
    /// Nodes that hold our key (1 for single-node strategies; ≥ quorum for redlock).
    pub locked_nodes: usize,
    /// `single-wait`: replicas that acknowledged the lock's `SET` (the reply of `WAIT`, at least
    /// 1 for a lease to be returned); `None` for every other strategy.
    pub replica_acks: Option<u32>,
}

impl Lease {
    /// How far a `no-ttl` lease's deadline is placed: effectively never (100 years).
    pub const NO_EXPIRY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

    /// Time left until [`validity_deadline`](Self::validity_deadline); zero once it has passed.
    pub fn remaining_validity(&self) -> Duration {
        self.validity_deadline
            .saturating_duration_since(Instant::now())
    }

    /// True while the validity deadline has not passed.
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.validity_deadline
    }
}

/// A random owner token: 128 bits as 32 lowercase hex digits.
pub(crate) fn new_owner_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReleaseOutcome {
    /// Nodes where a key was deleted: our key for the owner-checked strategies; for
    /// `naive-del`, whatever key was there, possibly another owner's.
    pub released_nodes: usize,
    /// Nodes that errored or timed out during the release.
    pub failed_nodes: usize,
    /// Nodes on which the key must have been found for the lease to count as still held at
    /// the release: the quorum `N/2 + 1` for `redlock` and `redlock-fenced`, 1 otherwise.
    pub needed_nodes: usize,
}

/// Whether a release found the lease still held, read off a [`ReleaseOutcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseFinding {
    /// A key was deleted on at least [`ReleaseOutcome::needed_nodes`] nodes: the lease was
    /// still held (for `naive-del`: some key was deleted, whoever owned it).
    Held,
    /// Even counting every failed node as a deletion, fewer than the needed nodes had our key:
    /// the lease was already lost (expired, or taken by another owner) before the release.
    Lost,
    /// Too few deletions, but failed nodes might have held the key: cannot tell.
    Unknown,
}

impl ReleaseOutcome {
    /// Whether the lease was still held when it was released (see [`ReleaseFinding`]).
    pub fn finding(&self) -> ReleaseFinding {
        if self.released_nodes >= self.needed_nodes.max(1) {
            ReleaseFinding::Held
        } else if self.released_nodes + self.failed_nodes < self.needed_nodes.max(1) {
            ReleaseFinding::Lost
        } else {
            ReleaseFinding::Unknown
        }
    }
}

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

/// The failures joined with `; `, for error messages.
pub(crate) fn join_failures(failures: &[NodeFailure]) -> String {
    failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("; ")
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
    /// A lock-client adapter's failed answer, or none (see `docs/adapter-protocol.md`).
    #[error("adapter {adapter}: {message}")]
    Adapter {
        /// The adapter's name (`redis-py`).
        adapter: String,
        /// `true` when the adapter said the operation surely did not happen (`fail`); `false`
        /// for `info`, no reply in time, or a failed process.
        definite: bool,
        /// Timeout, connection or other.
        kind: NodeFailureKind,
        /// The adapter's message, or lockbench's when there was no reply.
        message: String,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remaining_validity_counts_down_to_zero() {
        let now = Instant::now();
        let lease = Lease {
            resource: "r".into(),
            owner: "o".into(),
            fencing_token: None,
            acquired_at: now,
            validity_deadline: now + Duration::from_millis(100),
            locked_nodes: 1,
            replica_acks: None,
        };
        assert_eq!(lease.remaining_validity(), Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(40)).await;
        assert_eq!(lease.remaining_validity(), Duration::from_millis(60));
        assert!(lease.is_valid());
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(lease.remaining_validity(), Duration::ZERO);
        assert!(!lease.is_valid());
    }

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
