//! The `sentinel` kind behind proxies: client proxies `nX` and replication proxies `nX-repl`
//! first, then the group announced at them.

use super::{connect_api, create, settle, split_addr, ProxiedTopology, ProxyOptions};
use crate::topology::{ports, LocalTopologyOptions, SentinelAddressing, Topology, TopologyError};

impl ProxiedTopology {
    /// Starts the `sentinel` topology behind proxies: the client proxies `nX` and the
    /// replication proxies `nX-repl` first, then the nodes announced at them (see
    /// [`crate::topology::sentinel`]).
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    pub(super) async fn start_sentinel(
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let (server, api) = connect_api(&proxy.source).await?;
        let built = async {
            let node_ports = (0..3)
                .map(|_| ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()?;
            let mut clients = Vec::new();
            for (i, port) in node_ports.iter().enumerate() {
                let name = format!("n{}", i + 1);
                clients.push(
                    create(
                        &api,
                        &name,
                        &name,
                        &proxy.listen_host,
                        &format!("127.0.0.1:{port}"),
                    )
                    .await?,
                );
            }
            let mut replication = Vec::new();
            for i in 1..node_ports.len() {
                let name = format!("n{}", i + 1);
                replication.push(
                    create(
                        &api,
                        &name,
                        &format!("{name}-repl"),
                        &proxy.listen_host,
                        &format!("127.0.0.1:{}", node_ports[0]),
                    )
                    .await?,
                );
            }
            let addressing = SentinelAddressing {
                node_ports: node_ports.clone(),
                announce: clients
                    .iter()
                    .map(|l| split_addr(&l.listen))
                    .collect::<Result<_, _>>()?,
                replicate_from: replication
                    .iter()
                    .map(|l| split_addr(&l.listen))
                    .collect::<Result<_, _>>()?,
            };
            let topology = Topology::start_sentinel(options, &proxy.sentinel, &addressing).await?;
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
        let names = ["n1", "n2", "n3", "n2-repl", "n3-repl"].map(String::from);
        settle(built, server, &api, &names).await
    }
}
