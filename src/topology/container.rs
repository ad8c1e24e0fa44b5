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
//! `sentinel` is laid out as `docker/compose.yml`'s `sentinel` profile ([`start_sentinel_run`]):
//!
//! | what | container | listens on (inside = host) |
//! |---|---|---|
//! | Toxiproxy, holding the run's network namespace | `<tag>-toxiproxy` | API `:8474` (host: a free port) |
//! | proxy `nX` (→ `nX`), `nX-repl` (→ `n1`) | `<tag>-toxiproxy` | `127.0.0.1:<client port>`; `-repl` inside only |
//! | node `nX` | `<tag>-nX`, in the Toxiproxy container's namespace | `127.0.0.1:<direct port>` |
//! | Sentinel `sX` | `<tag>-sX`, same namespace | `127.0.0.1:<sentinel port>` |
//!
//! Every port is published 1:1, so `127.0.0.1:<port>` means the same thing inside the run
//! and on the host: nodes announce `127.0.0.1:<client port>` and Sentinel's answers are
//! usable by host-side clients as they are.
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
use super::sentinel::{SentinelAddressing, SentinelOptions};
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
        let net = Net::Run(ports.clone());
        match start_container_once(image, name, options, cmd.clone(), net).await {
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

/// Where a container's network stack comes from.
enum Net {
    /// Its own, on the run's network, with these (host, container) ports published on 127.0.0.1.
    Run(Vec<(u16, u16)>),
    /// The named container's (`network_mode: container:<name>`): same interfaces, same
    /// 127.0.0.1, same published ports; nothing published of its own.
    Shared(String),
}

/// `network_mode: container:<name>` and no port of its own (the engine refuses both together).
fn shared_with(container: String) -> impl Fn(&mut HostConfig) + Send + Sync + 'static {
    move |hc: &mut HostConfig| {
        hc.network_mode = Some(format!("container:{container}"));
        hc.port_bindings = None;
        hc.publish_all_ports = Some(false);
    }
}

async fn start_container_once(
    image: &str,
    name: &str,
    options: &DockerOptions,
    cmd: Vec<String>,
    net: Net,
) -> Result<ContainerAsync<GenericImage>, TopologyError> {
    let (repo, tag) = split_image(image);
    let mut generic = GenericImage::new(repo, tag);
    if let Net::Run(ports) = &net {
        for (_, inner) in ports {
            generic = generic.with_exposed_port(ContainerPort::Tcp(*inner));
        }
    }
    let mut request = generic
        .with_cmd(cmd)
        .with_container_name(name)
        .with_label(RUN_LABEL, &options.run_tag)
        .with_startup_timeout(options.start_timeout);
    let request = match net {
        Net::Run(ports) => {
            request = request.with_network(options.network_name());
            for (host, inner) in &ports {
                request = request.with_mapped_port(*host, ContainerPort::Tcp(*inner));
            }
            request.with_host_config_modifier(loopback_only(ports))
        }
        // Not `with_network`: testcontainers would try to create a network named `container:…`.
        Net::Shared(owner) => request.with_host_config_modifier(shared_with(owner)),
    };
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

/// `redis-server` arguments: listen on `port`, no protection, no RDB snapshots, AOF with
/// `appendfsync always` only with [`Persistence::AofAlways`], then each `redis.conf` line of
/// `extra` as an option (`replicaof h p` becomes `--replicaof h p`).
pub fn redis_server_args(port: u16, persistence: Persistence, extra: &[String]) -> Vec<String> {
    let aof = match persistence {
        Persistence::None => "no",
        Persistence::AofAlways => "yes",
    };
    let port = port.to_string();
    let mut args: Vec<String> = [
        "redis-server",
        "--port",
        &port,
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
    for line in extra {
        let mut words = line.split_whitespace();
        if let Some(key) = words.next() {
            args.push(format!("--{key}"));
            args.extend(words.map(String::from));
        }
    }
    args
}

/// The command of a Sentinel container: `/bin/sh` writes `/data/sentinel.conf` (Sentinel
/// rewrites its config, so it needs a writable file; an existing one, from before a restart,
/// is kept) with `port <port>` and `lines`, then execs `redis-sentinel` on it.
pub fn sentinel_command(port: u16, lines: &[String]) -> Vec<String> {
    let mut conf = vec![format!("port {port}"), "protected-mode no".to_string()];
    conf.extend(lines.iter().cloned());
    let quoted: Vec<String> = conf.iter().map(|l| format!("'{l}'")).collect();
    let script = format!(
        "test -s /data/sentinel.conf || printf '%s\\n' {} > /data/sentinel.conf; \
         exec redis-sentinel /data/sentinel.conf",
        quoted.join(" ")
    );
    vec!["sh".to_string(), "-c".to_string(), script]
}

/// One Redis node in a container. Dropping it removes the container (testcontainers' `Drop`);
/// prefer [`ContainerNode::remove`].
pub struct ContainerNode {
    name: String,
    container_name: String,
    container: Option<ContainerAsync<GenericImage>>,
    docker: Docker,
    host_port: u16,
    /// `host:port` inside the run's network (`<container>:6379`, or `127.0.0.1:<port>` in a
    /// shared namespace).
    inner_addr: String,
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
        let cmd = redis_server_args(REDIS_PORT, persistence, &[]);
        let (container, ports) = start_container(
            &options.redis_image,
            &container_name,
            options,
            cmd,
            vec![(host_port, REDIS_PORT)],
        )
        .await?;
        let inner_addr = format!("{container_name}:{REDIS_PORT}");
        let mut node = Self {
            name: name.to_string(),
            container_name,
            container: Some(container),
            docker: docker.clone(),
            host_port: ports[0].0,
            inner_addr,
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

    /// Starts `name` (a Redis node or a Sentinel: `cmd` says which) in container
    /// `<tag>-<name>` inside the network namespace of container `owner`, where it listens on
    /// `port`; `owner` publishes that port 1:1 on 127.0.0.1, so the process answers at
    /// `127.0.0.1:port` inside the namespace and on the host alike. Waits for PING there.
    ///
    /// # Errors
    /// As [`ContainerNode::start`].
    async fn start_shared(
        docker: &Docker,
        name: &str,
        cmd: Vec<String>,
        port: u16,
        owner: &str,
        persistence: Persistence,
        options: &DockerOptions,
    ) -> Result<Self, TopologyError> {
        let container_name = options.node_container_name(name);
        let container = start_container_once(
            &options.redis_image,
            &container_name,
            options,
            cmd,
            Net::Shared(owner.to_string()),
        )
        .await?;
        let mut node = Self {
            name: name.to_string(),
            container_name,
            container: Some(container),
            docker: docker.clone(),
            host_port: port,
            inner_addr: format!("127.0.0.1:{port}"),
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

    /// The address inside the run's network: `<container name>:6379`, or for a node sharing
    /// the Toxiproxy container's namespace (`sentinel`) `127.0.0.1:<port>`.
    pub fn network_address(&self) -> String {
        self.inner_addr.clone()
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
    /// Proxies the run created itself (`sentinel`: they must exist before the nodes start).
    links: Vec<RunProxy>,
}

/// A proxy that [`start_sentinel_run`] created in the run's Toxiproxy container.
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
    async fn remove_toxiproxy(&mut self) {
        if let Some(c) = self.toxiproxy.take() {
            let name = self.options.toxiproxy_container_name();
            match c.rm().await {
                Ok(()) => docker::unregister_container(&name),
                Err(e) => tracing::warn!("removing container {name}: {e}"),
            }
        }
    }

    /// Proxies the run created itself ([`start_sentinel_run`]); empty for `single` and `five`,
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
async fn open_run(options: &DockerOptions) -> Result<DockerRun, TopologyError> {
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
    let mut run = open_run(options).await?;
    let docker = run.docker.clone();
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

/// `k` free host ports.
fn free_ports(k: usize) -> Result<Vec<u16>, TopologyError> {
    (0..k).map(|_| pick_free_port()).collect()
}

/// Ports of a docker `sentinel` run. Every container of the run shares the Toxiproxy
/// container's network namespace, and every port but the API's is published 1:1 on the host's
/// 127.0.0.1, so `127.0.0.1:<port>` is the same address inside the run and on the host: what
/// the nodes announce and Sentinel hands out, a host-side client can use as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelPorts {
    /// Toxiproxy API on the host ([`TOXIPROXY_API_PORT`] inside).
    pub api: u16,
    /// Client proxy `nX` at index X−1: the address node `nX` is announced at.
    pub client: Vec<u16>,
    /// Node `nX` itself at index X−1 (bypassing Toxiproxy).
    pub direct: Vec<u16>,
    /// Replication proxy `nX-repl` of replica `nX` at index X−2 (not published).
    pub replication: Vec<u16>,
    /// Sentinel `sX` at index X−1.
    pub sentinels: Vec<u16>,
}

impl SentinelPorts {
    /// Free host ports for `nodes` data nodes and `sentinels` Sentinels, all distinct.
    fn pick(nodes: usize, sentinels: usize) -> Result<Self, TopologyError> {
        Ok(Self {
            api: pick_free_port()?,
            client: free_ports(nodes)?,
            direct: free_ports(nodes)?,
            replication: free_ports(nodes.saturating_sub(1))?,
            sentinels: free_ports(sentinels)?,
        })
    }

    /// (host, container) pairs the Toxiproxy container publishes.
    fn published(&self) -> Vec<(u16, u16)> {
        let mut out = vec![(self.api, TOXIPROXY_API_PORT)];
        for p in self
            .client
            .iter()
            .chain(&self.direct)
            .chain(&self.sentinels)
        {
            out.push((*p, *p));
        }
        out
    }

    /// The run's proxies: `nX` (client port → node `nX`) and `nX-repl` (→ `n1`).
    fn proxies(&self) -> Vec<WantedProxy> {
        let mut wanted = Vec::new();
        for i in 0..self.client.len() {
            let node = format!("n{}", i + 1);
            wanted.push((node.clone(), node, self.client[i], self.direct[i]));
        }
        for (i, repl) in self.replication.iter().enumerate() {
            let node = format!("n{}", i + 2);
            wanted.push((node.clone(), format!("{node}-repl"), *repl, self.direct[0]));
        }
        wanted
    }

    /// Announced, listening and replication addresses of the data nodes.
    pub fn addressing(&self) -> SentinelAddressing {
        let local = |p: &u16| ("127.0.0.1".to_string(), *p);
        SentinelAddressing {
            node_ports: self.direct.clone(),
            announce: self.client.iter().map(local).collect(),
            replicate_from: self.replication.iter().map(local).collect(),
        }
    }
}

/// The containers of a docker `sentinel` run ([`start_sentinel_run`]).
#[derive(Debug)]
pub struct SentinelRun {
    /// Data nodes `n1` (first primary), `n2`, `n3`.
    pub nodes: Vec<ContainerNode>,
    /// Sentinels `s1`..`s3`.
    pub sentinels: Vec<ContainerNode>,
    /// The Toxiproxy container (holding the shared namespace, with proxies `nX`, `nX-repl`)
    /// and the network.
    pub run: DockerRun,
    /// Where everything listens.
    pub ports: SentinelPorts,
}

/// Starts a docker `sentinel` run, laid out as `docker/compose.yml`'s `sentinel` profile:
/// the network, the Toxiproxy container on it (publishing every port of the run), proxies
/// `nX` (`127.0.0.1:<client port>` → node `nX`) and `nX-repl` (→ `n1`), then the data
/// nodes and `opts.sentinels` Sentinels, each a container of the Redis image in the Toxiproxy
/// container's network namespace. Node `nX` gets the same `redis.conf` lines as the local
/// sentinel topology (announced at its client proxy, replicas replicating through `nX-repl`),
/// the Sentinels the same `sentinel` lines plus `sentinel announce-ip 127.0.0.1` /
/// `announce-port`. Returns once every container answers
/// PING (the caller waits for the group to be in sync).
///
/// # Errors
/// As [`start_run`]; a proxy that cannot be created is a [`TopologyError::Docker`]. On error
/// nothing of the run is left.
pub async fn start_sentinel_run(
    persistence: Persistence,
    options: &DockerOptions,
    opts: &SentinelOptions,
) -> Result<SentinelRun, TopologyError> {
    let mut run = open_run(options).await?;
    let mut nodes = Vec::new();
    let mut sentinels = Vec::new();
    let filled = fill_sentinel_run(&mut run, persistence, opts, &mut nodes, &mut sentinels).await;
    match filled {
        Ok(ports) => Ok(SentinelRun {
            nodes,
            sentinels,
            run,
            ports,
        }),
        Err(e) => {
            for c in sentinels.iter_mut().chain(nodes.iter_mut()) {
                c.remove().await;
            }
            run.remove().await;
            Err(e)
        }
    }
}

async fn fill_sentinel_run(
    run: &mut DockerRun,
    persistence: Persistence,
    opts: &SentinelOptions,
    nodes: &mut Vec<ContainerNode>,
    sentinels: &mut Vec<ContainerNode>,
) -> Result<SentinelPorts, TopologyError> {
    let options = run.options.clone();
    let proxy_name = options.toxiproxy_container_name();
    let ports = start_shared_namespace(
        run,
        || SentinelPorts::pick(DATA_NODES, opts.sentinels),
        SentinelPorts::published,
        SentinelPorts::proxies,
    )
    .await?;
    let addressing = ports.addressing();
    let docker = run.docker.clone();
    let starts = (0..DATA_NODES).map(|i| {
        let cmd = redis_server_args(
            ports.direct[i],
            persistence,
            &super::sentinel::data_node_lines(i, &addressing),
        );
        (format!("n{}", i + 1), cmd, ports.direct[i])
    });
    nodes.extend(start_all_shared(&docker, starts, &proxy_name, persistence, &options).await?);
    let starts = ports.sentinels.iter().enumerate().map(|(i, &port)| {
        let mut lines = super::sentinel::sentinel_lines(opts, &addressing.announce[0]);
        lines.push("sentinel announce-ip 127.0.0.1".to_string());
        lines.push(format!("sentinel announce-port {port}"));
        (format!("s{}", i + 1), sentinel_command(port, &lines), port)
    });
    sentinels.extend(start_all_shared(&docker, starts, &proxy_name, persistence, &options).await?);
    Ok(ports)
}

/// Starts every (name, command, port) as a container in `owner`'s network namespace
/// ([`ContainerNode::start_shared`]), all at once. Returns them in order, or the first error
/// after removing the ones that started.
async fn start_all_shared(
    docker: &Docker,
    starts: impl Iterator<Item = (String, Vec<String>, u16)>,
    owner: &str,
    persistence: Persistence,
    options: &DockerOptions,
) -> Result<Vec<ContainerNode>, TopologyError> {
    let starts = starts.map(|(name, cmd, port)| async move {
        ContainerNode::start_shared(docker, &name, cmd, port, owner, persistence, options).await
    });
    let mut started = Vec::new();
    let mut first_error = None;
    for result in futures::future::join_all(starts).await {
        match result {
            Ok(n) => started.push(n),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(started),
        Some(e) => {
            for n in &mut started {
                n.remove().await;
            }
            Err(e)
        }
    }
}

/// Ports of a docker `cluster` run, laid out as the `sentinel` run: every container shares
/// the Toxiproxy container's network namespace, and the client proxies and the nodes' own
/// ports are published 1:1 on the host's 127.0.0.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPorts {
    /// Toxiproxy API on the host ([`TOXIPROXY_API_PORT`] inside).
    pub api: u16,
    /// Client proxy `nX` at index X−1 (what the clients' address map leads to).
    pub client: Vec<u16>,
    /// Node `nX` itself at index X−1 (bypassing Toxiproxy; `redis-cli --cluster create`
    /// and the nemesis use it).
    pub direct: Vec<u16>,
    /// Replication proxy `nX-repl` at index X−1: the address node `nX` announces (not
    /// published).
    pub replication: Vec<u16>,
    /// Cluster-bus port of node `nX` (not published: the bus stays inside the namespace).
    pub bus: Vec<u16>,
}

impl ClusterPorts {
    /// Free host ports for `nodes` nodes, all distinct.
    fn pick(nodes: usize) -> Result<Self, TopologyError> {
        Ok(Self {
            api: pick_free_port()?,
            client: free_ports(nodes)?,
            direct: free_ports(nodes)?,
            replication: free_ports(nodes)?,
            bus: free_ports(nodes)?,
        })
    }

    /// (host, container) pairs the Toxiproxy container publishes: the API, then every client
    /// proxy and node port 1:1.
    fn published(&self) -> Vec<(u16, u16)> {
        let mut out = vec![(self.api, TOXIPROXY_API_PORT)];
        out.extend(self.client.iter().chain(&self.direct).map(|&p| (p, p)));
        out
    }

    /// The run's proxies: `nX` and `nX-repl`, both to node `nX`.
    fn proxies(&self) -> Vec<WantedProxy> {
        let mut wanted = Vec::new();
        for i in 0..self.direct.len() {
            let node = format!("n{}", i + 1);
            wanted.push((node.clone(), node.clone(), self.client[i], self.direct[i]));
            wanted.push((
                node.clone(),
                format!("{node}-repl"),
                self.replication[i],
                self.direct[i],
            ));
        }
        wanted
    }

    /// Where the nodes listen and what they announce (`127.0.0.1:<nX-repl>`).
    pub fn addressing(&self) -> super::ClusterAddressing {
        super::ClusterAddressing {
            node_ports: self.direct.clone(),
            bus_ports: self.bus.clone(),
            announce: self
                .replication
                .iter()
                .map(|&p| ("127.0.0.1".to_string(), p))
                .collect(),
        }
    }
}

/// The containers of a docker `cluster` run ([`start_cluster_run`]).
#[derive(Debug)]
pub struct ClusterRun {
    /// Data nodes `n1`..`n{2×shards}`, not yet joined (the caller runs `redis-cli --cluster
    /// create`).
    pub nodes: Vec<ContainerNode>,
    /// The Toxiproxy container (holding the shared namespace, with proxies `nX`, `nX-repl`)
    /// and the network.
    pub run: DockerRun,
    /// Where everything listens.
    pub ports: ClusterPorts,
}

/// Starts the containers of a docker `cluster` run: the network, the Toxiproxy container
/// (publishing the API, the client proxies and the nodes' ports), proxies `nX` and `nX-repl`
/// (both → node `nX`), then `settings.node_count()` Redis containers in its namespace with the
/// local cluster topology's `redis.conf` lines (announced at `nX-repl`, so replication passes
/// through it; the bus direct). Returns once every node answers PING.
///
/// # Errors
/// As [`start_run`]. On error nothing of the run is left.
pub async fn start_cluster_run(
    persistence: Persistence,
    options: &DockerOptions,
    settings: &super::cluster::ClusterSettings,
) -> Result<ClusterRun, TopologyError> {
    let mut run = open_run(options).await?;
    let filled = async {
        let count = settings.node_count();
        let ports = start_shared_namespace(
            &mut run,
            || ClusterPorts::pick(count),
            ClusterPorts::published,
            ClusterPorts::proxies,
        )
        .await?;
        let addressing = ports.addressing();
        let starts = (0..count).map(|i| {
            let lines = super::cluster::node_lines(i, &addressing, settings);
            let cmd = redis_server_args(ports.direct[i], persistence, &lines);
            (format!("n{}", i + 1), cmd, ports.direct[i])
        });
        let owner = options.toxiproxy_container_name();
        let nodes = start_all_shared(&run.docker, starts, &owner, persistence, options).await?;
        Ok::<_, TopologyError>((nodes, ports))
    }
    .await;
    match filled {
        Ok((nodes, ports)) => Ok(ClusterRun { nodes, run, ports }),
        Err(e) => {
            run.remove().await;
            Err(e)
        }
    }
}

/// Data nodes of a docker `sentinel` run (`n1` first primary, `n2`, `n3`).
const DATA_NODES: usize = 3;

/// One proxy a shared-namespace run creates: (node, proxy name, listen port, upstream port),
/// both ports on 127.0.0.1 inside the namespace. A client proxy is named after its node.
type WantedProxy = (String, String, u16, u16);

/// Starts the Toxiproxy container of a run whose containers share its network namespace
/// (`sentinel`, `cluster`) and creates the run's proxies in it. Ports are picked free
/// (`pick`), then bound by the engine (`published`): another process can take one in
/// between, so a clash picks them all again (3 tries). Inside the container's namespace a
/// port can be taken too (Docker's embedded DNS resolver listens on a random port there): a
/// proxy that cannot listen ("Address already in use") starts the container over with fresh
/// ports (3 tries).
async fn start_shared_namespace<P>(
    run: &mut DockerRun,
    pick: impl Fn() -> Result<P, TopologyError>,
    published: impl Fn(&P) -> Vec<(u16, u16)>,
    proxies: impl Fn(&P) -> Vec<WantedProxy>,
) -> Result<P, TopologyError> {
    let options = run.options.clone();
    let proxy_name = options.toxiproxy_container_name();
    let cmd = vec![
        "--host=0.0.0.0".to_string(),
        format!("--port={TOXIPROXY_API_PORT}"),
    ];
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut tries = 0;
        let ports = loop {
            tries += 1;
            let ports = pick()?;
            let net = Net::Run(published(&ports));
            match start_container_once(
                &options.toxiproxy_image,
                &proxy_name,
                &options,
                cmd.clone(),
                net,
            )
            .await
            {
                Ok(c) => {
                    run.toxiproxy = Some(c);
                    run.api_port = published(&ports)[0].0;
                    break ports;
                }
                Err(e) if tries < 3 && e.to_string().contains("port is already allocated") => {}
                Err(e) => return Err(e),
            }
        };
        wait_api(run, options.start_timeout).await?;
        match create_run_proxies(run, proxies(&ports), &proxy_name).await {
            Ok(()) => return Ok(ports),
            Err(e) if attempts < 3 && e.to_string().contains("Address already in use") => {
                tracing::warn!("{e}; starting {proxy_name} again with other ports");
                run.remove_toxiproxy().await;
                run.links.clear();
                run.proxy_ports.clear();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates `wanted` proxies in the run's Toxiproxy container, recording them in `run`.
async fn create_run_proxies(
    run: &mut DockerRun,
    wanted: Vec<WantedProxy>,
    proxy_name: &str,
) -> Result<(), TopologyError> {
    let api = crate::toxiproxy::ToxiproxyClient::new(&run.api_url())
        .map_err(|e| docker_err("toxiproxy API client", e))?;
    let local = |p: u16| format!("127.0.0.1:{p}");
    for (node, proxy, listen, upstream) in wanted {
        api.create_proxy(&proxy, &format!("0.0.0.0:{listen}"), &local(upstream))
            .await
            .map_err(|e| docker_err(format!("creating proxy {proxy} in {proxy_name}"), e))?;
        if proxy == node {
            run.proxy_ports.push((node.clone(), listen, listen));
        }
        run.links.push(RunProxy {
            node,
            proxy,
            listen: local(listen),
            upstream: local(upstream),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_server_args_turn_conf_lines_into_options() {
        let extra = vec![
            "replica-announce-ip 127.0.0.1".to_string(),
            "replicaof 127.0.0.1 4102".to_string(),
        ];
        let args = redis_server_args(4001, Persistence::AofAlways, &extra);
        assert_eq!(&args[..3], ["redis-server", "--port", "4001"]);
        let joined = args.join(" ");
        assert!(
            joined.contains("--appendonly yes --appendfsync always"),
            "{joined}"
        );
        assert!(
            joined.ends_with("--replica-announce-ip 127.0.0.1 --replicaof 127.0.0.1 4102"),
            "{joined}"
        );
        let plain = redis_server_args(REDIS_PORT, Persistence::None, &[]);
        assert!(plain.join(" ").contains("--appendonly no"));
        // `--save ""`: one empty argument, no snapshots.
        let save = plain.iter().position(|a| a == "--save").unwrap();
        assert_eq!(plain[save + 1], "");
    }

    #[test]
    fn sentinel_command_writes_its_config_once_then_execs_sentinel() {
        let cmd = sentinel_command(
            26001,
            &["sentinel monitor lockbench 127.0.0.1 16001 2".to_string()],
        );
        assert_eq!(&cmd[..2], ["sh", "-c"]);
        let script = &cmd[2];
        assert!(
            script.starts_with("test -s /data/sentinel.conf || printf '%s\\n' 'port 26001' "),
            "{script}"
        );
        assert!(
            script.contains("'sentinel monitor lockbench 127.0.0.1 16001 2'"),
            "{script}"
        );
        assert!(
            script.ends_with("> /data/sentinel.conf; exec redis-sentinel /data/sentinel.conf"),
            "{script}"
        );
    }

    #[test]
    fn sentinel_ports_are_distinct_published_one_to_one_and_announced() {
        let p = SentinelPorts::pick(3, 3).unwrap();
        let mut all: Vec<u16> = [p.api]
            .iter()
            .chain(&p.client)
            .chain(&p.direct)
            .chain(&p.replication)
            .chain(&p.sentinels)
            .copied()
            .collect();
        assert_eq!(all.len(), 1 + 3 + 3 + 2 + 3);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12, "ports must be distinct");
        let published = p.published();
        assert_eq!(published[0], (p.api, TOXIPROXY_API_PORT));
        assert!(published[1..].iter().all(|(h, c)| h == c));
        assert!(!published.iter().any(|(h, _)| p.replication.contains(h)));
        let a = p.addressing();
        assert_eq!(a.node_ports, p.direct);
        assert_eq!(a.announce[1], ("127.0.0.1".to_string(), p.client[1]));
        assert_eq!(
            a.replicate_from[0],
            ("127.0.0.1".to_string(), p.replication[0])
        );
    }
}
