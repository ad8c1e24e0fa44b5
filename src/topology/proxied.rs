//! [`ProxiedTopology`]: a started [`Topology`] with one Toxiproxy proxy per node.
//!
//! Proxy names: `nX` for the client link of node `nX` (clients, and for `sentinel` also the
//! Sentinels, reach the node through it), `nX-cI` for client `I`'s own link to `nX` when the
//! clients have their own ([`ProxiedTopology::add_client_links`]) and `nX-repl` for replica `nX`'s replication link to
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

use super::{
    ports, ClusterAddressing, DockerOptions, LocalTopologyOptions, SentinelAddressing,
    SentinelOptions, Topology, TopologyError, TopologyKind,
};
use crate::node::{host_port, with_host_port, NodeEndpoint};
use crate::toxiproxy::{ToxiproxyClient, ToxiproxyServer};

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
            })
        }
        .await;
        let names = ["n1", "n2", "n3", "n2-repl", "n3-repl"].map(String::from);
        settle(built, server, &api, &names).await
    }

    /// Starts the `cluster` topology behind proxies: for each node `nX`, the client proxy `nX`
    /// and the replication proxy `nX-repl` (both to its client port) are created first; the
    /// node announces `nX-repl`'s address, so its replicas replicate through it, and the
    /// clients' cluster endpoint maps every announced address to the client proxy `nX` (see
    /// [`crate::topology::cluster`]). The cluster bus is not proxied. Faults with
    /// `link = "replication"` act on the targets' `nX-repl` proxies.
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    async fn start_cluster(
        options: &LocalTopologyOptions,
        proxy: &ProxyOptions,
    ) -> Result<Self, TopologyError> {
        let mut attempt = 1;
        loop {
            match Self::start_cluster_once(options, proxy).await {
                Err(e)
                    if super::cluster::start_again(&e)
                        && attempt < super::cluster::START_ATTEMPTS =>
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
            let mut clients = Vec::new();
            let mut replication = Vec::new();
            for (i, port) in node_ports.iter().enumerate() {
                let name = format!("n{}", i + 1);
                let upstream = format!("127.0.0.1:{port}");
                let client = create(&api, &name, &name, &proxy.listen_host, &upstream).await?;
                made.push(client.proxy.clone());
                clients.push(client);
                let repl = create(
                    &api,
                    &name,
                    &format!("{name}-repl"),
                    &proxy.listen_host,
                    &upstream,
                )
                .await?;
                made.push(repl.proxy.clone());
                replication.push(repl);
            }
            let addressing = ClusterAddressing {
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
                super::cluster::READY_TIMEOUT,
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
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }

    /// Starts the `postgres` topology with a pooler behind proxies: the server `n1`, then the
    /// proxy `n1-server` to it, then PgBouncer forwarding to that proxy, then the client proxy
    /// `n1` to PgBouncer. Faults with `link = "server"` act on `n1-server` (PgBouncer's
    /// connections to the server), the others on `n1` (the clients' connections to PgBouncer).
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    async fn start_pooled(
        options: &LocalTopologyOptions,
        pooler: super::PoolerSettings,
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
            let pooler_port = topology.pooler().map_or(0, super::LocalNode::port);
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
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }

    /// Starts the `etcd` topology behind proxies: the peer proxies `nX-peer` are created first
    /// (each forwards to member X's peer port, and member X advertises it to its peers, so all
    /// Raft traffic *to* member X passes through it), then the members, then the client
    /// proxies `nX`. Faults with `link = "peer"` act on the `nX-peer` proxies.
    ///
    /// # Errors
    /// Toxiproxy or topology start errors; on error nothing is left running.
    async fn start_etcd(
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
                        reason,
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
            })
        }
        .await;
        settle(built, server, &api, &made).await
    }

    /// Starts `single`, `five`, `sentinel` or `cluster` (with `options.cluster`) as containers
    /// ([`Topology::start_docker`]). For
    /// `single` and `five` it then creates proxy `nX` for each node in the run's Toxiproxy
    /// container through its API
    /// ([`ToxiproxySource::External`] at the container's published API port): it listens on
    /// `0.0.0.0:2000X` inside the container (published on a free 127.0.0.1 port, which is what
    /// [`ProxiedTopology::endpoints`] returns) and forwards to `<tag>-nX:6379` on the run's
    /// network. [`ProxiedTopology::direct_endpoint`] is the node container's own published port.
    /// For `sentinel` and `cluster` the run creates its proxies itself before the nodes start
    /// (client proxies `nX` and replication proxies `nX-repl`, see
    /// [`crate::topology::container`]); they are taken over as they are.
    ///
    /// # Errors
    /// As [`Topology::start_docker`]; Toxiproxy errors. On error every container and the
    /// network are removed.
    pub async fn start_docker(
        kind: TopologyKind,
        options: &LocalTopologyOptions,
        docker: &DockerOptions,
    ) -> Result<Self, TopologyError> {
        let topology = Topology::start_docker(
            kind,
            options.persistence,
            docker,
            &options.cluster,
            &options.key_prefix,
        )
        .await?;
        match Self::proxy_containers(topology).await {
            Ok(p) => Ok(p),
            Err((topology, e)) => {
                topology.shutdown().await;
                Err(e)
            }
        }
    }

    #[cfg(feature = "docker")]
    async fn proxy_containers(topology: Topology) -> Result<Self, (Topology, TopologyError)> {
        let Some(run) = topology.docker_run() else {
            let e = TopologyError::ProxyUnsupported {
                reason: "not a docker topology".into(),
            };
            return Err((topology, e));
        };
        let source = ToxiproxySource::External(run.api_url());
        let (_, api) = match connect_api(&source).await {
            Ok(x) => x,
            Err(e) => return Err((topology, e)),
        };
        let direct = topology.data_endpoints();
        if !run.created_proxies().is_empty() {
            // `sentinel`: the run created its proxies before the nodes started.
            let link = |p: &super::container::RunProxy| ProxyLink {
                node: p.node.clone(),
                proxy: p.proxy.clone(),
                listen: p.listen.clone(),
                upstream: p.upstream.clone(),
            };
            let (repl, clients): (Vec<_>, Vec<_>) = run
                .created_proxies()
                .iter()
                .partition(|p| p.proxy.ends_with("-repl"));
            return Ok(Self {
                clients: clients.into_iter().map(link).collect(),
                replication: repl.into_iter().map(link).collect(),
                topology,
                server: None,
                api,
                direct,
                per_client: Vec::new(),
            });
        }
        let mut clients = Vec::new();
        for node in topology.container_nodes() {
            let Some((inside, outside)) = run.proxy_addresses(node.name()) else {
                let e = TopologyError::ProxyTarget {
                    target: node.name().to_string(),
                    reason: "no proxy port was published for this node".into(),
                };
                return Err((topology, e));
            };
            let upstream = node.network_address();
            if let Err(e) = api.create_proxy(node.name(), &inside, &upstream).await {
                return Err((topology, e.into()));
            }
            clients.push(ProxyLink {
                node: node.name().to_string(),
                proxy: node.name().to_string(),
                listen: outside,
                upstream,
            });
        }
        Ok(Self {
            topology,
            server: None,
            api,
            clients,
            replication: Vec::new(),
            direct,
            per_client: Vec::new(),
        })
    }

    #[cfg(not(feature = "docker"))]
    async fn proxy_containers(topology: Topology) -> Result<Self, (Topology, TopologyError)> {
        let e = TopologyError::ProxyUnsupported {
            reason: "lockbench was built without the `docker` feature".into(),
        };
        Err((topology, e))
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
                        reason,
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
        self.direct
            .iter()
            .zip(&self.clients)
            .map(|(e, link)| {
                let (host, port) = split_addr(&link.listen).unwrap_or_default();
                let url = with_host_port(&e.url, &host, port).unwrap_or_else(|_| e.url.clone());
                NodeEndpoint::new(e.name.clone(), url).with_tls(e.tls.clone())
            })
            .collect()
    }

    /// The node's own endpoint, bypassing Toxiproxy (for the nemesis's admin commands).
    pub fn direct_endpoint(&self, node: &str) -> Option<&NodeEndpoint> {
        self.direct.iter().find(|e| e.name == node)
    }

    /// Data node names in order (`n1`, `n2`, …).
    pub fn node_names(&self) -> Vec<String> {
        self.direct.iter().map(|e| e.name.clone()).collect()
    }

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
    /// # Errors
    /// [`TopologyError::ProxyUnsupported`] on `sentinel` and `cluster` (their clients learn
    /// node addresses from the servers, which announce the shared proxies) and on the docker
    /// backend (its proxies listen on ports published when the containers started), or when
    /// client links were added already; Toxiproxy errors (the proxies created so far are
    /// removed).
    pub async fn add_client_links(&mut self, clients: u32) -> Result<(), TopologyError> {
        let unsupported = |reason: &str| TopologyError::ProxyUnsupported {
            reason: format!("per-client proxies: {reason}"),
        };
        if matches!(
            self.topology.kind(),
            TopologyKind::Sentinel | TopologyKind::Cluster
        ) {
            return Err(unsupported(
                "sentinel and cluster clients learn node addresses from the servers",
            ));
        }
        if self.topology.is_docker() {
            return Err(unsupported(
                "the docker backend's proxies listen on ports published at start",
            ));
        }
        if !self.per_client.is_empty() {
            return Err(unsupported("already added"));
        }
        let mut made: Vec<Vec<ProxyLink>> = Vec::new();
        for i in 0..clients {
            let mut own = Vec::new();
            for shared in &self.clients {
                let host = split_addr(&shared.listen)?.0;
                let name = format!("{}-c{i}", shared.proxy);
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
        self.per_client = made;
        Ok(())
    }

    /// Client `client`'s endpoints through its own proxies, in [`ProxiedTopology::endpoints`]'
    /// order (`None` without [`ProxiedTopology::add_client_links`] or for an unknown client).
    pub fn client_endpoints(&self, client: u32) -> Option<Vec<NodeEndpoint>> {
        let own = self.per_client.get(client as usize)?;
        Some(
            self.direct
                .iter()
                .zip(own)
                .map(|(e, link)| {
                    let (host, port) = split_addr(&link.listen).unwrap_or_default();
                    let url = with_host_port(&e.url, &host, port).unwrap_or_else(|_| e.url.clone());
                    NodeEndpoint::new(e.name.clone(), url).with_tls(e.tls.clone())
                })
                .collect(),
        )
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

    /// Every client proxy of `node`: the shared `nX`, then each client's `nX-cI`.
    pub fn client_proxies_of(&self, node: &str) -> Vec<String> {
        self.clients
            .iter()
            .chain(self.per_client.iter().flatten())
            .filter(|l| l.node == node)
            .map(|l| l.proxy.clone())
            .collect()
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
        let own = self.per_client.iter().flatten();
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
