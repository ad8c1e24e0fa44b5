//! The interface every lock backend implements, and the enum [`LockClient`](super::LockClient)
//! dispatches through.
//!
//! One backend per lock service, one file each: [`RedisNodes`] (`redis`: `single`, `redlock`,
//! the fenced variants, the negative controls, `single-wait`), [`PgSession`] (`postgres`:
//! `pg-advisory`, `pg-advisory-fenced`), [`ClaimQueue`] (`claim`: `claim-update`, a jobs table
//! on PostgreSQL claimed without a lock), [`EtcdSession`] (`etcd`: `etcd-lease`) and
//! [`AdapterClient`] (`adapter`: `adapter:*`, a lock library behind an adapter process). They all
//! keep the contract of [`crate::lease`]. The dispatch is a `match` on [`Backend`], not a
//! trait object: no allocation and no virtual call per acquire, release or extend.

use std::future::Future;

use super::adapter::AdapterClient;
use super::claim::ClaimQueue;
use super::etcd::EtcdSession;
use super::pg_pool::PgPooled;
use super::postgres::PgSession;
use super::redis::RedisNodes;
use super::{LockService, StrategyError, StrategyOptions};
use crate::lease::{AcquireError, Lease, ReleaseOutcome};
use crate::node::{ConnectOptions, NodeEndpoint};

/// The caller's crash point inside a multi-request acquire: asked between two requests, and
/// when it returns `true` the attempt stops there (see `LockClient::acquire_or_crash`).
pub(crate) type CrashPoint<'a> = dyn Fn() -> bool + Sync + 'a;

/// What a lock backend does for one client. `opts` are the client's options, validated at
/// connect; every request to a node is bounded by [`StrategyOptions::node_timeout`].
pub(crate) trait LockBackend: Sized {
    /// Opens the client's connections for `opts.kind` (`endpoints` is never empty).
    ///
    /// # Errors
    /// [`StrategyError::Connect`] when the service cannot be reached (a quorum strategy
    /// tolerates unreachable nodes and connects later), [`StrategyError::NoEndpoints`],
    /// [`StrategyError::InvalidOptions`].
    fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> impl Future<Output = Result<Self, StrategyError>> + Send;

    /// Nodes this client locks on (the N of a quorum; 1 for PostgreSQL; etcd's member count).
    fn node_count(&self) -> usize;

    /// One acquisition attempt on `resource`, no retry; `crash` is asked at the strategy's
    /// crash point, if it has one.
    ///
    /// # Errors
    /// Every [`AcquireError`] but `Timeout` (the retry policy's).
    fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        crash: &CrashPoint<'_>,
    ) -> impl Future<Output = Result<Lease, AcquireError>> + Send;

    /// Releases `lease`; [`ReleaseOutcome::finding`] says whether it was still held.
    ///
    /// # Errors
    /// [`StrategyError::Node`] / [`StrategyError::AllNodesFailed`] when no node answered.
    fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> impl Future<Output = Result<ReleaseOutcome, StrategyError>> + Send;

    /// Renews `lease` to a fresh TTL and returns it with its new deadline.
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the lease is gone; node failures when retrying may help.
    fn extend(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> impl Future<Output = Result<Lease, AcquireError>> + Send;
}

/// The backend of one client, chosen by the strategy's [`LockService`].
pub(crate) enum Backend {
    /// Redis nodes.
    Redis(RedisNodes),
    /// A PostgreSQL session (boxed: it is much larger than the other two).
    Postgres(Box<PgSession>),
    /// PostgreSQL connections borrowed per operation from a shared pool (`--pg-pool`).
    PgPooled(Box<PgPooled>),
    /// An etcd cluster.
    Etcd(EtcdSession),
    /// A jobs table on PostgreSQL, claimed by conditional updates (`claim-update`; boxed).
    Claim(Box<ClaimQueue>),
    /// A lock library behind an adapter process (`adapter:*`; boxed, as `Postgres`).
    Adapter(Box<AdapterClient>),
}

impl Backend {
    /// The jobs table, for the claim strategies.
    pub(crate) fn claim(&self) -> Option<&ClaimQueue> {
        match self {
            Backend::Claim(c) => Some(c),
            _ => None,
        }
    }

    /// The adapter client, for the `adapter:*` strategies.
    pub(crate) fn adapter(&self) -> Option<&AdapterClient> {
        match self {
            Backend::Adapter(a) => Some(a),
            _ => None,
        }
    }
}

impl LockBackend for Backend {
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        if opts.kind.is_adapter() {
            return Ok(Backend::Adapter(Box::new(
                AdapterClient::connect(endpoints, opts, conn).await?,
            )));
        }
        if opts.kind.is_claim() {
            return Ok(Backend::Claim(Box::new(
                ClaimQueue::connect(endpoints, opts, conn).await?,
            )));
        }
        Ok(match opts.kind.service() {
            LockService::Redis => Backend::Redis(RedisNodes::connect(endpoints, opts, conn).await?),
            LockService::Postgres if opts.pg_pool.is_some() => {
                Backend::PgPooled(Box::new(PgPooled::connect(endpoints, opts, conn).await?))
            }
            LockService::Postgres => {
                Backend::Postgres(Box::new(PgSession::connect(endpoints, opts, conn).await?))
            }
            LockService::Etcd => Backend::Etcd(EtcdSession::connect(endpoints, opts, conn).await?),
        })
    }

    fn node_count(&self) -> usize {
        match self {
            Backend::Redis(b) => b.node_count(),
            Backend::Postgres(b) => b.node_count(),
            Backend::PgPooled(b) => b.node_count(),
            Backend::Etcd(b) => b.node_count(),
            Backend::Claim(b) => b.node_count(),
            Backend::Adapter(b) => b.node_count(),
        }
    }

    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        match self {
            Backend::Redis(b) => b.try_acquire(opts, resource, crash).await,
            Backend::Postgres(b) => b.try_acquire(opts, resource, crash).await,
            Backend::PgPooled(b) => b.try_acquire(opts, resource, crash).await,
            Backend::Etcd(b) => b.try_acquire(opts, resource, crash).await,
            Backend::Claim(b) => b.try_acquire(opts, resource, crash).await,
            Backend::Adapter(b) => b.try_acquire(opts, resource, crash).await,
        }
    }

    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        match self {
            Backend::Redis(b) => b.release(opts, lease).await,
            Backend::Postgres(b) => b.release(opts, lease).await,
            Backend::PgPooled(b) => b.release(opts, lease).await,
            Backend::Etcd(b) => b.release(opts, lease).await,
            Backend::Claim(b) => b.release(opts, lease).await,
            Backend::Adapter(b) => b.release(opts, lease).await,
        }
    }

    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        match self {
            Backend::Redis(b) => b.extend(opts, lease).await,
            Backend::Postgres(b) => b.extend(opts, lease).await,
            Backend::PgPooled(b) => b.extend(opts, lease).await,
            Backend::Etcd(b) => b.extend(opts, lease).await,
            Backend::Claim(b) => b.extend(opts, lease).await,
            Backend::Adapter(b) => b.extend(opts, lease).await,
        }
    }
}
