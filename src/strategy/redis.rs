//! The Redis strategies: `single`, `single-fenced`, `redlock`, `redlock-fenced`, the negative
//! controls (`naive-del`, `get-then-del`, `no-ttl`, `setnx-expire`, `unchecked-extend`) and
//! `single-wait`, on one node or a quorum of nodes.
//!
//! Single-node strategies are the N = 1 case of the same code path: the request goes to every
//! node the strategy uses concurrently, the replies are tallied, and [`quorum::decide`] says
//! whether the attempt holds (quorum of the *configured* node count, validity > 0).
//! `single-wait` and `setnx-expire` take the lock in two requests and have their own attempt.
//! The commands and scripts are in `scripts`, one node's connection in `link`.

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use super::backend::{CrashPoint, LockBackend};
use super::link::NodeLink;
use super::quorum::{self, QuorumDecision, Tally};
use super::scripts::{self, ExtendReply, LockReply, WaitReply};
use super::{StrategyError, StrategyKind, StrategyOptions};
use crate::lease::{new_owner_token, AcquireError, Lease, NodeFailure, ReleaseOutcome};
use crate::node::{ConnectOptions, NodeEndpoint};

/// One client's links to the Redis nodes of its strategy: the first endpoint for single-node
/// strategies, every endpoint for `redlock` and `redlock-fenced`. A node that dies produces
/// [`NodeFailure`]s (never a panic) and is reconnected on the next command.
pub(crate) struct RedisNodes {
    links: Vec<NodeLink>,
}

/// Replies of every node to one request, in node order.
type Replies<T> = Vec<Result<T, NodeFailure>>;

impl LockBackend for RedisNodes {
    /// Opens a connection to every node the strategy uses. Quorum strategies tolerate nodes
    /// that are unreachable at start: they count as failures in each attempt and are
    /// reconnected later; the quorum is always computed from `endpoints.len()`.
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
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
                    os_error: super::error::os_error_code(&e),
                });
            }
        }
        Ok(Self { links })
    }

    fn node_count(&self) -> usize {
        self.links.len()
    }

    /// Sends the lock request to every node concurrently with a fresh owner token. The attempt
    /// holds when a quorum of the configured nodes locked and `ttl − elapsed − drift > 0`;
    /// otherwise our key is deleted again on every node (compare-and-delete, also on nodes
    /// that timed out, since their `SET` may still be applied; a `SET` that lands after this
    /// clean-up leaves a key nobody holds until its TTL runs out).
    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        match opts.kind {
            StrategyKind::SingleWait => self.attempt_with_wait(opts, resource).await,
            StrategyKind::SetnxExpire => self.attempt_setnx_expire(opts, resource, crash).await,
            _ => self.attempt_on_all_nodes(opts, resource).await,
        }
    }

    /// Releases `lease` on every node the strategy uses, the way the strategy releases
    /// (see [`StrategyKind`]): a release of a lease that expired or passed to another owner
    /// deletes nothing (owner-checked strategies) and reports
    /// [`ReleaseFinding::Lost`](crate::lease::ReleaseFinding::Lost).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the single node failed, [`StrategyError::AllNodesFailed`]
    /// when no node of a quorum strategy answered. Partial failures are counted in
    /// [`ReleaseOutcome::failed_nodes`].
    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let key = opts.lock_key(&lease.resource);
        let replies = if opts.kind == StrategyKind::GetThenDel {
            self.get_then_del(opts.node_timeout, &key, &lease.owner)
                .await
        } else {
            self.on_all_nodes(opts.node_timeout, |conn| {
                scripts::release(conn, opts.kind, key.clone(), lease.owner.clone())
            })
            .await
        };
        let mut outcome = ReleaseOutcome {
            needed_nodes: self.needed_nodes(opts.kind),
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

    /// Extends `lease` to a fresh TTL on every node where our key still is
    /// (compare-and-PEXPIRE), and returns the lease with its new deadline
    /// (`start of this extend + ttl − drift`).
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the key is gone or owned by someone else on enough nodes that
    /// no quorum can be extended; [`AcquireError::ValidityExhausted`] when the extend took too
    /// long; node failures as in [`try_acquire`](Self::try_acquire) when the shortfall is due
    /// to failing nodes (retrying may help).
    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        let n = self.node_count();
        let needed = quorum::quorum(n);
        let key = opts.lock_key(&lease.resource);
        let ttl_ms = ttl_millis(opts);
        let start = Instant::now();
        let replies = self
            .on_all_nodes(opts.node_timeout, |conn| {
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
}

impl RedisNodes {
    /// The attempt of `single`, `redlock`, their fenced variants, `naive-del`,
    /// `get-then-del`, `no-ttl` and `unchecked-extend` (they differ in the script and in
    /// release/extend, not in how an attempt is decided).
    async fn attempt_on_all_nodes(
        &self,
        opts: &StrategyOptions,
        resource: &str,
    ) -> Result<Lease, AcquireError> {
        let n = self.node_count();
        let owner = new_owner_token();
        let key = opts.lock_key(resource);
        let fence_key = opts.fence_key(resource);
        let ttl_ms = ttl_millis(opts);
        let start = Instant::now();

        let replies = self
            .on_all_nodes(opts.node_timeout, |conn| {
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
                let confirmed = self.raise_fences(opts.node_timeout, &fence_key, t).await;
                if confirmed < quorum::quorum(n) {
                    self.clean_up(opts.node_timeout, &key, &owner).await;
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
        let verdict = if opts.kind.has_ttl() {
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
        match verdict {
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
                self.clean_up(opts.node_timeout, &key, &owner).await;
                Err(AcquireError::ValidityExhausted {
                    elapsed,
                    ttl: opts.ttl,
                })
            }
            QuorumDecision::QuorumNotReached { needed } => {
                if tally.locked > 0 || tally.failed > 0 {
                    self.clean_up(opts.node_timeout, &key, &owner).await;
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
                self.clean_up(opts.node_timeout, &key, &owner).await;
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
    async fn attempt_with_wait(
        &self,
        opts: &StrategyOptions,
        resource: &str,
    ) -> Result<Lease, AcquireError> {
        let link = &self.links[0];
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
                self.clean_up(opts.node_timeout, &key, &owner).await;
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
        let mut lease = self
            .single_node_lease(opts, resource, &key, owner, start)
            .await?;
        lease.replica_acks = Some(acked);
        Ok(lease)
    }

    /// `setnx-expire`'s attempt: `SETNX` (no expiry), the crash point, then `PEXPIRE` as a
    /// second request. A failure of either request deletes our key again if it can; when that
    /// delete fails too, the key stays without expiry (the bug this control shows).
    async fn attempt_setnx_expire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let link = &self.links[0];
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
                self.clean_up(opts.node_timeout, &key, &owner).await;
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
                self.clean_up(opts.node_timeout, &key, &owner).await;
                return Err(AcquireError::Node(f));
            }
        }
        self.single_node_lease(opts, resource, &key, owner, start)
            .await
    }

    /// The lease of a single-node attempt that started at `start` and holds our key: validity
    /// `ttl − elapsed − drift`; when none is left, our key is deleted again.
    async fn single_node_lease(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        key: &str,
        owner: String,
        start: Instant,
    ) -> Result<Lease, AcquireError> {
        let elapsed = start.elapsed();
        let Some(validity) = quorum::validity(opts.ttl, elapsed, opts.drift_factor) else {
            self.clean_up(opts.node_timeout, key, &owner).await;
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

    /// Nodes that must confirm an operation: the quorum for quorum strategies, else 1.
    fn needed_nodes(&self, kind: StrategyKind) -> usize {
        if kind.is_quorum() {
            quorum::quorum(self.node_count())
        } else {
            1
        }
    }

    /// Runs one command on every node concurrently, each bounded by the per-node timeout.
    async fn on_all_nodes<T, F, Fut>(&self, timeout: Duration, op: F) -> Replies<T>
    where
        F: Fn(super::link::RedisConn) -> Fut,
        Fut: std::future::Future<Output = Result<T, ::redis::RedisError>>,
    {
        join_all(self.links.iter().map(|l| l.run(timeout, &op))).await
    }

    /// `get-then-del`'s release on every node: `GET`, compare in the client, then `DEL` as a
    /// second request, so other clients' commands can run in between (the bug it shows).
    async fn get_then_del(&self, timeout: Duration, key: &str, owner: &str) -> Replies<bool> {
        join_all(self.links.iter().map(|link| async move {
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
    async fn raise_fences(&self, timeout: Duration, fence_key: &str, token: u64) -> usize {
        self.on_all_nodes(timeout, |conn| {
            scripts::raise_fence(conn, fence_key.to_string(), token)
        })
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(c) if *c >= token))
        .count()
    }

    /// Deletes our key (compare-and-delete) on every node; failures are ignored because the
    /// key expires anyway. After a timeout the link reconnects (see `link`), so this may
    /// reach a node before a late `SET` of the failed attempt does: that key then lives until
    /// its TTL runs out (forever for `no-ttl`), held by nobody.
    async fn clean_up(&self, timeout: Duration, key: &str, owner: &str) {
        let _ = self
            .on_all_nodes(timeout, |conn| {
                scripts::release_owned(conn, key.to_string(), owner.to_string())
            })
            .await;
    }
}

/// Replicas `single-wait` waits for: one acknowledgement makes the lease count.
const REPLICAS_TO_WAIT: u32 = 1;

/// The TTL in whole milliseconds for `PX` / `PEXPIRE` (at least 1; validated at connect).
fn ttl_millis(opts: &StrategyOptions) -> u64 {
    (opts.ttl.as_millis() as u64).max(1)
}
