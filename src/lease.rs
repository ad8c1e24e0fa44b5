//! What a successful acquire returns: a lease on a resource until a validity deadline.

use std::time::Duration;

use tokio::time::Instant;

/// A lock held on `resource` by `owner`, believed valid until `validity_deadline`.
///
/// The deadline is on the client's monotonic clock (tokio's [`Instant`]) and is computed as
/// `start of the successful attempt + ttl − drift` (see [`crate::strategy::quorum`]), so it is
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
}
