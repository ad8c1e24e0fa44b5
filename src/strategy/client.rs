//! [`LockClient`]: one client's view of the lock service, the entry the driver and the tests
//! use for every strategy. It validates the options, connects the backend of the strategy's
//! [`LockService`](super::LockService) (see [`backend`](super::backend)) and retries acquires
//! under the [`RetryPolicy`](super::RetryPolicy).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::backend::{Backend, LockBackend};
use super::watchdog::Watchdog;
use super::{StrategyError, StrategyKind, StrategyOptions};
use crate::lease::{AcquireError, Lease, ReleaseOutcome};
use crate::node::{ConnectOptions, NodeEndpoint};

/// One client's connections to the nodes of one strategy. Cloning shares the connections.
///
/// Single-node strategies use the first endpoint only; `redlock` and `redlock-fenced` use all of
/// them; `etcd-lease` every member. Every command to a node is bounded by
/// [`StrategyOptions::node_timeout`]; a node that dies produces
/// [`NodeFailure`](crate::lease::NodeFailure)s (never a panic) and is reconnected on the next
/// command.
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<Inner>,
}

struct Inner {
    opts: StrategyOptions,
    backend: Backend,
}

impl LockClient {
    /// Opens a connection to every node the strategy uses.
    ///
    /// Quorum strategies tolerate nodes that are unreachable at start: they count as failures
    /// in each attempt and are reconnected later; the quorum is always computed from
    /// `endpoints.len()`.
    ///
    /// # Errors
    /// [`StrategyError::InvalidOptions`] (see [`StrategyOptions::validate`]),
    /// [`StrategyError::NoEndpoints`], and for single-node strategies
    /// [`StrategyError::Connect`] when the node cannot be reached.
    pub async fn connect(
        endpoints: &[NodeEndpoint],
        opts: StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        opts.validate()?;
        if endpoints.is_empty() {
            return Err(StrategyError::NoEndpoints);
        }
        let backend = Backend::connect(endpoints, &opts, conn).await?;
        Ok(Self {
            inner: Arc::new(Inner { opts, backend }),
        })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &StrategyOptions {
        &self.inner.opts
    }

    /// The strategy.
    pub fn kind(&self) -> StrategyKind {
        self.inner.opts.kind
    }

    /// Number of nodes this client uses (the N of the quorum); 1 for PostgreSQL, the member
    /// count for etcd (which answers as one service).
    pub fn node_count(&self) -> usize {
        self.inner.backend.node_count()
    }

    /// Acquires a lease on `resource`, retrying under [`StrategyOptions::retry`].
    ///
    /// The lease's validity is counted from the start of the attempt that succeeded.
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire); with an acquire timeout,
    /// [`AcquireError::Timeout`] wrapping the last attempt's error.
    pub async fn acquire(&self, resource: &str) -> Result<Lease, AcquireError> {
        if self.kind().acquires_once() {
            // An adapter's library runs its own retry loop (it got the policy at init); a
            // claim is never retried (see `StrategyKind::acquires_once`).
            return self.try_acquire(resource).await;
        }
        let policy = self.inner.opts.retry;
        policy.run(|| self.try_acquire(resource)).await
    }

    /// [`acquire`](Self::acquire) for a client that may crash: `crash` is asked at the
    /// strategy's crash point inside an acquire (only `setnx-expire` has one: after `SETNX`
    /// set the key, before `PEXPIRE`; see [`StrategyKind::has_mid_acquire_crash_point`]).
    /// When it returns `true` the attempt stops there, sends nothing more and cleans nothing
    /// up, as a crashed process would.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`AcquireError::Crashed`] (never retried).
    pub async fn acquire_or_crash(
        &self,
        resource: &str,
        crash: &(dyn Fn() -> bool + Sync),
    ) -> Result<Lease, AcquireError> {
        if self.kind().acquires_once() {
            return self.try_acquire(resource).await;
        }
        let policy = self.inner.opts.retry;
        policy
            .run(|| {
                self.inner
                    .backend
                    .try_acquire(&self.inner.opts, resource, crash)
            })
            .await
    }

    /// The claim strategies: the job this worker should claim next (`job:<id>`, see
    /// [`claim`](super::claim)); `None` for every other strategy, whose resource the driver
    /// chooses.
    ///
    /// # Errors
    /// [`AcquireError::Node`] when the jobs table did not answer in time.
    pub async fn next_job(&self) -> Option<Result<String, AcquireError>> {
        match self.inner.backend.claim() {
            Some(c) => Some(c.pick(&self.inner.opts).await),
            None => None,
        }
    }

    /// One acquisition attempt, no retry.
    ///
    /// On Redis, sends the lock request to every node concurrently with a fresh owner token.
    /// The attempt holds when a quorum of the configured nodes locked and
    /// `ttl − elapsed − drift > 0`; otherwise our key is deleted again on every node
    /// (compare-and-delete, also on nodes that timed out, since their `SET` may still be
    /// applied; a `SET` that lands after this clean-up leaves a key nobody holds until its TTL
    /// runs out). PostgreSQL and etcd: see their strategies in [`StrategyKind`].
    ///
    /// # Errors
    /// [`AcquireError::Held`] / [`AcquireError::Node`] (single-node strategies),
    /// [`AcquireError::QuorumNotReached`] / [`AcquireError::AllNodesFailed`] (quorum
    /// strategies), [`AcquireError::ValidityExhausted`], and for `single-wait`
    /// [`AcquireError::NoReplicaAck`].
    pub async fn try_acquire(&self, resource: &str) -> Result<Lease, AcquireError> {
        self.inner
            .backend
            .try_acquire(&self.inner.opts, resource, &|| false)
            .await
    }

    /// Releases `lease` on every node the strategy uses, the way the strategy releases
    /// (see [`StrategyKind`]). [`ReleaseOutcome::finding`] says whether the lease was still
    /// held: a release of a lease that expired or passed to another owner deletes nothing
    /// (owner-checked strategies) and reports
    /// [`ReleaseFinding::Lost`](crate::lease::ReleaseFinding::Lost).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the single node failed, [`StrategyError::AllNodesFailed`]
    /// when no node of a quorum strategy answered. Partial failures are counted in
    /// [`ReleaseOutcome::failed_nodes`].
    pub async fn release(&self, lease: &Lease) -> Result<ReleaseOutcome, StrategyError> {
        self.inner.backend.release(&self.inner.opts, lease).await
    }

    /// Extends `lease` to a fresh TTL on every node where our key still is
    /// (compare-and-PEXPIRE), and returns the lease with its new deadline
    /// (`start of this extend + ttl − drift`).
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the key is gone or owned by someone else on enough nodes that
    /// no quorum can be extended; [`AcquireError::ValidityExhausted`] when the extend took too
    /// long; node failures as in [`try_acquire`](Self::try_acquire) when the shortfall is due
    /// to failing nodes (retrying may help).
    pub async fn extend(&self, lease: &Lease) -> Result<Lease, AcquireError> {
        self.inner.backend.extend(&self.inner.opts, lease).await
    }

    /// The critical section's work while holding `lease`: built-in strategies sleep `hold`
    /// here; an `adapter:*` strategy sends `hold` to its adapter, which sleeps inside its own
    /// process (so a paused adapter stalls the section, as a stalled application would) and
    /// says whether the library still believes it owns the lock. Returns that belief (`None`
    /// for built-in strategies, or when the adapter could not tell). A zero `hold` is no work:
    /// nothing is sent to an adapter (no round trip, no ownership check) and `None` returned.
    pub async fn hold(&self, lease: &Lease, hold: Duration) -> Option<bool> {
        match self.inner.backend.adapter() {
            Some(_) if hold.is_zero() => None,
            Some(a) => a.hold(lease, hold).await,
            None => {
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                None
            }
        }
    }

    /// Why this client's adapter process failed (broke the protocol, exited), naming the
    /// adapter and the line; `None` for built-in strategies and healthy adapters. A failed
    /// adapter answers every later request with the same reason.
    pub fn failure(&self) -> Option<String> {
        self.inner.backend.adapter().and_then(|a| a.failure())
    }

    /// Closes the stdin of this client's adapter process and waits up to `bound` for it to
    /// exit by itself, as the adapter protocol requires. Returns its exit status; `None` when it
    /// did not exit in time, or for built-in strategies. Later requests fail.
    pub async fn close_adapter(&self, bound: Duration) -> Option<std::process::ExitStatus> {
        match self.inner.backend.adapter() {
            Some(a) => a.close_and_wait(bound).await,
            None => None,
        }
    }

    /// Crashes this client's adapter process: `SIGKILL`, then waits up to `bound` until it is
    /// gone (reaped). Every request still waiting on it, or sent later, fails with an
    /// [`AcquireError::Adapter`] / [`StrategyError::Adapter`] of unknown outcome naming the
    /// crash; [`failure`](Self::failure) stays `None` (a crash is not a broken adapter, the run
    /// goes on). Returns `Some(true)` when the process is gone, `Some(false)` when it was still
    /// there after `bound`, `None` for built-in strategies.
    pub async fn crash_adapter(&self, bound: Duration) -> Option<bool> {
        match self.inner.backend.adapter() {
            Some(a) => Some(a.crash(bound).await),
            None => None,
        }
    }

    /// The harness's overhead per answered request of this client's adapter process so far,
    /// µs: lockbench's round trip minus the adapter's own time around the library call
    /// (`None` for built-in strategies).
    pub fn adapter_overhead(&self) -> Option<super::AdapterOverhead> {
        self.inner.backend.adapter().map(|a| a.overhead())
    }

    /// True when `self` and `other` are handles of the same connection (the driver's
    /// `--shared-connection` clones one client for all).
    pub fn same_connection(&self, other: &LockClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The id of this client's adapter process while it runs (`None` for built-in strategies).
    pub fn adapter_pid(&self) -> Option<u32> {
        self.inner.backend.adapter().and_then(|a| a.pid())
    }

    /// Starts renewing `lease` every TTL/3 in a background task (see [`Watchdog`]). While
    /// `paused` is `true` the watchdog does not renew, as a paused process would not.
    pub fn spawn_watchdog(&self, lease: Lease, paused: watch::Receiver<bool>) -> Watchdog {
        Watchdog::spawn(self.clone(), lease, paused)
    }
}
