//! [`LockClient`]: acquire, release and extend a lease on one node or a quorum of nodes.
//!
//! Single-node strategies are the N = 1 case of the same code path: the request goes to every
//! node the strategy uses concurrently, the replies are tallied, and [`quorum::decide`] says
//! whether the attempt holds (quorum of the *configured* node count, validity > 0).

use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::NodeFailure;
use super::etcd::EtcdSession;
use super::link::NodeLink;
use super::postgres::PgSession;
use super::quorum::{self, QuorumDecision, Tally};
use super::scripts::{self, ExtendReply, LockReply, WaitReply};
use super::watchdog::Watchdog;
use super::{AcquireError, LockService, StrategyError, StrategyKind, StrategyOptions};
use crate::lease::Lease;
use crate::node::{ConnectOptions, NodeEndpoint};

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

/// One client's connections to the nodes of one strategy. Cloning shares the connections.
///
/// Single-node strategies use the first endpoint only; `redlock` and `redlock-fenced` use all of
/// them. Every command to a node is bounded by [`StrategyOptions::node_timeout`]; a node that
/// dies produces [`NodeFailure`]s (never a panic) and is reconnected on the next command.
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<Inner>,
}

struct Inner {
    opts: StrategyOptions,
    /// Redis strategies: one link per node used.
    links: Vec<NodeLink>,
    /// The PostgreSQL session or etcd client of the strategies that do not lock on Redis.
    service: Service,
}

/// The non-Redis lock services.
enum Service {
    Redis,
    Postgres(Box<PgSession>),
    Etcd(EtcdSession),
}

/// Replies of every node to one request, in node order.
type Replies<T> = Vec<Result<T, NodeFailure>>;

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
        let service = match opts.kind.service() {
            LockService::Redis => Service::Redis,
            LockService::Postgres => {
                let session = PgSession::new(endpoints[0].clone(), &opts, *conn);
                session.ensure_connected().await?;
                Service::Postgres(Box::new(session))
            }
            LockService::Etcd => {
                let session = EtcdSession::new(endpoints, conn)?;
                session
                    .ensure_connected(conn.connect_timeout + conn.response_timeout)
                    .await?;
                Service::Etcd(session)
            }
        };
        if !matches!(service, Service::Redis) {
            return Ok(Self {
                inner: Arc::new(Inner {
                    opts,
                    links: Vec::new(),
                    service,
                }),
            });
        }
        let used = if opts.kind.is_quorum() {
            endpoints
        } else {
            &endpoints[..1]
        };
        let links: Vec<NodeLink> = used
            .iter()
            .map(|e| NodeLink::new(e.clone(), *conn))
            .collect();
        let results = join_all(links.iter().map(|l| l.ensure_connected())).await;
        if !opts.kind.is_quorum() {
            if let Some(Err(e)) = results.into_iter().next() {
                return Err(StrategyError::Connect {
                    node: links[0].endpoint().to_string(),
                    message: e.to_string(),
                });
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                opts,
                links,
                service,
            }),
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
        match &self.inner.service {
            Service::Redis => self.inner.links.len(),
            Service::Postgres(_) => 1,
            Service::Etcd(e) => e.member_count(),
        }
    }

    /// Acquires a lease on `resource`, retrying under [`StrategyOptions::retry`].
    ///
    /// The lease's validity is counted from the start of the attempt that succeeded.
    ///
    /// # Errors
    /// See [`try_acquire`](Self::try_acquire); with an acquire timeout,
    /// [`AcquireError::Timeout`] wrapping the last attempt's error.
    pub async fn acquire(&self, resource: &str) -> Result<Lease, AcquireError> {
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
        let policy = self.inner.opts.retry;
        policy.run(|| self.attempt(resource, crash)).await
    }

    /// One acquisition attempt, no retry.
    ///
    /// Sends the lock request to every node concurrently with a fresh owner token. The attempt
    /// holds when a quorum of the configured nodes locked and `ttl − elapsed − drift > 0`;
    /// otherwise our key is deleted again on every node (compare-and-delete, also on nodes
    /// that timed out, since their `SET` may still be applied; a `SET` that lands after this
    /// clean-up leaves a key nobody holds until its TTL runs out).
    ///
    /// # Errors
    /// [`AcquireError::Held`] / [`AcquireError::Node`] (single-node strategies),
    /// [`AcquireError::QuorumNotReached`] / [`AcquireError::AllNodesFailed`] (quorum
    /// strategies), [`AcquireError::ValidityExhausted`], and for `single-wait`
    /// [`AcquireError::NoReplicaAck`].
    pub async fn try_acquire(&self, resource: &str) -> Result<Lease, AcquireError> {
        self.attempt(resource, &|| false).await
    }

    /// One attempt, with the caller's crash point (see [`acquire_or_crash`](Self::acquire_or_crash)).
    async fn attempt(
        &self,
        resource: &str,
        crash: &(dyn Fn() -> bool + Sync),
    ) -> Result<Lease, AcquireError> {
        match self.inner.opts.kind {
            StrategyKind::SingleWait => return self.attempt_with_wait(resource).await,
            StrategyKind::SetnxExpire => return self.attempt_setnx_expire(resource, crash).await,
            _ => {}
        }
        let opts = &self.inner.opts;
        match &self.inner.service {
            Service::Redis => {}
            Service::Postgres(pg) => return pg.try_acquire(opts, resource).await,
            Service::Etcd(etcd) => return etcd.try_acquire(opts, resource).await,
        }
        let n = self.node_count();
        let owner = new_owner_token();
        let key = opts.lock_key(resource);
        let fence_key = opts.fence_key(resource);
        let ttl_ms = ttl_millis(opts);
        let start = Instant::now();

        let replies = self
            .on_all_nodes(|conn| {
                scripts::lock(
                    conn,
                    opts.kind,
                    key.clone(),
                    fence_key.clone(),
                    owner.clone(),
                    ttl_ms,
                )
            })
            .await;
        let mut tally = Tally::default();
        let mut failures = Vec::new();
        let mut token: Option<u64> = None;
        for reply in replies {
            match reply {
                Ok(LockReply::Locked(counter)) => {
                    tally.locked += 1;
                    token = token.max(counter);
                }
                Ok(LockReply::Held) => tally.held += 1,
                Err(f) => {
                    tally.failed += 1;
                    failures.push(f);
                }
            }
        }

        if opts.kind == StrategyKind::RedlockFenced && tally.locked >= quorum::quorum(n) {
            if let Some(t) = token {
                let confirmed = self.raise_fences(&fence_key, t).await;
                if confirmed < quorum::quorum(n) {
                    self.clean_up(&key, &owner).await;
                    return Err(AcquireError::QuorumNotReached {
                        locked: confirmed.min(tally.locked),
                        needed: quorum::quorum(n),
                        held: tally.held,
                        failed: n.saturating_sub(confirmed.min(tally.locked) + tally.held),
                    });
                }
            }
        }

        let elapsed = start.elapsed();
        let decision = if opts.kind.has_ttl() {
            quorum::decide(n, tally, opts.ttl, elapsed, opts.drift_factor)
        } else {
            // No expiry: the lease does not run out, whatever the latency.
            match quorum::decide(n, tally, Lease::NO_EXPIRY, elapsed, 0.0) {
                QuorumDecision::Acquired { .. } => QuorumDecision::Acquired {
                    validity: Lease::NO_EXPIRY,
                },
                other => other,
            }
        };
        match decision {
            QuorumDecision::Acquired { validity } => Ok(Lease {
                resource: resource.to_string(),
                owner,
                fencing_token: token,
                acquired_at: start,
                validity_deadline: start + elapsed + validity,
                locked_nodes: tally.locked,
                replica_acks: None,
            }),
            QuorumDecision::ValidityExhausted => {
                self.clean_up(&key, &owner).await;
                Err(AcquireError::ValidityExhausted {
                    elapsed,
                    ttl: opts.ttl,
                })
            }
            QuorumDecision::QuorumNotReached { needed } => {
                if tally.locked > 0 || tally.failed > 0 {
                    self.clean_up(&key, &owner).await;
                }
                if !opts.kind.is_quorum() {
                    return Err(match failures.into_iter().next() {
                        Some(f) => AcquireError::Node(f),
                        None => AcquireError::Held {
                            resource: resource.to_string(),
                        },
                    });
                }
                Err(AcquireError::QuorumNotReached {
                    locked: tally.locked,
                    needed,
                    held: tally.held,
                    failed: tally.failed,
                })
            }
            QuorumDecision::AllNodesFailed => {
                self.clean_up(&key, &owner).await;
                if !opts.kind.is_quorum() && failures.len() == 1 {
                    return Err(AcquireError::Node(failures.remove(0)));
                }
                Err(AcquireError::AllNodesFailed { failures })
            }
        }
    }

    /// `single-wait`'s attempt on the single node: `SET NX PX`, then `WAIT 1` (timeout
    /// [`StrategyOptions::replica_wait`]), both on one connection, bounded together by
    /// [`StrategyOptions::replica_wait_bound`].
    /// Without an acknowledgement the key is deleted again (compare-and-delete).
    async fn attempt_with_wait(&self, resource: &str) -> Result<Lease, AcquireError> {
        let opts = &self.inner.opts;
        let link = &self.inner.links[0];
        let owner = new_owner_token();
        let key = opts.lock_key(resource);
        let ttl_ms = ttl_millis(opts);
        let wait = opts.replica_wait();
        let wait_ms = wait.as_millis() as u64;
        let start = Instant::now();
        let reply = link
            .run(opts.replica_wait_bound(), |conn| {
                scripts::lock_and_wait(
                    conn,
                    key.clone(),
                    owner.clone(),
                    ttl_ms,
                    REPLICAS_TO_WAIT,
                    wait_ms,
                )
            })
            .await;
        let acked = match reply {
            Ok(WaitReply::Held) => {
                return Err(AcquireError::Held {
                    resource: resource.to_string(),
                })
            }
            Err(f) => {
                // The SET may have been applied (timeout): delete it if it is ours.
                self.clean_up(&key, &owner).await;
                return Err(AcquireError::Node(f));
            }
            Ok(WaitReply::Locked { acked }) => acked,
        };
        if acked < REPLICAS_TO_WAIT {
            let released = link
                .run(opts.node_timeout, |conn| {
                    scripts::release_owned(conn, key.clone(), owner.clone())
                })
                .await
                .is_ok();
            return Err(AcquireError::NoReplicaAck {
                resource: resource.to_string(),
                acked,
                needed: REPLICAS_TO_WAIT,
                wait_timeout: wait,
                released,
            });
        }
        let mut lease = self.single_node_lease(resource, &key, owner, start).await?;
        lease.replica_acks = Some(acked);
        Ok(lease)
    }

    /// `setnx-expire`'s attempt: `SETNX` (no expiry), the crash point, then `PEXPIRE` as a
    /// second request. A failure of either request deletes our key again if it can; when that
    /// delete fails too, the key stays without expiry (the bug this control shows).
    async fn attempt_setnx_expire(
        &self,
        resource: &str,
        crash: &(dyn Fn() -> bool + Sync),
    ) -> Result<Lease, AcquireError> {
        let opts = &self.inner.opts;
        let link = &self.inner.links[0];
        let owner = new_owner_token();
        let key = opts.lock_key(resource);
        let start = Instant::now();
        match link
            .run(opts.node_timeout, |conn| {
                scripts::setnx(conn, key.clone(), owner.clone())
            })
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Err(AcquireError::Held {
                    resource: resource.to_string(),
                })
            }
            Err(f) => {
                self.clean_up(&key, &owner).await;
                return Err(AcquireError::Node(f));
            }
        }
        if crash() {
            return Err(AcquireError::Crashed {
                resource: resource.to_string(),
                done: "SETNX",
                not_sent: "PEXPIRE",
            });
        }
        match link
            .run(opts.node_timeout, |conn| {
                scripts::pexpire(conn, key.clone(), ttl_millis(opts))
            })
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Err(AcquireError::Lost {
                    resource: resource.to_string(),
                    reason: "key gone between SETNX and PEXPIRE".into(),
                })
            }
            Err(f) => {
                self.clean_up(&key, &owner).await;
                return Err(AcquireError::Node(f));
            }
        }
        self.single_node_lease(resource, &key, owner, start).await
    }

    /// The lease of a single-node attempt that started at `start` and holds our key: validity
    /// `ttl − elapsed − drift`; when none is left, our key is deleted again.
    async fn single_node_lease(
        &self,
        resource: &str,
        key: &str,
        owner: String,
        start: Instant,
    ) -> Result<Lease, AcquireError> {
        let opts = &self.inner.opts;
        let elapsed = start.elapsed();
        let Some(validity) = quorum::validity(opts.ttl, elapsed, opts.drift_factor) else {
            self.clean_up(key, &owner).await;
            return Err(AcquireError::ValidityExhausted {
                elapsed,
                ttl: opts.ttl,
            });
        };
        Ok(Lease {
            resource: resource.to_string(),
            owner,
            fencing_token: None,
            acquired_at: start,
            validity_deadline: start + elapsed + validity,
            locked_nodes: 1,
            replica_acks: None,
        })
    }

    /// Releases `lease` on every node the strategy uses, the way the strategy releases
    /// (see [`StrategyKind`]). [`ReleaseOutcome::finding`] says whether the lease was still
    /// held: a release of a lease that expired or passed to another owner deletes nothing
    /// (owner-checked strategies) and reports [`ReleaseFinding::Lost`].
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the single node failed, [`StrategyError::AllNodesFailed`]
    /// when no node of a quorum strategy answered. Partial failures are counted in
    /// [`ReleaseOutcome::failed_nodes`].
    pub async fn release(&self, lease: &Lease) -> Result<ReleaseOutcome, StrategyError> {
        let opts = &self.inner.opts;
        match &self.inner.service {
            Service::Redis => {}
            Service::Postgres(pg) => return pg.release(opts, lease).await,
            Service::Etcd(etcd) => return etcd.release(opts, lease).await,
        }
        let key = opts.lock_key(&lease.resource);
        let replies = if opts.kind == StrategyKind::GetThenDel {
            self.get_then_del(&key, &lease.owner).await
        } else {
            self.on_all_nodes(|conn| {
                scripts::release(conn, opts.kind, key.clone(), lease.owner.clone())
            })
            .await
        };
        let mut outcome = ReleaseOutcome {
            needed_nodes: self.needed_nodes(),
            ..ReleaseOutcome::default()
        };
        let mut failures = Vec::new();
        for reply in replies {
            match reply {
                Ok(true) => outcome.released_nodes += 1,
                Ok(false) => {}
                Err(f) => failures.push(f),
            }
        }
        outcome.failed_nodes = failures.len();
        if failures.len() == self.node_count() {
            if !opts.kind.is_quorum() && failures.len() == 1 {
                return Err(StrategyError::Node(failures.remove(0)));
            }
            return Err(StrategyError::AllNodesFailed { failures });
        }
        Ok(outcome)
    }

    /// Nodes that must confirm an operation: the quorum for quorum strategies, else 1.
    fn needed_nodes(&self) -> usize {
        if self.kind().is_quorum() {
            quorum::quorum(self.node_count())
        } else {
            1
        }
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
        let opts = &self.inner.opts;
        match &self.inner.service {
            Service::Redis => {}
            Service::Postgres(pg) => return pg.extend(opts, lease).await,
            Service::Etcd(etcd) => return etcd.extend(opts, lease).await,
        }
        let n = self.node_count();
        let needed = quorum::quorum(n);
        let key = opts.lock_key(&lease.resource);
        let ttl_ms = ttl_millis(opts);
        let start = Instant::now();
        let replies = self
            .on_all_nodes(|conn| {
                scripts::extend(conn, opts.kind, key.clone(), lease.owner.clone(), ttl_ms)
            })
            .await;
        let (mut extended, mut missing, mut other) = (0, 0, 0);
        let mut failures = Vec::new();
        for reply in replies {
            match reply {
                Ok(ExtendReply::Extended) => extended += 1,
                Ok(ExtendReply::Missing) => missing += 1,
                Ok(ExtendReply::OtherOwner) => other += 1,
                Err(f) => failures.push(f),
            }
        }
        let elapsed = start.elapsed();
        if extended >= needed {
            let validity = if opts.kind.has_ttl() {
                quorum::validity(opts.ttl, elapsed, opts.drift_factor).ok_or(
                    AcquireError::ValidityExhausted {
                        elapsed,
                        ttl: opts.ttl,
                    },
                )?
            } else {
                Lease::NO_EXPIRY
            };
            return Ok(Lease {
                validity_deadline: start + elapsed + validity,
                locked_nodes: extended,
                ..lease.clone()
            });
        }
        if extended + failures.len() < needed {
            return Err(AcquireError::Lost {
                resource: lease.resource.clone(),
                reason: format!(
                    "key missing on {missing} and owned by another client on {other} of {n} nodes"
                ),
            });
        }
        if !opts.kind.is_quorum() && failures.len() == 1 {
            return Err(AcquireError::Node(failures.remove(0)));
        }
        if failures.len() == n {
            return Err(AcquireError::AllNodesFailed { failures });
        }
        Err(AcquireError::QuorumNotReached {
            locked: extended,
            needed,
            held: other,
            failed: failures.len(),
        })
    }

    /// Starts renewing `lease` every TTL/3 in a background task (see [`Watchdog`]). While
    /// `paused` is `true` the watchdog does not renew, as a paused process would not.
    pub fn spawn_watchdog(&self, lease: Lease, paused: watch::Receiver<bool>) -> Watchdog {
        Watchdog::spawn(self.clone(), lease, paused)
    }

    /// Runs one command on every node concurrently, each bounded by the per-node timeout.
    async fn on_all_nodes<T, F, Fut>(&self, op: F) -> Replies<T>
    where
        F: Fn(redis::aio::MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, redis::RedisError>>,
    {
        let timeout = self.inner.opts.node_timeout;
        join_all(self.inner.links.iter().map(|l| l.run(timeout, &op))).await
    }

    /// `get-then-del`'s release on every node: `GET`, compare in the client, then `DEL` as a
    /// second request, so other clients' commands can run in between (the bug it shows).
    async fn get_then_del(&self, key: &str, owner: &str) -> Replies<bool> {
        let timeout = self.inner.opts.node_timeout;
        join_all(self.inner.links.iter().map(|link| async move {
            let current = link
                .run(timeout, |conn| scripts::get(conn, key.to_string()))
                .await?;
            if current.as_deref() != Some(owner) {
                return Ok(false);
            }
            link.run(timeout, |conn| scripts::delete(conn, key.to_string()))
                .await
        }))
        .await
    }

    /// Raises every node's fence counter to at least `token`; returns how many confirmed.
    async fn raise_fences(&self, fence_key: &str, token: u64) -> usize {
        self.on_all_nodes(|conn| scripts::raise_fence(conn, fence_key.to_string(), token))
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(c) if *c >= token))
            .count()
    }

    /// Deletes our key (compare-and-delete) on every node; failures are ignored because the
    /// key expires anyway. After a timeout the link reconnects (see `link`), so this may
    /// reach a node before a late `SET` of the failed attempt does: that key then lives until
    /// its TTL runs out (forever for `no-ttl`), held by nobody.
    async fn clean_up(&self, key: &str, owner: &str) {
        let _ = self
            .on_all_nodes(|conn| scripts::release_owned(conn, key.to_string(), owner.to_string()))
            .await;
    }
}

/// Replicas `single-wait` waits for: one acknowledgement makes the lease count.
const REPLICAS_TO_WAIT: u32 = 1;

/// The TTL in whole milliseconds for `PX` / `PEXPIRE` (at least 1; validated at connect).
fn ttl_millis(opts: &StrategyOptions) -> u64 {
    (opts.ttl.as_millis() as u64).max(1)
}

/// A random owner token: 128 bits as 32 lowercase hex digits.
pub(crate) fn new_owner_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}
