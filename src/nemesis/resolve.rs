//! Target resolution: what a step's [`Target`] names in this topology, for every family — data
//! nodes (`minority`, `majority`, `all`, `primary`, `replica`, named nodes), clients
//! (`clients:…`, `holder`), a worker process (`worker:I`), and the proxies a network fault on
//! them acts on (the nodes' client proxies with every client's own, a replication, peer or
//! pooler→server link, a client's or a worker's own proxies).

use std::time::{Duration, Instant};

use super::process::WorkerProcess;
use super::{ClientControls, FaultStep, Link, Nemesis, NemesisError, Target};
use crate::topology::TopologyKind;

/// How long a `holder` target waits for some client to enter a critical section.
pub(crate) const HOLDER_WAIT: Duration = Duration::from_secs(5);

impl Nemesis {
    /// The data nodes a node target names.
    ///
    /// # Errors
    /// [`NemesisError::Target`] for client targets or unknown names.
    pub async fn resolve_nodes(&self, target: &Target) -> Result<Vec<String>, NemesisError> {
        let names = self.proxied.node_names();
        let n = names.len();
        let first = |k: usize| names.iter().take(k).cloned().collect::<Vec<_>>();
        Ok(match target {
            Target::Minority => first(n.saturating_sub(1) / 2),
            Target::Majority => first(n / 2 + 1),
            Target::AllNodes => names.clone(),
            Target::Primary => vec![self.proxied.primary().await?],
            Target::Nodes(list) => {
                let mut out = Vec::new();
                for x in list {
                    let name = if x == "primary" {
                        self.proxied.primary().await?
                    } else if x == super::step::REPLICA {
                        self.replica_of_primary().await?
                    } else if names.contains(x) {
                        x.clone()
                    } else {
                        return Err(NemesisError::Target {
                            target: x.clone(),
                            reason: format!("no such node (nodes: {})", names.join(", ")),
                        });
                    };
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
                out
            }
            Target::Clients(_) | Target::Holder | Target::Worker { .. } => {
                return Err(NemesisError::Target {
                    target: target.to_string(),
                    reason: "this fault targets nodes, not clients or workers".into(),
                })
            }
        })
    }

    /// The endpoint of `node` that bypasses its proxy.
    ///
    /// # Errors
    /// [`NemesisError::Target`] when there is no such node.
    pub(super) fn direct(&self, node: &str) -> Result<crate::node::NodeEndpoint, NemesisError> {
        self.proxied
            .direct_endpoint(node)
            .cloned()
            .ok_or_else(|| NemesisError::Target {
                target: node.to_string(),
                reason: format!(
                    "no such node (nodes: {})",
                    self.proxied.node_names().join(", ")
                ),
            })
    }

    /// The first replica of the shard `primary` serves (`cluster` only).
    pub(super) async fn replica_of(&self, primary: &str) -> Result<String, NemesisError> {
        if self.proxied.topology().kind() != TopologyKind::Cluster {
            return Err(NemesisError::Target {
                target: super::step::REPLICA.into(),
                reason: "only the cluster topology has a replica target".into(),
            });
        }
        let layout = self.proxied.topology().cluster_layout().await?;
        layout
            .iter()
            .find(|s| s.primary == primary)
            .and_then(|s| s.replicas.first())
            .cloned()
            .ok_or_else(|| NemesisError::Target {
                target: primary.to_string(),
                reason: "no live replica in its shard".into(),
            })
    }

    /// The first replica of the shard serving `r0`'s slot now (target `replica`).
    async fn replica_of_primary(&self) -> Result<String, NemesisError> {
        let primary = self.proxied.primary().await?;
        self.replica_of(&primary).await
    }

    /// The proxies a network fault on a node or worker target acts on, and the window's
    /// targets: a worker's own proxies ([`Nemesis::worker_proxies`]), or the target nodes'
    /// link proxies with, on the client link, every client's own proxies to them.
    ///
    /// # Errors
    /// As [`Nemesis::worker_proxies`] and [`Nemesis::resolve_nodes`]; a link the topology
    /// does not have.
    pub(super) async fn node_or_worker_proxies(
        &self,
        step: &FaultStep,
    ) -> Result<(Vec<String>, Vec<String>), NemesisError> {
        match &step.target {
            Target::Worker { .. } => self.worker_proxies(step).await,
            _ => {
                let nodes = self.resolve_nodes(&step.target).await?;
                let targets = self.link_proxies_for(&nodes, step.link.unwrap_or_default())?;
                Ok((self.with_own_links(&targets), targets))
            }
        }
    }

    /// Proxy names a network fault acts on: the targets' client proxies, or with
    /// `link = "replication"` / `"peer"` / `"server"` their replication, peer or pooler→server
    /// proxies.
    fn link_proxies_for(&self, nodes: &[String], link: Link) -> Result<Vec<String>, NemesisError> {
        if link == Link::Client {
            return Ok(nodes.to_vec());
        }
        let repl = self.proxied.replication_links();
        if link == Link::Server {
            let server: Vec<String> = repl
                .iter()
                .filter(|l| l.proxy.ends_with("-server") && nodes.contains(&l.node))
                .map(|l| l.proxy.clone())
                .collect();
            if server.is_empty() {
                return Err(NemesisError::Unsupported {
                    fault: "server link fault".into(),
                    reason: "only topology postgres with a pooler has a pooler→server proxy \
                             (`[pooler]` in a scenario, --pooler on run)"
                        .into(),
                });
            }
            return Ok(server);
        }
        let postgres = self.proxied.topology().kind() == TopologyKind::Postgres;
        let etcd = self.proxied.topology().kind() == TopologyKind::Etcd;
        if repl.is_empty() || postgres || etcd != (link == Link::Peer) {
            return Err(NemesisError::Unsupported {
                fault: format!("{} link fault", link.name()),
                reason: "only the sentinel and cluster topologies have replication proxies, and only the etcd \
                         topology has peer proxies"
                    .into(),
            });
        }
        if etcd {
            return Ok(repl
                .iter()
                .filter(|l| nodes.contains(&l.node))
                .map(|l| l.proxy.clone())
                .collect());
        }
        let primary_targeted = nodes.iter().any(|n| !repl.iter().any(|l| &l.node == n));
        Ok(repl
            .iter()
            .filter(|l| primary_targeted || nodes.contains(&l.node))
            .map(|l| l.proxy.clone())
            .collect())
    }

    /// `proxies` with each shared client proxy (`nX`) followed by the clients' own proxies to
    /// that node (`nX-cI`, when they have them): a node's network fault reaches every client.
    /// The window keeps naming `nX` alone.
    fn with_own_links(&self, proxies: &[String]) -> Vec<String> {
        proxies
            .iter()
            .flat_map(
                |p| match self.proxied.client_links().iter().find(|l| &l.proxy == p) {
                    Some(shared) => self.proxied.client_proxies_of(&shared.node),
                    None => vec![p.clone()],
                },
            )
            .collect()
    }

    /// A partition of clients: the target clients' own proxies to every node
    /// ([`crate::topology::ProxiedTopology::add_client_links`]), and the window's targets
    /// (`client:3`).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the clients have no proxies of their own or `link`
    /// is not the client link; as [`resolve_clients`].
    pub(super) async fn own_proxies_of_clients(
        &self,
        step: &FaultStep,
        controls: &ClientControls,
    ) -> Result<(Vec<String>, Vec<String>), NemesisError> {
        let unsupported = |reason: String| NemesisError::Unsupported {
            fault: "partition of clients".into(),
            reason,
        };
        if step.link.unwrap_or_default() != Link::Client {
            return Err(unsupported(
                "a client is cut off on its own client links only (leave `link` unset)".into(),
            ));
        }
        let ids = resolve_clients(&step.target, controls).await?;
        let mut proxies = Vec::new();
        for &i in &ids {
            let own = self.proxied.links_of_client(i);
            if own.is_empty() {
                return Err(unsupported(format!(
                    "client {i} has no proxies of its own ({} clients have)",
                    self.proxied.client_link_count()
                )));
            }
            proxies.extend(own.iter().map(|l| l.proxy.clone()));
        }
        let names = ids.iter().map(|i| format!("client:{i}")).collect();
        Ok((proxies, names))
    }

    /// The worker a `worker:I` target names, and the window's targets: the target as written,
    /// then the worker's clients (`client:4`, …), so the checker ties the window to them.
    pub(super) fn worker_of(
        &self,
        step: &FaultStep,
    ) -> Result<(u32, WorkerProcess, Vec<String>), NemesisError> {
        let Target::Worker { worker, .. } = &step.target else {
            return Err(NemesisError::Target {
                target: step.target.to_string(),
                reason: "not a worker target".into(),
            });
        };
        let w =
            self.workers
                .get(*worker as usize)
                .cloned()
                .ok_or_else(|| NemesisError::Target {
                    target: step.target.to_string(),
                    reason: format!(
                        "no such worker (this run has {} worker process(es))",
                        self.workers.len()
                    ),
                })?;
        let mut targets = vec![step.target.to_string()];
        targets.extend((w.first_client..w.first_client + w.clients).map(|c| format!("client:{c}")));
        Ok((*worker, w, targets))
    }

    /// A network fault on a worker's own proxies (`nX-wI`) to the nodes after `/` (every node
    /// without), and the window's targets ([`Nemesis::worker_of`]).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the worker has no proxies of its own or `link` is
    /// not the client link; node targets as [`Nemesis::resolve_nodes`].
    async fn worker_proxies(
        &self,
        step: &FaultStep,
    ) -> Result<(Vec<String>, Vec<String>), NemesisError> {
        let (worker, _, targets) = self.worker_of(step)?;
        if step.link.unwrap_or_default() != Link::Client {
            return Err(NemesisError::Unsupported {
                fault: format!("{} {}", step.fault, step.target),
                reason: "a worker is cut off on its own client links only (leave `link` unset)"
                    .into(),
            });
        }
        let nodes = match &step.target {
            Target::Worker {
                nodes: Some(nodes), ..
            } => self.resolve_nodes(nodes).await?,
            _ => self.proxied.node_names(),
        };
        let proxies: Vec<String> = self
            .proxied
            .links_of_worker(worker)
            .iter()
            .filter(|l| nodes.contains(&l.node))
            .map(|l| l.proxy.clone())
            .collect();
        if proxies.is_empty() {
            return Err(NemesisError::Unsupported {
                fault: format!("{} {}", step.fault, step.target),
                reason: format!("worker {worker} has no proxies of its own"),
            });
        }
        Ok((proxies, targets))
    }
}

/// The clients a client target names: `clients:…` as given, `holder` = the clients inside a
/// critical section now (or the first to enter one, [`wait_for_holder`]).
///
/// # Errors
/// [`NemesisError::Target`] for a node target or a client that does not exist;
/// [`NemesisError::Timeout`] when no client held a lease in time.
pub(super) async fn resolve_clients(
    target: &Target,
    controls: &ClientControls,
) -> Result<Vec<u32>, NemesisError> {
    let ids = match target {
        Target::Clients(ids) => ids.clone(),
        Target::Holder => wait_for_holder(controls).await?,
        other => {
            return Err(NemesisError::Target {
                target: format!("{other:?}"),
                reason: "client faults target clients (`clients:0,1`, `holder`)".into(),
            })
        }
    };
    if let Some(bad) = ids.iter().find(|&&i| i as usize >= controls.len()) {
        return Err(NemesisError::Target {
            target: format!("client:{bad}"),
            reason: format!("no such client (clients are 0..{})", controls.len()),
        });
    }
    Ok(ids)
}

/// The clients inside a critical section now; if none, polls every millisecond until one
/// enters (at most [`HOLDER_WAIT`]).
///
/// # Errors
/// [`NemesisError::Timeout`] when no client held a lease within [`HOLDER_WAIT`].
async fn wait_for_holder(controls: &ClientControls) -> Result<Vec<u32>, NemesisError> {
    let deadline = Instant::now() + HOLDER_WAIT;
    loop {
        let inside = controls.inside();
        if !inside.is_empty() {
            return Ok(inside);
        }
        if Instant::now() >= deadline {
            return Err(NemesisError::Timeout {
                what: "a client inside a critical section (target `holder`)".into(),
                waited_ms: HOLDER_WAIT.as_millis(),
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
