//! How every client of a test takes its locks ([`ClientSpec`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::defaults;
use crate::node::ConnectOptions;
use crate::strategy::{PgPool, RetryPolicy};

/// How every client takes its locks: what [`StrategyOptions`] gets besides the strategy and
/// its key prefix, and the connection timeouts. Durations are ms in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Lease TTL.
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Acquire retry policy.
    pub retry: RetryPolicy,
    /// Renew held leases every TTL/3.
    pub watchdog: bool,
    /// Redlock clock-drift factor: drift = TTL × factor + 2 ms.
    pub drift_factor: f64,
    /// Bound on one command to one node, connect included.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
    /// Connect and reply timeouts of every client connection.
    pub connect: ConnectOptions,
    /// PostgreSQL strategies: an application-side pool the clients borrow a connection from
    /// per operation (`run --pg-pool`); `None`: a session per client.
    #[serde(default)]
    pub pg_pool: Option<PgPool>,
    /// The command line of the strategy `adapter:command` (`run --adapter 'command args…'`,
    /// scenario key `workload.adapter`): split as a POSIX shell would (quotes, backslashes), no
    /// shell is run. `None` when no strategy needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
}

impl ClientSpec {
    /// The defaults of [`defaults`] for a lease of `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            retry: defaults::retry(),
            watchdog: false,
            drift_factor: defaults::DRIFT_FACTOR,
            node_timeout: defaults::node_timeout(ttl),
            connect: defaults::connect(),
            pg_pool: None,
            adapter: None,
        }
    }

    /// [`adapter`](Self::adapter) as a program and its arguments (`None` when unset, empty,
    /// or unbalanced quotes: [`Test::validate`] says which).
    pub fn adapter_argv(&self) -> Option<Vec<String>> {
        self.adapter
            .as_deref()
            .and_then(shlex::split)
            .filter(|a| !a.is_empty())
    }
}
