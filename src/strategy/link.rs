//! One client's connection to one node, reopened lazily after the node drops it.
//!
//! A [`NodeLink`] keeps at most one multiplexed connection. An operation that finds no
//! connection opens one (through [`NodeEndpoint::connect`], so the suite's timeouts apply). A
//! connection is discarded only when the error says it is dead (refused, reset, EOF, closed);
//! a reply timeout keeps it, so commands sent later on the same link are still executed by the
//! node *after* the timed-out one. Redlock relies on that order: the release that follows a
//! timed-out `SET` on a slow node runs after that `SET` and deletes its key.

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::RedisError;
use tokio::sync::Mutex;

use super::error::{NodeFailure, NodeFailureKind};
use super::scripts;
use crate::node::{ConnectOptions, NodeEndpoint};

/// A lazily (re)connected link to one node.
pub(crate) struct NodeLink {
    endpoint: NodeEndpoint,
    connect: ConnectOptions,
    /// The current connection; held only for a clone, never across an await.
    slot: std::sync::Mutex<Slot>,
    /// Serializes reconnects so concurrent callers open one connection, not many.
    connecting: Mutex<()>,
}

#[derive(Default)]
struct Slot {
    conn: Option<MultiplexedConnection>,
    /// Bumped at every new connection, so a stale failure does not drop a fresh connection.
    generation: u64,
}

impl NodeLink {
    pub(crate) fn new(endpoint: NodeEndpoint, connect: ConnectOptions) -> Self {
        Self {
            endpoint,
            connect,
            slot: std::sync::Mutex::new(Slot::default()),
            connecting: Mutex::new(()),
        }
    }

    /// The endpoint (for messages; its Display form is password-free).
    pub(crate) fn endpoint(&self) -> &NodeEndpoint {
        &self.endpoint
    }

    /// Opens the connection now if there is none.
    pub(crate) async fn ensure_connected(&self) -> Result<(), RedisError> {
        self.checkout().await.map(|_| ())
    }

    async fn checkout(&self) -> Result<(MultiplexedConnection, u64), RedisError> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(current) = self.current() {
            return Ok(current); // another caller reconnected meanwhile
        }
        let mut conn = self.endpoint.connect(&self.connect).await?;
        scripts::preload(&mut conn).await?;
        let mut slot = self.lock_slot();
        slot.generation += 1;
        slot.conn = Some(conn.clone());
        Ok((conn, slot.generation))
    }

    fn current(&self) -> Option<(MultiplexedConnection, u64)> {
        let slot = self.lock_slot();
        slot.conn.clone().map(|c| (c, slot.generation))
    }

    fn lock_slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        // The slot holds no invariant a panic could break; recover from poisoning.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn discard(&self, generation: u64) {
        let mut slot = self.lock_slot();
        if slot.generation == generation {
            slot.conn = None;
        }
    }

    /// Runs `op` on this node's connection, bounded by `timeout` (connect included).
    ///
    /// # Errors
    /// A [`NodeFailure`]: `Timeout` when `timeout` or the response timeout passed,
    /// `Unreachable` when the connection could not be opened or died (it is then reopened on
    /// the next call), `Command` for an error reply.
    pub(crate) async fn run<T, F, Fut>(&self, timeout: Duration, op: F) -> Result<T, NodeFailure>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        let attempt = async {
            let (conn, generation) = match self.checkout().await {
                Ok(c) => c,
                Err(e) => return Err(self.failure_from(&e)),
            };
            match op(conn).await {
                Ok(v) => Ok(v),
                Err(e) => {
                    if connection_is_dead(&e) {
                        self.discard(generation);
                    }
                    Err(self.failure_from(&e))
                }
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(NodeFailure {
                node: self.endpoint.name.clone(),
                kind: NodeFailureKind::Timeout,
                message: format!("no reply within the {timeout:?} per-node timeout"),
            }),
        }
    }

    fn failure_from(&self, e: &RedisError) -> NodeFailure {
        let kind = if e.is_timeout() {
            NodeFailureKind::Timeout
        } else if e.is_io_error() || connection_is_dead(e) {
            NodeFailureKind::Unreachable
        } else {
            NodeFailureKind::Command
        };
        NodeFailure {
            node: self.endpoint.name.clone(),
            kind,
            message: crate::node::redact_url(&e.to_string()),
        }
    }
}

/// True when the connection cannot be used again and must be reopened. A `READONLY` reply
/// also counts: the node was demoted to a replica (failover), and reopening the connection
/// resolves the primary again when the endpoint has a Sentinel lookup.
fn connection_is_dead(e: &RedisError) -> bool {
    !e.is_timeout()
        && (e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
            || e.code() == Some("READONLY"))
}
