//! The `cluster` layout: the data nodes in the Toxiproxy container's network namespace, each
//! announced at its replication proxy, the bus direct.

use super::command::redis_server_args;
use super::node::ContainerNode;
use super::run::{free_ports, open_run, DockerRun};
use super::shared::{start_all_shared, start_shared_namespace, WantedProxy};
use super::TOXIPROXY_API_PORT;
use crate::topology::cluster::{node_lines, ClusterSettings};
use crate::topology::docker::DockerOptions;
use crate::topology::ports::pick_free_port;
use crate::topology::{ClusterAddressing, Persistence, TopologyError};

/// Ports of a docker `cluster` run, laid out as the `sentinel` run: every container shares
/// the Toxiproxy container's network namespace, and the client proxies and the nodes' own
/// ports are published 1:1 on the host's 127.0.0.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPorts {
    /// Toxiproxy API on the host ([`TOXIPROXY_API_PORT`] inside).
    pub api: u16,
    /// Client proxy `nX` at index X−1 (what the clients' address map leads to).
    pub client: Vec<u16>,
    /// Node `nX` itself at index X−1 (bypassing Toxiproxy; `redis-cli --cluster create`
    /// and the nemesis use it).
    pub direct: Vec<u16>,
    /// Replication proxy `nX-repl` at index X−1: the address node `nX` announces (not
    /// published).
    pub replication: Vec<u16>,
    /// Cluster-bus port of node `nX` (not published: the bus stays inside the namespace).
    pub bus: Vec<u16>,
}

impl ClusterPorts {
    /// Free host ports for `nodes` nodes, all distinct.
    fn pick(nodes: usize) -> Result<Self, TopologyError> {
        Ok(Self {
            api: pick_free_port()?,
            client: free_ports(nodes)?,
            direct: free_ports(nodes)?,
            replication: free_ports(nodes)?,
            bus: free_ports(nodes)?,
        })
    }

    /// (host, container) pairs the Toxiproxy container publishes: the API, then every client
    /// proxy and node port 1:1.
    fn published(&self) -> Vec<(u16, u16)> {
        let mut out = vec![(self.api, TOXIPROXY_API_PORT)];
        out.extend(self.client.iter().chain(&self.direct).map(|&p| (p, p)));
        out
    }

    /// The run's proxies: `nX` and `nX-repl`, both to node `nX`.
    fn proxies(&self) -> Vec<WantedProxy> {
        let mut wanted = Vec::new();
        for i in 0..self.direct.len() {
            let node = format!("n{}", i + 1);
            wanted.push((node.clone(), node.clone(), self.client[i], self.direct[i]));
            wanted.push((
                node.clone(),
                format!("{node}-repl"),
                self.replication[i],
                self.direct[i],
            ));
        }
        wanted
    }

    /// Where the nodes listen and what they announce (`127.0.0.1:<nX-repl>`).
    pub fn addressing(&self) -> ClusterAddressing {
        ClusterAddressing {
            hosts: vec![std::net::Ipv4Addr::LOCALHOST; self.direct.len()],
            node_ports: self.direct.clone(),
            bus_ports: self.bus.clone(),
            announce: self
                .replication
                .iter()
                .map(|&p| ("127.0.0.1".to_string(), p))
                .collect(),
        }
    }
}

/// The containers of a docker `cluster` run ([`start_cluster_run`]).
#[derive(Debug)]
pub struct ClusterRun {
    /// Data nodes `n1`..`n{2×shards}`, not yet joined (the caller runs `redis-cli --cluster
    /// create`).
    pub nodes: Vec<ContainerNode>,
    /// The Toxiproxy container (holding the shared namespace, with proxies `nX`, `nX-repl`)
    /// and the network.
    pub run: DockerRun,
    /// Where everything listens.
    pub ports: ClusterPorts,
}

/// Starts the containers of a docker `cluster` run: the network, the Toxiproxy container
/// (publishing the API, the client proxies and the nodes' ports), proxies `nX` and `nX-repl`
/// (both → node `nX`), then `settings.node_count()` Redis containers in its namespace with the
/// local cluster topology's `redis.conf` lines (announced at `nX-repl`, so replication passes
/// through it; the bus direct). Returns once every node answers PING.
///
/// # Errors
/// As [`start_run`]. On error nothing of the run is left.
pub async fn start_cluster_run(
    persistence: Persistence,
    options: &DockerOptions,
    settings: &ClusterSettings,
) -> Result<ClusterRun, TopologyError> {
    let mut run = open_run(options).await?;
    let filled = async {
        let count = settings.node_count();
        let ports = start_shared_namespace(
            &mut run,
            || ClusterPorts::pick(count),
            ClusterPorts::published,
            ClusterPorts::proxies,
        )
        .await?;
        let addressing = ports.addressing();
        let starts = (0..count).map(|i| {
            let lines = node_lines(i, &addressing, settings);
            let cmd = redis_server_args(ports.direct[i], persistence, &lines);
            (format!("n{}", i + 1), cmd, ports.direct[i])
        });
        let owner = options.toxiproxy_container_name();
        let nodes = start_all_shared(&run.docker, starts, &owner, persistence, options).await?;
        Ok::<_, TopologyError>((nodes, ports))
    }
    .await;
    match filled {
        Ok((nodes, ports)) => Ok(ClusterRun { nodes, run, ports }),
        Err(e) => {
            run.remove().await;
            Err(e)
        }
    }
}
