//! Lock clients on nodes a test started: one attempt per acquire, and a per-node timeout
//! that fits the TTL.

use std::time::Duration;

use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, RetryPolicy, StrategyKind, StrategyOptions};
use lockbench::topology::LocalNode;

use super::node::endpoints;

/// Options of `kind` with `ttl`: no retry, and a per-node timeout of 200 ms or half the TTL,
/// whichever is shorter (at least 1 ms).
pub fn options(kind: StrategyKind, ttl: Duration) -> StrategyOptions {
    let mut o = StrategyOptions::new(kind, ttl);
    o.retry = RetryPolicy::no_retry();
    o.node_timeout = Duration::from_millis(200)
        .min(ttl / 2)
        .max(Duration::from_millis(1));
    o
}

/// A lock client of `nodes` (the suite's default connection timeouts).
pub async fn client(nodes: &[LocalNode], opts: StrategyOptions) -> LockClient {
    LockClient::connect(&endpoints(nodes), opts, &ConnectOptions::default())
        .await
        .expect("connect")
}
