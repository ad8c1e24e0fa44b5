//! `claim-update`, `claim-update-unguarded`, `claim-skip-locked` and
//! `claim-skip-locked-lease`: no lock at all. The jobs are rows of a PostgreSQL table, and a
//! worker claims one with a conditional `UPDATE` whose affected rows say who won, the way
//! queue claim semantics work (a job row's state, owner and lease), or with a row lock taken
//! by `FOR UPDATE SKIP LOCKED` ([`ClaimMode`]).
//!
//! ## Table (`"{prefix}jobs"`, on the strategy's PostgreSQL server)
//! ```sql
//! CREATE TABLE "{prefix}jobs" (
//!     id          bigint PRIMARY KEY,              -- job n is resource `job:n`
//!     state       text   NOT NULL DEFAULT 'pending', -- 'pending' | 'running' | 'done'
//!     owner       text,                            -- the claiming worker's owner token
//!     claims      integer NOT NULL DEFAULT 0,      -- how often it was claimed
//!     lease_until timestamptz,                     -- the claim's lease (server clock)
//!     done_at     timestamptz);
//! CREATE INDEX "{prefix}jobs_open" ON "{prefix}jobs" (id) WHERE state <> 'done';
//! ```
//! Created by the first session (under an advisory transaction lock, so concurrent sessions
//! do not race on the catalog; a session that finds it takes no lock) and kept stocked: [`CANDIDATES`] open jobs are read per pick,
//! and when fewer are open the picking session appends the next [`STOCK`] ids (`ON CONFLICT DO
//! NOTHING`, so two appending at once add them once). The supply never runs dry, as a queue
//! fed faster than its workers drain it.
//!
//! ## Statements
//! - **Pick** ([`ClaimQueue::pick`], not part of the claim): `SELECT id … WHERE state <> 'done'
//!   AND (state = 'pending' OR lease_until < clock_timestamp()) ORDER BY id LIMIT 8`: an
//!   expired claim among them first (a rescue; expired claims have the lowest open ids), else
//!   one at random, so workers rarely collide.
//! - **Claim** (acquire of `job:n`): `UPDATE … SET state = 'running', owner = $me, claims =
//!   claims + 1, lease_until = clock_timestamp() + ttl WHERE id = n AND (state = 'pending' OR
//!   (state = 'running' AND lease_until < clock_timestamp()))`. Under READ COMMITTED a
//!   concurrent claim of the same row waits for the first to commit and then re-evaluates the
//!   `WHERE` on the new row version (PostgreSQL manual, §13.2.1), so exactly one of them
//!   updates it: one row affected is the claim, none is "taken" ([`AcquireError::Held`]).
//!   Never retried: a lost claim means another worker has the job; the driver picks the next.
//!   `claims` (1 for the first claim, 2 for the rescue, …) is the lease's **fencing token** for
//!   `claim-update`: the job's own row (the ledger's resource `job:n`) takes a write only from
//!   the latest claim, the same guard as the completion's. `claim-update-unguarded` has none.
//! - **Renew** (extend, the heartbeat a watchdog sends): `SET lease_until = clock_timestamp()
//!   + ttl WHERE id = n AND owner = $me AND state = 'running'`; no row: the claim was taken
//!   over ([`AcquireError::Lost`]).
//! - **Complete** (release): `SET state = 'done' WHERE id = n AND owner = $me AND state =
//!   'running'` for `claim-update`: a worker whose claim was taken over completes nothing (the
//!   release reports the lease lost, "not owner"). `claim-update-unguarded` completes `WHERE
//!   id = n` whoever claimed it since: a zombie completion.
//!
//! The lease the client believes in ends at `claim start + ttl − drift`
//! ([`quorum::clock_drift`](super::quorum::clock_drift)); the server's `lease_until` is later,
//! so no other claim can take the job while its holder still believes it has it — unless the
//! holder stalls past it, which is the failure these strategies expose: the job then runs
//! twice (at-least-once), and only the owner guard keeps the stale worker's completion out.
//!
//! ## `claim-skip-locked` (a transaction held for the work)
//! - **Pick**: the pick above, a plain read that takes no row lock (a pick `FOR SHARE SKIP
//!   LOCKED` would leave out the jobs another worker holds, but its share locks make a
//!   concurrent claim of a free job skip it: a job nobody holds refused for a while). A
//!   transaction's claim is not visible to it, so it may name a job another worker holds.
//! - **Claim**: `BEGIN; SELECT id … WHERE id = n AND state = 'pending' FOR UPDATE SKIP LOCKED`
//!   (one round trip): a row is the claim, held by the open transaction; none is "taken" (the
//!   transaction is rolled back). The canonical dequeue, `… ORDER BY id LIMIT 1 FOR UPDATE
//!   SKIP LOCKED`, takes whichever job is free in one statement; here the pick names the job
//!   first, because every attempt is recorded on the resource it takes before it answers.
//! - **Heartbeat** (extend): `SELECT 1` on the session that holds the transaction; the session
//!   gone (or replaced): the claim was rolled back ([`AcquireError::Lost`]).
//! - **Complete**: `UPDATE … SET state = 'done' WHERE id = n; COMMIT` in the transaction. A
//!   session that ended before it (a reset connection, the server's timeout) completes nothing:
//!   the server rolled the claim back and the job is pending again.
//!
//! No TTL and no token: the claim lasts as long as the session. A crashed worker's session
//! closes and the job is free at once; a paused worker keeps it (no second run, a stall).
//!
//! ## `claim-skip-locked-lease` (the claim committed, a lease rescued)
//! As `claim-update`, with the claim `UPDATE … WHERE id = (SELECT id … WHERE id = n AND
//! (state = 'pending' OR (state = 'running' AND lease_until < clock_timestamp())) FOR UPDATE
//! SKIP LOCKED) RETURNING claims`: a concurrent claim of the same job skips it instead of
//! waiting for the first to commit.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the modes, the queue's [`LockBackend`]: claim, renew, complete; the pick |
//! | `statements` | the SQL of each mode |
//! | `held` | `claim-skip-locked`'s transaction: claim, heartbeat, completion |
//! | `session` | the one session: statements bounded by the per-node timeout, opening and closing |
//!
//! Connection hygiene as in `postgres`: one statement in flight per session, bounded by the
//! per-node timeout, and the session closed after a timeout or an I/O error.

use std::time::Duration;

use rand::Rng;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_postgres::Client;

use super::backend::{CrashPoint, LockBackend};
use super::{quorum, StrategyError, StrategyOptions};
use crate::lease::{
    new_owner_token, AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome,
};
use crate::node::{ConnectOptions, NodeEndpoint};

mod held;
mod session;
mod statements;

use session::{Answer, Want};
use statements::Statements;

/// Open jobs read per pick (an expired claim among them first, else one at random, so
/// workers rarely collide).
pub const CANDIDATES: i64 = 8;

/// Job ids appended at a time when fewer than [`CANDIDATES`] jobs are open.
pub const STOCK: i64 = 10_000;

/// The resource name of job `id`: `job:{id}`.
pub fn job_resource(id: i64) -> String {
    format!("job:{id}")
}

/// A completion's outcome on the one jobs table: `done` is `released_nodes: 1` (the job
/// marked done by this claim), else 0 (the claim was taken over, or rolled back).
fn completed(done: bool) -> ReleaseOutcome {
    ReleaseOutcome {
        released_nodes: usize::from(done),
        failed_nodes: 0,
        needed_nodes: 1,
    }
}

/// How a claim strategy takes and completes its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimMode {
    /// A conditional `UPDATE`, committed; completion guarded by the owner (`claim-update`) or
    /// not (`claim-update-unguarded`).
    Update {
        /// Completion `WHERE owner = $me`, and the claim's number as the fencing token.
        guarded: bool,
    },
    /// `FOR UPDATE SKIP LOCKED` in a transaction held open for the work
    /// (`claim-skip-locked`).
    SkipLocked,
    /// A committed `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)` with a lease,
    /// completion guarded by the owner (`claim-skip-locked-lease`).
    SkipLockedLease,
}

impl ClaimMode {
    /// The mode of a claim strategy.
    fn of(kind: crate::strategy::StrategyKind) -> Self {
        use crate::strategy::StrategyKind as K;
        match kind {
            K::ClaimSkipLocked => ClaimMode::SkipLocked,
            K::ClaimSkipLockedLease => ClaimMode::SkipLockedLease,
            k => ClaimMode::Update {
                guarded: k.is_fenced(),
            },
        }
    }

    /// True when the completion (and the job's row, by the token) takes only the latest
    /// claim's: `WHERE owner = $me`.
    fn guarded(self) -> bool {
        !matches!(self, ClaimMode::Update { guarded: false })
    }
}

/// One worker's session on the jobs table, reconnected lazily.
pub(crate) struct ClaimQueue {
    endpoint: NodeEndpoint,
    connect: ConnectOptions,
    mode: ClaimMode,
    sql: Statements,
    /// Held for the whole statement: one statement in flight per session.
    session: Mutex<Option<Open>>,
}

struct Open {
    client: Client,
    connection: tokio::task::AbortHandle,
    /// `claim-skip-locked`: the job whose row this session's open transaction holds.
    job: Option<i64>,
}

impl LockBackend for ClaimQueue {
    /// A session on the first endpoint, opened now; the first session creates the table.
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        let mode = ClaimMode::of(opts.kind);
        let queue = ClaimQueue {
            endpoint: endpoints[0].clone(),
            connect: *conn,
            mode,
            sql: Statements::new(&opts.key_prefix, mode),
            session: Mutex::new(None),
        };
        let mut session = queue.session.lock().await;
        let timeout = conn.connect_timeout + conn.response_timeout;
        if let Err(f) = queue.open(&mut session, timeout).await {
            return Err(StrategyError::Connect {
                node: queue.endpoint.to_string(),
                message: f.message,
                os_error: None,
            });
        }
        drop(session);
        Ok(queue)
    }

    fn node_count(&self) -> usize {
        1
    }

    /// The claim of `resource` (`job:n`, from [`ClaimQueue::pick`]): one conditional
    /// `UPDATE`. Never retried.
    ///
    /// # Errors
    /// [`AcquireError::Held`] when another worker claimed it first (or it is done);
    /// [`AcquireError::Node`] for a resource that is not a job, or when the server did not
    /// answer within the per-node timeout (the claim may have been made: unknown outcome).
    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        _crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let id = self.job_id(resource).map_err(AcquireError::Node)?;
        let owner = format!("claim-{}", new_owner_token());
        let start = Instant::now();
        if self.mode == ClaimMode::SkipLocked {
            return self.claim_held(opts, resource, id, owner, start).await;
        }
        let ttl_ms = opts.ttl.as_millis() as i64;
        let answer = self
            .run(
                opts.node_timeout,
                &self.sql.claim,
                id,
                &owner,
                Some(ttl_ms),
                Want::Rows,
            )
            .await
            .map_err(AcquireError::Node)?;
        let claims = match &answer {
            Answer::Rows(rows) => rows.first().and_then(|r| r.try_get::<_, i32>(0).ok()),
            _ => None,
        };
        match claims {
            Some(claims) => Ok(Lease {
                resource: resource.to_string(),
                owner,
                // `claim-update`: the claim's number is the lease's fencing token.
                fencing_token: opts.kind.is_fenced().then_some(claims.max(0) as u64),
                acquired_at: start,
                validity_deadline: start + opts.ttl.saturating_sub(self.drift(opts)),
                locked_nodes: 1,
                replica_acks: None,
            }),
            _ => Err(AcquireError::Held {
                resource: resource.to_string(),
            }),
        }
    }

    /// Completes the job: one row affected is `released_nodes: 1` (done by this claim),
    /// none is the lease lost (another worker claimed it since; `claim-update` only).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the server did not answer in time or refused.
    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let id = self.job_id(&lease.resource).map_err(StrategyError::Node)?;
        if self.mode == ClaimMode::SkipLocked {
            return self.complete_held(opts, id).await;
        }
        let answer = self
            .run(
                opts.node_timeout,
                &self.sql.complete,
                id,
                &lease.owner,
                None,
                Want::Affected,
            )
            .await
            .map_err(StrategyError::Node)?;
        let done = matches!(answer, Answer::Affected(n) if n > 0);
        Ok(completed(done))
    }

    /// Renews the claim's lease to a fresh TTL (the worker's heartbeat).
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the claim was taken over or the job is done;
    /// [`AcquireError::Node`] when the server did not answer in time.
    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        let id = self.job_id(&lease.resource).map_err(AcquireError::Node)?;
        if self.mode == ClaimMode::SkipLocked {
            return self.heartbeat_held(opts, lease, id).await;
        }
        let start = Instant::now();
        let ttl_ms = opts.ttl.as_millis() as i64;
        let answer = self
            .run(
                opts.node_timeout,
                &self.sql.renew,
                id,
                &lease.owner,
                Some(ttl_ms),
                Want::Affected,
            )
            .await
            .map_err(AcquireError::Node)?;
        match answer {
            Answer::Affected(n) if n > 0 => Ok(Lease {
                validity_deadline: start + opts.ttl.saturating_sub(self.drift(opts)),
                ..lease.clone()
            }),
            _ => Err(AcquireError::Lost {
                resource: lease.resource.clone(),
                reason: "another worker claimed the job after this claim's lease ran out".into(),
            }),
        }
    }
}

impl ClaimQueue {
    /// The job to claim next: of the first [`CANDIDATES`] open jobs, a claimed one whose
    /// lease ran out (the rescue comes first: its worker is gone or stalled), else one of the
    /// pending ones at random; appends [`STOCK`] jobs first when fewer are open.
    ///
    /// # Errors
    /// [`AcquireError::Node`] when the server did not answer within the per-node timeout;
    /// [`AcquireError::Held`] (resource [`crate::sink::JOB_QUEUE`]) when no job is open even
    /// after stocking.
    pub(crate) async fn pick(&self, opts: &StrategyOptions) -> Result<String, AcquireError> {
        let mut open = self.open_jobs(opts).await?;
        if (open.len() as i64) < CANDIDATES {
            let mut session = self.session.lock().await;
            self.statement(
                &mut session,
                opts.node_timeout,
                &self.sql.stock,
                &[],
                Want::Affected,
            )
            .await
            .map_err(AcquireError::Node)?;
            drop(session);
            if open.is_empty() {
                open = self.open_jobs(opts).await?;
            }
        }
        if open.is_empty() {
            return Err(AcquireError::Held {
                resource: crate::sink::JOB_QUEUE.into(),
            });
        }
        let id = match open.iter().find(|&&(_, expired)| expired) {
            Some(&(id, _)) => id,
            None => open[rand::rng().random_range(0..open.len())].0,
        };
        Ok(job_resource(id))
    }

    /// The first open jobs: (id, claimed with an expired lease).
    async fn open_jobs(&self, opts: &StrategyOptions) -> Result<Vec<(i64, bool)>, AcquireError> {
        let mut session = self.session.lock().await;
        let answer = self
            .statement(
                &mut session,
                opts.node_timeout,
                &self.sql.pick,
                &[],
                Want::Rows,
            )
            .await
            .map_err(AcquireError::Node)?;
        let rows = match answer {
            Answer::Rows(rows) => rows,
            _ => Vec::new(),
        };
        rows.iter()
            .map(|r| Ok((r.try_get::<_, i64>(0)?, r.try_get::<_, bool>(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| AcquireError::Node(self.failure(NodeFailureKind::Command, e.to_string())))
    }

    fn drift(&self, opts: &StrategyOptions) -> Duration {
        quorum::clock_drift(opts.ttl, opts.drift_factor)
    }

    fn job_id(&self, resource: &str) -> Result<i64, NodeFailure> {
        resource
            .strip_prefix("job:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                self.failure(
                    NodeFailureKind::Command,
                    format!("{resource:?} is not a job (job:<id>): claims take jobs only"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_resources_round_trip() {
        assert_eq!(job_resource(17), "job:17");
        assert_eq!(
            "job:17".strip_prefix("job:").unwrap().parse::<i64>().ok(),
            Some(17)
        );
    }
}
