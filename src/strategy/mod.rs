//! The lock strategies: how a lease is acquired, released and extended on Redis nodes.
//!
//! [`LockClient`] is one client's view of the lock service: its own connection to every node
//! it uses, a [`StrategyKind`], and [`StrategyOptions`] (TTL, retry policy, drift factor,
//! per-node timeout). Keys: the lock is `{prefix}lock:{resource}`, the fencing counter is
//! `{prefix}fence:{resource}` (no expiry).
//!
//! | module | concept |
//! |---|---|
//! | [`quorum`] | quorum size and validity arithmetic (pure) |
//! | [`retry`] | [`RetryPolicy`]: attempts, delay, jitter, acquire timeout |
//! | [`watchdog`] | lease renewal every TTL/3 while held |
//!
//! Sources: "Distributed Locks with Redis" (redis.io) for `SET NX PX`, compare-and-delete and
//! Redlock; Kleppmann, "How to do distributed locking" (2016) for fencing tokens.

use std::time::Duration;

mod client;
mod error;
mod kind;
mod link;
pub mod quorum;
pub mod retry;
mod scripts;
pub mod watchdog;

pub use client::{LockClient, ReleaseOutcome};
pub use error::{AcquireError, NodeFailure, NodeFailureKind, StrategyError};
pub use kind::StrategyKind;
pub use retry::RetryPolicy;
pub use watchdog::{Watchdog, WatchdogReport};

/// Everything a [`LockClient`] needs to know besides the endpoints.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StrategyOptions {
    /// Which strategy.
    pub kind: StrategyKind,
    /// Lease TTL: the key's expiry (ms in configs; at least 1 ms).
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Retry policy of [`LockClient::acquire`].
    pub retry: RetryPolicy,
    /// Whether the driver should run a [`Watchdog`] for each lease (the client does not start
    /// one by itself; see [`LockClient::spawn_watchdog`]).
    pub watchdog: bool,
    /// Clock-drift factor: drift = `ttl × drift_factor + 2 ms` (default 0.01).
    pub drift_factor: f64,
    /// Prefix of every key the strategy writes (default `lockbench:`).
    pub key_prefix: String,
    /// Bound on one command to one node, connect included (ms in configs). Keep it well below
    /// the TTL (default TTL/10) so one slow node cannot eat the lease's validity; a larger value
    /// is allowed, and then the validity check catches slow acquisitions instead. The
    /// connection's own response timeout also applies.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
}

impl StrategyOptions {
    /// Options for `kind` with `ttl`, defaults elsewhere and [`default_node_timeout`](Self::default_node_timeout).
    pub fn new(kind: StrategyKind, ttl: Duration) -> Self {
        Self {
            kind,
            ttl,
            retry: RetryPolicy::default(),
            watchdog: false,
            drift_factor: 0.01,
            key_prefix: "lockbench:".to_string(),
            node_timeout: Self::default_node_timeout(ttl),
        }
    }

    /// Per-node timeout derived from the TTL: TTL/10, at least 1 ms, at most 500 ms.
    pub fn default_node_timeout(ttl: Duration) -> Duration {
        (ttl / 10).clamp(Duration::from_millis(1), Duration::from_millis(500))
    }

    /// Checks that the options can work.
    ///
    /// # Errors
    /// [`StrategyError::InvalidOptions`] for a TTL under 1 ms, a zero per-node timeout, or a
    /// drift factor outside `[0, 1)`.
    pub fn validate(&self) -> Result<(), StrategyError> {
        let bad = |m: String| Err(StrategyError::InvalidOptions(m));
        if self.ttl < Duration::from_millis(1) {
            return bad(format!("ttl is {:?}; it must be at least 1 ms", self.ttl));
        }
        if self.node_timeout.is_zero() {
            return bad("node timeout must be above zero".into());
        }
        if !(self.drift_factor.is_finite() && (0.0..1.0).contains(&self.drift_factor)) {
            return bad(format!(
                "drift factor {} must be in [0, 1) (default 0.01)",
                self.drift_factor
            ));
        }
        Ok(())
    }

    /// The lock key of `resource`: `{prefix}lock:{resource}`.
    pub fn lock_key(&self, resource: &str) -> String {
        format!("{}lock:{resource}", self.key_prefix)
    }

    /// The fencing-counter key of `resource`: `{prefix}fence:{resource}`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}fence:{resource}", self.key_prefix)
    }
}

impl Default for StrategyOptions {
    /// `single`, 10 s TTL.
    fn default() -> Self {
        Self::new(StrategyKind::Single, Duration::from_secs(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_keys_are_prefixed() {
        let o = StrategyOptions::default();
        o.validate().unwrap();
        assert_eq!(o.node_timeout, Duration::from_millis(500));
        assert_eq!(o.lock_key("r1"), "lockbench:lock:r1");
        assert_eq!(o.fence_key("r1"), "lockbench:fence:r1");
        let short = StrategyOptions::new(StrategyKind::Redlock, Duration::from_millis(50));
        assert_eq!(short.node_timeout, Duration::from_millis(5));
        short.validate().unwrap();
    }

    #[test]
    fn validate_rejects_unworkable_options() {
        let mut o = StrategyOptions::new(StrategyKind::Redlock, Duration::from_millis(100));
        o.node_timeout = Duration::ZERO;
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .contains("node timeout"));
        o.node_timeout = Duration::from_millis(10);
        o.drift_factor = 1.5;
        assert!(o.validate().is_err());
        o.drift_factor = 0.01;
        o.ttl = Duration::from_micros(500);
        assert!(o.validate().is_err());
    }
}
