//! Settings of the docker backend and the last-resort cleanup of its containers.
//!
//! A docker run (`lockbench chaos --backend docker`, `lockbench matrix --backend docker`)
//! starts, on a user-defined network of its own, one Redis container per node (and per
//! Sentinel for `sentinel`) and one Toxiproxy container (see [`super::container`], behind the
//! `docker` cargo feature). Every name starts with the run's tag ([`DockerOptions::run_tag`],
//! `lb-<run id>-<4 hex>`): the network is `<tag>`, the containers `<tag>-n1`, …, `<tag>-s1`,
//! …, `<tag>-toxiproxy`, and every container carries the label [`RUN_LABEL`]`=<tag>`.
//!
//! Cleanup, from cooperative to last resort (as [`super::reaper`] does for processes):
//! 1. [`super::Topology::shutdown`] removes the containers and the network through the Docker API;
//! 2. a dropped container is removed by testcontainers' `Drop`;
//! 3. every name is registered here before it is created; [`remove_all_blocking`] runs
//!    `docker rm -f` / `docker network rm` on what is still registered. The CLI calls it from
//!    its panic hook ([`install_panic_hook`]) and on a second Ctrl-C, where no destructor runs.
//!
//! After a `kill -9` of lockbench itself nothing can run: remove the leftovers with
//! `docker rm -f $(docker ps -aq --filter label=org.lockbench.run)`.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, Once, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// The local Redis image that `docker/build-images.sh` builds.
pub const DEFAULT_REDIS_IMAGE: &str = "lockbench/redis:7.0-local";
/// The local stand-in for Toxiproxy that `docker/build-images.sh` builds.
pub const DEFAULT_TOXIPROXY_IMAGE: &str = "lockbench/toxiproxy:local";
/// Label put on every container of a run, valued with the run's tag.
pub const RUN_LABEL: &str = "org.lockbench.run";
/// Bound on a container's start (create, start, first PING / first API answer).
pub const DEFAULT_CONTAINER_START_TIMEOUT: Duration = Duration::from_secs(30);

/// How to run a topology in containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerOptions {
    /// Redis image (`name:tag`); its `redis-server` must be on `PATH` (the official `redis:7`
    /// and [`DEFAULT_REDIS_IMAGE`] both qualify).
    pub redis_image: String,
    /// Toxiproxy image: Shopify's (`ghcr.io/shopify/toxiproxy:2.12.0`) or
    /// [`DEFAULT_TOXIPROXY_IMAGE`]; it must accept `--host=0.0.0.0 --port=8474`.
    pub toxiproxy_image: String,
    /// Prefix of every network and container name of this run; unique per run.
    pub run_tag: String,
    /// Bound on each container's start.
    pub start_timeout: Duration,
}

impl DockerOptions {
    /// Images from `REDIS_IMAGE` / `TOXIPROXY_IMAGE` when set (else the local images), a tag
    /// made from `run_id` ([`run_tag`]) and a 30 s start bound.
    pub fn new(run_id: &str) -> Self {
        let env = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        Self {
            redis_image: env("REDIS_IMAGE", DEFAULT_REDIS_IMAGE),
            toxiproxy_image: env("TOXIPROXY_IMAGE", DEFAULT_TOXIPROXY_IMAGE),
            run_tag: run_tag(run_id),
            start_timeout: DEFAULT_CONTAINER_START_TIMEOUT,
        }
    }

    /// Name of the run's network (the tag itself).
    pub fn network_name(&self) -> String {
        self.run_tag.clone()
    }

    /// Name of the container of node `node` (`<tag>-n1`).
    pub fn node_container_name(&self, node: &str) -> String {
        format!("{}-{node}", self.run_tag)
    }

    /// Name of the Toxiproxy container (`<tag>-toxiproxy`).
    pub fn toxiproxy_container_name(&self) -> String {
        format!("{}-toxiproxy", self.run_tag)
    }
}

/// `lb-<run id>-<4 hex>`: the run id reduced to characters Docker accepts in names
/// (`[a-zA-Z0-9_.-]`, others become `-`, at most 80 kept), plus 16 random bits so that two
/// runs with the same id (a batch's `06-…` twice) never share a name.
pub fn run_tag(run_id: &str) -> String {
    let clean: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(80)
        .collect();
    let clean = clean.trim_matches(|c| c == '-' || c == '.' || c == '_');
    let suffix: u16 = rand::random();
    if clean.is_empty() {
        format!("lb-{suffix:04x}")
    } else {
        format!("lb-{clean}-{suffix:04x}")
    }
}

/// Splits `name[:tag]` at the tag's colon (not a registry port's): `("redis", "7")`,
/// `("localhost:5000/redis", "7")`; the tag defaults to `latest`.
pub fn split_image(image: &str) -> (String, String) {
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (
            image[..last_slash + i].to_string(),
            image[last_slash + i + 1..].to_string(),
        ),
        None => (image.to_string(), "latest".to_string()),
    }
}

#[derive(Default)]
struct Registry {
    containers: BTreeSet<String>,
    networks: BTreeSet<String>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry::default()))
}

fn lock() -> MutexGuard<'static, Registry> {
    registry().lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers a container name before it is created.
pub fn register_container(name: &str) {
    lock().containers.insert(name.to_string());
}

/// Unregisters a container after it was removed.
pub fn unregister_container(name: &str) {
    lock().containers.remove(name);
}

/// Registers a network name before it is created.
pub fn register_network(name: &str) {
    lock().networks.insert(name.to_string());
}

/// Unregisters a network after it was removed.
pub fn unregister_network(name: &str) {
    lock().networks.remove(name);
}

/// Container and network names still registered (sorted).
pub fn registered() -> (Vec<String>, Vec<String>) {
    let r = lock();
    (
        r.containers.iter().cloned().collect(),
        r.networks.iter().cloned().collect(),
    )
}

/// Runs `docker <args>` with output discarded, bounded by `limit`; true on exit code 0.
pub fn docker_cli(args: &[&str], limit: Duration) -> bool {
    let Ok(mut child) = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// Removes the given containers (`docker rm -f -v`) and then networks (`docker network rm`)
/// with the docker CLI, and unregisters what is gone. Blocking, bounded to about 30 s; never
/// panics. Returns how many names were still there to remove.
pub fn remove_blocking(containers: &[String], networks: &[String]) -> usize {
    if !containers.is_empty() {
        let mut args = vec!["rm", "-f", "-v"];
        args.extend(containers.iter().map(String::as_str));
        docker_cli(&args, Duration::from_secs(20));
        for c in containers {
            unregister_container(c);
        }
    }
    for n in networks {
        if docker_cli(&["network", "rm", n], Duration::from_secs(10))
            || !docker_cli(&["network", "inspect", n], Duration::from_secs(5))
        {
            unregister_network(n);
        }
    }
    containers.len() + networks.len()
}

/// Removes every registered container and network (see [`remove_blocking`]). Safe to call
/// from a panic hook or a signal path: it gives up on a held registry lock after 200 ms.
pub fn remove_all_blocking() -> usize {
    let deadline = Instant::now() + Duration::from_millis(200);
    let (containers, networks) = loop {
        match registry().try_lock() {
            Ok(r) => break (r.containers.clone(), r.networks.clone()),
            Err(TryLockError::Poisoned(p)) => {
                let r = p.into_inner();
                break (r.containers.clone(), r.networks.clone());
            }
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return 0,
        }
    };
    if containers.is_empty() && networks.is_empty() {
        return 0;
    }
    let containers: Vec<String> = containers.into_iter().collect();
    let networks: Vec<String> = networks.into_iter().collect();
    remove_blocking(&containers, &networks)
}

/// Installs (once) a panic hook that removes every registered container and network, then
/// calls the previous hook. For binaries, like [`super::reaper::install_panic_hook`].
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            remove_all_blocking();
            previous(info);
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_tag_keeps_the_run_id_and_is_unique() {
        let a = run_tag("20260101T120000Z-06-redlock minority/loss");
        assert!(
            a.starts_with("lb-20260101T120000Z-06-redlock-minority-loss-"),
            "{a}"
        );
        assert_eq!(
            a.len(),
            "lb-20260101T120000Z-06-redlock-minority-loss-".len() + 4
        );
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)));
        // 16 random bits: 20 tags colliding entirely would be a broken generator.
        let tags: BTreeSet<String> = (0..20).map(|_| run_tag("x")).collect();
        assert!(tags.len() > 1);
        assert!(run_tag("///").starts_with("lb-"));
    }

    #[test]
    fn names_derive_from_the_tag() {
        let mut o = DockerOptions::new("r1");
        o.run_tag = "lb-r1-beef".into();
        assert_eq!(o.network_name(), "lb-r1-beef");
        assert_eq!(o.node_container_name("n3"), "lb-r1-beef-n3");
        assert_eq!(o.toxiproxy_container_name(), "lb-r1-beef-toxiproxy");
    }

    #[test]
    fn image_names_split_at_the_tag_colon() {
        assert_eq!(
            split_image("lockbench/redis:7.0-local"),
            ("lockbench/redis".into(), "7.0-local".into())
        );
        assert_eq!(split_image("redis"), ("redis".into(), "latest".into()));
        assert_eq!(
            split_image("localhost:5000/redis"),
            ("localhost:5000/redis".into(), "latest".into())
        );
        assert_eq!(
            split_image("ghcr.io/shopify/toxiproxy:2.12.0"),
            ("ghcr.io/shopify/toxiproxy".into(), "2.12.0".into())
        );
    }

    #[test]
    fn registry_tracks_names_until_unregistered() {
        register_container("lb-unit-test-c");
        register_network("lb-unit-test-n");
        let (c, n) = registered();
        assert!(c.contains(&"lb-unit-test-c".to_string()));
        assert!(n.contains(&"lb-unit-test-n".to_string()));
        unregister_container("lb-unit-test-c");
        unregister_network("lb-unit-test-n");
        let (c, n) = registered();
        assert!(!c.contains(&"lb-unit-test-c".to_string()));
        assert!(!n.contains(&"lb-unit-test-n".to_string()));
    }
}
