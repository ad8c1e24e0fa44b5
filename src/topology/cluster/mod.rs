//! The `cluster` topology: a Redis Cluster of `shards` primaries with one replica each
//! (`n1`..`n{2×shards}`), local `redis-server --cluster-enabled yes` processes created with
//! `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`.
//!
//! Every process is a [`LocalNode`] (its `nodes.conf` and data in its own directory), so the
//! [`super::reaper`] tears them down like any other node.
//!
//! ## Addressing
//! [`ClusterAddressing`] says where each node listens (client port and cluster-bus port) and
//! the address it *announces* (`cluster-announce-ip/port`): what `CLUSTER SLOTS`, `MOVED` and
//! `ASK` name, and what a replica replicates from. Behind proxies
//! ([`super::ProxiedTopology::start`]) a node is announced at its replication proxy `nX-repl`
//! (so replication *from* `nX` to its replicas passes through it and can lag or be cut), and
//! the cluster client remaps every announced address to the node's client proxy `nX` at connect
//! time ([`crate::node::ClusterRouting`]). The cluster bus goes direct (its own port, announced
//! as is), so neither a client-side nor a replication fault touches failure detection.
//!
//! Behind proxies each node also has its own loopback address ([`own_hosts`]: `127.A.B.i`,
//! one block drawn per run): it binds its client and bus ports there, opens its bus
//! connections from there (`bind-source-addr`), and its `nX-repl` proxy listens there too
//! (a node announces one IP for its client and bus ports). So every bus packet names its two
//! nodes, and [`Topology::cut_bus`] can cut pairs of nodes both ways with kernel packet drops
//! ([`super::bus_cut`]) while the proxies (which connect from 127.0.0.1) are untouched.
//!
//! ## Settings
//! `cluster-node-timeout` is [`ClusterSettings::node_timeout`] (default 1500 ms: a primary
//! unreachable that long is marked failing and a replica is promoted); `cluster-require-full-
//! coverage no` (the other shards keep serving while one has no primary);
//! `cluster-allow-replica-migration no` (the layout stays as created); replication as in
//! `sentinel` (`repl-diskless-sync-delay 0`, `repl-ping-replica-period 1`, `repl-timeout 5`).

use std::net::Ipv4Addr;
use std::time::Duration;

use super::bus_cut::{BusAddr, BusFirewall};
use super::{Topology, TopologyError};
use crate::node::{ClusterRouting, ConnectOptions, NodeEndpoint};

mod bus;
mod layout;
mod start;

pub use layout::{ask_cluster_nodes, key_slot, parse_cluster_nodes, resource_slot, ShardLayout};
pub(crate) use start::node_lines;

/// Bound on the wait for `redis-cli --cluster create` and a ready cluster.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts of a cluster, each on fresh nodes and ports, when one failed in a way a new start
/// can mend ([`start_again`]).
pub const START_ATTEMPTS: u32 = 3;

/// Bound on `redis-cli --cluster create` itself (it takes 1–3 s; one that hangs never ends,
/// see [`TopologyError::ClusterCreateHung`]).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether a failed cluster start is worth another on fresh nodes and ports: a picked port
/// another process took first, or a `redis-cli --cluster create` that hung.
pub fn start_again(e: &TopologyError) -> bool {
    matches!(
        e,
        TopologyError::PortInUse { .. } | TopologyError::ClusterCreateHung { .. }
    )
}

/// The least time a cluster node is given to answer PING at start.
pub const CLUSTER_NODE_START_TIMEOUT: Duration = Duration::from_secs(15);

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The cluster's shape and timing (scenario `[topology]` keys, `run --shards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterSettings {
    /// Primaries (each with one replica); at least 3, as `redis-cli --cluster create` needs.
    #[serde(default = "default_shards")]
    pub shards: usize,
    /// `cluster-node-timeout` (ms in configs).
    #[serde(
        default = "default_node_timeout",
        with = "crate::duration_ms",
        rename = "node_timeout_ms"
    )]
    pub node_timeout: Duration,
}

fn default_shards() -> usize {
    3
}

fn default_node_timeout() -> Duration {
    Duration::from_millis(1500)
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            shards: default_shards(),
            node_timeout: default_node_timeout(),
        }
    }
}

impl ClusterSettings {
    /// Data nodes: two per shard.
    pub fn node_count(&self) -> usize {
        self.shards * 2
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`TopologyError::ClusterShards`] when there are fewer than 3 shards (or more than 50),
    /// [`TopologyError::ClusterNodeTimeout`] when the node timeout is below 100 ms.
    pub fn validate(&self) -> Result<(), TopologyError> {
        if !(3..=50).contains(&self.shards) {
            return Err(TopologyError::ClusterShards(self.shards));
        }
        if self.node_timeout < Duration::from_millis(100) {
            return Err(TopologyError::ClusterNodeTimeout(self.node_timeout));
        }
        Ok(())
    }
}

impl ClusterSettings {
    /// [`ClusterSettings::validate`], before a start.
    ///
    /// # Errors
    /// As [`ClusterSettings::validate`].
    fn check_to_start(&self) -> Result<(), TopologyError> {
        self.validate()
    }
}

/// Ports and announced addresses of the nodes (index `i` is node `n{i+1}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAddressing {
    /// Loopback address each node binds (client and bus port) and opens its bus connections
    /// from: all 127.0.0.1, or one each ([`own_hosts`]) when the bus may be cut.
    pub hosts: Vec<Ipv4Addr>,
    /// Client port of each node (on its host).
    pub node_ports: Vec<u16>,
    /// Cluster-bus port of each node (on its host, announced as is).
    pub bus_ports: Vec<u16>,
    /// Address (`host`, `port`) each node announces.
    pub announce: Vec<(String, u16)>,
}

impl ClusterAddressing {
    /// No proxies: each node on 127.0.0.1, announced at its own port.
    pub fn direct(node_ports: &[u16], bus_ports: &[u16]) -> Self {
        Self {
            hosts: vec![Ipv4Addr::LOCALHOST; node_ports.len()],
            node_ports: node_ports.to_vec(),
            bus_ports: bus_ports.to_vec(),
            announce: node_ports
                .iter()
                .map(|&p| ("127.0.0.1".to_string(), p))
                .collect(),
        }
    }

    /// Each node's end of the bus (its host and bus port).
    pub fn bus(&self) -> Vec<BusAddr> {
        self.hosts
            .iter()
            .zip(&self.bus_ports)
            .map(|(&host, &port)| BusAddr { host, port })
            .collect()
    }

    /// Free ports for `nodes` nodes (client and bus port each).
    ///
    /// # Errors
    /// [`TopologyError::Io`] when no port can be had.
    pub fn free_ports(nodes: usize) -> Result<(Vec<u16>, Vec<u16>), TopologyError> {
        let pick = || {
            (0..nodes)
                .map(|_| super::ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()
        };
        Ok((pick()?, pick()?))
    }
}

/// A loopback address for each of `nodes` nodes (at most 250): `127.A.B.1`, `127.A.B.2`, …
/// in a block drawn at random per call (A in 64..=254, clear of 127.0.0.1 and Debian's
/// 127.0.1.1), so concurrent runs almost never share one. Were two runs to draw the same
/// block, their bus cuts would still not touch each other: a cut names the bus ports of its
/// own run's nodes, which no other node can hold at the same time.
pub fn own_hosts(nodes: usize) -> Vec<Ipv4Addr> {
    use rand::Rng;
    let mut rng = rand::rng();
    let (a, b) = (rng.random_range(64..=254u8), rng.random::<u8>());
    (1..=nodes.min(250))
        .map(|i| Ipv4Addr::new(127, a, b, i as u8))
        .collect()
}

/// What a started cluster needs to remember.
#[derive(Debug)]
pub(crate) struct ClusterGroup {
    pub(crate) settings: ClusterSettings,
    pub(crate) announce: Vec<(String, u16)>,
    /// Each node's end of the bus, in node order.
    pub(crate) bus: Vec<BusAddr>,
    /// The bus cuts (an nft table once the first cut is made; deleted when dropped).
    pub(crate) firewall: BusFirewall,
}

impl Topology {
    /// The cluster's settings (`cluster` kind only).
    pub fn cluster_settings(&self) -> Option<ClusterSettings> {
        self.cluster.as_ref().map(|g| g.settings)
    }

    /// The endpoint clients lock on for `cluster`: one endpoint `cluster` whose seeds are the
    /// nodes' URLs in `seeds` (proxies or the nodes), and whose address map sends each
    /// announced address to `seeds[i]`'s host and port.
    pub(crate) fn cluster_endpoint(&self, seeds: &[NodeEndpoint]) -> Option<NodeEndpoint> {
        let group = self.cluster.as_ref()?;
        let address_map = group
            .announce
            .iter()
            .zip(seeds)
            .filter_map(|(a, s)| {
                let to = crate::node::host_port(&s.url).ok()?;
                (a != &to).then(|| (a.clone(), to))
            })
            .collect();
        let seed_urls = seeds.iter().map(|s| s.url.clone()).collect::<Vec<_>>();
        Some(
            NodeEndpoint::new("cluster", seed_urls[0].clone()).with_cluster(ClusterRouting {
                seeds: seed_urls,
                address_map,
            }),
        )
    }

    /// The address each node announces (`cluster` kind only), index `i` being `n{i+1}`: what
    /// [`parse_cluster_nodes`] names nodes by.
    pub fn cluster_announce(&self) -> Option<&[(String, u16)]> {
        self.cluster.as_ref().map(|g| g.announce.as_slice())
    }
}

/// Admin connections: short timeouts, direct to a node.
fn admin() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
    }
}

#[cfg(test)]
mod tests;
