//! The `sentinel` layout, as `docker/compose.yml`'s `sentinel` profile: three data nodes and
//! the Sentinels in the Toxiproxy container's network namespace.

use super::command::{redis_server_args, sentinel_command};
use super::node::ContainerNode;
use super::run::{free_ports, open_run, DockerRun};
use super::shared::{start_all_shared, start_shared_namespace, WantedProxy};
use super::TOXIPROXY_API_PORT;
use crate::topology::docker::DockerOptions;
use crate::topology::ports::pick_free_port;
use crate::topology::sentinel::{
    data_node_lines, sentinel_lines, SentinelAddressing, SentinelOptions,
};
use crate::topology::{Persistence, TopologyError};

/// Data nodes of a docker `sentinel` run (`n1` first primary, `n2`, `n3`).
const DATA_NODES: usize = 3;

/// Ports of a docker `sentinel` run. Every container of the run shares the Toxiproxy
/// container's network namespace, and every port but the API's is published 1:1 on the host's
/// 127.0.0.1, so `127.0.0.1:<port>` is the same address inside the run and on the host: what
/// the nodes announce and Sentinel hands out, a host-side client can use as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelPorts {
    /// Toxiproxy API on the host ([`TOXIPROXY_API_PORT`] inside).
    pub api: u16,
    /// Client proxy `nX` at index X−1: the address node `nX` is announced at.
    pub client: Vec<u16>,
    /// Node `nX` itself at index X−1 (bypassing Toxiproxy).
    pub direct: Vec<u16>,
    /// Replication proxy `nX-repl` of replica `nX` at index X−2 (not published).
    pub replication: Vec<u16>,
    /// Sentinel `sX` at index X−1.
    pub sentinels: Vec<u16>,
}

impl SentinelPorts {
    /// Free host ports for `nodes` data nodes and `sentinels` Sentinels, all distinct.
    fn pick(nodes: usize, sentinels: usize) -> Result<Self, TopologyError> {
        Ok(Self {
            api: pick_free_port()?,
            client: free_ports(nodes)?,
            direct: free_ports(nodes)?,
            replication: free_ports(nodes.saturating_sub(1))?,
            sentinels: free_ports(sentinels)?,
        })
    }

    /// (host, container) pairs the Toxiproxy container publishes.
    fn published(&self) -> Vec<(u16, u16)> {
        let mut out = vec![(self.api, TOXIPROXY_API_PORT)];
        for p in self
            .client
            .iter()
            .chain(&self.direct)
            .chain(&self.sentinels)
        {
            out.push((*p, *p));
        }
        out
    }

    /// The run's proxies: `nX` (client port → node `nX`) and `nX-repl` (→ `n1`).
    fn proxies(&self) -> Vec<WantedProxy> {
        let mut wanted = Vec::new();
        for i in 0..self.client.len() {
            let node = format!("n{}", i + 1);
            wanted.push((node.clone(), node, self.client[i], self.direct[i]));
        }
        for (i, repl) in self.replication.iter().enumerate() {
            let node = format!("n{}", i + 2);
            wanted.push((node.clone(), format!("{node}-repl"), *repl, self.direct[0]));
        }
        wanted
    }

    /// Announced, listening and replication addresses of the data nodes.
    pub fn addressing(&self) -> SentinelAddressing {
        let local = |p: &u16| ("127.0.0.1".to_string(), *p);
        SentinelAddressing {
            node_ports: self.direct.clone(),
            announce: self.client.iter().map(local).collect(),
            replicate_from: self.replication.iter().map(local).collect(),
        }
    }
}

/// The containers of a docker `sentinel` run ([`start_sentinel_run`]).
#[derive(Debug)]
pub struct SentinelRun {
    /// Data nodes `n1` (first primary), `n2`, `n3`.
    pub nodes: Vec<ContainerNode>,
    /// Sentinels `s1`..`s3`.
    pub sentinels: Vec<ContainerNode>,
    /// The Toxiproxy container (holding the shared namespace, with proxies `nX`, `nX-repl`)
    /// and the network.
    pub run: DockerRun,
    /// Where everything listens.
    pub ports: SentinelPorts,
}

/// Starts a docker `sentinel` run, laid out as `docker/compose.yml`'s `sentinel` profile:
/// the network, the Toxiproxy container on it (publishing every port of the run), proxies
/// `nX` (`127.0.0.1:<client port>` → node `nX`) and `nX-repl` (→ `n1`), then the data
/// nodes and `opts.sentinels` Sentinels, each a container of the Redis image in the Toxiproxy
/// container's network namespace. Node `nX` gets the same `redis.conf` lines as the local
/// sentinel topology (announced at its client proxy, replicas replicating through `nX-repl`),
/// the Sentinels the same `sentinel` lines plus `sentinel announce-ip 127.0.0.1` /
/// `announce-port`. Returns once every container answers
/// PING (the caller waits for the group to be in sync).
///
/// # Errors
/// As [`start_run`]; a proxy that cannot be created is a [`TopologyError::Docker`]. On error
/// nothing of the run is left.
pub async fn start_sentinel_run(
    persistence: Persistence,
    options: &DockerOptions,
    opts: &SentinelOptions,
) -> Result<SentinelRun, TopologyError> {
    let mut run = open_run(options).await?;
    let mut nodes = Vec::new();
    let mut sentinels = Vec::new();
    let filled = fill_sentinel_run(&mut run, persistence, opts, &mut nodes, &mut sentinels).await;
    match filled {
        Ok(ports) => Ok(SentinelRun {
            nodes,
            sentinels,
            run,
            ports,
        }),
        Err(e) => {
            for c in sentinels.iter_mut().chain(nodes.iter_mut()) {
                c.remove().await;
            }
            run.remove().await;
            Err(e)
        }
    }
}

async fn fill_sentinel_run(
    run: &mut DockerRun,
    persistence: Persistence,
    opts: &SentinelOptions,
    nodes: &mut Vec<ContainerNode>,
    sentinels: &mut Vec<ContainerNode>,
) -> Result<SentinelPorts, TopologyError> {
    let options = run.options.clone();
    let proxy_name = options.toxiproxy_container_name();
    let ports = start_shared_namespace(
        run,
        || SentinelPorts::pick(DATA_NODES, opts.sentinels),
        SentinelPorts::published,
        SentinelPorts::proxies,
    )
    .await?;
    let addressing = ports.addressing();
    let docker = run.docker.clone();
    let starts = (0..DATA_NODES).map(|i| {
        let cmd = redis_server_args(
            ports.direct[i],
            persistence,
            &data_node_lines(i, &addressing),
        );
        (format!("n{}", i + 1), cmd, ports.direct[i])
    });
    nodes.extend(start_all_shared(&docker, starts, &proxy_name, persistence, &options).await?);
    let starts = ports.sentinels.iter().enumerate().map(|(i, &port)| {
        let mut lines = sentinel_lines(opts, &addressing.announce[0]);
        lines.push("sentinel announce-ip 127.0.0.1".to_string());
        lines.push(format!("sentinel announce-port {port}"));
        (format!("s{}", i + 1), sentinel_command(port, &lines), port)
    });
    sentinels.extend(start_all_shared(&docker, starts, &proxy_name, persistence, &options).await?);
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_ports_are_distinct_published_one_to_one_and_announced() {
        let p = SentinelPorts::pick(3, 3).unwrap();
        let mut all: Vec<u16> = [p.api]
            .iter()
            .chain(&p.client)
            .chain(&p.direct)
            .chain(&p.replication)
            .chain(&p.sentinels)
            .copied()
            .collect();
        assert_eq!(all.len(), 1 + 3 + 3 + 2 + 3);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12, "ports must be distinct");
        let published = p.published();
        assert_eq!(published[0], (p.api, TOXIPROXY_API_PORT));
        assert!(published[1..].iter().all(|(h, c)| h == c));
        assert!(!published.iter().any(|(h, _)| p.replication.contains(h)));
        let a = p.addressing();
        assert_eq!(a.node_ports, p.direct);
        assert_eq!(a.announce[1], ("127.0.0.1".to_string(), p.client[1]));
        assert_eq!(
            a.replicate_from[0],
            ("127.0.0.1".to_string(), p.replication[0])
        );
    }
}
