//! The `etcd` kind behind proxies: peer traffic through the proxies too.

use super::{connect_api, create, settle, ProxiedTopology, ProxyOptions};
use crate::node::host_port;
use crate::topology::{ports, LocalTopologyOptions, Topology, TopologyError};

impl ProxiedTopology {
    /// Starts the `etcd` topology behind proxies: the peer proxies `nX-peer` are created first
    /// (each forwards to member X's peer port, and member X advertises it to its peers, so all
    /// Raft traffic *to* member X passes through it), then the members, then the client
    /// proxies `nX`. Faults with `link = "peer"` act on the `nX-peer` proxies.
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    pub(super) async fn start_etcd(
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let (server, api) = connect_api(&proxy.source).await?;
        let mut made: Vec<String> = Vec::new();
        let built = async {
            let peer_ports = (0..3)
                .map(|_| ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()?;
            let mut peers = Vec::new();
            for (i, port) in peer_ports.iter().enumerate() {
                let name = format!("n{}", i + 1);
                let link = create(
                    &api,
                    &name,
                    &format!("{name}-peer"),
                    &proxy.listen_host,
                    &format!("127.0.0.1:{port}"),
                )
                .await?;
                made.push(link.proxy.clone());
                peers.push(link);
            }
            let advertise: Vec<String> = peers.iter().map(|l| l.listen.clone()).collect();
            let topology = Topology::start_etcd(options, &peer_ports, &advertise).await?;
            let direct = topology.data_endpoints();
            let mut clients = Vec::new();
            for e in &direct {
                let (host, port) =
                    host_port(&e.url).map_err(|reason| TopologyError::ProxyTarget {
                        target: e.name.clone(),
                        reason: reason.to_string(),
                    })?;
                let link = create(
                    &api,
                    &e.name,
                    &e.name,
                    &proxy.listen_host,
                    &format!("{host}:{port}"),
                )
                .await?;
                made.push(link.proxy.clone());
                clients.push(link);
            }
            Ok::<_, TopologyError>(Self {
                topology,
                server: None,
                api: api.clone(),
                clients,
                replication: peers,
                direct,
                per_client: Vec::new(),
                per_worker: Vec::new(),
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }
}
