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
//! Connection hygiene as in `postgres`: one statement in flight per session, bounded by the
//! per-node timeout, and the session closed after a timeout or an I/O error.

use std::time::Duration;

use rand::Rng;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Client;

use super::backend::{CrashPoint, LockBackend};
use super::postgres::{describe_error, open_connection};
use super::{quorum, StrategyError, StrategyOptions};
use crate::lease::{
    new_owner_token, AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome,
};
use crate::node::{ConnectOptions, NodeEndpoint};

/// Open jobs read per pick (an expired claim among them first, else one at random, so
/// workers rarely collide).
pub const CANDIDATES: i64 = 8;

/// Job ids appended at a time when fewer than [`CANDIDATES`] jobs are open.
pub const STOCK: i64 = 10_000;

/// The resource name of job `id`: `job:{id}`.
pub fn job_resource(id: i64) -> String {
    format!("job:{id}")
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

/// The statements, with the table's quoted name filled in.
struct Statements {
    exists: String,
    setup: String,
    stock: String,
    pick: String,
    claim: String,
    renew: String,
    complete: String,
}

impl Statements {
    fn new(prefix: &str, mode: ClaimMode) -> Self {
        let quoted = |suffix: &str| format!("\"{}{suffix}\"", prefix.replace('"', "\"\""));
        let (t, index) = (quoted("jobs"), quoted("jobs_open"));
        let open = "state <> 'done' AND (state = 'pending' OR lease_until < clock_timestamp())";
        let literal = t.replace('\'', "''");
        let claimable =
            "(state = 'pending' OR (state = 'running' AND lease_until < clock_timestamp()))";
        let set_claim = "state = 'running', owner = $2, claims = claims + 1, \
             lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'";
        Self {
            exists: format!("SELECT to_regclass('{literal}') IS NOT NULL"),
            setup: format!(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('{literal}', 0)); \
                 CREATE TABLE IF NOT EXISTS {t} (id bigint PRIMARY KEY, \
                 state text NOT NULL DEFAULT 'pending', owner text, \
                 claims integer NOT NULL DEFAULT 0, lease_until timestamptz, \
                 done_at timestamptz); \
                 CREATE INDEX IF NOT EXISTS {index} ON {t} (id) WHERE state <> 'done'; COMMIT"
            ),
            stock: format!(
                "INSERT INTO {t} (id) SELECT m + g FROM (SELECT coalesce(max(id), 0) AS m \
                 FROM {t}) s, generate_series(1, {STOCK}::bigint) g ON CONFLICT DO NOTHING"
            ),
            pick: format!(
                "SELECT id, state = 'running' FROM {t} WHERE {open} ORDER BY id LIMIT {CANDIDATES}"
            ),
            claim: match mode {
                ClaimMode::Update { .. } => format!(
                    "UPDATE {t} SET {set_claim} WHERE id = $1 AND {claimable} RETURNING claims"
                ),
                ClaimMode::SkipLockedLease => format!(
                    "UPDATE {t} SET {set_claim} WHERE id = (SELECT id FROM {t} WHERE id = $1 \
                     AND {claimable} FOR UPDATE SKIP LOCKED) RETURNING claims"
                ),
                // The job's id is filled in (an integer) by `held_claim`: one simple query.
                ClaimMode::SkipLocked => format!(
                    "BEGIN; SELECT id FROM {t} WHERE id = {{id}} AND state = 'pending' \
                     FOR UPDATE SKIP LOCKED"
                ),
            },
            renew: format!(
                "UPDATE {t} SET lease_until = clock_timestamp() + $3::bigint * interval \
                 '1 millisecond' WHERE id = $1 AND owner = $2 AND state = 'running'"
            ),
            complete: if mode == ClaimMode::SkipLocked {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = {{id}} AND state = 'pending'; COMMIT"
                )
            } else if mode.guarded() {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = $1 AND owner = $2 AND state = 'running'"
                )
            } else {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = $1 AND $2::text IS NOT NULL"
                )
            },
        }
    }
}

/// What one statement returns: its rows, or how many rows it changed.
enum Answer {
    Rows(Vec<tokio_postgres::Row>),
    Affected(u64),
    /// A simple query's (several statements, one round trip): rows of the last statement
    /// that returned any, and the first statement's affected count that changed rows.
    Simple {
        rows: usize,
        affected: u64,
    },
}

/// Which [`Answer`] a statement is run for.
#[derive(Clone, Copy)]
enum Want {
    Rows,
    Affected,
    /// A simple query (no parameters): [`Answer::Simple`].
    Simple,
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
        Ok(ReleaseOutcome {
            released_nodes: usize::from(done),
            failed_nodes: 0,
            needed_nodes: 1,
        })
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
    /// `claim-skip-locked`'s claim: `BEGIN` and the job's row `FOR UPDATE SKIP LOCKED`, the
    /// transaction left open for the work. No row: rolled back, [`AcquireError::Held`].
    async fn claim_held(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        id: i64,
        owner: String,
        start: Instant,
    ) -> Result<Lease, AcquireError> {
        let mut session = self.session.lock().await;
        if session.as_ref().is_some_and(|o| o.job.is_some()) {
            // A transaction left open by a claim never completed: end it with its session.
            close(&mut session);
        }
        let sql = self.sql.claim.replace("{id}", &id.to_string());
        let answer = self
            .statement(&mut session, opts.node_timeout, &sql, &[], Want::Simple)
            .await;
        match answer {
            Ok(Answer::Simple { rows, .. }) if rows > 0 => {
                if let Some(o) = session.as_mut() {
                    o.job = Some(id);
                }
                Ok(Lease {
                    resource: resource.to_string(),
                    owner,
                    fencing_token: None,
                    acquired_at: start,
                    validity_deadline: start + Lease::NO_EXPIRY,
                    locked_nodes: 1,
                    replica_acks: None,
                })
            }
            Ok(_) => {
                let rolled_back = self
                    .statement(
                        &mut session,
                        opts.node_timeout,
                        "ROLLBACK",
                        &[],
                        Want::Simple,
                    )
                    .await;
                if rolled_back.is_err() {
                    close(&mut session);
                }
                Err(AcquireError::Held {
                    resource: resource.to_string(),
                })
            }
            Err(f) => {
                // Whatever the transaction holds ends with its session.
                close(&mut session);
                Err(AcquireError::Node(f))
            }
        }
    }

    /// `claim-skip-locked`'s heartbeat: `SELECT 1` on the session whose transaction holds job
    /// `id`. That session gone (or another in its place): the claim was rolled back.
    async fn heartbeat_held(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
        id: i64,
    ) -> Result<Lease, AcquireError> {
        let lost = || AcquireError::Lost {
            resource: lease.resource.clone(),
            reason: "the session whose transaction held the job's row ended: the server rolled \
                     the claim back"
                .into(),
        };
        let mut session = self.session.lock().await;
        if !self.holds(&session, id) {
            return Err(lost());
        }
        match self
            .statement(
                &mut session,
                opts.node_timeout,
                "SELECT 1",
                &[],
                Want::Simple,
            )
            .await
        {
            Ok(_) => Ok(lease.clone()),
            Err(f) if f.kind == NodeFailureKind::Timeout => Err(AcquireError::Node(f)),
            Err(_) => Err(lost()),
        }
    }

    /// `claim-skip-locked`'s completion: `UPDATE … SET state = 'done'; COMMIT` in the
    /// transaction that holds job `id`. The session gone before it: nothing completed
    /// (`released_nodes: 0`, the job is pending again).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the commit's answer did not come (it may have taken
    /// effect).
    async fn complete_held(
        &self,
        opts: &StrategyOptions,
        id: i64,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let outcome = |done: bool| ReleaseOutcome {
            released_nodes: usize::from(done),
            failed_nodes: 0,
            needed_nodes: 1,
        };
        let mut session = self.session.lock().await;
        if !self.holds(&session, id) {
            return Ok(outcome(false));
        }
        let sql = self.sql.complete.replace("{id}", &id.to_string());
        let answer = self
            .statement(&mut session, opts.node_timeout, &sql, &[], Want::Simple)
            .await;
        if let Some(o) = session.as_mut() {
            o.job = None;
        }
        match answer {
            Ok(Answer::Simple { affected, .. }) => Ok(outcome(affected > 0)),
            Ok(_) => Ok(outcome(false)),
            Err(f) => {
                close(&mut session);
                Err(StrategyError::Node(f))
            }
        }
    }

    /// True when the session is open, its connection alive, and its transaction holds job `id`.
    fn holds(&self, session: &Option<Open>, id: i64) -> bool {
        session
            .as_ref()
            .is_some_and(|o| o.job == Some(id) && !o.client.is_closed())
    }

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

    /// One statement on job `id` with `owner` (and the TTL in ms when given), run for `want`.
    async fn run(
        &self,
        timeout: Duration,
        sql: &str,
        id: i64,
        owner: &str,
        ttl_ms: Option<i64>,
        want: Want,
    ) -> Result<Answer, NodeFailure> {
        let ttl = ttl_ms.unwrap_or(0);
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> =
            vec![(&id, Type::INT8), (&owner, Type::TEXT)];
        if ttl_ms.is_some() {
            params.push((&ttl, Type::INT8));
        }
        let mut session = self.session.lock().await;
        self.statement(&mut session, timeout, sql, &params, want)
            .await
    }

    /// Runs `sql` on the open session (opening one first), bounded by `timeout`, unnamed
    /// (one round trip, as in `postgres`): its rows, or its affected-row count from the
    /// command's completion.
    async fn statement(
        &self,
        session: &mut Option<Open>,
        timeout: Duration,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        want: Want,
    ) -> Result<Answer, NodeFailure> {
        if session.is_none() {
            let t = self.connect.connect_timeout + self.connect.response_timeout;
            self.open(session, t).await?;
        }
        let Some(open) = session.as_ref() else {
            return Err(self.failure(NodeFailureKind::Unreachable, "no session".into()));
        };
        let client = &open.client;
        let work = async {
            match want {
                Want::Rows => client.query_typed(sql, params).await.map(Answer::Rows),
                Want::Affected => {
                    let stream = client.query_typed_raw(sql, params.iter().cloned()).await?;
                    futures::pin_mut!(stream);
                    while futures::StreamExt::next(&mut stream)
                        .await
                        .transpose()?
                        .is_some()
                    {}
                    Ok(Answer::Affected(stream.rows_affected().unwrap_or(0)))
                }
                Want::Simple => client.simple_query(sql).await.map(|messages| {
                    let mut rows = 0;
                    let mut affected = 0;
                    for m in messages {
                        match m {
                            tokio_postgres::SimpleQueryMessage::Row(_) => rows += 1,
                            tokio_postgres::SimpleQueryMessage::CommandComplete(n) => {
                                affected = affected.max(n)
                            }
                            _ => {}
                        }
                    }
                    Answer::Simple { rows, affected }
                }),
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) if e.as_db_error().is_some() && !e.is_closed() => {
                Err(self.failure(NodeFailureKind::Command, describe_error(&e)))
            }
            Ok(Err(e)) => {
                close(session);
                Err(self.failure(NodeFailureKind::Unreachable, describe_error(&e)))
            }
            Err(_) => {
                close(session);
                Err(self.failure(
                    NodeFailureKind::Timeout,
                    format!("no answer within {} ms", timeout.as_millis()),
                ))
            }
        }
    }

    /// Connects, and creates the table (and stocks it) when it does not exist yet.
    async fn open(&self, session: &mut Option<Open>, timeout: Duration) -> Result<(), NodeFailure> {
        let opened = tokio::time::timeout(timeout, async {
            let (client, connection) = open_connection(&self.endpoint.url, &self.connect).await?;
            let open = Open {
                client,
                connection,
                job: None,
            };
            // A reconnect finds the table and takes no lock: a session the server has not yet
            // seen die may still hold the creation's lock (or an unfinished stocking).
            let set_up = async {
                let row = open.client.query_one(&self.sql.exists, &[]).await?;
                if !row.try_get::<_, bool>(0)? {
                    open.client.batch_execute(&self.sql.setup).await?;
                    open.client.execute(&self.sql.stock, &[]).await?;
                }
                Ok::<_, tokio_postgres::Error>(())
            };
            match set_up.await {
                Ok(_) => Ok(open),
                Err(e) => {
                    open.connection.abort();
                    Err(e)
                }
            }
        })
        .await;
        match opened {
            Ok(Ok(open)) => {
                *session = Some(open);
                Ok(())
            }
            Ok(Err(e)) => Err(self.failure(NodeFailureKind::Unreachable, describe_error(&e))),
            Err(_) => Err(self.failure(
                NodeFailureKind::Timeout,
                format!("could not connect within {} ms", timeout.as_millis()),
            )),
        }
    }

    fn failure(&self, kind: NodeFailureKind, message: String) -> NodeFailure {
        NodeFailure {
            node: self.endpoint.name.clone(),
            kind,
            message,
        }
    }
}

/// Ends the session from this side (the socket closes at once, see `postgres`).
fn close(session: &mut Option<Open>) {
    if let Some(open) = session.take() {
        open.connection.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_the_prefix_and_guard_the_completion() {
        let s = Statements::new("lb:\"x\":", ClaimMode::Update { guarded: true });
        assert!(
            s.claim.contains("UPDATE \"lb:\"\"x\"\":jobs\""),
            "{}",
            s.claim
        );
        assert!(s.complete.contains("owner = $2"), "{}", s.complete);
        assert!(s.setup.contains("'\"lb:\"\"x\"\":jobs\"'"), "{}", s.setup);
        let u = Statements::new("lb:", ClaimMode::Update { guarded: false });
        assert!(!u.complete.contains("owner ="), "{}", u.complete);
        assert!(u.pick.ends_with(&format!("LIMIT {CANDIDATES}")));
        let held = Statements::new("lb:", ClaimMode::SkipLocked);
        assert!(held
            .claim
            .starts_with("BEGIN; SELECT id FROM \"lb:jobs\" WHERE id = {id}"));
        assert!(
            held.claim.ends_with("FOR UPDATE SKIP LOCKED"),
            "{}",
            held.claim
        );
        assert!(held.complete.ends_with("; COMMIT"), "{}", held.complete);
        assert_eq!(held.pick, u.pick, "a plain read: it takes no row lock");
        let lease = Statements::new("lb:", ClaimMode::SkipLockedLease);
        assert!(lease
            .claim
            .contains("FOR UPDATE SKIP LOCKED) RETURNING claims"));
        assert!(lease.complete.contains("owner = $2"), "{}", lease.complete);
        assert_eq!(lease.pick, u.pick);
    }

    #[test]
    fn job_resources_round_trip() {
        assert_eq!(job_resource(17), "job:17");
        assert_eq!(
            "job:17".strip_prefix("job:").unwrap().parse::<i64>().ok(),
            Some(17)
        );
    }
}
