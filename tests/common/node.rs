//! Looking at a local node's keys from a test, on a connection of its own.

use std::time::Duration;

use lockbench::node::ConnectOptions;
use lockbench::topology::LocalNode;
use redis::AsyncCommands;
use tokio::time::Instant;

/// A fresh connection to `node` (the suite's default timeouts).
pub async fn inspect(node: &LocalNode) -> redis::aio::MultiplexedConnection {
    node.endpoint()
        .connect(&ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("inspect connection to {}: {e}", node.name()))
}

/// `GET key` on `node`.
pub async fn get(node: &LocalNode, key: &str) -> Option<String> {
    inspect(node).await.get(key).await.expect("GET")
}

/// Polls (every 5 ms) until `key` is gone from `node`, failing after `limit`.
pub async fn wait_until_gone(node: &LocalNode, key: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut conn = inspect(node).await;
    loop {
        let present: bool = conn.exists(key).await.expect("EXISTS");
        if !present {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{key} still on {} after {limit:?}",
            node.name()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
