//! [`ProxiedTopology`]: a started [`Topology`] with one Toxiproxy proxy per node.
//!
//! Proxy names: `nX` for the client link of node `nX` (clients, and for `sentinel` also the
//! Sentinels, reach the node through it), `nX-cI` for client `I`'s own link to `nX` when the
//! clients have their own ([`ProxiedTopology::add_client_links`]), `nX-wI` for worker `I`'s own link to
//! `nX` in a multi-worker run ([`ProxiedTopology::add_worker_links`]) and `nX-repl` for replica `nX`'s replication link to
//! the initial primary (`sentinel` only). Proxies listen on `listen_host:0` (a free port).
//!
//! The Toxiproxy API is either the embedded [`ToxiproxyServer`] started in-process on
//! `127.0.0.1:0`, or an external one (Shopify's) given by base URL. Only the HTTP API is used,
//! so both behave the same.
//!
//! With `--backend docker` ([`ProxiedTopology::start_docker`]) the nodes are containers and
//! Toxiproxy is a container of the same run; its proxies listen inside that container on
//! published ports and forward to the node containers by name (for `sentinel`, to
//! `127.0.0.1:<port>` in the network namespace every container of the run shares).

use std::net::{Ipv4Addr, SocketAddr};

use super::{LocalTopologyOptions, SentinelOptions, Topology, TopologyError, TopologyKind};
use crate::node::{host_port, with_host_port, NodeEndpoint};
use crate::toxiproxy::{ToxiproxyClient, ToxiproxyServer};

mod cluster;
mod docker;
mod etcd;
mod links;
mod postgres;
mod sentinel;

/// Where the Toxiproxy API is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToxiproxySource {
    /// Start the embedded server in this process on `127.0.0.1:0`.
    #[default]
    Embedded,
    /// Use a running Toxiproxy at this base URL (e.g. `http://127.0.0.1:8474`).
    External(String),
}

/// How to put a topology behind proxies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyOptions {
    /// Which Toxiproxy.
    pub source: ToxiproxySource,
    /// Host the proxies listen on, and clients connect to (default `127.0.0.1`).
    pub listen_host: String,
    /// Sentinel settings for the `sentinel` kind.
    pub sentinel: SentinelOptions,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            source: ToxiproxySource::Embedded,
            listen_host: "127.0.0.1".to_string(),
            sentinel: SentinelOptions::default(),
        }
    }
}

/// One proxy and what it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyLink {
    /// Data node this link leads to (client link) or comes from (replication link: the replica).
    pub node: String,
    /// Proxy name in Toxiproxy (`n1`, `n2-repl`).
    pub proxy: String,
    /// `host:port` the proxy listens on.
    pub listen: String,
    /// `host:port` it forwards to.
    pub upstream: String,
}

/// A topology whose every node is reached through Toxiproxy. Call [`ProxiedTopology::shutdown`]
/// at the end: it removes the proxies, stops the embedded server and the nodes.
pub struct ProxiedTopology {
    topology: Topology,
    server: Option<ToxiproxyServer>,
    api: ToxiproxyClient,
    clients: Vec<ProxyLink>,
    replication: Vec<ProxyLink>,
    /// The node URLs as given (direct, no proxy), for the nemesis's own admin commands.
    direct: Vec<NodeEndpoint>,
    /// Per-client links ([`ProxiedTopology::add_client_links`]): entry `i` holds client `i`'s
    /// own proxies, one per entry of `clients`, in the same order. Empty = shared links only.
    per_client: Vec<Vec<ProxyLink>>,
    /// Per-worker links ([`ProxiedTopology::add_worker_links`]): entry `i` holds worker `i`'s
    /// own proxies `nX-wI`, as `per_client` does for clients.
    per_worker: Vec<Vec<ProxyLink>>,
}

impl std::fmt::Debug for ProxiedTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxiedTopology")
            .field("kind", &self.topology.kind())
            .field("api", &self.api.base_url())
            .field("clients", &self.clients)
            .field("replication", &self.replication)
            .finish_non_exhaustive()
    }
}

async fn connect_api(
    source: &ToxiproxySource,
) -> Result<(Option<ToxiproxyServer>, ToxiproxyClient), TopologyError> {
    match source {
        ToxiproxySource::Embedded => {
            let server = ToxiproxyServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
            let api = ToxiproxyClient::new(&server.base_url())?;
            Ok((Some(server), api))
        }
        ToxiproxySource::External(url) => {
            let api = ToxiproxyClient::new(url)?;
            api.version().await?;
            Ok((None, api))
        }
    }
}

impl ProxiedTopology {
    /// Starts a local topology of `kind` (`single`, `five` or `sentinel`) behind proxies.
    /// For `sentinel`, the proxies are created first so that the replicas replicate through
    /// `nX-repl` and every node is announced at its `nX` proxy (see
    /// [`crate::topology::sentinel`]).
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    pub async fn start(
        kind: TopologyKind,
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        if kind == TopologyKind::Etcd {
            return Self::start_etcd(options, proxy).await;
        }
        if kind == TopologyKind::Cluster {
            return Self::start_cluster(options, proxy).await;
        }
        if let (TopologyKind::Postgres, Some(pooler)) = (kind, options.pooler) {
            return Self::start_pooled(options, pooler, proxy).await;
        }
        if kind != TopologyKind::Sentinel {
            let topology = Topology::start_local(kind, options).await?;
            return Self::wrap(topology, proxy).await;
        }
        Self::start_sentinel(options, proxy).await
    }

    /// Puts an already started topology (`single`, `five`, `postgres` or `external`) behind
    /// one proxy per node. For an external topology the proxies forward to the URLs'
    /// host:port; for `postgres` with a pooler, proxy `n1` forwards to the pooler.
    ///
    /// # Errors
    /// [`TopologyError::ProxyUnsupported`] for a `sentinel` topology (use [`ProxiedTopology::start`]);
    /// Toxiproxy errors. On error the proxies created so far are removed and the embedded
    /// server is stopped; the topology is dropped (local nodes killed).
    pub async fn wrap(topology: Topology, proxy: &ProxyOptions) -> Result<Self, TopologyError> {
        if matches!(
            topology.kind(),
            TopologyKind::Sentinel | TopologyKind::Cluster
        ) {
            return Err(TopologyError::ProxyUnsupported {
                reason:
                    "a sentinel topology must be started behind proxies: use ProxiedTopology::start"
                        .into(),
            });
        }
        let (server, api) = connect_api(&proxy.source).await?;
        let direct = topology.data_endpoints();
        let mut clients = Vec::new();
        // What clients use (a pooler's address, when there is one in front of the server).
        for e in &topology.endpoints() {
            let made = async {
                let (host, port) =
                    host_port(&e.url).map_err(|reason| TopologyError::ProxyTarget {
                        target: e.name.clone(),
                        reason: reason.to_string(),
                    })?;
                create(
                    &api,
                    &e.name,
                    &e.name,
                    &proxy.listen_host,
                    &format!("{host}:{port}"),
                )
                .await
            }
            .await;
            match made {
                Ok(link) => clients.push(link),
                Err(err) => {
                    let names: Vec<String> = clients.iter().map(|l| l.proxy.clone()).collect();
                    remove_named(&api, &names).await;
                    if let Some(s) = server {
                        s.shutdown().await;
                    }
                    return Err(err);
                }
            }
        }
        Ok(Self {
            topology,
            server,
            api,
            clients,
            replication: Vec::new(),
            direct,
            per_client: Vec::new(),
            per_worker: Vec::new(),
        })
    }

    /// What clients lock on, through the proxies: one endpoint per node (`n1`..), or for
    /// `sentinel` one endpoint `primary` resolved through the Sentinels (which return the
    /// primary's proxy address).
    pub fn endpoints(&self) -> Vec<NodeEndpoint> {
        if self.topology.kind() == TopologyKind::Sentinel {
            return self.topology.endpoints();
        }
        if let Some(cluster) = self.topology.cluster_endpoint(&self.node_endpoints()) {
            return vec![cluster];
        }
        self.node_endpoints()
    }

    /// One endpoint per data node through its client proxy (URL credentials and db kept).
    pub fn node_endpoints(&self) -> Vec<NodeEndpoint> {
        through(&self.direct, &self.clients)
    }

    /// The node's own endpoint, bypassing Toxiproxy (for the nemesis's admin commands).
    pub fn direct_endpoint(&self, node: &str) -> Option<&NodeEndpoint> {
        self.direct.iter().find(|e| e.name == node)
    }

    /// Data node names in order (`n1`, `n2`, …).
    pub fn node_names(&self) -> Vec<String> {
        self.direct.iter().map(|e| e.name.clone()).collect()
    }

    /// Replication proxies (`nX-repl`, `sentinel`), peer proxies (`nX-peer`, `etcd`), or the
    /// pooler→server proxy (`nX-server`, `postgres` with a pooler).
    pub fn replication_links(&self) -> &[ProxyLink] {
        &self.replication
    }

    /// Byte counts of every proxy, when the proxies run in the embedded server (`None` for a
    /// Toxiproxy container, whose own `/metrics` has them).
    pub fn traffic_probe(&self) -> Option<crate::toxiproxy::TrafficProbe> {
        self.server.as_ref().map(ToxiproxyServer::traffic_probe)
    }

    /// The Toxiproxy API client.
    pub fn api(&self) -> &ToxiproxyClient {
        &self.api
    }

    /// The topology behind the proxies.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The topology, for process faults.
    pub fn topology_mut(&mut self) -> &mut Topology {
        &mut self.topology
    }

    /// Name of the current primary: asked from the Sentinels for `sentinel`, else `n1`.
    ///
    /// # Errors
    /// As [`Topology::current_primary`].
    pub async fn primary(&self) -> Result<String, TopologyError> {
        self.topology.current_primary().await
    }

    /// `POST /reset`: every proxy enabled, every toxic removed.
    ///
    /// # Errors
    /// Toxiproxy errors.
    pub async fn reset(&self) -> Result<(), TopologyError> {
        Ok(self.api.reset().await?)
    }

    /// Resets and deletes this topology's proxies, stops the embedded server, then stops the
    /// nodes (Sentinels first). Errors are logged; afterwards no proxy or process is left.
    pub async fn shutdown(self) {
        if let Err(e) = self.api.reset().await {
            tracing::warn!("toxiproxy reset at shutdown: {e}");
        }
        let own = self.per_client.iter().chain(&self.per_worker).flatten();
        for link in self.clients.iter().chain(own).chain(&self.replication) {
            if let Err(e) = self.api.delete_proxy(&link.proxy).await {
                tracing::warn!("deleting proxy {}: {e}", link.proxy);
            }
        }
        if let Some(server) = self.server {
            server.shutdown().await;
        }
        self.topology.shutdown().await;
    }
}

/// Each of `direct`'s endpoints reached through the matching proxy of `links` (its listen
/// address in place of the node's; URL credentials, db and TLS kept).
fn through(direct: &[NodeEndpoint], links: &[ProxyLink]) -> Vec<NodeEndpoint> {
    direct
        .iter()
        .zip(links)
        .map(|(e, link)| {
            let (host, port) = split_addr(&link.listen).unwrap_or_default();
            let url = with_host_port(&e.url, &host, port).unwrap_or_else(|_| e.url.clone());
            NodeEndpoint::new(e.name.clone(), url).with_tls(e.tls.clone())
        })
        .collect()
}

async fn create(
    api: &ToxiproxyClient,
    node: &str,
    proxy: &str,
    listen_host: &str,
    upstream: &str,
) -> Result<ProxyLink, TopologyError> {
    let info = api
        .create_proxy(proxy, &format!("{listen_host}:0"), upstream)
        .await?;
    Ok(ProxyLink {
        node: node.to_string(),
        proxy: proxy.to_string(),
        listen: info.listen,
        upstream: upstream.to_string(),
    })
}

/// Ends a start that created its proxies before its nodes: on success the topology takes the
/// embedded server (if any); on error the proxies in `made` are removed and the server stopped.
async fn settle(
    built: Result<ProxiedTopology, TopologyError>,
    server: Option<ToxiproxyServer>,
    api: &ToxiproxyClient,
    made: &[String],
) -> Result<ProxiedTopology, TopologyError> {
    match built {
        Ok(mut p) => {
            p.server = server;
            Ok(p)
        }
        Err(e) => {
            remove_named(api, made).await;
            if let Some(s) = server {
                s.shutdown().await;
            }
            Err(e)
        }
    }
}

/// Best effort: deletes the named proxies (used when a start fails half-way; other proxies
/// of a shared Toxiproxy are left alone).
async fn remove_named(api: &ToxiproxyClient, names: &[String]) {
    for name in names {
        let _ = api.delete_proxy(name).await;
    }
}

fn split_addr(addr: &str) -> Result<(String, u16), TopologyError> {
    let bad = || TopologyError::ProxyTarget {
        target: addr.to_string(),
        reason: "proxy listen address is not host:port".into(),
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    Ok((host.to_string(), port.parse().map_err(|_| bad())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_listen_addresses() {
        assert_eq!(
            split_addr("127.0.0.1:4100").unwrap(),
            ("127.0.0.1".to_string(), 4100)
        );
        assert!(split_addr("nope").is_err());
    }
}
