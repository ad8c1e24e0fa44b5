//! One Redis node (or Sentinel) in a container: start, kill, restart, pause, resume, remove.

use std::time::{Duration, Instant};

use testcontainers::bollard::query_parameters::KillContainerOptionsBuilder;
use testcontainers::bollard::Docker;
use testcontainers::{ContainerAsync, GenericImage};

use super::command::redis_server_args;
use super::start::{start_container, start_container_once, Net};
use super::{docker_err, REDIS_PORT};
use crate::node::{ConnectOptions, NodeEndpoint};
use crate::topology::docker::{self, DockerOptions};
use crate::topology::local::ping;
use crate::topology::ports::pick_free_port;
use crate::topology::{Persistence, TopologyError};

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
    pub(super) async fn start_shared(
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
