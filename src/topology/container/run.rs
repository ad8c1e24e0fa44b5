//! The containers of one docker run besides the nodes: the network and the Toxiproxy
//! container, opened and removed together.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use testcontainers::bollard::models::NetworkCreateRequest;
use testcontainers::bollard::Docker;
use testcontainers::{ContainerAsync, GenericImage};

use super::{connect, docker_err, ensure_image};
use crate::topology::docker::{self, DockerOptions, RUN_LABEL};
use crate::topology::ports::pick_free_port;
use crate::topology::TopologyError;

/// The containers of one docker run besides the nodes: the Toxiproxy container and the
/// network. Call [`DockerRun::remove`] after the nodes are removed.
pub struct DockerRun {
    pub(super) options: DockerOptions,
    pub(super) docker: Docker,
    pub(super) toxiproxy: Option<ContainerAsync<GenericImage>>,
    pub(super) api_port: u16,
    /// Node name → (port inside the Toxiproxy container, host port).
    pub(super) proxy_ports: Vec<(String, u16, u16)>,
    /// Proxies the run created itself (`sentinel`: they must exist before the nodes start).
    pub(super) links: Vec<RunProxy>,
}

/// A proxy that [`super::start_sentinel_run`] created in the run's Toxiproxy container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunProxy {
    /// The data node it leads to (client proxy `nX`) or the replica it serves (`nX-repl`).
    pub node: String,
    /// Proxy name (`n1`, `n2-repl`).
    pub proxy: String,
    /// `127.0.0.1:<port>`: where it listens, the same address inside the run's shared
    /// namespace and on the host (client proxies are published 1:1; replication proxies are
    /// not published and only reachable inside).
    pub listen: String,
    /// `127.0.0.1:<port>` of the node it forwards to, inside the namespace.
    pub upstream: String,
}

impl std::fmt::Debug for DockerRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRun")
            .field("tag", &self.options.run_tag)
            .field("api_port", &self.api_port)
            .field("proxy_ports", &self.proxy_ports)
            .finish()
    }
}

impl DockerRun {
    /// The run's tag (prefix of every name).
    pub fn tag(&self) -> &str {
        &self.options.run_tag
    }

    /// `http://127.0.0.1:<port>`: the Toxiproxy API of this run.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    /// For node `nX`: the address proxy `nX` listens on inside the Toxiproxy container
    /// (`0.0.0.0:2000X`) and where clients reach it (`127.0.0.1:<host port>`).
    pub fn proxy_addresses(&self, node: &str) -> Option<(String, String)> {
        self.proxy_ports
            .iter()
            .find(|(n, _, _)| n == node)
            .map(|(_, inner, host)| (format!("0.0.0.0:{inner}"), format!("127.0.0.1:{host}")))
    }

    /// Removes the Toxiproxy container (errors logged, the name left to the last-resort
    /// cleanup).
    pub(super) async fn remove_toxiproxy(&mut self) {
        if let Some(c) = self.toxiproxy.take() {
            let name = self.options.toxiproxy_container_name();
            match c.rm().await {
                Ok(()) => docker::unregister_container(&name),
                Err(e) => tracing::warn!("removing container {name}: {e}"),
            }
        }
    }

    /// Proxies the run created itself ([`super::start_sentinel_run`]); empty for `single` and `five`,
    /// whose proxies the caller creates.
    pub fn created_proxies(&self) -> &[RunProxy] {
        &self.links
    }

    /// Removes the Toxiproxy container, then the network. Errors are logged; the names are
    /// then left to the last-resort cleanup ([`docker::remove_all_blocking`]).
    pub async fn remove(&mut self) {
        self.remove_toxiproxy().await;
        let net = self.options.network_name();
        match self.docker.remove_network(&net).await {
            Ok(()) => docker::unregister_network(&net),
            Err(e) => tracing::warn!("removing network {net}: {e}"),
        }
    }
}

/// Connects to the engine, checks both images and creates the run's network.
pub(super) async fn open_run(options: &DockerOptions) -> Result<DockerRun, TopologyError> {
    let docker = connect().await?;
    ensure_image(&docker, &options.redis_image).await?;
    ensure_image(&docker, &options.toxiproxy_image).await?;
    let net = options.network_name();
    docker::register_network(&net);
    let created = docker
        .create_network(NetworkCreateRequest {
            name: net.clone(),
            driver: Some("bridge".into()),
            labels: Some(HashMap::from([(
                RUN_LABEL.to_string(),
                options.run_tag.clone(),
            )])),
            ..Default::default()
        })
        .await;
    if let Err(e) = created {
        docker::unregister_network(&net);
        return Err(docker_err(format!("creating network {net}"), e));
    }
    Ok(DockerRun {
        options: options.clone(),
        docker,
        toxiproxy: None,
        api_port: 0,
        proxy_ports: Vec::new(),
        links: Vec::new(),
    })
}

/// Polls `GET /version` on the run's Toxiproxy API until it answers (bounded).
pub(super) async fn wait_api(run: &DockerRun, limit: Duration) -> Result<(), TopologyError> {
    let api = crate::toxiproxy::ToxiproxyClient::new(&run.api_url())
        .map_err(|e| docker_err("toxiproxy API client", e))?;
    let began = Instant::now();
    loop {
        let last = match api.version().await {
            Ok(_) => return Ok(()),
            Err(e) => e.to_string(),
        };
        if began.elapsed() >= limit {
            let logs = match &run.toxiproxy {
                Some(c) => {
                    let mut v = c.stdout_to_vec().await.unwrap_or_default();
                    v.extend(c.stderr_to_vec().await.unwrap_or_default());
                    String::from_utf8_lossy(&v).into_owned()
                }
                None => String::new(),
            };
            return Err(TopologyError::Docker {
                context: format!(
                    "container {} ({})",
                    run.options.toxiproxy_container_name(),
                    run.options.toxiproxy_image
                ),
                reason: format!(
                    "its Toxiproxy API did not answer on {} within {} ms (last error: {last}); \
                     container output:\n{logs}",
                    run.api_url(),
                    limit.as_millis()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `k` free host ports.
pub(super) fn free_ports(k: usize) -> Result<Vec<u16>, TopologyError> {
    (0..k).map(|_| pick_free_port()).collect()
}
