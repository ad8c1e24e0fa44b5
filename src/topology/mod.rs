//! Topologies: the Redis nodes a run talks to, and their lifecycle.
//!
//! | kind | nodes | who owns them |
//! |---|---|---|
//! | `single` | `n1` | this process ([`LocalNode`]) |
//! | `five` | `n1`..`n5`, independent (no replication) | this process |
//! | `sentinel` | primary `n1`, replicas `n2`, `n3`, Sentinels `s1`..`s3` ([`sentinel`]) | this process |
//! | `postgres` | `n1`: one PostgreSQL server ([`program`]); with a pooler, PgBouncer in front of it ([`pgbouncer`]) | this process |
//! | `cluster` | `n1`..`n6` (3 shards by default): a Redis Cluster, each primary with one replica ([`cluster`]); behind proxies each node has its own loopback address, so its bus can be cut per pair of nodes ([`bus_cut`]) | this process |
//! | `etcd` | `n1`..`n3`: an etcd cluster, peers advertised at their proxies ([`program`]) | this process |
//! | `external` | `n1`..`nN` from user URLs (`redis://`, `postgres://`, `http://` for etcd) | the user: never started, stopped or flushed |
//!
//! Any of them can run behind Toxiproxy, one proxy per node: [`ProxiedTopology`] ([`proxied`]),
//! the topology the nemesis injects network faults into.
//!
//! Which strategy runs on which topology is decided in [`pairing`] (the only file here that
//! asks the strategy layer). [`limits`] is the process's descriptor budget, which the local
//! nodes inherit.
//!
//! Local nodes are direct child processes tracked by the [`reaper`], so they are torn down on
//! normal exit, error, SIGINT/SIGTERM (cooperatively, through [`reaper::termination_signal`])
//! and panic ([`reaper::install_panic_hook`]). A `sentinel` kind (primary, replicas, sentinels)
//! fits the same shape: more [`LocalNode`]s with [`LocalNodeConfig::extra_config`] lines.
//!
//! With the `docker` feature, `single`, `five` and `sentinel` can also run as containers
//! ([`Topology::start_docker`], [`container`]); the nemesis reaches either kind of node (and
//! of Sentinel) through [`NodeHandle`].

pub mod bus_cut;
pub mod cluster;
#[cfg(feature = "docker")]
pub mod container;
pub mod docker;
mod error;
pub mod external;
pub mod handle;
mod kind;
pub mod limits;
pub mod local;
pub mod pairing;
pub mod pgbouncer;
pub mod ports;
pub mod program;
pub mod proxied;
pub mod reaper;
pub mod sentinel;
mod start;

pub use cluster::{ClusterAddressing, ClusterSettings, ShardLayout};
pub use docker::DockerOptions;
pub use error::TopologyError;
pub use handle::NodeHandle;
pub use kind::TopologyKind;
pub use local::{LocalNode, LocalNodeConfig, Persistence, DEFAULT_START_TIMEOUT};
pub use pgbouncer::{PoolMode, PoolReset, PoolerKind, PoolerSettings};
pub use program::{EtcdMember, ServerProgram};
pub use proxied::{ProxiedTopology, ProxyLink, ProxyOptions, ToxiproxySource};
pub use sentinel::{SentinelAddressing, SentinelOptions};
pub use start::LocalTopologyOptions;

use crate::node::{ConnectOptions, NodeEndpoint};

/// Prefix of every key the suite writes, unless configured otherwise.
pub const DEFAULT_KEY_PREFIX: &str = "lockbench:";

/// The nodes of one run. Dropping it kills every local process; prefer [`Topology::shutdown`].
#[derive(Debug)]
pub struct Topology {
    kind: TopologyKind,
    local: Vec<LocalNode>,
    external: Vec<NodeEndpoint>,
    key_prefix: String,
    /// Sentinel processes (`sentinel` kind only).
    sentinels: Vec<LocalNode>,
    /// PgBouncer in front of `n1` (`postgres` kind with a pooler only): clients reach `n1`
    /// through it.
    pooler: Option<LocalNode>,
    /// How the Sentinel group was set up (`sentinel` kind only).
    sentinel: Option<sentinel::SentinelGroup>,
    /// How the Redis Cluster was set up (`cluster` kind only).
    cluster: Option<cluster::ClusterGroup>,
    /// Redis containers (`--backend docker`).
    #[cfg(feature = "docker")]
    containers: Vec<container::ContainerNode>,
    /// Sentinel containers (`--backend docker`, `sentinel` kind only).
    #[cfg(feature = "docker")]
    sentinel_containers: Vec<container::ContainerNode>,
    /// The docker run's Toxiproxy container and network (`--backend docker`).
    #[cfg(feature = "docker")]
    docker: Option<container::DockerRun>,
}

impl Topology {
    /// A topology of local node processes only (no Sentinels, no containers).
    fn of_local_nodes(kind: TopologyKind, local: Vec<LocalNode>, key_prefix: &str) -> Self {
        Self {
            kind,
            local,
            external: Vec::new(),
            key_prefix: key_prefix.to_string(),
            sentinels: Vec::new(),
            pooler: None,
            sentinel: None,
            cluster: None,
            #[cfg(feature = "docker")]
            containers: Vec::new(),
            #[cfg(feature = "docker")]
            sentinel_containers: Vec::new(),
            #[cfg(feature = "docker")]
            docker: None,
        }
    }

    /// The docker run's containers besides the nodes (`None` unless started by
    /// [`Topology::start_docker`]).
    #[cfg(feature = "docker")]
    pub fn docker_run(&self) -> Option<&container::DockerRun> {
        self.docker.as_ref()
    }

    /// Redis containers (empty unless started by [`Topology::start_docker`]).
    #[cfg(feature = "docker")]
    pub fn container_nodes(&self) -> &[container::ContainerNode] {
        &self.containers
    }

    /// True when the nodes are containers ([`Topology::start_docker`]).
    pub fn is_docker(&self) -> bool {
        #[cfg(feature = "docker")]
        {
            self.docker.is_some()
        }
        #[cfg(not(feature = "docker"))]
        {
            false
        }
    }

    /// Every data node, local process or container, for the nemesis.
    pub fn node_handles(&mut self) -> Vec<NodeHandle<'_>> {
        #[allow(unused_mut)]
        let mut out: Vec<NodeHandle<'_>> = self.local.iter_mut().map(NodeHandle::Local).collect();
        #[cfg(feature = "docker")]
        out.extend(self.containers.iter_mut().map(NodeHandle::Container));
        out
    }

    /// Every Sentinel, local process or container, for the nemesis (empty for other kinds).
    pub fn sentinel_handles(&mut self) -> Vec<NodeHandle<'_>> {
        #[allow(unused_mut)]
        let mut out: Vec<NodeHandle<'_>> =
            self.sentinels.iter_mut().map(NodeHandle::Local).collect();
        #[cfg(feature = "docker")]
        out.extend(
            self.sentinel_containers
                .iter_mut()
                .map(NodeHandle::Container),
        );
        out
    }

    /// The data node called `name`, local process or container, for the nemesis.
    ///
    /// # Errors
    /// As [`Topology::node_mut`].
    pub fn node_handle(&mut self, name: &str) -> Result<NodeHandle<'_>, TopologyError> {
        #[cfg(feature = "docker")]
        if !self.containers.is_empty() {
            let known = self
                .containers
                .iter()
                .map(|n| n.name().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return self
                .containers
                .iter_mut()
                .find(|n| n.name() == name)
                .map(NodeHandle::Container)
                .ok_or(TopologyError::UnknownNode {
                    name: name.to_string(),
                    known,
                });
        }
        self.node_mut(name).map(NodeHandle::Local)
    }

    /// The kind this topology was built as.
    pub fn kind(&self) -> TopologyKind {
        self.kind
    }

    /// The endpoints clients lock on: one per node, in order `n1`, `n2`, …; for `sentinel`,
    /// one endpoint `primary` that finds the current primary through the Sentinels at every
    /// connect (see [`Topology::data_endpoints`] for the nodes themselves); with a pooler,
    /// PgBouncer's address under the server's name `n1`.
    pub fn endpoints(&self) -> Vec<NodeEndpoint> {
        if let Some(group) = &self.sentinel {
            return vec![group.primary_endpoint(&self.sentinel_endpoints())];
        }
        if let Some(cluster) = self.cluster_endpoint(&self.data_endpoints()) {
            return vec![cluster];
        }
        if let (Some(pooler), Some(server)) = (&self.pooler, self.local.first()) {
            return vec![NodeEndpoint::new(server.name(), pooler.endpoint().url)];
        }
        self.data_endpoints()
    }

    /// One endpoint per data node (direct, not through Sentinel), in order `n1`, `n2`, ….
    pub fn data_endpoints(&self) -> Vec<NodeEndpoint> {
        #[cfg(feature = "docker")]
        if !self.containers.is_empty() {
            return self
                .containers
                .iter()
                .map(container::ContainerNode::endpoint)
                .collect();
        }
        if self.is_external() {
            self.external.clone()
        } else {
            self.local.iter().map(LocalNode::endpoint).collect()
        }
    }

    /// Prefix of every key the suite writes on these nodes.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// True for URLs given by the user (never started, stopped or flushed here).
    pub fn is_external(&self) -> bool {
        self.kind == TopologyKind::External
    }

    /// Local node processes (empty for external topologies).
    pub fn local_nodes(&self) -> &[LocalNode] {
        &self.local
    }

    /// Local node processes, for the nemesis (kill, restart, pause).
    pub fn local_nodes_mut(&mut self) -> &mut [LocalNode] {
        &mut self.local
    }

    /// The local node called `name`, for the nemesis.
    ///
    /// # Errors
    /// [`TopologyError::ExternalRefused`] on an external topology;
    /// [`TopologyError::UnknownNode`] listing the valid names.
    pub fn node_mut(&mut self, name: &str) -> Result<&mut LocalNode, TopologyError> {
        if self.is_external() {
            return Err(TopologyError::ExternalRefused {
                op: "fault",
                node: self.external_node_label(name),
            });
        }
        let known = self
            .local
            .iter()
            .map(|n| n.name().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        self.local
            .iter_mut()
            .find(|n| n.name() == name)
            .ok_or(TopologyError::UnknownNode {
                name: name.to_string(),
                known,
            })
    }

    /// FLUSHALL on every local node (to reset between runs).
    ///
    /// # Errors
    /// [`TopologyError::ExternalRefused`] on an external topology (nothing is sent);
    /// [`TopologyError::Redis`] if a node does not answer.
    pub async fn flush_all(&self) -> Result<(), TopologyError> {
        if self.is_external() {
            return Err(TopologyError::ExternalRefused {
                op: "FLUSHALL",
                node: self
                    .external
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let opts = ConnectOptions::default();
        for endpoint in self.data_endpoints() {
            let redis_err = |source| TopologyError::Redis {
                node: endpoint.to_string(),
                source,
            };
            let mut conn = endpoint.connect(&opts).await.map_err(redis_err)?;
            let _: () = redis::cmd("FLUSHALL")
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
        }
        Ok(())
    }

    /// Stops every local node gracefully and concurrently (SIGTERM, then SIGKILL after 5 s).
    /// Sentinels are stopped first, so they start no failover during teardown.
    /// Containers (docker backend) are removed, then the Toxiproxy container and the network.
    /// Does nothing to external nodes. Failures are logged; every process is gone afterwards
    /// (dropping a node SIGKILLs it; a container left by a failure is removed by the
    /// last-resort cleanup, [`docker::remove_all_blocking`]).
    pub async fn shutdown(mut self) {
        #[cfg(feature = "docker")]
        {
            // Sentinels first, so they start no failover during teardown.
            let removals = self.sentinel_containers.iter_mut().map(|c| c.remove());
            futures::future::join_all(removals).await;
            let removals = self.containers.iter_mut().map(|c| c.remove());
            futures::future::join_all(removals).await;
            if let Some(run) = self.docker.as_mut() {
                run.remove().await;
            }
        }
        let sentinel_stops = self.sentinels.iter_mut().map(|node| async move {
            if let Err(e) = node.stop().await {
                tracing::warn!("stopping sentinel {}: {e}", node.name());
            }
        });
        futures::future::join_all(sentinel_stops).await;
        // The pooler before the server it forwards to.
        if let Some(pooler) = self.pooler.as_mut() {
            if let Err(e) = pooler.stop().await {
                tracing::warn!("stopping the pooler: {e}");
            }
        }
        let stops = self.local.iter_mut().map(|node| async move {
            if let Err(e) = node.stop().await {
                tracing::warn!("stopping node {}: {e}", node.name());
            }
        });
        futures::future::join_all(stops).await;
    }

    fn external_node_label(&self, name: &str) -> String {
        self.external
            .iter()
            .find(|e| e.name == name)
            .map(ToString::to_string)
            .unwrap_or_else(|| name.to_string())
    }
}
