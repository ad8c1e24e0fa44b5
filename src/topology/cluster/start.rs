//! Starting a cluster: its nodes (local or containers), `redis-cli --cluster create`, and the
//! wait until every slot is served.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    admin, parse_cluster_nodes, ClusterAddressing, ClusterGroup, ClusterSettings,
    CLUSTER_NODE_START_TIMEOUT, CREATE_TIMEOUT, READY_TIMEOUT,
};
use crate::topology::bus_cut::BusFirewall;
use crate::topology::local::{LocalNode, LocalNodeConfig};
use crate::topology::{LocalTopologyOptions, Topology, TopologyError, TopologyKind};

/// Finds `redis-cli`: beside the configured redis-server, else on `PATH`.
fn find_redis_cli(redis_server: Option<&Path>) -> Result<PathBuf, TopologyError> {
    let candidates: Vec<PathBuf> = match redis_server {
        Some(server) => vec![server.with_file_name("redis-cli")],
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("redis-cli"))
            .collect(),
    };
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or_else(|| TopologyError::ServerNotFound {
            program: "redis-cli",
            package: "redis-tools",
            location: match redis_server {
                Some(server) => format!("beside {}", server.display()),
                None => "on PATH".to_string(),
            },
        })
}

/// The `redis.conf` lines of node `i`.
pub(crate) fn node_lines(
    i: usize,
    addressing: &ClusterAddressing,
    settings: &ClusterSettings,
) -> Vec<String> {
    let (host, port) = &addressing.announce[i];
    let own = addressing.hosts[i];
    // A node on its own address opens its bus connections from it (else from 127.0.0.1).
    let source = (own != Ipv4Addr::LOCALHOST).then(|| format!("bind-source-addr {own}"));
    let mut lines = vec![
        "cluster-enabled yes".to_string(),
        "cluster-config-file nodes.conf".to_string(),
        format!("cluster-node-timeout {}", settings.node_timeout.as_millis()),
        format!("cluster-port {}", addressing.bus_ports[i]),
        format!("cluster-announce-ip {host}"),
        format!("cluster-announce-port {port}"),
        format!("cluster-announce-bus-port {}", addressing.bus_ports[i]),
        "cluster-require-full-coverage no".to_string(),
        "cluster-allow-replica-migration no".to_string(),
        "repl-diskless-sync-delay 0".to_string(),
        "repl-ping-replica-period 1".to_string(),
        "repl-timeout 5".to_string(),
    ];
    lines.extend(source);
    lines
}

impl Topology {
    /// Starts a `cluster` topology: `settings.node_count()` nodes `n1`.. on
    /// `addressing.node_ports`, then `redis-cli --cluster create` with one replica per primary,
    /// then waits (bounded by `ready_timeout`) until every node reports `cluster_state:ok`, knows
    /// every other node, and every replica's `master_link_status` is `up`. On error every
    /// started process is killed.
    ///
    /// # Errors
    /// As [`LocalNode::start`]; [`TopologyError::ServerNotFound`] without `redis-cli`;
    /// [`TopologyError::ClusterNotReady`] naming what failed or was still missing.
    pub async fn start_cluster(
        options: &LocalTopologyOptions,
        settings: &ClusterSettings,
        addressing: &ClusterAddressing,
        ready_timeout: Duration,
    ) -> Result<Self, TopologyError> {
        settings.check_to_start()?;
        let cli = find_redis_cli(options.redis_server.as_deref())?;
        let configs: Vec<LocalNodeConfig> = (0..addressing.node_ports.len())
            .map(|i| LocalNodeConfig {
                port: Some(addressing.node_ports[i]),
                host: addressing.hosts[i],
                persistence: options.persistence,
                redis_server: options.redis_server.clone(),
                // Six or more processes start at once: on a loaded 2-core machine one of them
                // can take more than the default 5 s to answer PING (seen in the tests).
                start_timeout: options.start_timeout.max(CLUSTER_NODE_START_TIMEOUT),
                extra_config: node_lines(i, addressing, settings),
                ..LocalNodeConfig::new(format!("n{}", i + 1))
            })
            .collect();
        let local = futures::future::try_join_all(
            configs
                .iter()
                .map(|c| LocalNode::start(c, &options.base_dir)),
        )
        .await?;
        let mut topology = Self::of_local_nodes(TopologyKind::Cluster, local, &options.key_prefix);
        topology.cluster = Some(ClusterGroup {
            settings: *settings,
            announce: addressing.announce.clone(),
            bus: addressing.bus(),
            firewall: BusFirewall::new(),
        });
        // Dropping `topology` on error kills every process.
        let began = Instant::now();
        let nodes: Vec<String> = addressing
            .hosts
            .iter()
            .zip(&addressing.node_ports)
            .map(|(h, p)| format!("{h}:{p}"))
            .collect();
        create_cluster(&cli, &nodes, ready_timeout.min(CREATE_TIMEOUT)).await?;
        let left = ready_timeout.saturating_sub(began.elapsed());
        topology.wait_cluster_ready(left).await?;
        Ok(topology)
    }

    /// Starts a `cluster` topology as containers ([`crate::topology::container::start_cluster_run`]:
    /// every node in the Toxiproxy container's network namespace, announced at its
    /// replication proxy `nX-repl`), then `redis-cli --cluster create` from this machine
    /// on the nodes' published ports and the same readiness wait as the local cluster. On
    /// error every container and the network are removed.
    ///
    /// # Errors
    /// As [`crate::topology::container::start_cluster_run`]; [`TopologyError::ServerNotFound`] without
    /// `redis-cli` on `PATH`; [`TopologyError::ClusterNotReady`] /
    /// [`TopologyError::ClusterCreateHung`] as [`Topology::start_cluster`].
    pub async fn start_docker_cluster(
        persistence: crate::topology::Persistence,
        docker: &crate::topology::DockerOptions,
        settings: &ClusterSettings,
        key_prefix: &str,
    ) -> Result<Self, TopologyError> {
        settings.check_to_start()?;
        #[cfg(feature = "docker")]
        {
            let cli = find_redis_cli(None)?;
            let run = crate::topology::container::start_cluster_run(persistence, docker, settings)
                .await?;
            // Published on this machine's loopback; the bus stays inside the namespace (one
            // address for every node, so a bus cut is refused there).
            let addressing = run.ports.addressing();
            let direct: Vec<String> = addressing
                .node_ports
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect();
            let topology = Self {
                kind: TopologyKind::Cluster,
                local: Vec::new(),
                external: Vec::new(),
                key_prefix: key_prefix.to_string(),
                sentinels: Vec::new(),
                pooler: None,
                sentinel: None,
                cluster: Some(ClusterGroup {
                    settings: *settings,
                    bus: addressing.bus(),
                    announce: addressing.announce,
                    firewall: BusFirewall::new(),
                }),
                containers: run.nodes,
                sentinel_containers: Vec::new(),
                docker: Some(run.run),
            };
            let began = Instant::now();
            let ready = async {
                create_cluster(&cli, &direct, CREATE_TIMEOUT).await?;
                topology
                    .wait_cluster_ready(READY_TIMEOUT.saturating_sub(began.elapsed()))
                    .await
            };
            if let Err(e) = ready.await {
                topology.shutdown().await;
                return Err(e);
            }
            Ok(topology)
        }
        #[cfg(not(feature = "docker"))]
        {
            let _ = (persistence, docker, key_prefix);
            Err(TopologyError::DockerUnsupported {
                what: "this build".into(),
                reason: ": lockbench was built without the `docker` cargo feature (rebuild with `cargo build --features docker`)".into(),
            })
        }
    }

    /// Waits (bounded) until every node reports `cluster_state:ok` and knows every node, and
    /// every replica's link to its primary is up.
    ///
    /// # Errors
    /// [`TopologyError::ClusterNotReady`] naming what was still missing at the deadline.
    pub async fn wait_cluster_ready(&self, timeout: Duration) -> Result<(), TopologyError> {
        let start = Instant::now();
        loop {
            let missing = self.cluster_missing().await;
            match missing {
                None => return Ok(()),
                Some(reason) if start.elapsed() >= timeout => {
                    return Err(TopologyError::ClusterNotReady {
                        waited_ms: start.elapsed().as_millis(),
                        reason,
                    })
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// `None` when ready, else what is missing.
    async fn cluster_missing(&self) -> Option<String> {
        let group = self.cluster.as_ref()?;
        let nodes = self.data_endpoints();
        for node in &nodes {
            let asked = async {
                let mut conn = node.connect_direct(&admin()).await?;
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query_async(&mut conn)
                    .await?;
                let repl: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut conn)
                    .await?;
                let view: String = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, redis::RedisError>((info, repl, view))
            };
            let (info, repl, view) = match asked.await {
                Ok(x) => x,
                Err(e) => return Some(format!("{}: {e}", node.name)),
            };
            let field = crate::topology::sentinel::info_field;
            if field(&info, "cluster_state") != Some("ok") {
                return Some(format!("{} reports cluster_state not ok", node.name));
            }
            let known = field(&info, "cluster_known_nodes").and_then(|k| k.parse::<usize>().ok());
            if known != Some(nodes.len()) {
                return Some(format!(
                    "{} knows {} of {} nodes",
                    node.name,
                    known.unwrap_or(0),
                    nodes.len()
                ));
            }
            // Every node sees every shard with its replica (gossip has spread the layout).
            match parse_cluster_nodes(&view, &group.announce) {
                Ok(shards)
                    if shards.len() == group.settings.shards
                        && shards.iter().all(|s| s.replicas.len() == 1) => {}
                Ok(shards) => {
                    return Some(format!(
                        "{} sees {} shards, not each {} with one replica",
                        node.name,
                        shards.len(),
                        group.settings.shards
                    ))
                }
                Err(e) => return Some(format!("{}: {e}", node.name)),
            }
            if field(&repl, "role") == Some("slave")
                && field(&repl, "master_link_status") != Some("up")
            {
                return Some(format!("replica {} link is not up", node.name));
            }
        }
        None
    }
}

/// Runs `redis-cli --cluster create <host:port>… --cluster-replicas 1 --cluster-yes`
/// (bounded).
async fn create_cluster(
    cli: &Path,
    nodes: &[String],
    timeout: Duration,
) -> Result<(), TopologyError> {
    let mut cmd = tokio::process::Command::new(cli);
    cmd.arg("--cluster").arg("create");
    cmd.args(nodes);
    cmd.args(["--cluster-replicas", "1", "--cluster-yes"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let began = Instant::now();
    let running = |e| TopologyError::io(format!("running {} --cluster create", cli.display()), e);
    let mut child = cmd.spawn().map_err(running)?;
    // Read its output as it comes, so a hung create can say where it stopped.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = tokio::spawn({
        let printed = std::sync::Arc::clone(&printed);
        async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                printed.lock().expect("output").extend_from_slice(&buf[..n]);
            }
        }
    });
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(mut o)) => {
            let _ = reader.await;
            o.stdout = std::mem::take(&mut *printed.lock().expect("output"));
            o
        }
        Ok(Err(e)) => return Err(running(e)),
        Err(_) => {
            // Dropping the child (kill_on_drop) ends redis-cli; the nodes go with the topology.
            reader.abort();
            let text = String::from_utf8_lossy(&printed.lock().expect("output")).into_owned();
            let tail: Vec<&str> = text.lines().rev().take(4).collect();
            return Err(TopologyError::ClusterCreateHung {
                waited_ms: began.elapsed().as_millis(),
                output: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            });
        }
    };
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stdout);
        let tail: Vec<&str> = text.lines().rev().take(8).collect();
        return Err(TopologyError::ClusterNotReady {
            waited_ms: began.elapsed().as_millis(),
            reason: format!(
                "redis-cli --cluster create exited with {}: {}{}",
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    Ok(())
}
