//! Local redis-server nodes a test owns, and looking at a node's keys from a test on a
//! connection of its own.

use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::time::Duration;

use lockbench::node::{ConnectOptions, NodeEndpoint};
use lockbench::topology::{
    LocalNode, LocalNodeConfig, LocalTopologyOptions, Topology, TopologyKind,
};
use redis::AsyncCommands;
use tokio::time::Instant;

/// A test's own nodes `n1..` in a temporary directory. Fields drop in order: the nodes are
/// killed before their directory is removed.
pub struct Nodes {
    nodes: Vec<LocalNode>,
    dir: tempfile::TempDir,
}

impl Deref for Nodes {
    type Target = Vec<LocalNode>;
    fn deref(&self) -> &Vec<LocalNode> {
        &self.nodes
    }
}

impl DerefMut for Nodes {
    fn deref_mut(&mut self) -> &mut Vec<LocalNode> {
        &mut self.nodes
    }
}

impl<'a> IntoIterator for &'a Nodes {
    type Item = &'a LocalNode;
    type IntoIter = std::slice::Iter<'a, LocalNode>;
    fn into_iter(self) -> Self::IntoIter {
        self.nodes.iter()
    }
}

impl Nodes {
    /// Adds a node that is down: started on a free port to reserve its name, port and
    /// directory, then killed. `restart` brings it up (empty) on the same port.
    pub async fn push_stopped(&mut self, name: &str) {
        let mut node = LocalNode::start(&LocalNodeConfig::new(name), self.dir.path())
            .await
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        node.kill().expect("kill");
        self.nodes.push(node);
    }
}

/// `n` running nodes named `n1..`, started concurrently.
pub async fn start_nodes(n: usize) -> Nodes {
    let dir = tempfile::tempdir().expect("tempdir");
    let configs: Vec<LocalNodeConfig> = (1..=n)
        .map(|i| LocalNodeConfig::new(format!("n{i}")))
        .collect();
    let nodes =
        futures::future::try_join_all(configs.iter().map(|c| LocalNode::start(c, dir.path())))
            .await
            .unwrap_or_else(|e| panic!("start {n} nodes: {e}"));
    Nodes { nodes, dir }
}

/// `n` nodes that are down (see [`Nodes::push_stopped`]).
pub async fn stopped_nodes(n: usize) -> Nodes {
    let mut nodes = start_nodes(0).await;
    for i in 1..=n {
        nodes.push_stopped(&format!("n{i}")).await;
    }
    nodes
}

/// The endpoints of `nodes`, in order.
pub fn endpoints(nodes: &[LocalNode]) -> Vec<NodeEndpoint> {
    nodes.iter().map(LocalNode::endpoint).collect()
}

/// A node a test can look at: one it started, or any endpoint.
pub trait Inspectable {
    /// Where to connect.
    fn inspection_endpoint(&self) -> NodeEndpoint;
}

impl Inspectable for LocalNode {
    fn inspection_endpoint(&self) -> NodeEndpoint {
        self.endpoint()
    }
}

impl Inspectable for NodeEndpoint {
    fn inspection_endpoint(&self) -> NodeEndpoint {
        self.clone()
    }
}

/// A fresh connection to `node` (the suite's default timeouts).
pub async fn inspect(node: &impl Inspectable) -> redis::aio::MultiplexedConnection {
    let endpoint = node.inspection_endpoint();
    endpoint
        .connect(&ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("inspect connection to {}: {e}", endpoint.name))
}

/// `PING` on a fresh connection to `node`: its reply, or why there was none.
pub async fn ping(node: &impl Inspectable) -> Result<String, redis::RedisError> {
    let mut conn = node
        .inspection_endpoint()
        .connect(&ConnectOptions::default())
        .await?;
    redis::cmd("PING").query_async(&mut conn).await
}

/// `GET key` on `node`.
pub async fn get(node: &impl Inspectable, key: &str) -> Option<String> {
    inspect(node).await.get(key).await.expect("GET")
}

/// `SET key value` on `node`.
pub async fn set(node: &impl Inspectable, key: &str, value: &str) {
    let () = inspect(node).await.set(key, value).await.expect("SET");
}

/// `EXISTS key` on `node`.
pub async fn exists(node: &impl Inspectable, key: &str) -> bool {
    inspect(node).await.exists(key).await.expect("EXISTS")
}

/// `PTTL key` on `node` (ms; -1 without expiry, -2 when the key is gone).
pub async fn pttl(node: &impl Inspectable, key: &str) -> i64 {
    inspect(node).await.pttl(key).await.expect("PTTL")
}

/// Polls (every 5 ms) until `key` is gone from `node`, failing after `limit`.
pub async fn wait_until_gone(node: &impl Inspectable, key: &str, limit: Duration) {
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
            node.inspection_endpoint().name
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts a local topology of `kind` in `dir` (default options).
pub async fn start_topology(kind: TopologyKind, dir: &Path) -> Topology {
    Topology::start_local(kind, &LocalTopologyOptions::new(dir))
        .await
        .unwrap_or_else(|e| panic!("{kind} topology starts: {e}"))
}
