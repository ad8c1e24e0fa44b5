//! The lock strategies: how a lease is acquired, released and extended on Redis nodes, a
//! PostgreSQL server or an etcd cluster.
//!
//! [`LockClient`] is one client's view of the lock service: its own connection to every node
//! it uses, a [`StrategyKind`], and [`StrategyOptions`] (TTL, retry policy, drift factor,
//! per-node timeout). Keys: the lock is `{prefix}lock:{resource}`, the fencing counter is
//! `{prefix}fence:{resource}` (no expiry). What an acquire and a release return (lease,
//! release outcome, acquire errors) is the contract of [`crate::lease`], the same for every
//! backend. Which topology a strategy runs on is decided by the topology layer
//! (`topology::pairing`), from [`StrategyKind::service`] and the strategy's needs
//! ([`StrategyKind::is_quorum`], [`StrategyKind::needs_replicas`]).
//!
//! | module | concept |
//! |---|---|
//! | `kind` | [`StrategyKind`] (the strategy names, and the service each locks on) |
//! | `service` | [`LockService`] (what a strategy locks on) and its registration in this layer ([`ServiceSpec`]: name, URL schemes, backend file) |
//! | `client` | [`LockClient`]: connect, acquire (with retry), release, extend, watchdog |
//! | `backend` | the interface every backend implements, and the enum `LockClient` dispatches through |
//! | `redis` | `single`, `redlock`, fenced variants, negative controls, `single-wait` (with `scripts`, `link`) |
//! | `postgres` | `pg-advisory`, `pg-advisory-fenced`: session advisory locks on PostgreSQL |
//! | `pg_pool` | `--pg-pool`: PostgreSQL clients borrowing a connection per operation from a shared application-side pool |
//! | [`claim`] | `claim-update`, `claim-update-unguarded`: no lock, a jobs table claimed by a conditional `UPDATE` (for `job` work) |
//! | `etcd` | `etcd-lease`: lease + create-if-absent through etcd's JSON gateway |
//! | `adapter` | `adapter:*`: a lock library driven through an adapter process (`docs/adapter-protocol.md`) |
//! | [`quorum`] | quorum size and validity arithmetic (pure) |
//! | [`retry`] | [`RetryPolicy`]: attempts, delay, jitter, acquire timeout |
//! | [`watchdog`] | lease renewal every TTL/3 while held |
//!
//! Sources: "Distributed Locks with Redis" (redis.io) for `SET NX PX`, compare-and-delete and
//! Redlock; Kleppmann, "How to do distributed locking" (2016) for fencing tokens.

use std::time::Duration;

mod adapter;
mod backend;
pub mod claim;
mod client;
mod error;
mod etcd;
mod kind;
mod link;
mod pg_pool;
mod postgres;
pub use pg_pool::{PgPool, PgPoolRecycle};
pub use postgres::describe_error as describe_postgres_error;
pub mod quorum;
mod redis;
pub mod retry;
mod scripts;
mod service;
pub mod watchdog;

pub use adapter::AdapterOverhead;
pub use client::LockClient;
pub use error::{os_error_code, StrategyError};
pub use kind::StrategyKind;
pub use retry::RetryPolicy;
pub use service::{LockService, ServiceSpec};
pub use watchdog::{Watchdog, WatchdogReport};

/// Everything a [`LockClient`] needs to know besides the endpoints.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StrategyOptions {
    /// Which strategy.
    pub kind: StrategyKind,
    /// Lease TTL: the key's expiry (ms in configs; a whole number of ms, at least
    /// [`quorum::min_workable_ttl`] of the drift factor: 4 ms by default).
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
    /// Bound on one command to one node, connect included (ms in configs). Default:
    /// [`default_node_timeout`](Self::default_node_timeout) (TTL/10, 1 ms to 500 ms). A larger
    /// value is allowed, and then the validity check catches slow acquisitions instead. The
    /// connection's own response timeout also applies.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
    /// `adapter:*` strategies: the file the adapter process's stderr is appended to (the
    /// experiment sets `<strategy dir>/adapter.log`; late replies and events go to
    /// `adapter-messages.jsonl` beside it). `None`: stderr is inherited. Not part of configs.
    #[serde(skip)]
    pub adapter_log: Option<std::path::PathBuf>,
    /// PostgreSQL strategies: borrow a connection per operation from an application-side pool
    /// shared by the run's clients (`None`: each client keeps its own session). See
    /// [`PgPool`].
    #[serde(default)]
    pub pg_pool: Option<PgPool>,
    /// `adapter:command`: the adapter's command line, program first (`--adapter 'command
    /// args…'` split as a POSIX shell would, without running a shell). Ignored by the other
    /// strategies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_command: Option<Vec<String>>,
    /// Put the resource name in a hash tag (`{resource}`) in every key, so a resource's lock
    /// key and fencing counter hash to one Redis Cluster slot (one shard), as a script that
    /// touches both requires there. Set for topology `cluster` and for `external` with
    /// `--cluster` seeds; default false.
    #[serde(default)]
    pub hash_tag: bool,
    /// `adapter:*` strategies: one adapter process serves several clients of the run (the
    /// driver's `--shared-connection`, or `--adapter-processes` below the client count), and
    /// `init` says so (`concurrency`: null). `false` (default): each client has its own process,
    /// which then has one request in flight at a time, and `init` says so (`concurrency`:
    /// 1), so the adapter may run the requests on the thread that reads them.
    #[serde(skip)]
    pub adapter_shared: bool,
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
            adapter_log: None,
            pg_pool: None,
            adapter_command: None,
            hash_tag: false,
            adapter_shared: false,
        }
    }

    /// The per-node timeout used when none is given: TTL/10, at least 1 ms, at most 500 ms.
    /// The CLI (`run --node-timeout`), scenario files (`workload.node_timeout`) and the library
    /// all use this one rule.
    ///
    /// Why: TTL/10 keeps one slow node from eating more than a tenth of the lease's validity
    /// (the Redis distributed-lock page asks for a node timeout much smaller than the TTL). The
    /// 500 ms cap equals the default response timeout (`--response-timeout`), beyond which the
    /// connection gives up anyway; a lower cap such as 50 ms would turn every latency fault
    /// above it into timeouts on long TTLs, so latency experiments would measure the timeout
    /// instead of the latency.
    pub fn default_node_timeout(ttl: Duration) -> Duration {
        (ttl / 10).clamp(Duration::from_millis(1), Duration::from_millis(500))
    }

    /// Checks that the options can work.
    ///
    /// # Errors
    /// [`StrategyError::InvalidOptions`] for a zero per-node timeout, a drift factor outside
    /// `[0, 1)`, a TTL that is not a whole number of milliseconds, a pool of 0 connections or
    /// a PostgreSQL strategy a pool cannot carry;
    /// [`StrategyError::TtlTooShort`] for a TTL below [`quorum::min_workable_ttl`] (no lease
    /// could ever be valid).
    pub fn validate(&self) -> Result<(), StrategyError> {
        let bad = |m: String| Err(StrategyError::InvalidOptions(m));
        if self.node_timeout.is_zero() {
            return bad("node timeout must be above zero".into());
        }
        if !(self.drift_factor.is_finite() && (0.0..1.0).contains(&self.drift_factor)) {
            return bad(format!(
                "drift factor {} must be in [0, 1) (default 0.01)",
                self.drift_factor
            ));
        }
        let min = quorum::min_workable_ttl(self.drift_factor);
        if self.ttl < min {
            return Err(StrategyError::TtlTooShort {
                ttl: self.ttl,
                min,
                drift_factor: self.drift_factor,
            });
        }
        if self.kind == StrategyKind::AdapterCommand
            && self.adapter_command.as_ref().is_none_or(|a| a.is_empty())
        {
            return bad(
                "adapter:command needs the adapter's command line: --adapter 'command args…' \
                 (scenario key workload.adapter)"
                    .into(),
            );
        }
        if self.kind == StrategyKind::EtcdLease
            && (self.ttl < std::time::Duration::from_secs(1) || self.ttl.subsec_nanos() != 0)
        {
            return bad(format!(
                "TTL {:?}: etcd lease TTLs are whole seconds, at least 1s",
                self.ttl
            ));
        }
        if let Some(pool) = self.pg_pool {
            if pool.size == 0 {
                return bad("pool size must be at least 1 (connections the pool opens)".into());
            }
            if self.kind.service() == LockService::Postgres && !pg_pool::pool_supports(self.kind) {
                return bad(format!(
                    "{} cannot borrow a pooled connection per operation (its lock lives in a \
                     transaction or needs a sequence on its session); pooled clients run \
                     pg-advisory, pg-advisory-wait",
                    self.kind
                ));
            }
        }
        if !self.ttl.subsec_nanos().is_multiple_of(1_000_000) {
            return bad(format!(
                "TTL {:?} is not a whole number of milliseconds (Redis PX takes ms)",
                self.ttl
            ));
        }
        Ok(())
    }

    /// The `WAIT` timeout of `single-wait`: half the per-node timeout (at least 1 ms;
    /// `WAIT … 0` would block forever). The `SET` + `WAIT` request is bounded by
    /// [`replica_wait_bound`](Self::replica_wait_bound), so a missing acknowledgement shows as
    /// [`AcquireError::NoReplicaAck`](crate::lease::AcquireError::NoReplicaAck) rather than as
    /// a node timeout.
    pub fn replica_wait(&self) -> Duration {
        (self.node_timeout / 2).max(Duration::from_millis(1))
    }

    /// The bound on `single-wait`'s `SET` + `WAIT` request: the per-node timeout plus 100 ms,
    /// because Redis checks blocked clients' timeouts from its event loop, which wakes every
    /// `1000 / hz` ms (hz 10 by default), so a `WAIT` can answer up to 100 ms after its
    /// timeout (source: `hz` in the redis.conf shipped with Redis). With the default per-node
    /// timeout (at most 500 ms) the `WAIT` answers within 350 ms, inside the connection's
    /// default 500 ms response timeout.
    pub fn replica_wait_bound(&self) -> Duration {
        self.node_timeout + Duration::from_millis(100)
    }

    /// `pg-advisory-wait`: how long one attempt waits in the server's lock queue (the
    /// `lock_timeout` it sets): the retry policy's acquire timeout when there is one, else the
    /// per-node timeout; whole milliseconds, at least 1 ms (`lock_timeout = 0` would wait
    /// forever).
    pub fn lock_wait(&self) -> Duration {
        let wait = self.retry.acquire_timeout.unwrap_or(self.node_timeout);
        Duration::from_millis((wait.as_millis() as u64).max(1))
    }

    /// The client's bound on `pg-advisory-wait`'s waiting statement:
    /// [`lock_wait`](Self::lock_wait) plus the per-node timeout, so a wait the server ends at
    /// its `lock_timeout` answers before the client gives up; only a slow or cut link (no
    /// answer within the per-node timeout after the wait) makes the client give up first.
    pub fn lock_wait_bound(&self) -> Duration {
        self.lock_wait() + self.node_timeout
    }

    /// The lock key of `resource`: `{prefix}lock:{resource}`, or with
    /// [`hash_tag`](Self::hash_tag) `{prefix}lock:{{resource}}`.
    pub fn lock_key(&self, resource: &str) -> String {
        format!("{}lock:{}", self.key_prefix, self.tagged(resource))
    }

    /// The fencing-counter key of `resource`: `{prefix}fence:{resource}`, or with
    /// [`hash_tag`](Self::hash_tag) `{prefix}fence:{{resource}}`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}fence:{}", self.key_prefix, self.tagged(resource))
    }

    fn tagged(&self, resource: &str) -> String {
        if self.hash_tag {
            format!("{{{resource}}}")
        } else {
            resource.to_string()
        }
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
    fn hash_tagged_keys_share_the_resource_tag() {
        let opts = StrategyOptions {
            hash_tag: true,
            key_prefix: "lockbench:single:".into(),
            ..StrategyOptions::default()
        };
        assert_eq!(opts.lock_key("r0"), "lockbench:single:lock:{r0}");
        assert_eq!(opts.fence_key("r0"), "lockbench:single:fence:{r0}");
    }

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
    fn default_node_timeout_is_a_tenth_of_the_ttl_between_1_and_500_ms() {
        let ms = Duration::from_millis;
        for (ttl, expected) in [
            (ms(4), ms(1)),
            (ms(10), ms(1)),
            (ms(100), ms(10)),
            (ms(1_000), ms(100)),
            (ms(5_000), ms(500)),
            (ms(60_000), ms(500)),
        ] {
            assert_eq!(
                StrategyOptions::default_node_timeout(ttl),
                expected,
                "{ttl:?}"
            );
            assert_eq!(
                StrategyOptions::new(StrategyKind::Single, ttl).node_timeout,
                expected
            );
        }
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
        o.ttl = Duration::from_micros(4_500);
        let msg = o.validate().unwrap_err().to_string();
        assert!(
            msg.contains("4.5ms") && msg.contains("whole number"),
            "{msg}"
        );
    }

    #[test]
    fn ttl_below_the_smallest_workable_one_is_rejected_with_that_value() {
        for kind in [StrategyKind::Single, StrategyKind::Redlock] {
            let mut o = StrategyOptions::new(kind, Duration::from_millis(2));
            let err = o.validate().unwrap_err();
            assert!(
                matches!(err, StrategyError::TtlTooShort { min, .. } if min == Duration::from_millis(4)),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                "TTL 2ms leaves no validity (drift margin 2 ms + 1 % of the TTL): use at least 4ms"
            );
            o.ttl = Duration::from_millis(3);
            assert!(o.validate().is_err(), "3 ms leaves 0.97 ms");
            o.ttl = Duration::from_millis(4);
            o.validate().unwrap();
            o.drift_factor = 0.0;
            o.ttl = Duration::from_millis(3);
            o.validate().unwrap();
            o.drift_factor = 0.5;
            let msg = o.validate().unwrap_err().to_string();
            assert!(
                msg.contains("50 %") && msg.ends_with("use at least 6ms"),
                "{msg}"
            );
        }
    }
}
