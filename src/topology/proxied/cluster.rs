//! The `cluster` kind behind proxies: per node a client proxy `nX` and a replication proxy
//! `nX-repl` on the node's own loopback address; the bus direct, cut per pair.

use super::{connect_api, create, settle, split_addr, ProxiedTopology, ProxyOptions};
use crate::topology::{ClusterAddressing, LocalTopologyOptions, Topology, TopologyError};

impl ProxiedTopology {
    /// Starts the `cluster` topology behind proxies: for each node `nX`, the client proxy `nX`
    /// and the replication proxy `nX-repl` (both to its client port) are created first; the
    /// node announces `nX-repl`'s address, so its replicas replicate through it, and the
    /// clients' cluster endpoint maps every announced address to the client proxy `nX` (see
    /// [`crate::topology::cluster`]). Each node has its own loopback address, where it listens
    /// and `nX-repl` listens too; the cluster bus is not proxied but can be cut per pair of
    /// nodes ([`Topology::cut_bus`]). Faults with `link = "replication"` act on the targets'
    /// `nX-repl` proxies, `link = "bus"` on the bus.
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    pub(super) async fn start_cluster(
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let mut attempt = 1;
        loop {
            match Self::start_cluster_once(options, proxy).await {
                Err(e)
                    if crate::topology::cluster::start_again(&e)
                        && attempt < crate::topology::cluster::START_ATTEMPTS =>
                {
                    tracing::warn!(attempt, "cluster start failed, starting again: {e}");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`ProxiedTopology::start_cluster`]: its node and bus ports are picked
    /// before the proxies (which listen on ephemeral ports) are created and the nodes start,
    /// so another process can take one in between; the caller then starts again.
    async fn start_cluster_once(
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let (server, api) = connect_api(&proxy.source).await?;
        let mut made: Vec<String> = Vec::new();
        let built = async {
            let (node_ports, bus_ports) =
                ClusterAddressing::free_ports(options.cluster.node_count())?;
            let hosts = crate::topology::cluster::own_hosts(node_ports.len());
            let mut clients = Vec::new();
            let mut replication = Vec::new();
            for (i, port) in node_ports.iter().enumerate() {
                let name = format!("n{}", i + 1);
                let upstream = format!("{}:{port}", hosts[i]);
                let client = create(&api, &name, &name, &proxy.listen_host, &upstream).await?;
                made.push(client.proxy.clone());
                clients.push(client);
                // On the node's own address: the node announces it for its bus port too.
                let repl = create(
                    &api,
                    &name,
                    &format!("{name}-repl"),
                    &hosts[i].to_string(),
                    &upstream,
                )
                .await?;
                made.push(repl.proxy.clone());
                replication.push(repl);
            }
            let addressing = ClusterAddressing {
                hosts,
                node_ports,
                bus_ports,
                announce: replication
                    .iter()
                    .map(|l| split_addr(&l.listen))
                    .collect::<Result<_, _>>()?,
            };
            let topology = Topology::start_cluster(
                options,
                &options.cluster,
                &addressing,
                crate::topology::cluster::READY_TIMEOUT,
            )
            .await?;
            let direct = topology.data_endpoints();
            Ok::<_, TopologyError>(Self {
                topology,
                server: None,
                api: api.clone(),
                clients,
                replication,
                direct,
                per_client: Vec::new(),
                per_worker: Vec::new(),
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }
}
