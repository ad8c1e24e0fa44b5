//! Own links: per-client (`nX-cI`) and per-worker (`nX-wI`) proxies, and the endpoints through
//! them.

use super::{create, remove_named, split_addr, through, ProxiedTopology, ProxyLink};
use crate::node::NodeEndpoint;
use crate::topology::{TopologyError, TopologyKind};

impl ProxiedTopology {
    /// Client proxies, one per data node.
    pub fn client_links(&self) -> &[ProxyLink] {
        &self.clients
    }

    /// Gives each of `clients` clients its own proxy to every node: `nX-cI` for client `I`,
    /// forwarding where the shared client proxy `nX` forwards. Standard Toxiproxy proxies (any
    /// Toxiproxy serves them); a fault on one client's proxies touches no other client's
    /// connections, which is how the nemesis cuts one client off (`partition` on `holder` or
    /// `clients:…`). Node faults act on `nX` and every `nX-cI` alike.
    /// Clients reach them through [`ProxiedTopology::client_endpoints`].
    ///
    /// On `cluster` a client's cluster connection maps every node's announced address to the
    /// client's own proxy of that node (see [`ProxiedTopology::client_endpoints`]), so
    /// redirections keep working and one client can be cut off some nodes only.
    ///
    /// # Errors
    /// [`TopologyError::ProxyUnsupported`] on `sentinel` (its clients learn the primary's
    /// address from the Sentinels, which announce the shared proxies) and on the docker
    /// backend (its proxies listen on ports published when the containers started), or when
    /// client links were added already; Toxiproxy errors (the proxies created so far are
    /// removed).
    pub async fn add_client_links(&mut self, clients: u32) -> Result<(), TopologyError> {
        if !self.per_client.is_empty() {
            return Err(TopologyError::ProxyUnsupported {
                reason: "per-client proxies: already added".into(),
            });
        }
        self.per_client = self.own_links("client", 'c', clients).await?;
        Ok(())
    }

    /// Gives each of `workers` worker processes its own proxy to every node: `nX-wI` for
    /// worker `I`, as [`ProxiedTopology::add_client_links`] does for clients (same rules and
    /// errors). A fault on one worker's proxies cuts that worker off and no other; node faults
    /// act on them as on `nX`. Workers reach them through [`ProxiedTopology::worker_endpoints`].
    ///
    /// # Errors
    /// As [`ProxiedTopology::add_client_links`].
    pub async fn add_worker_links(&mut self, workers: u32) -> Result<(), TopologyError> {
        if !self.per_worker.is_empty() {
            return Err(TopologyError::ProxyUnsupported {
                reason: "per-worker proxies: already added".into(),
            });
        }
        self.per_worker = self.own_links("worker", 'w', workers).await?;
        Ok(())
    }

    /// `count` sets of proxies, one per node each, named `nX-<letter>I`, forwarding where the
    /// shared proxies do; on error the ones made are removed.
    async fn own_links(
        &self,
        what: &str,
        letter: char,
        count: u32,
    ) -> Result<Vec<Vec<ProxyLink>>, TopologyError> {
        let unsupported = |reason: &str| TopologyError::ProxyUnsupported {
            reason: format!("per-{what} proxies: {reason}"),
        };
        if self.topology.kind() == TopologyKind::Sentinel {
            return Err(unsupported(
                "sentinel clients learn the primary's address from the Sentinels",
            ));
        }
        if self.topology.is_docker() {
            return Err(unsupported(
                "the docker backend's proxies listen on ports published at start",
            ));
        }
        let mut made: Vec<Vec<ProxyLink>> = Vec::new();
        for i in 0..count {
            let mut own = Vec::new();
            for shared in &self.clients {
                let host = split_addr(&shared.listen)?.0;
                let name = format!("{}-{letter}{i}", shared.proxy);
                match create(&self.api, &shared.node, &name, &host, &shared.upstream).await {
                    Ok(link) => own.push(link),
                    Err(e) => {
                        let names: Vec<String> = made
                            .iter()
                            .chain(std::iter::once(&own))
                            .flatten()
                            .map(|l| l.proxy.clone())
                            .collect();
                        remove_named(&self.api, &names).await;
                        return Err(e);
                    }
                }
            }
            made.push(own);
        }
        Ok(made)
    }

    /// The endpoints through `own` (one link per node, in node order).
    fn endpoints_through(&self, own: &[ProxyLink]) -> Vec<NodeEndpoint> {
        through(&self.direct, own)
    }

    /// Worker `worker`'s endpoints through its own proxies (`None` without
    /// [`ProxiedTopology::add_worker_links`] or for an unknown worker).
    pub fn worker_endpoints(&self, worker: u32) -> Option<Vec<NodeEndpoint>> {
        let own = self.per_worker.get(worker as usize)?;
        Some(self.endpoints_through(own))
    }

    /// Worker `worker`'s own proxies, one per node (empty without worker links).
    pub fn links_of_worker(&self, worker: u32) -> &[ProxyLink] {
        self.per_worker
            .get(worker as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// Client `client`'s endpoints through its own proxies, in [`ProxiedTopology::endpoints`]'
    /// order: one per node, or on `cluster` the one cluster endpoint whose address map leads
    /// to the client's own proxies (`None` without [`ProxiedTopology::add_client_links`] or for
    /// an unknown client).
    pub fn client_endpoints(&self, client: u32) -> Option<Vec<NodeEndpoint>> {
        let own = self.per_client.get(client as usize)?;
        let nodes = self.endpoints_through(own);
        if let Some(cluster) = self.topology.cluster_endpoint(&nodes) {
            return Some(vec![cluster]);
        }
        Some(nodes)
    }

    /// Client `client`'s own proxies, one per node (empty without client links).
    pub fn links_of_client(&self, client: u32) -> &[ProxyLink] {
        self.per_client
            .get(client as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// How many clients have their own proxies (0 = every client shares `nX`).
    pub fn client_link_count(&self) -> u32 {
        self.per_client.len() as u32
    }

    /// Every client proxy of `node`: the shared `nX`, then each client's `nX-cI`, then each
    /// worker's `nX-wI`.
    pub fn client_proxies_of(&self, node: &str) -> Vec<String> {
        self.clients
            .iter()
            .chain(self.per_client.iter().flatten())
            .chain(self.per_worker.iter().flatten())
            .filter(|l| l.node == node)
            .map(|l| l.proxy.clone())
            .collect()
    }
}
