//! `pg-advisory` and `pg-advisory-fenced`: PostgreSQL session advisory locks;
//! `pg-advisory-xact`: a transaction-scoped advisory lock; `pg-advisory-wait`: a session
//! advisory lock taken blocking, under `lock_timeout`.
//!
//! A [`PgSession`] is one client's session on the server. The lock on a resource is
//! `pg_try_advisory_lock(hashtextextended(key, 0))`, where `key` is the strategy's lock key
//! (`{prefix}lock:{resource}`); release is `pg_advisory_unlock` of the same number. The server
//! holds the lock for the *session*: there is no TTL. When the session ends (the connection is
//! reset by a partition, the server restarts, the client drops its connection after a timeout)
//! the server releases every lock of that session at once, and the client is not told. That is
//! the failure mode these strategies expose (PostgreSQL manual, "Advisory Locks", §13.3.5: "a
//! session-level advisory lock … is held until explicitly released or the session ends").
//!
//! **Sessions and leases.** Each connection gets a generation number; a lease's owner token is
//! `pg-session-<generation>-<random>`. A lease taken on a session that has since been replaced
//! can only have been released by the server, so its extend reports it lost without
//! asking; a release on the new session returns `false` (PostgreSQL answers `pg_advisory_unlock`
//! of a lock the session does not hold with `false` and a warning), so the release reports the
//! lease lost, which is the truth.
//!
//! **Fencing.** `pg-advisory-fenced` asks for the lock and the token in one statement:
//! `CASE WHEN pg_try_advisory_lock(…) THEN nextval(sequence) END`, so a token is drawn exactly
//! when the lock is granted. The sequence `"{prefix}fence"` is one per key prefix (tokens grow
//! across all resources, hence for each one). A sequence is transactional-safe and never hands
//! out a number twice, also across a crash (it is WAL-logged).
//!
//! **Transaction-scoped.** `pg-advisory-xact` opens a transaction and asks for
//! `pg_try_advisory_xact_lock` in it (`BEGIN` and the lock pipelined: one round trip); the
//! critical section runs while that transaction stays open, and the release is `COMMIT`, which
//! is when the server frees the lock (a refused lock is `ROLLBACK`ed at once). A transaction
//! pooler (PgBouncer `pool_mode = transaction`) keeps one server connection for the whole
//! transaction, so the lock and its release always meet the same server session, which a
//! session lock through such a pooler does not (PostgreSQL manual, "Advisory Locks"; PgBouncer
//! documentation, "pool_mode").
//!
//! **Blocking.** `pg-advisory-wait` pipelines `SET lock_timeout = <ms>` with
//! `pg_advisory_lock` (one round trip): the server queues the request behind the holder and
//! grants it when the holder unlocks, or cancels it at the timeout with SQLSTATE `55P03`
//! (lock_not_available), a definite refusal reported as busy ([`AcquireError::Held`]). The
//! client waits for the answer up to `lock_wait + node_timeout`
//! ([`StrategyOptions::lock_wait_bound`]); past that it closes the connection like after any
//! timeout. The server does not read the socket of a session queued for a lock, so a grant
//! can still reach that session after the client left: the server then holds the lock for a
//! client that does not know it, until it finds the socket closed (when it sends the answer
//! and reads the next statement) and ends the session, which frees the lock. Through a
//! transaction pooler the `SET` and the lock may reach different server sessions (the `SET`
//! then applies to another client's session, and the lock waits under the server's own
//! `lock_timeout`, 0 = forever, until the client bound).
//!
//! **Statements.** Every statement is sent unnamed (`query_typed`: parse, bind and execute in
//! one round trip), never as a named prepared statement: a transaction pooler hands each
//! transaction whichever server connection is free, where a statement prepared on another one
//! does not exist.
//!
//! **Connection hygiene.** As for Redis (see `link`): one statement in flight per session, and
//! the connection is closed after a timeout or an I/O error (its socket task is aborted, so
//! the socket closes even while a request waits for a reply that a black hole swallowed), never
//! after an error *reply* from the server. Closing the connection ends the session, so the
//! server frees its locks: a client whose statement timed out loses every lock it held, as a
//! real one would.

use std::str::FromStr;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

use super::backend::{CrashPoint, LockBackend};
use super::{StrategyError, StrategyKind, StrategyOptions};
use crate::lease::{
    new_owner_token, AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome,
};
use crate::node::{ConnectOptions, NodeEndpoint};

/// One client's PostgreSQL session, reconnected lazily.
pub(crate) struct PgSession {
    endpoint: NodeEndpoint,
    connect: ConnectOptions,
    scope: Scope,
    sequence: String,
    /// Held for the whole statement: one statement in flight per session.
    state: Mutex<State>,
}

/// What holds the lock, and so what a release does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// `pg-advisory`: the session, until `pg_advisory_unlock`.
    Session,
    /// `pg-advisory-fenced`: the session, and a token from the sequence with each grant.
    SessionFenced,
    /// `pg-advisory-xact`: the open transaction, until `COMMIT`.
    Transaction,
    /// `pg-advisory-wait`: the session, taken blocking under `lock_timeout`.
    SessionWait,
}

#[derive(Default)]
struct State {
    open: Option<Open>,
    generation: u64,
    /// A `pg-advisory-xact` transaction is open on this session (cleared by its release; a
    /// new acquire rolls a forgotten one back first).
    in_transaction: bool,
    /// The owner token of the lease that transaction holds the lock for: only that lease's
    /// release commits it.
    transaction_owner: Option<String>,
}

struct Open {
    client: Client,
    /// The task driving the connection's socket.
    connection: tokio::task::AbortHandle,
}

impl State {
    /// Forgets a session the connection already saw end (the server closed it: a terminated
    /// backend, `idle_session_timeout`, a restart): its locks are gone with it.
    fn close_if_ended(&mut self) {
        if self.open.as_ref().is_some_and(|o| o.client.is_closed()) {
            self.close();
        }
    }

    /// Ends the session from this side: the connection task is aborted, which closes the
    /// socket at once. Dropping the client alone is not enough: the connection task keeps
    /// the socket open while a statement still waits for its reply, and behind a black hole
    /// that reply never comes, so the server would keep the session (and its locks) forever.
    fn close(&mut self) {
        self.in_transaction = false;
        self.transaction_owner = None;
        if let Some(open) = self.open.take() {
            open.connection.abort();
        }
    }
}

/// The statements, each sent unnamed (see the module docs).
enum Query<'a> {
    /// The session lock (with the token when fenced): one row, `bool` or `Option<i64>`.
    Lock(&'a str),
    /// `SET lock_timeout` pipelined with the blocking session lock: one row (`void`).
    WaitLock { key: &'a str, lock_timeout_ms: u64 },
    /// `BEGIN` pipelined with the transaction lock (after a `ROLLBACK` of a transaction left
    /// open, when `rollback_first`): one row, `bool`.
    XactLock { key: &'a str, rollback_first: bool },
    /// `pg_advisory_unlock`: one row, `bool`.
    Unlock(&'a str),
    /// `COMMIT` or `ROLLBACK`: no row.
    End(&'static str),
    /// `SELECT 1`.
    Ping,
}

const SESSION_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended($1::text, 0))";
const FENCED_LOCK: &str = "SELECT CASE WHEN pg_try_advisory_lock(hashtextextended($1::text, 0)) \
                           THEN nextval($2::text::regclass) END";
const XACT_LOCK: &str = "SELECT pg_try_advisory_xact_lock(hashtextextended($1::text, 0))";
const WAIT_LOCK: &str = "SELECT pg_advisory_lock(hashtextextended($1::text, 0))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtextextended($1::text, 0))";

/// What a failed statement did to the session.
enum Failure {
    /// No answer in time, or the connection broke: the session is gone.
    Lost(NodeFailure),
    /// The server answered with an error: the session is intact.
    Reply(NodeFailure),
    /// The server cancelled a queued lock request at its `lock_timeout` (SQLSTATE `55P03`):
    /// the lock stayed with its holder; the session is intact.
    Busy(NodeFailure),
    /// The session had ended before the statement ran: the connection was already closed,
    /// or the server's answer was a `FATAL` error (a terminated backend, a session timeout).
    /// The statement did nothing, and the session's locks are gone with it.
    Ended(NodeFailure),
}

impl Failure {
    fn into_inner(self) -> NodeFailure {
        match self {
            Failure::Lost(f) | Failure::Reply(f) | Failure::Busy(f) | Failure::Ended(f) => f,
        }
    }
}

impl LockBackend for PgSession {
    /// A session on the first endpoint, opened now.
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        let session = PgSession::new(endpoints[0].clone(), opts, *conn);
        session.ensure_connected().await?;
        Ok(session)
    }

    /// One server.
    fn node_count(&self) -> usize {
        1
    }

    /// One attempt: `pg_try_advisory_lock` (and `nextval` when fenced) in one statement; for
    /// `pg-advisory-xact`, `BEGIN` + `pg_try_advisory_xact_lock` in one round trip, the
    /// transaction left open for the hold (rolled back at once when the lock is refused); for
    /// `pg-advisory-wait`, `SET lock_timeout` + `pg_advisory_lock` in one round trip, waiting
    /// in the server's queue up to [`StrategyOptions::lock_wait`].
    ///
    /// # Errors
    /// [`AcquireError::Held`] when another session holds the lock (`pg-advisory-wait`: still
    /// held at the `lock_timeout`); [`AcquireError::Node`] when the server did not answer
    /// within `opts.node_timeout` (`pg-advisory-wait`: [`StrategyOptions::lock_wait_bound`]) or
    /// refused the statement.
    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        _crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let key = opts.lock_key(resource);
        let start = Instant::now();
        let mut state = self.state.lock().await;
        let query = match self.scope {
            Scope::Transaction => Query::XactLock {
                key: &key,
                rollback_first: state.in_transaction,
            },
            Scope::SessionWait => Query::WaitLock {
                key: &key,
                lock_timeout_ms: opts.lock_wait().as_millis() as u64,
            },
            Scope::Session | Scope::SessionFenced => Query::Lock(&key),
        };
        let timeout = if self.scope == Scope::SessionWait {
            opts.lock_wait_bound()
        } else {
            opts.node_timeout
        };
        let result = self
            .query(&mut state, timeout, query)
            .await
            .and_then(|row| {
                let row = row.ok_or_else(|| self.no_row())?;
                if self.scope == Scope::SessionFenced {
                    row.try_get::<_, Option<i64>>(0)
                } else if self.scope == Scope::SessionWait {
                    // `pg_advisory_lock` returns `void`: an answer is the grant.
                    Ok(Some(0))
                } else {
                    row.try_get::<_, bool>(0).map(|locked| locked.then_some(0))
                }
                .map_err(|e| Failure::Reply(self.failure(NodeFailureKind::Command, e.to_string())))
            });
        if self.scope == Scope::Transaction {
            state.in_transaction = state.open.is_some();
            if !matches!(result, Ok(Some(_))) && state.in_transaction {
                // Refused or failed inside the transaction: end it now. A failure here closed
                // the session (and so the transaction) already.
                if self
                    .query(&mut state, opts.node_timeout, Query::End("ROLLBACK"))
                    .await
                    .is_ok()
                {
                    state.in_transaction = false;
                }
            }
        }
        let owner = format!("pg-session-{}-{}", state.generation, new_owner_token());
        if self.scope == Scope::Transaction {
            state.transaction_owner = matches!(result, Ok(Some(_))).then(|| owner.clone());
        }
        drop(state);
        match result {
            Ok(Some(token)) => Ok(Lease {
                resource: resource.to_string(),
                owner,
                fencing_token: (self.scope == Scope::SessionFenced).then_some(token.max(0) as u64),
                acquired_at: start,
                validity_deadline: start + Lease::NO_EXPIRY,
                locked_nodes: 1,
                replica_acks: None,
            }),
            Ok(None) | Err(Failure::Busy(_)) => Err(AcquireError::Held {
                resource: resource.to_string(),
            }),
            Err(f) => Err(AcquireError::Node(f.into_inner())),
        }
    }

    /// `pg_advisory_unlock` on the current session. `released_nodes` is 1 when this session
    /// held the lock, 0 when it did not: the session that took the lease is gone, so the
    /// server released the lock already, or the unlock answered `false` (the lock was not this
    /// session's: through a transaction pooler the unlock may reach another server session
    /// than the lock did), or the session had ended before the unlock ran (the connection was
    /// closed, or the server answered `FATAL`: a terminated backend, a session timeout),
    /// which the driver records as a lost lease, never as a release.
    /// For `pg-advisory-xact`, `COMMIT` of the lease's transaction: 1 when it committed.
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the server did not answer in time or refused.
    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let key = opts.lock_key(&lease.resource);
        let mut state = self.state.lock().await;
        let lost = ReleaseOutcome {
            needed_nodes: 1,
            ..ReleaseOutcome::default()
        };
        state.close_if_ended();
        if Some(state.generation) != lease_generation(lease) || state.open.is_none() {
            // The lease's session ended: the server freed the lock with it. Unlocking on
            // another session would only return false.
            return Ok(lost);
        }
        if self.scope == Scope::Transaction {
            if !state.in_transaction || state.transaction_owner.as_deref() != Some(&lease.owner) {
                // Its transaction ended already (committed, or rolled back with its session).
                return Ok(lost);
            }
            let result = self
                .query(&mut state, opts.node_timeout, Query::End("COMMIT"))
                .await;
            state.in_transaction = false;
            state.transaction_owner = None;
            return match result {
                Ok(_) => Ok(ReleaseOutcome {
                    released_nodes: 1,
                    ..lost
                }),
                Err(f) => Err(StrategyError::Node(f.into_inner())),
            };
        }
        let result = self
            .query(&mut state, opts.node_timeout, Query::Unlock(&key))
            .await
            .and_then(|row| {
                let row = row.ok_or_else(|| self.no_row())?;
                row.try_get::<_, bool>(0).map_err(|e| {
                    Failure::Reply(self.failure(NodeFailureKind::Command, e.to_string()))
                })
            });
        match result {
            Ok(released) => Ok(ReleaseOutcome {
                released_nodes: usize::from(released),
                ..lost
            }),
            // The session ended before the unlock ran: the server freed the lock with it.
            Err(Failure::Ended(_)) => Ok(lost),
            Err(f) => Err(StrategyError::Node(f.into_inner())),
        }
    }

    /// "Renewal": a session lock needs none, so this only checks that the session that took
    /// the lease is still the open one (`SELECT 1` on it). The lease keeps no expiry.
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the session was replaced (the server released the lock);
    /// [`AcquireError::Node`] when the check timed out (the session is then dropped, so the
    /// lock is gone too, and the next renewal reports it lost).
    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        let mut state = self.state.lock().await;
        state.close_if_ended();
        if Some(state.generation) != lease_generation(lease) || state.open.is_none() {
            return Err(AcquireError::Lost {
                resource: lease.resource.clone(),
                reason: "the session that took the lock has ended (the server released it)".into(),
            });
        }
        match self.query(&mut state, opts.node_timeout, Query::Ping).await {
            Ok(_) => Ok(lease.clone()),
            Err(f) => Err(AcquireError::Node(f.into_inner())),
        }
    }
}

impl PgSession {
    /// A session on `endpoint` (a `postgres://` URL); opened by [`PgSession::ensure_connected`]
    /// or the first statement. For `pg-advisory-fenced` the connect also creates the fencing
    /// sequence `"{prefix}fence"` if it is missing.
    fn new(endpoint: NodeEndpoint, opts: &StrategyOptions, conn: ConnectOptions) -> Self {
        Self {
            endpoint,
            connect: conn,
            scope: match opts.kind {
                StrategyKind::PgAdvisoryXact => Scope::Transaction,
                StrategyKind::PgAdvisoryWait => Scope::SessionWait,
                k if k.is_fenced() => Scope::SessionFenced,
                _ => Scope::Session,
            },
            sequence: sequence_name(&opts.key_prefix),
            state: Mutex::new(State::default()),
        }
    }

    /// Opens the session now if there is none.
    ///
    /// # Errors
    /// [`StrategyError::Connect`] naming the server (password redacted).
    async fn ensure_connected(&self) -> Result<(), StrategyError> {
        let mut state = self.state.lock().await;
        if state.open.is_some() {
            return Ok(());
        }
        let timeout = self.connect.connect_timeout + self.connect.response_timeout;
        match self.open(&mut state, timeout).await {
            Ok(()) => Ok(()),
            Err(f) => Err(StrategyError::Connect {
                node: self.endpoint.to_string(),
                message: f.into_inner().message,
                os_error: None,
            }),
        }
    }

    /// Runs one statement on the open session (opening one first if needed, bounded by the
    /// connect + response timeouts), the statement bounded by `timeout`. `Ok(None)` for a
    /// statement that returns no row (`COMMIT`, `ROLLBACK`).
    async fn query(
        &self,
        state: &mut State,
        timeout: Duration,
        query: Query<'_>,
    ) -> Result<Option<tokio_postgres::Row>, Failure> {
        if state.open.is_none() {
            let connect_timeout = self.connect.connect_timeout + self.connect.response_timeout;
            self.open(state, connect_timeout).await?;
        }
        let Some(open) = state.open.as_ref() else {
            return Err(Failure::Lost(
                self.failure(NodeFailureKind::Unreachable, "no session".into()),
            ));
        };
        let sequence = self.sequence.as_str();
        let client = &open.client;
        let statement = async {
            match query {
                Query::Lock(key) if self.scope == Scope::SessionFenced => client
                    .query_typed_one(FENCED_LOCK, &[(&key, Type::TEXT), (&sequence, Type::TEXT)])
                    .await
                    .map(Some),
                Query::Lock(key) => client
                    .query_typed_one(SESSION_LOCK, &[(&key, Type::TEXT)])
                    .await
                    .map(Some),
                Query::WaitLock {
                    key,
                    lock_timeout_ms,
                } => {
                    let set = format!("SET lock_timeout = {lock_timeout_ms}");
                    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 1] =
                        [(&key, Type::TEXT)];
                    let (set, row) = futures::join!(
                        client.batch_execute(&set),
                        client.query_typed_one(WAIT_LOCK, &params)
                    );
                    set.and(row).map(Some)
                }
                Query::XactLock {
                    key,
                    rollback_first,
                } => {
                    // Pipelined: sent back to back, answered in order (one round trip).
                    let begin = if rollback_first {
                        "ROLLBACK; BEGIN"
                    } else {
                        "BEGIN"
                    };
                    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 1] =
                        [(&key, Type::TEXT)];
                    let (begun, row) = futures::join!(
                        client.batch_execute(begin),
                        client.query_typed_one(XACT_LOCK, &params)
                    );
                    begun.and(row).map(Some)
                }
                Query::Unlock(key) => client
                    .query_typed_one(UNLOCK, &[(&key, Type::TEXT)])
                    .await
                    .map(Some),
                Query::End(sql) => client.batch_execute(sql).await.map(|()| None),
                Query::Ping => client.query_typed_one("SELECT 1", &[]).await.map(Some),
            }
        };
        match tokio::time::timeout(timeout, statement).await {
            Ok(Ok(row)) => Ok(row),
            Ok(Err(e))
                if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) =>
            {
                Err(Failure::Busy(
                    self.failure(NodeFailureKind::Command, describe_error(&e)),
                ))
            }
            Ok(Err(e)) if e.is_closed() || session_ended(&e) => {
                state.close();
                Err(Failure::Ended(
                    self.failure(NodeFailureKind::Unreachable, describe_error(&e)),
                ))
            }
            Ok(Err(e)) if e.as_db_error().is_some() => Err(Failure::Reply(
                self.failure(NodeFailureKind::Command, describe_error(&e)),
            )),
            Ok(Err(e)) => {
                state.close();
                Err(Failure::Lost(
                    self.failure(NodeFailureKind::Unreachable, e.to_string()),
                ))
            }
            Err(_) => {
                state.close();
                Err(Failure::Lost(self.failure(
                    NodeFailureKind::Timeout,
                    format!("no answer within {} ms", timeout.as_millis()),
                )))
            }
        }
    }

    /// Connects (and creates the sequence when fenced), and bumps the generation.
    async fn open(&self, state: &mut State, timeout: Duration) -> Result<(), Failure> {
        let opened = tokio::time::timeout(timeout, self.connect_session()).await;
        match opened {
            Ok(Ok(open)) => {
                state.generation += 1;
                state.open = Some(open);
                Ok(())
            }
            Ok(Err(e)) => Err(Failure::Lost(
                self.failure(NodeFailureKind::Unreachable, describe_error(&e)),
            )),
            Err(_) => Err(Failure::Lost(self.failure(
                NodeFailureKind::Timeout,
                format!("could not connect within {} ms", timeout.as_millis()),
            ))),
        }
    }

    async fn connect_session(&self) -> Result<Open, tokio_postgres::Error> {
        let (client, connection) = open_connection(&self.endpoint.url, &self.connect).await?;
        // Until the session is handed over, a timeout (this future dropped mid-statement)
        // or an error closes the socket too.
        let guard = CloseOnDrop(Some(connection));
        if self.scope == Scope::SessionFenced {
            create_sequence(&client, &self.sequence).await?;
        }
        Ok(Open {
            client,
            connection: guard.disarm(),
        })
    }

    /// A statement that should return one row returned none.
    fn no_row(&self) -> Failure {
        Failure::Reply(self.failure(NodeFailureKind::Command, "no row in the answer".into()))
    }

    fn failure(&self, kind: NodeFailureKind, message: String) -> NodeFailure {
        NodeFailure {
            node: self.endpoint.name.clone(),
            kind,
            message,
        }
    }
}

/// Opens a session on `url` (the connect timeout of `connect`; application name
/// `lockbench` unless the URL names one) and spawns its connection task. The task ends when
/// the client is dropped with nothing in flight, when the socket breaks, or when the returned
/// handle aborts it (after a timeout); each closes the session, and the server frees its
/// locks. Shared by the advisory-lock sessions and the claim strategies' sessions.
pub(super) async fn open_connection(
    url: &str,
    connect: &ConnectOptions,
) -> Result<(Client, tokio::task::AbortHandle), tokio_postgres::Error> {
    let mut config = tokio_postgres::Config::from_str(url)?;
    config.connect_timeout(connect.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name("lockbench");
    }
    let (client, connection) = config.connect(NoTls).await?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    })
    .abort_handle();
    Ok((client, connection))
}

/// Aborts a connection task when dropped, unless disarmed.
struct CloseOnDrop(Option<tokio::task::AbortHandle>);

impl CloseOnDrop {
    fn disarm(mut self) -> tokio::task::AbortHandle {
        self.0.take().expect("armed once")
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// A PostgreSQL error as the user should read it: the server's own message and SQLSTATE
/// with what to change for the common refusals (no such database, wrong password, a user the
/// server does not let in, too many connections); any other error with its causes (a refused
/// connection says "Connection refused"), where the driver's own text alone is only
/// "db error" or "error connecting to server".
pub fn describe_error(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        let change = match code {
            "3D000" => {
                ": the database does not exist; change the database in the URL \
                        (postgres://user@host/<database>) or create it"
            }
            "28P01" => ": change the password in the URL (postgres://user:<password>@host/db)",
            "28000" => {
                ": change the user in the URL, or let it in through the server's \
                        pg_hba.conf"
            }
            "53300" => {
                ": lower --clients (one session each) or raise the server's \
                        max_connections"
            }
            _ => "",
        };
        return format!("{} (SQLSTATE {code}){change}", db.message());
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

/// True when the server answered with a `FATAL` (or `PANIC`) error: it ended the session
/// instead of running the statement (`pg_terminate_backend`, `idle_session_timeout`, a
/// shutdown).
fn session_ended(e: &tokio_postgres::Error) -> bool {
    e.as_db_error()
        .is_some_and(|db| matches!(db.severity(), "FATAL" | "PANIC"))
}

/// `CREATE SEQUENCE IF NOT EXISTS`; two sessions racing to create it make one fail with a
/// unique violation on the catalog, which means it exists now.
async fn create_sequence(client: &Client, sequence: &str) -> Result<(), tokio_postgres::Error> {
    let sql = format!("CREATE SEQUENCE IF NOT EXISTS {sequence}");
    match client.batch_execute(&sql).await {
        Ok(()) => Ok(()),
        Err(e)
            if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
                || e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_TABLE) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The fencing sequence of a key prefix, as a quoted SQL identifier: `"{prefix}fence"`
/// (double quotes inside doubled).
pub(crate) fn sequence_name(prefix: &str) -> String {
    format!("\"{}fence\"", prefix.replace('"', "\"\""))
}

/// The session generation a lease was taken on (from its owner token), if it is a
/// PostgreSQL lease.
fn lease_generation(lease: &Lease) -> Option<u64> {
    lease
        .owner
        .strip_prefix("pg-session-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_names_are_quoted_identifiers() {
        assert_eq!(sequence_name("lockbench:"), "\"lockbench:fence\"");
        assert_eq!(sequence_name("a\"b"), "\"a\"\"bfence\"");
    }

    #[test]
    fn lease_generation_is_read_off_the_owner_token() {
        let mut lease = Lease {
            resource: "r".into(),
            owner: "pg-session-17-00ff".into(),
            fencing_token: None,
            acquired_at: Instant::now(),
            validity_deadline: Instant::now(),
            locked_nodes: 1,
            replica_acks: None,
        };
        assert_eq!(lease_generation(&lease), Some(17));
        lease.owner = "0123abcd".into();
        assert_eq!(lease_generation(&lease), None);
    }
}
