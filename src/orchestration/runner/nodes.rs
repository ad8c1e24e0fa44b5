//! The servers of a running test: started (behind the proxies unless direct, each worker
//! with links of its own where the topology allows), asked for their addresses, and torn
//! down (every fault healed, every proxy and process gone).

use std::sync::Arc;

use tokio::sync::Mutex;

use super::{Backend, Progress, RunError, Runner};
use crate::nemesis::{FaultStep, Nemesis, NemesisError, Target};
use crate::node::NodeEndpoint;
use crate::orchestration::test::Test;
use crate::orchestration::workers::coordinator::WorkersPlan;
use crate::orchestration::workers::faults::WorkerFaults;
use crate::results::{LiveMetrics, RunDir};
use crate::topology::{
    LocalTopologyOptions, ProxiedTopology, ProxyOptions, ShardLayout, Topology, TopologyError,
    TopologyKind,
};

/// The servers of a running test: behind the proxies (with the nemesis that owns them), or
/// reached directly.
pub(super) enum Nodes {
    Direct(Box<Topology>),
    Proxied(Arc<Mutex<Nemesis>>),
}

impl Nodes {
    /// Where the clients connect (the proxies unless direct).
    pub(super) async fn endpoints(&self) -> Vec<NodeEndpoint> {
        match self {
            Nodes::Direct(t) => t.endpoints(),
            Nodes::Proxied(n) => n.lock().await.proxied().endpoints(),
        }
    }

    /// Each client's own proxies, when a step cuts clients off (see [`Runner::start`]);
    /// empty otherwise.
    pub(super) async fn client_endpoints(&self) -> Vec<Vec<NodeEndpoint>> {
        match self {
            Nodes::Proxied(n) => {
                let nem = n.lock().await;
                let p = nem.proxied();
                (0..p.client_link_count())
                    .filter_map(|i| p.client_endpoints(i))
                    .collect()
            }
            Nodes::Direct(_) => Vec::new(),
        }
    }

    /// With `live` metrics on, the embedded proxies' bytes, read at every scrape while this
    /// test runs: the metrics and the watch's id (for `unwatch_traffic`).
    pub(super) async fn watch_traffic<'a>(
        &self,
        live: Option<&'a LiveMetrics>,
    ) -> Option<(&'a LiveMetrics, u64)> {
        match (live, self) {
            (Some(live), Nodes::Proxied(n)) => {
                let probe = n.lock().await.proxied().traffic_probe();
                match probe {
                    Some(p) => Some((live, live.watch_traffic(p).await)),
                    None => None,
                }
            }
            _ => None,
        }
    }

    /// The cluster's shards as the nodes see them now.
    ///
    /// # Errors
    /// [`TopologyError`] when the layout cannot be read.
    pub(super) async fn cluster_layout(&self) -> Result<Vec<ShardLayout>, TopologyError> {
        match self {
            Nodes::Direct(t) => t.cluster_layout().await,
            Nodes::Proxied(n) => n.lock().await.proxied().topology().cluster_layout().await,
        }
    }

    /// Tears down whatever happened: heals every fault, removes the proxies, stops every
    /// process. Every schedule hook must have finished.
    ///
    /// # Errors
    /// The heal's [`NemesisError`] (the rest is torn down all the same).
    pub(super) async fn tear_down(self) -> Result<(), NemesisError> {
        match self {
            Nodes::Direct(t) => {
                t.shutdown().await;
                Ok(())
            }
            Nodes::Proxied(nemesis) => {
                let mut nem = match Arc::try_unwrap(nemesis) {
                    Ok(m) => m.into_inner(),
                    Err(_) => unreachable!("every schedule hook has finished"),
                };
                let healed = nem.heal_all(|_| {}).await;
                nem.into_proxied().shutdown().await;
                healed
            }
        }
    }
}

impl Runner {
    /// Starts the topology: external nodes reached (and proxied unless direct), local nodes
    /// started (processes or containers), behind the proxies unless direct; with workers,
    /// each worker gets proxies of its own (`nX-wI`) where the topology allows them.
    pub(super) async fn start(
        &self,
        test: &Test,
        backend: &Backend,
        dir: &RunDir,
        plan: Option<&WorkersPlan>,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<Nodes, RunError> {
        let topology_err = |source| RunError::Topology {
            test: test.name.clone(),
            source,
        };
        let spec = &test.topology;
        let local = LocalTopologyOptions {
            persistence: spec.persistence,
            key_prefix: spec.key_prefix.clone(),
            pooler: spec.pooler,
            pg_settings: spec.pg_settings.clone(),
            cluster: spec.cluster.unwrap_or_default(),
            ..LocalTopologyOptions::new(dir.file("nodes"))
        };
        // Workers on other hosts reach the proxies by this host's name: they listen on every
        // address then (the `kubernetes` launcher).
        let proxy_options = match self.workers.as_ref().and_then(|w| w.launcher.worker_host()) {
            Some(_) => ProxyOptions {
                listen_host: "0.0.0.0".into(),
                ..ProxyOptions::default()
            },
            None => ProxyOptions::default(),
        };
        let proxied = match (spec.kind, spec.direct, backend) {
            (TopologyKind::External, direct, _) => {
                let tls = spec
                    .tls
                    .load()
                    .map_err(|e| topology_err(TopologyError::from(e)))?;
                let t = if spec.cluster_seeds.is_empty() {
                    Topology::external_with_tls(
                        &spec.urls,
                        &spec.key_prefix,
                        &test.client.connect,
                        tls,
                    )
                    .await
                } else {
                    Topology::external_cluster(
                        &spec.cluster_seeds,
                        &spec.key_prefix,
                        &test.client.connect,
                        tls,
                    )
                    .await
                }
                .map_err(topology_err)?;
                if direct {
                    return Ok(Nodes::Direct(Box::new(t)));
                }
                ProxiedTopology::wrap(t, &proxy_options).await
            }
            (kind, true, _) => {
                return Topology::start_local(kind, &local)
                    .await
                    .map(|t| Nodes::Direct(Box::new(t)))
                    .map_err(topology_err)
            }
            (kind, false, Backend::Local) => {
                ProxiedTopology::start(kind, &local, &proxy_options).await
            }
            (kind, false, Backend::Docker(options)) => {
                let mut options = options.clone();
                options.run_tag = crate::topology::docker::run_tag(dir.run_id());
                progress(Progress::Containers(&options.run_tag));
                ProxiedTopology::start_docker(kind, &local, &options).await
            }
        };
        let mut proxied = proxied.map_err(topology_err)?;
        // A partition of clients cuts them off through proxies of their own (a shared
        // connection has none to cut: its steps fail naming that).
        if test.nemesis.iter().any(FaultStep::cuts_clients) && !test.workload.shared_connection {
            if let Err(e) = proxied.add_client_links(test.workload.clients).await {
                proxied.shutdown().await;
                return Err(topology_err(e));
            }
        }
        // Workers of their own links, so that one worker can be cut off and another not. A
        // topology that cannot give them (docker) runs without them when no step needs them.
        if let Some(plan) = plan {
            let needed = test
                .nemesis
                .iter()
                .any(|s| matches!(s.target, Target::Worker { .. }));
            if let Err(e) = proxied.add_worker_links(plan.workers).await {
                if needed {
                    proxied.shutdown().await;
                    return Err(topology_err(e));
                }
                tracing::info!("{}: workers share the node proxies ({e})", test.name);
            }
        }
        Ok(Nodes::Proxied(Arc::new(Mutex::new(Nemesis::new(proxied)))))
    }
}

impl Nodes {
    /// Each worker's endpoints (its own proxies when every worker has them, else `shared` for
    /// all) and, behind the proxies with a schedule, the faults the workers' runs share.
    pub(super) async fn worker_endpoints(
        &self,
        plan: &WorkersPlan,
        test: &Test,
        shared: &[NodeEndpoint],
    ) -> (Vec<Vec<NodeEndpoint>>, Option<WorkerFaults>) {
        match self {
            Nodes::Proxied(n) => {
                let nem = n.lock().await;
                let own: Option<Vec<Vec<NodeEndpoint>>> = (0..plan.workers)
                    .map(|i| nem.proxied().worker_endpoints(i))
                    .collect();
                let faults = (!test.nemesis.is_empty()).then(|| WorkerFaults {
                    nemesis: n.clone(),
                    steps: test.nemesis.clone(),
                });
                (own.unwrap_or_else(|| vec![shared.to_vec()]), faults)
            }
            Nodes::Direct(_) => (vec![shared.to_vec()], None),
        }
    }
}
