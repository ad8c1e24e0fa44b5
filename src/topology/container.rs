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

//!
//! One file per concept: [`start`] (creating one container), [`command`] (what runs in it),
//! [`node`] (a Redis node in a container), [`run`] (the run's network and Toxiproxy
//! container), then one file per layout: [`bridge`] (`single`, `five`: each node on the run's
//! network), [`shared`] (the shared-namespace start of `sentinel` and `cluster`),
//! [`sentinel`] and [`cluster`].

mod bridge;
mod cluster;
mod command;
mod node;
mod run;
mod sentinel;
mod shared;
mod start;

use testcontainers::bollard::Docker;

use super::TopologyError;

pub use bridge::start_run;
pub use cluster::{start_cluster_run, ClusterPorts, ClusterRun};
pub use command::{redis_server_args, sentinel_command};
pub use node::ContainerNode;
pub use run::{DockerRun, RunProxy};
pub use sentinel::{start_sentinel_run, SentinelPorts, SentinelRun};

/// Port Redis listens on inside its container.
pub const REDIS_PORT: u16 = 6379;
/// Port of the Toxiproxy API inside its container.
pub const TOXIPROXY_API_PORT: u16 = 8474;
/// Proxy `nX` listens on `PROXY_PORT_BASE + X` inside the Toxiproxy container.
pub const PROXY_PORT_BASE: u16 = 20000;

pub(crate) fn docker_err(context: impl Into<String>, e: impl std::fmt::Display) -> TopologyError {
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
