//! The `postgres` kind with a pooler behind proxies.

use super::{connect_api, create, settle, ProxiedTopology, ProxyOptions};
use crate::topology::{LocalTopologyOptions, Topology, TopologyError, TopologyKind};

impl ProxiedTopology {
    /// Starts the `postgres` topology with a pooler behind proxies: the server `n1`, then the
    /// proxy `n1-server` to it, then PgBouncer forwarding to that proxy, then the client proxy
    /// `n1` to PgBouncer. Faults with `link = "server"` act on `n1-server` (PgBouncer's
    /// connections to the server), the others on `n1` (the clients' connections to PgBouncer).
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    pub(super) async fn start_pooled(
        options: &LocalTopologyOptions,
        pooler: crate::topology::PoolerSettings,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let (server, api) = connect_api(&proxy.source).await?;
        let mut made: Vec<String> = Vec::new();
        let built = async {
            let direct_options = LocalTopologyOptions {
                pooler: None,
                ..options.clone()
            };
            let mut topology =
                Topology::start_local(TopologyKind::Postgres, &direct_options).await?;
            let direct = topology.data_endpoints();
            let node = direct[0].name.clone();
            let port = topology.local_nodes()[0].port();
            let to_server = create(
                &api,
                &node,
                &format!("{node}-server"),
                &proxy.listen_host,
                &format!("127.0.0.1:{port}"),
            )
            .await?;
            made.push(to_server.proxy.clone());
            topology
                .start_pooler(pooler, to_server.listen.clone(), options)
                .await?;
            let pooler_port = topology
                .pooler()
                .map_or(0, crate::topology::LocalNode::port);
            let client = create(
                &api,
                &node,
                &node,
                &proxy.listen_host,
                &format!("127.0.0.1:{pooler_port}"),
            )
            .await?;
            made.push(client.proxy.clone());
            Ok::<_, TopologyError>(Self {
                topology,
                server: None,
                api: api.clone(),
                clients: vec![client],
                replication: vec![to_server],
                direct,
                per_client: Vec::new(),
                per_worker: Vec::new(),
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }
}
