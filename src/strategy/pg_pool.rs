//! Pooled PostgreSQL clients (`--pg-pool N`): every client borrows a connection from one
//! application-side pool per operation, as a web application does, instead of keeping its
//! own session.
//!
//! The pool is `deadpool-postgres`, one per server URL, size and recycling mode, shared by
//! every client of a run (a process-wide registry holds it weakly: it closes when the run's
//! last client is dropped). An acquire borrows a connection, runs the strategy's lock
//! statement (`pg_try_advisory_lock`, or for `pg-advisory-wait` `SET lock_timeout` +
//! `pg_advisory_lock`) and returns the connection; the release borrows one again, which may
//! be another, and runs `pg_advisory_unlock`. A session advisory lock belongs to the server
//! session it was taken on, so:
//! - a release on another connection answers `false` (not this session's lock): recorded as a
//!   lost lease, never as a release, and the lock stays with the connection that took it;
//! - the next borrower of the connection that holds the lock is granted it again (advisory
//!   locks are re-entrant per session), while the lock's owner may still be inside.
//!
//! The recycling mode is what deadpool does to a connection before lending it again:
//! [`PgPoolRecycle::Fast`] nothing (the lock stays with the connection), [`PgPoolRecycle::Clean`]
//! its clean sequence, which includes `pg_advisory_unlock_all()` (the lock is freed the
//! moment its connection is lent again, whoever holds the lease). Source: deadpool-postgres
//! documentation, `RecyclingMethod`; PostgreSQL manual, "Advisory Locks".
//!
//! A statement that times out takes its connection out of the pool and closes it (the server
//! ends that session and frees its locks).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::NoTls;

use super::backend::{CrashPoint, LockBackend};
use super::postgres::describe_error;
use super::{StrategyError, StrategyKind, StrategyOptions};
use crate::lease::{
    new_owner_token, AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome,
};
use crate::node::{ConnectOptions, NodeEndpoint};

/// What the pool does to a connection before lending it again.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PgPoolRecycle {
    /// Nothing (deadpool `RecyclingMethod::Fast`): the session, advisory locks included, goes
    /// to the next borrower as the last one left it.
    #[default]
    Fast,
    /// deadpool `RecyclingMethod::Clean` (`RESET ALL`, `pg_advisory_unlock_all()`, …): the
    /// session is reset, its advisory locks freed, before it is lent again.
    Clean,
}

impl FromStr for PgPoolRecycle {
    type Err = String;

    /// `fast` or `clean`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "pool recycling", "values")
    }
}

/// An application-side connection pool shared by a run's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgPool {
    /// Connections the pool opens at most, ≥ 1.
    pub size: u32,
    /// What it does to a connection before lending it again.
    #[serde(default)]
    pub recycle: PgPoolRecycle,
}

/// The strategies a pooled client can run: the session locks taken in one statement.
pub(crate) fn pool_supports(kind: StrategyKind) -> bool {
    matches!(
        kind,
        StrategyKind::PgAdvisory | StrategyKind::PgAdvisoryWait
    )
}

type PoolKey = (String, u32, PgPoolRecycle);

/// The pools alive in this process, by URL, size and recycling mode, held weakly.
fn registry() -> &'static Mutex<HashMap<PoolKey, deadpool_postgres::WeakPool>> {
    static POOLS: OnceLock<Mutex<HashMap<PoolKey, deadpool_postgres::WeakPool>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

/// The pool of `url` with `settings`, made on first use.
fn shared_pool(url: &str, settings: PgPool, conn: &ConnectOptions) -> Result<Pool, String> {
    let key = (url.to_string(), settings.size, settings.recycle);
    let mut pools = registry().lock().unwrap_or_else(|p| p.into_inner());
    pools.retain(|_, weak| weak.upgrade().is_some());
    if let Some(pool) = pools.get(&key).and_then(|w| w.upgrade()) {
        return Ok(pool);
    }
    let mut config = tokio_postgres::Config::from_str(url).map_err(|e| e.to_string())?;
    config.connect_timeout(conn.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name("lockbench");
    }
    let recycling_method = match settings.recycle {
        PgPoolRecycle::Fast => RecyclingMethod::Fast,
        PgPoolRecycle::Clean => RecyclingMethod::Clean,
    };
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method });
    let pool = Pool::builder(manager)
        .max_size(settings.size.max(1) as usize)
        .build()
        .map_err(|e| e.to_string())?;
    pools.insert(key, pool.weak());
    Ok(pool)
}

/// One client of a shared pool.
pub(crate) struct PgPooled {
    endpoint: NodeEndpoint,
    connect: ConnectOptions,
    pool: Pool,
}

const SESSION_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended($1::text, 0))";
const WAIT_LOCK: &str = "SELECT pg_advisory_lock(hashtextextended($1::text, 0))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtextextended($1::text, 0))";

impl LockBackend for PgPooled {
    /// Joins (or makes) the pool of the first endpoint with `opts.pg_pool`, and borrows one
    /// connection to check the server is reachable.
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        let endpoint = endpoints[0].clone();
        let settings = opts.pg_pool.ok_or_else(|| {
            StrategyError::InvalidOptions("a pooled client needs pool settings".into())
        })?;
        let pool = shared_pool(&endpoint.url, settings, conn).map_err(|message| {
            StrategyError::Connect {
                node: endpoint.to_string(),
                message,
                os_error: None,
            }
        })?;
        let client = Self {
            endpoint,
            connect: *conn,
            pool,
        };
        let probe = client.borrow().await.map_err(|f| StrategyError::Connect {
            node: client.endpoint.to_string(),
            message: f.message,
            os_error: None,
        })?;
        drop(probe);
        Ok(client)
    }

    fn node_count(&self) -> usize {
        1
    }

    /// Borrows a connection, runs the lock statement, returns the connection.
    ///
    /// # Errors
    /// [`AcquireError::Held`] when another session holds the lock (`pg-advisory-wait`: still
    /// at its `lock_timeout`); [`AcquireError::Node`] when no connection could be borrowed or
    /// the statement failed or timed out.
    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        _crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let key = opts.lock_key(resource);
        let start = Instant::now();
        let client = self.borrow().await.map_err(AcquireError::Node)?;
        let params: [(&(dyn ToSql + Sync), Type); 1] = [(&key, Type::TEXT)];
        let wait = opts.kind == StrategyKind::PgAdvisoryWait;
        let statement = async {
            if wait {
                let set = format!("SET lock_timeout = {}", opts.lock_wait().as_millis());
                let (set, row) = futures::join!(
                    client.batch_execute(&set),
                    client.query_typed_one(WAIT_LOCK, &params)
                );
                set.and(row).map(|_| true)
            } else {
                client
                    .query_typed_one(SESSION_LOCK, &params)
                    .await
                    .and_then(|row| row.try_get::<_, bool>(0))
            }
        };
        let bound = if wait {
            opts.lock_wait_bound()
        } else {
            opts.node_timeout
        };
        let answer = tokio::time::timeout(bound, statement).await;
        let locked = self.settle(client, bound, answer);
        match locked {
            Ok(true) => Ok(Lease {
                resource: resource.to_string(),
                owner: new_owner_token(),
                fencing_token: None,
                acquired_at: start,
                validity_deadline: start + Lease::NO_EXPIRY,
                locked_nodes: 1,
                replica_acks: None,
            }),
            Ok(false) => Err(AcquireError::Held {
                resource: resource.to_string(),
            }),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
                Err(AcquireError::Held {
                    resource: resource.to_string(),
                })
            }
            Err(e) => Err(AcquireError::Node(e.into_failure(self))),
        }
    }

    /// Borrows a connection (any: possibly not the one the lock was taken on) and runs
    /// `pg_advisory_unlock`; `released_nodes` is 1 when it answered `true`, 0 when `false`
    /// (that session did not hold the lock: a lost lease).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when no connection could be borrowed or the statement failed.
    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let key = opts.lock_key(&lease.resource);
        let client = self.borrow().await.map_err(StrategyError::Node)?;
        let params: [(&(dyn ToSql + Sync), Type); 1] = [(&key, Type::TEXT)];
        let statement = async {
            client
                .query_typed_one(UNLOCK, &params)
                .await
                .and_then(|row| row.try_get::<_, bool>(0))
        };
        let answer = tokio::time::timeout(opts.node_timeout, statement).await;
        match self.settle(client, opts.node_timeout, answer) {
            Ok(released) => Ok(ReleaseOutcome {
                released_nodes: usize::from(released),
                needed_nodes: 1,
                ..ReleaseOutcome::default()
            }),
            Err(e) => Err(StrategyError::Node(e.into_failure(self))),
        }
    }

    /// Nothing to renew or check: the lease is not tied to a connection the client keeps.
    async fn extend(&self, _opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        Ok(lease.clone())
    }
}

/// A statement's failure: the server's or the driver's error, or no answer in time.
enum StatementError {
    Pg(tokio_postgres::Error),
    Timeout(Duration),
}

impl StatementError {
    fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            StatementError::Pg(e) => e.code(),
            StatementError::Timeout(_) => None,
        }
    }

    fn into_failure(self, client: &PgPooled) -> NodeFailure {
        match self {
            StatementError::Pg(e) => client.failure(
                if e.as_db_error().is_some() {
                    NodeFailureKind::Command
                } else {
                    NodeFailureKind::Unreachable
                },
                describe_error(&e),
            ),
            StatementError::Timeout(t) => client.failure(
                NodeFailureKind::Timeout,
                format!("no answer within {} ms", t.as_millis()),
            ),
        }
    }
}

impl PgPooled {
    /// One connection from the pool, bounded by the connect + response timeouts.
    async fn borrow(&self) -> Result<Object, NodeFailure> {
        let bound = self.connect.connect_timeout + self.connect.response_timeout;
        match tokio::time::timeout(bound, self.pool.get()).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(self.failure(NodeFailureKind::Unreachable, e.to_string())),
            Err(_) => Err(self.failure(
                NodeFailureKind::Timeout,
                format!(
                    "no pooled connection within {} ms (pool size {})",
                    bound.as_millis(),
                    self.pool.status().max_size
                ),
            )),
        }
    }

    /// What a statement on `client` (bounded by `bound`) answered; the connection goes back
    /// to the pool after an answer (an error reply included), and is closed after a timeout
    /// or a broken connection (taken out of the pool: dropping it aborts its connection task).
    fn settle<T>(
        &self,
        client: Object,
        bound: Duration,
        answer: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
    ) -> Result<T, StatementError> {
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.as_db_error().is_some() && !e.is_closed() => Err(StatementError::Pg(e)),
            Ok(Err(e)) => {
                drop(Object::take(client));
                Err(StatementError::Pg(e))
            }
            Err(_) => {
                drop(Object::take(client));
                Err(StatementError::Timeout(bound))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycle_names_parse_and_list_the_valid_values() {
        crate::variant_names::assert_names_match_serde::<PgPoolRecycle>();
        assert_eq!("clean".parse::<PgPoolRecycle>(), Ok(PgPoolRecycle::Clean));
        let err = "discard".parse::<PgPoolRecycle>().unwrap_err();
        assert!(
            err.contains("`discard`") && err.contains("fast, clean"),
            "{err}"
        );
    }

    #[test]
    fn only_one_statement_session_locks_are_pooled() {
        let pooled: Vec<_> = StrategyKind::all()
            .iter()
            .filter(|k| pool_supports(**k))
            .collect();
        assert_eq!(
            pooled,
            [&StrategyKind::PgAdvisory, &StrategyKind::PgAdvisoryWait]
        );
    }
}
