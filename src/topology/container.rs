//! Redis nodes and Toxiproxy as Docker containers, started through testcontainers (the
//! `docker` cargo feature). Names, images and the last-resort cleanup are in [`super::docker`].
//!
//! Layout of one run (tag `lb-<run id>-<hex>`):
//!
//! | what | container | inside the network | on the host |
//! |---|---|---|---|
//! | node `nX` | `<tag>-nX` | `<tag>-nX:6379` | `127.0.0.1:<free port>` (direct, for the nemesis) |
//! | Toxiproxy API | `<tag>-toxiproxy` | `:8474` | `127.0.0.1:<free port>` |
//! | proxy `nX` | `<tag>-toxiproxy` | listens on `0.0.0.0:2000X`, upstream `<tag>-nX:6379` | `127.0.0.1:<free port>` (clients) |
//!
//! Host ports are picked free before the container is created and bound to 127.0.0.1 only,
//! so they stay the same across a stop and start (a kill and restart). A node's data lives in
//! the container's own filesystem (`/data`): a restart brings it back with AOF always and
//! empty without persistence, as for local nodes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use testcontainers::bollard::models::{HostConfig, NetworkCreateRequest, PortBinding};
use testcontainers::bollard::query_parameters::KillContainerOptionsBuilder;
use testcontainers::bollard::Docker;
use testcontainers::core::{ContainerPort, ImageExt};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage};

use super::docker::{self, split_image, DockerOptions, RUN_LABEL};
use super::local::ping;
use super::ports::pick_free_port;
use super::{Persistence, TopologyError};
use crate::node::{ConnectOptions, NodeEndpoint};

/// Port Redis listens on inside its container.
pub const REDIS_PORT: u16 = 6379;
/// Port of the Toxiproxy API inside its container.
pub const TOXIPROXY_API_PORT: u16 = 8474;
/// Proxy `nX` listens on `PROXY_PORT_BASE + X` inside the Toxiproxy container.
pub const PROXY_PORT_BASE: u16 = 20000;

fn docker_err(context: impl Into<String>, e: impl std::fmt::Display) -> TopologyError {
    TopologyError::Docker {
        context: context.into(),
        reason: e.to_string(),
    }
}

/// A Docker API client (version negotiated with the engine).
///
/// # Errors
/// [`TopologyError::DockerUnavailable`] when no engine answers.
pub async fn connect() -> Result<Docker, TopologyError> {
    let unavailable = |e: &dyn std::fmt::Display| TopologyError::DockerUnavailable {
        reason: e.to_string(),
    };
    let docker = Docker::connect_with_defaults().map_err(|e| unavailable(&e))?;
    let docker = docker
        .negotiate_version()
        .await
        .map_err(|e| unavailable(&e))?;
    docker.ping().await.map_err(|e| unavailable(&e))?;
    Ok(docker)
}

/// Checks that `image` is present locally (these machines cannot pull).
///
/// # Errors
/// [`TopologyError::DockerImageMissing`] naming the image and `docker/build-images.sh`.
pub async fn ensure_image(docker: &Docker, image: &str) -> Result<(), TopologyError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(()),
        Err(testcontainers::bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }) => Err(TopologyError::DockerImageMissing {
            image: image.to_string(),
        }),
        Err(e) => Err(docker_err(format!("inspecting image {image}"), e)),
    }
}

/// Binds every published port to 127.0.0.1 (testcontainers binds 0.0.0.0).
fn loopback_only(ports: Vec<(u16, u16)>) -> impl Fn(&mut HostConfig) + Send + Sync + 'static {
    move |hc: &mut HostConfig| {
        let bindings: HashMap<String, Option<Vec<PortBinding>>> = ports
            .iter()
            .map(|(host, inner)| {
                (
                    format!("{inner}/tcp"),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(host.to_string()),
                    }]),
                )
            })
            .collect();
        hc.port_bindings = Some(bindings);
        hc.publish_all_ports = Some(false);
    }
}

/// Creates and starts one container; registers its name first for the last-resort cleanup.
///
/// `ports` maps host ports to container ports. Host ports are picked free just before, so
/// another process can take one in between ("port is already allocated"): then fresh host
/// ports are picked and the start is retried (3 tries). Returns the container and the host
/// ports it really got, in the order given.
async fn start_container(
    image: &str,
    name: &str,
    options: &DockerOptions,
    cmd: Vec<String>,
    mut ports: Vec<(u16, u16)>,
) -> Result<(ContainerAsync<GenericImage>, Vec<(u16, u16)>), TopologyError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match start_container_once(image, name, options, cmd.clone(), ports.clone()).await {
            Ok(c) => return Ok((c, ports)),
            Err(e) if tries < 3 && e.to_string().contains("port is already allocated") => {
                for (host, _) in &mut ports {
                    *host = pick_free_port()?;
                }
            }
            Err(e) => return Err(e),
        }
    }
}

async fn start_container_once(
    image: &str,
    name: &str,
    options: &DockerOptions,
    cmd: Vec<String>,
    ports: Vec<(u16, u16)>,
) -> Result<ContainerAsync<GenericImage>, TopologyError> {
    let (repo, tag) = split_image(image);
    let mut generic = GenericImage::new(repo, tag);
    for (_, inner) in &ports {
        generic = generic.with_exposed_port(ContainerPort::Tcp(*inner));
    }
    let mut request = generic
        .with_cmd(cmd)
        .with_container_name(name)
        .with_network(options.network_name())
        .with_label(RUN_LABEL, &options.run_tag)
        .with_startup_timeout(options.start_timeout);
    for (host, inner) in &ports {
        request = request.with_mapped_port(*host, ContainerPort::Tcp(*inner));
    }
    let request = request.with_host_config_modifier(loopback_only(ports));
    docker::register_container(name);
    match request.start().await {
        Ok(c) => Ok(c),
        Err(e) => {
            let names = [name.to_string()];
            tokio::task::spawn_blocking(move || docker::remove_blocking(&names, &[]))
                .await
                .ok();
            Err(docker_err(
                format!("starting container {name} ({image})"),
                e,
            ))
        }
    }
}

/// One Redis node in a container. Dropping it removes the container (testcontainers' `Drop`);
/// prefer [`ContainerNode::remove`].
pub struct ContainerNode {
    name: String,
    container_name: String,
    container: Option<ContainerAsync<GenericImage>>,
    docker: Docker,
    host_port: u16,
    persistence: Persistence,
    start_timeout: Duration,
    running: bool,
    paused: bool,
}

impl std::fmt::Debug for ContainerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerNode")
            .field("name", &self.name)
            .field("container", &self.container_name)
            .field("host_port", &self.host_port)
            .field("running", &self.running)
            .field("paused", &self.paused)
            .finish()
    }
}

impl ContainerNode {
    /// Starts node `name` in container `<tag>-<name>` on the run's network and waits for PING
    /// on its host port.
    ///
    /// # Errors
    /// [`TopologyError::Docker`] (create/start failed) or [`TopologyError::NodeStart`] (no
    /// PING within the start timeout); the container is removed on error.
    pub async fn start(
        docker: &Docker,
        name: &str,
        persistence: Persistence,
        options: &DockerOptions,
    ) -> Result<Self, TopologyError> {
        let host_port = pick_free_port()?;
        let container_name = options.node_container_name(name);
        let aof = match persistence {
            Persistence::None => "no",
            Persistence::AofAlways => "yes",
        };
        let cmd = [
            "redis-server",
            "--port",
            "6379",
            "--protected-mode",
            "no",
            "--save",
            "",
            "--appendonly",
            aof,
            "--appendfsync",
            "always",
        ]
        .map(String::from)
        .to_vec();
        let (container, ports) = start_container(
            &options.redis_image,
            &container_name,
            options,
            cmd,
            vec![(host_port, REDIS_PORT)],
        )
        .await?;
        let host_port = ports[0].0;
        let mut node = Self {
            name: name.to_string(),
            container_name,
            container: Some(container),
            docker: docker.clone(),
            host_port,
            persistence,
            start_timeout: options.start_timeout,
            running: true,
            paused: false,
        };
        if let Err(e) = node.wait_ready().await {
            node.remove().await;
            return Err(e);
        }
        Ok(node)
    }

    /// Node name (`n1`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Container name (`<tag>-n1`).
    pub fn container_name(&self) -> &str {
        &self.container_name
    }

    /// Where the node answers on the host, bypassing Toxiproxy: `redis://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> NodeEndpoint {
        NodeEndpoint::new(&self.name, format!("redis://127.0.0.1:{}", self.host_port))
    }

    /// `<container name>:6379`, the address inside the run's network.
    pub fn network_address(&self) -> String {
        format!("{}:{REDIS_PORT}", self.container_name)
    }

    /// The node's persistence mode.
    pub fn persistence(&self) -> Persistence {
        self.persistence
    }

    /// True between [`pause`](Self::pause) and [`resume`](Self::resume).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Asks the engine whether the container runs (a paused one counts as running).
    pub async fn is_running(&mut self) -> bool {
        let running = match &self.container {
            Some(c) => c.is_running().await.unwrap_or(false),
            None => false,
        };
        if !running {
            self.paused = false;
        }
        self.running = running;
        running
    }

    fn container(&self, op: &'static str) -> Result<&ContainerAsync<GenericImage>, TopologyError> {
        self.container.as_ref().ok_or(TopologyError::NotRunning {
            node: self.name.clone(),
            op,
        })
    }

    /// `docker kill` (SIGKILL): no shutdown, no final fsync; the container and its filesystem
    /// stay for [`restart`](Self::restart).
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] when already killed; [`TopologyError::Docker`].
    pub async fn kill(&mut self) -> Result<(), TopologyError> {
        let id = self.container("kill")?.id().to_string();
        if !self.running {
            return Err(TopologyError::NotRunning {
                node: self.name.clone(),
                op: "kill",
            });
        }
        if let Err(e) = self.kill_signal(&id).await {
            if !self.paused {
                return Err(e);
            }
            // An engine that refuses to kill a frozen container: thaw it, then kill.
            self.container("kill")?
                .unpause()
                .await
                .map_err(|e| docker_err(format!("docker unpause {}", self.container_name), e))?;
            self.kill_signal(&id).await?;
        }
        self.wait_exited().await?;
        self.running = false;
        self.paused = false;
        Ok(())
    }

    async fn kill_signal(&self, id: &str) -> Result<(), TopologyError> {
        let opts = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
        self.docker
            .kill_container(id, Some(opts))
            .await
            .map_err(|e| docker_err(format!("docker kill {}", self.container_name), e))
    }

    async fn wait_exited(&self) -> Result<(), TopologyError> {
        let c = self.container("kill")?;
        let began = Instant::now();
        loop {
            if !c.is_running().await.unwrap_or(false) {
                return Ok(());
            }
            if began.elapsed() > Duration::from_secs(10) {
                return Err(TopologyError::Docker {
                    context: format!("docker kill {}", self.container_name),
                    reason: "still running 10 s after SIGKILL".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts the container again (same host port, same filesystem) and waits for PING.
    /// A running container is killed first.
    ///
    /// # Errors
    /// [`TopologyError::Docker`], [`TopologyError::NodeStart`].
    pub async fn restart(&mut self) -> Result<(), TopologyError> {
        if self.is_running().await {
            self.kill().await?;
        }
        self.container("restart")?
            .start()
            .await
            .map_err(|e| docker_err(format!("docker start {}", self.container_name), e))?;
        self.running = true;
        self.paused = false;
        self.wait_ready().await
    }

    /// `docker pause` (cgroup freezer, like SIGSTOP): connections stay open, nothing answers.
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`], [`TopologyError::Docker`].
    pub async fn pause(&mut self) -> Result<(), TopologyError> {
        if !self.running {
            return Err(TopologyError::NotRunning {
                node: self.name.clone(),
                op: "pause",
            });
        }
        self.container("pause")?
            .pause()
            .await
            .map_err(|e| docker_err(format!("docker pause {}", self.container_name), e))?;
        self.paused = true;
        Ok(())
    }

    /// `docker unpause` after [`pause`](Self::pause).
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`], [`TopologyError::Docker`].
    pub async fn resume(&mut self) -> Result<(), TopologyError> {
        self.container("resume")?
            .unpause()
            .await
            .map_err(|e| docker_err(format!("docker unpause {}", self.container_name), e))?;
        self.paused = false;
        Ok(())
    }

    /// Removes the container (`docker rm -f -v`); errors are logged and the name is left to
    /// the last-resort cleanup.
    pub async fn remove(&mut self) {
        if let Some(c) = self.container.take() {
            match c.rm().await {
                Ok(()) => docker::unregister_container(&self.container_name),
                Err(e) => tracing::warn!("removing container {}: {e}", self.container_name),
            }
        }
        self.running = false;
        self.paused = false;
    }

    async fn wait_ready(&mut self) -> Result<(), TopologyError> {
        let endpoint = self.endpoint();
        let probe = ConnectOptions {
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_millis(500),
        };
        let began = Instant::now();
        loop {
            let last = match ping(&endpoint, &probe).await {
                Ok(()) => return Ok(()),
                Err(e) => e.to_string(),
            };
            if began.elapsed() >= self.start_timeout {
                return Err(TopologyError::NodeStart {
                    node: self.name.clone(),
                    port: self.host_port,
                    reason: format!(
                        "container {} did not answer PING within {} ms (last error: {last})",
                        self.container_name,
                        self.start_timeout.as_millis()
                    ),
                    log_path: format!("docker logs {}", self.container_name).into(),
                    log_tail: self.log_tail().await,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn log_tail(&self) -> String {
        let Some(c) = &self.container else {
            return String::new();
        };
        let out = c.stdout_to_vec().await.unwrap_or_default();
        let err = c.stderr_to_vec().await.unwrap_or_default();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        );
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

/// The containers of one docker run besides the nodes: the Toxiproxy container and the
/// network. Call [`DockerRun::remove`] after the nodes are removed.
pub struct DockerRun {
    options: DockerOptions,
    docker: Docker,
    toxiproxy: Option<ContainerAsync<GenericImage>>,
    api_port: u16,
    /// Node name → (port inside the Toxiproxy container, host port).
    proxy_ports: Vec<(String, u16, u16)>,
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

    /// Removes the Toxiproxy container, then the network. Errors are logged; the names are
    /// then left to the last-resort cleanup ([`docker::remove_all_blocking`]).
    pub async fn remove(&mut self) {
        if let Some(c) = self.toxiproxy.take() {
            let name = self.options.toxiproxy_container_name();
            match c.rm().await {
                Ok(()) => docker::unregister_container(&name),
                Err(e) => tracing::warn!("removing container {name}: {e}"),
            }
        }
        let net = self.options.network_name();
        match self.docker.remove_network(&net).await {
            Ok(()) => docker::unregister_network(&net),
            Err(e) => tracing::warn!("removing network {net}: {e}"),
        }
    }
}

/// Starts a docker run: checks both images, creates the network, starts `nodes` Redis
/// containers (`n1`..) and the Toxiproxy container concurrently, and waits until every node
/// answers PING and the Toxiproxy API answers.
///
/// # Errors
/// [`TopologyError::DockerUnavailable`], [`TopologyError::DockerImageMissing`],
/// [`TopologyError::Docker`], [`TopologyError::NodeStart`]. On error nothing of the run is
/// left (containers and network removed).
pub async fn start_run(
    nodes: usize,
    persistence: Persistence,
    options: &DockerOptions,
) -> Result<(Vec<ContainerNode>, DockerRun), TopologyError> {
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
    let mut run = DockerRun {
        options: options.clone(),
        docker: docker.clone(),
        toxiproxy: None,
        api_port: 0,
        proxy_ports: Vec::new(),
    };
    let started = async {
        run.api_port = pick_free_port()?;
        let mut ports = vec![(run.api_port, TOXIPROXY_API_PORT)];
        for i in 1..=nodes {
            let inner = PROXY_PORT_BASE + i as u16;
            let host = pick_free_port()?;
            run.proxy_ports.push((format!("n{i}"), inner, host));
            ports.push((host, inner));
        }
        let cmd = vec![
            "--host=0.0.0.0".to_string(),
            format!("--port={TOXIPROXY_API_PORT}"),
        ];
        let proxy_name = options.toxiproxy_container_name();
        let proxy = start_container(&options.toxiproxy_image, &proxy_name, options, cmd, ports);
        let node_starts =
            (1..=nodes).map(|i| {
                let docker = docker.clone();
                async move {
                    ContainerNode::start(&docker, &format!("n{i}"), persistence, options).await
                }
            });
        let (proxy, started_nodes) = futures::join!(proxy, futures::future::join_all(node_starts));
        Ok::<_, TopologyError>((proxy, started_nodes))
    }
    .await;
    let (proxy, started_nodes) = match started {
        Ok(x) => x,
        Err(e) => {
            run.remove().await;
            return Err(e);
        }
    };
    let mut ok_nodes = Vec::new();
    let mut first_error = None;
    for n in started_nodes {
        match n {
            Ok(node) => ok_nodes.push(node),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match proxy {
        Ok((c, used)) => {
            // The host ports actually bound (re-picked if one was taken meanwhile).
            run.api_port = used[0].0;
            for ((_, _, host), (bound, _)) in run.proxy_ports.iter_mut().zip(&used[1..]) {
                *host = *bound;
            }
            run.toxiproxy = Some(c);
        }
        Err(e) => {
            first_error.get_or_insert(e);
        }
    }
    if first_error.is_none() {
        if let Err(e) = wait_api(&run, options.start_timeout).await {
            first_error = Some(e);
        }
    }
    if let Some(e) = first_error {
        for n in &mut ok_nodes {
            n.remove().await;
        }
        run.remove().await;
        return Err(e);
    }
    Ok((ok_nodes, run))
}

/// Polls `GET /version` on the run's Toxiproxy API until it answers (bounded).
async fn wait_api(run: &DockerRun, limit: Duration) -> Result<(), TopologyError> {
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
