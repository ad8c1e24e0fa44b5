//! `--backend docker`: the nodes and Toxiproxy as containers of one run, proxies inside the
//! Toxiproxy container.

use super::{connect_api, ProxiedTopology, ProxyLink, ToxiproxySource};
use crate::topology::{DockerOptions, LocalTopologyOptions, Topology, TopologyError, TopologyKind};

impl ProxiedTopology {
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
            let link = |p: &crate::topology::container::RunProxy| ProxyLink {
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
                per_worker: Vec::new(),
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
            per_worker: Vec::new(),
        })
    }

    #[cfg(not(feature = "docker"))]
    async fn proxy_containers(topology: Topology) -> Result<Self, (Topology, TopologyError)> {
        let e = TopologyError::ProxyUnsupported {
            reason: "lockbench was built without the `docker` feature".into(),
        };
        Err((topology, e))
    }
}
