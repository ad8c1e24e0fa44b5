//! One client's connection to one node: every reply paired with its own request.
//!
//! A [`NodeLink`] keeps at most one multiplexed connection and opens it lazily (through
//! [`NodeEndpoint::connect`], so the suite's timeouts apply).
//!
//! **Why a connection is thrown away.** The redis crate pairs replies with requests in the
//! order they were sent. When a reply never arrives (a black hole drops it, or the request
//! itself was dropped on the way), the crate would hand the *next* reply to the request still
//! waiting, and every later request would get its predecessor's reply: a release reports
//! "timed out" although Redis deleted the key, and a shifted `OK` could pass for a lock that
//! was never taken. So after anything that can leave a request without its reply (the
//! per-node timeout of [`NodeLink::run`], the connection's own response timeout, an I/O,
//! parse or type error) the connection is discarded, and the next call opens a new one. Only
//! an error *reply* from Redis (`WRONGTYPE`, `OOM`, `LOADING`, …) proves the pairing intact
//! and keeps the connection; `READONLY` discards it too (the node was demoted, and a reconnect
//! asks Sentinel for the new primary).
//!
//! **One request at a time.** Discarding after a timeout is not enough when several tasks
//! share the link (the driver's `--shared-connection`): a second request sent while the first
//! waits for a swallowed reply would fill the first one's slot. So each [`NodeLink::run`] takes
//! the link's turn before it sends, and gives it back only after it has its reply or has
//! discarded the connection: an abandoned request's late reply can only land in a connection
//! nobody uses any more. A call that times out while still waiting for its turn sent nothing
//! and leaves the connection alone.
//!
//! **Cost of a fresh connection.** A command sent after a timeout no longer runs behind the
//! timed-out one: a compare-and-delete clean-up may reach the node *before* a late `SET` that
//! was stuck on the old connection (in a proxy, or in a paused node's input buffer). That key
//! then stays until its TTL runs out, which is safe (nobody believes they hold it) but keeps
//! the resource busy for up to one TTL. For `no-ttl` such a key never expires.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::scripts;
use crate::lease::{NodeFailure, NodeFailureKind};
use crate::node::{ConnectOptions, NodeEndpoint};

/// One open connection: to one node, or to a whole Redis Cluster (the endpoint has a
/// [`ClusterRouting`](crate::node::ClusterRouting); the crate's cluster client routes each
/// command by its key's slot and follows `MOVED`/`ASK`).
#[derive(Clone)]
pub(crate) enum RedisConn {
    /// One node (possibly found through Sentinel).
    Node(MultiplexedConnection),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Node(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Node(c) => c.req_packed_commands(cmd, offset, count),
            RedisConn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Node(c) => c.get_db(),
            RedisConn::Cluster(c) => c.get_db(),
        }
    }
}

/// A lazily (re)connected link to one node.
pub(crate) struct NodeLink {
    endpoint: NodeEndpoint,
    connect: ConnectOptions,
    /// The current connection; held only for a clone, never across an await. Shared with a
    /// reconnect that outlives its caller (see `checkout`).
    slot: Arc<std::sync::Mutex<Slot>>,
    /// Serializes reconnects so concurrent callers open one connection, not many; held by the
    /// reconnect task until it has stored its connection or failed.
    connecting: Arc<Mutex<()>>,
    /// Held by the one [`NodeLink::run`] whose request is on the connection (fair, FIFO).
    turn: Mutex<()>,
}

#[derive(Default)]
struct Slot {
    conn: Option<RedisConn>,
    /// Bumped at every new connection, so a stale failure does not drop a fresh connection.
    generation: u64,
}

impl NodeLink {
    pub(crate) fn new(endpoint: NodeEndpoint, connect: ConnectOptions) -> Self {
        Self {
            endpoint,
            connect,
            slot: Arc::new(std::sync::Mutex::new(Slot::default())),
            connecting: Arc::new(Mutex::new(())),
            turn: Mutex::new(()),
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

    async fn checkout(&self) -> Result<(RedisConn, u64), RedisError> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let connecting = self.connecting.clone().lock_owned().await;
        if let Some(current) = self.current() {
            return Ok(current); // another caller reconnected meanwhile
        }
        // The reconnect runs as its own task: a caller whose per-node timeout passes while the
        // connection is being opened drops this future, but the connect goes on (bounded by
        // the connect and response timeouts) and stores its connection for the next call.
        // Were it cancelled with its caller, then on a loaded machine where opening a
        // connection (TCP connect + script preload, through the proxy) takes longer than the
        // per-node timeout (TTL/10: 30 ms for a 300 ms TTL), every later call would start a
        // connect and cancel it again: the client would never reach the node again although
        // the node is up (seen in chaos scenarios while a build ran beside them).
        let endpoint = self.endpoint.clone();
        let options = self.connect;
        let slot = self.slot.clone();
        let task = tokio::spawn(async move {
            let _connecting = connecting;
            let mut conn = if endpoint.cluster.is_some() {
                RedisConn::Cluster(endpoint.connect_cluster(&options).await?)
            } else {
                RedisConn::Node(endpoint.connect(&options).await?)
            };
            scripts::preload(&mut conn).await?;
            let mut slot = lock(&slot);
            slot.generation += 1;
            slot.conn = Some(conn.clone());
            Ok((conn, slot.generation))
        });
        match task.await {
            Ok(result) => result,
            Err(e) => Err(RedisError::from(std::io::Error::other(format!(
                "connect task ended: {e}"
            )))),
        }
    }

    fn current(&self) -> Option<(RedisConn, u64)> {
        let slot = self.lock_slot();
        slot.conn.clone().map(|c| (c, slot.generation))
    }

    fn lock_slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        lock(&self.slot)
    }

    /// Drops connection `generation` if it is still the current one.
    fn discard(&self, generation: u64) {
        let mut slot = self.lock_slot();
        if slot.generation == generation {
            slot.conn = None;
        }
    }

    /// Runs `op` (one request, or requests that must follow each other on this connection)
    /// on this node's connection, bounded by `timeout` (waiting for the link's turn and
    /// connecting included).
    ///
    /// After a timeout or any error other than an error reply from Redis, the connection is
    /// discarded (see the module docs) and the next call reconnects.
    ///
    /// # Errors
    /// A [`NodeFailure`]: `Timeout` when `timeout` or the response timeout passed (the
    /// command may still be applied, unless it was still waiting for its turn), `Unreachable`
    /// when the connection could not be opened or died, `Command` for an error reply or an
    /// unexpected reply.
    pub(crate) async fn run<T, F, Fut>(&self, timeout: Duration, op: F) -> Result<T, NodeFailure>
    where
        F: FnOnce(RedisConn) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        let deadline = Instant::now() + timeout;
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.turn.lock()).await else {
            return Err(NodeFailure {
                node: self.endpoint.name.clone(),
                kind: NodeFailureKind::Timeout,
                message: format!(
                    "not sent: the connection stayed busy with other requests for the \
                     {timeout:?} per-node timeout"
                ),
            });
        };
        let (conn, generation) = match tokio::time::timeout_at(deadline, self.checkout()).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(self.failure_from(&e)),
            Err(_) => return Err(self.timed_out(timeout)),
        };
        // The turn is given back (dropped) only after a discard below.
        match tokio::time::timeout_at(deadline, op(conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if !reply_pairing_intact(&e) {
                    self.discard(generation);
                }
                Err(self.failure_from(&e))
            }
            Err(_) => {
                // The request may be unanswered: its reply would go to the next request.
                self.discard(generation);
                Err(self.timed_out(timeout))
            }
        }
    }

    fn timed_out(&self, timeout: Duration) -> NodeFailure {
        NodeFailure {
            node: self.endpoint.name.clone(),
            kind: NodeFailureKind::Timeout,
            message: format!("no reply within the {timeout:?} per-node timeout"),
        }
    }

    fn failure_from(&self, e: &RedisError) -> NodeFailure {
        let kind = if e.is_timeout() {
            NodeFailureKind::Timeout
        } else if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
            || e.code() == Some("READONLY")
        {
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

/// Locks a link's slot. The slot holds no invariant a panic could break, so a poisoned lock
/// is recovered.
fn lock(slot: &std::sync::Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// True when `e` proves the connection still pairs replies with requests: Redis answered
/// this request with an error reply. `READONLY` counts as not intact: the node was demoted
/// (failover) and reopening the connection resolves the primary again through Sentinel.
/// Everything else (timeouts, I/O and parse errors, a reply of an unexpected type) may mean a
/// reply went missing or belongs to another request.
fn reply_pairing_intact(e: &RedisError) -> bool {
    !e.is_timeout() && !e.is_io_error() && e.code().is_some_and(|code| code != "READONLY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_error_replies_keep_the_connection() {
        let server = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "ERR wrong number of arguments",
        ));
        assert!(reply_pairing_intact(&server), "{server:?}");
        let readonly = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "READONLY",
        ));
        assert!(!reply_pairing_intact(&readonly));
        let timeout: RedisError =
            std::io::Error::new(std::io::ErrorKind::TimedOut, "response timeout").into();
        assert!(timeout.is_timeout());
        assert!(!reply_pairing_intact(&timeout));
        let reset: RedisError =
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset").into();
        assert!(!reply_pairing_intact(&reset));
        let wrong_type = RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "Response was of incompatible type",
        ));
        assert!(!reply_pairing_intact(&wrong_type));
    }
}
