//! The `cluster` topology: a Redis Cluster of `shards` primaries with one replica each
//! (`n1`..`n{2×shards}`), local `redis-server --cluster-enabled yes` processes created with
//! `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`.
//!
//! Every process is a [`LocalNode`] (its `nodes.conf` and data in its own directory), so the
//! [`super::reaper`] tears them down like any other node.
//!
//! ## Addressing
//! [`ClusterAddressing`] says where each node listens (client port and cluster-bus port) and
//! the address it *announces* (`cluster-announce-ip/port`): what `CLUSTER SLOTS`, `MOVED` and
//! `ASK` name, and what a replica replicates from. Behind proxies
//! ([`super::ProxiedTopology::start`]) a node is announced at its replication proxy `nX-repl`
//! (so replication *from* `nX` to its replicas passes through it and can lag or be cut), and
//! the cluster client remaps every announced address to the node's client proxy `nX` at connect
//! time ([`crate::node::ClusterRouting`]). The cluster bus goes direct (its own port, announced
//! as is), so neither a client-side nor a replication fault touches failure detection.
//!
//! ## Settings
//! `cluster-node-timeout` is [`ClusterSettings::node_timeout`] (default 1500 ms: a primary
//! unreachable that long is marked failing and a replica is promoted); `cluster-require-full-
//! coverage no` (the other shards keep serving while one has no primary);
//! `cluster-allow-replica-migration no` (the layout stays as created); replication as in
//! `sentinel` (`repl-diskless-sync-delay 0`, `repl-ping-replica-period 1`, `repl-timeout 5`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::local::{LocalNode, LocalNodeConfig};
use super::{LocalTopologyOptions, Topology, TopologyError, TopologyKind};
use crate::node::{ClusterRouting, ConnectOptions, NodeEndpoint};

/// Bound on the wait for `redis-cli --cluster create` and a ready cluster.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts of a cluster, each on fresh nodes and ports, when one failed in a way a new start
/// can mend ([`start_again`]).
pub const START_ATTEMPTS: u32 = 3;

/// Bound on `redis-cli --cluster create` itself (it takes 1–3 s; one that hangs never ends,
/// see [`TopologyError::ClusterCreateHung`]).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether a failed cluster start is worth another on fresh nodes and ports: a picked port
/// another process took first, or a `redis-cli --cluster create` that hung.
pub fn start_again(e: &TopologyError) -> bool {
    matches!(
        e,
        TopologyError::PortInUse { .. } | TopologyError::ClusterCreateHung { .. }
    )
}

/// The least time a cluster node is given to answer PING at start.
pub const CLUSTER_NODE_START_TIMEOUT: Duration = Duration::from_secs(15);

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The cluster's shape and timing (scenario `[topology]` keys, `run --shards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterSettings {
    /// Primaries (each with one replica); at least 3, as `redis-cli --cluster create` needs.
    #[serde(default = "default_shards")]
    pub shards: usize,
    /// `cluster-node-timeout` (ms in configs).
    #[serde(
        default = "default_node_timeout",
        with = "crate::duration_ms",
        rename = "node_timeout_ms"
    )]
    pub node_timeout: Duration,
}

fn default_shards() -> usize {
    3
}

fn default_node_timeout() -> Duration {
    Duration::from_millis(1500)
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            shards: default_shards(),
            node_timeout: default_node_timeout(),
        }
    }
}

impl ClusterSettings {
    /// Data nodes: two per shard.
    pub fn node_count(&self) -> usize {
        self.shards * 2
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// A message when there are fewer than 3 shards (or more than 50) or the node timeout
    /// is below 100 ms.
    pub fn validate(&self) -> Result<(), String> {
        if !(3..=50).contains(&self.shards) {
            return Err(format!(
                "--shards {}: a Redis Cluster needs 3 to 50 shards (redis-cli --cluster create \
                 needs at least 3 primaries)",
                self.shards
            ));
        }
        if self.node_timeout < Duration::from_millis(100) {
            return Err(format!(
                "cluster node timeout {:?} is below 100 ms",
                self.node_timeout
            ));
        }
        Ok(())
    }
}

impl ClusterSettings {
    /// [`ClusterSettings::validate`] as the error a start returns.
    ///
    /// # Errors
    /// [`TopologyError::ClusterNotReady`] with the reason.
    fn check_to_start(&self) -> Result<(), TopologyError> {
        self.validate()
            .map_err(|reason| TopologyError::ClusterNotReady {
                waited_ms: 0,
                reason,
            })
    }
}

/// Ports and announced addresses of the nodes (index `i` is node `n{i+1}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAddressing {
    /// Client port of each node (127.0.0.1).
    pub node_ports: Vec<u16>,
    /// Cluster-bus port of each node (127.0.0.1, announced as is).
    pub bus_ports: Vec<u16>,
    /// Address (`host`, `port`) each node announces.
    pub announce: Vec<(String, u16)>,
}

impl ClusterAddressing {
    /// No proxies: each node announced at its own port.
    pub fn direct(node_ports: &[u16], bus_ports: &[u16]) -> Self {
        Self {
            node_ports: node_ports.to_vec(),
            bus_ports: bus_ports.to_vec(),
            announce: node_ports
                .iter()
                .map(|&p| ("127.0.0.1".to_string(), p))
                .collect(),
        }
    }

    /// Free ports for `nodes` nodes (client and bus port each).
    ///
    /// # Errors
    /// [`TopologyError::Io`] when no port can be had.
    pub fn free_ports(nodes: usize) -> Result<(Vec<u16>, Vec<u16>), TopologyError> {
        let pick = || {
            (0..nodes)
                .map(|_| super::ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()
        };
        Ok((pick()?, pick()?))
    }
}

/// What a started cluster needs to remember.
#[derive(Debug, Clone)]
pub(crate) struct ClusterGroup {
    pub(crate) settings: ClusterSettings,
    pub(crate) announce: Vec<(String, u16)>,
}

/// One shard as the cluster reports it now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardLayout {
    /// The node serving the shard's slots (`n1`..).
    pub primary: String,
    /// Its replicas.
    pub replicas: Vec<String>,
    /// Slot ranges, inclusive (`[first, last]`).
    pub slots: Vec<(u16, u16)>,
}

impl ShardLayout {
    /// True when `slot` is in one of the shard's ranges.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first `{`
/// and the next `}`, if not empty) or of the whole key, modulo [`SLOTS`] (the Redis Cluster
/// specification, "Keys distribution model").
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(bytes)) % SLOTS
}

/// The slot of every key of `resource` with hash-tagged keys (`…{resource}`).
pub fn resource_slot(resource: &str) -> u16 {
    key_slot(&format!("{{{resource}}}"))
}

/// Reads `CLUSTER NODES` into shards, naming nodes by their announced address
/// (`announce[i]` is `n{i+1}`). Nodes flagged `fail` or `noaddr` are left out; so is a
/// primary without slots.
///
/// # Errors
/// A message naming a line that does not parse or an address no node announces.
pub fn parse_cluster_nodes(
    text: &str,
    announce: &[(String, u16)],
) -> Result<Vec<ShardLayout>, String> {
    let name_of = |addr: &str| -> Result<String, String> {
        let host_port = addr.split(['@', ',']).next().unwrap_or(addr);
        let (host, port) = host_port
            .rsplit_once(':')
            .ok_or_else(|| format!("address {addr:?} is not host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("address {addr:?}: bad port"))?;
        announce
            .iter()
            .position(|(h, p)| h == host && *p == port)
            .map(|i| format!("n{}", i + 1))
            .ok_or_else(|| format!("address {host_port} is not announced by any node"))
    };
    let mut primaries: BTreeMap<String, ShardLayout> = BTreeMap::new();
    let mut replica_of: Vec<(String, String)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(format!(
                "CLUSTER NODES line {line:?} has fewer than 8 fields"
            ));
        }
        let (id, addr, flags, master) = (fields[0], fields[1], fields[2], fields[3]);
        if flags.split(',').any(|f| f == "fail" || f == "noaddr") {
            continue;
        }
        let name = name_of(addr)?;
        if flags.split(',').any(|f| f == "master") {
            let mut slots = Vec::new();
            for s in &fields[8..] {
                if s.starts_with('[') {
                    continue; // a slot being migrated or imported
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let parse = |x: &str| {
                    x.parse::<u16>()
                        .map_err(|_| format!("slot range {s:?} in line {line:?}"))
                };
                slots.push((parse(a)?, parse(b)?));
            }
            primaries.insert(
                id.to_string(),
                ShardLayout {
                    primary: name,
                    replicas: Vec::new(),
                    slots,
                },
            );
        } else {
            replica_of.push((name, master.to_string()));
        }
    }
    for (name, master) in replica_of {
        if let Some(shard) = primaries.get_mut(&master) {
            shard.replicas.push(name);
        }
    }
    let mut shards: Vec<ShardLayout> = primaries
        .into_values()
        .filter(|s| !s.slots.is_empty())
        .collect();
    for s in &mut shards {
        s.replicas.sort_by_key(|n| node_number(n));
    }
    shards.sort_by_key(|s| s.slots.first().copied());
    Ok(shards)
}

fn node_number(name: &str) -> usize {
    name.trim_start_matches('n').parse().unwrap_or(usize::MAX)
}

/// The `redis.conf` lines of node `i`.
pub(crate) fn node_lines(
    i: usize,
    addressing: &ClusterAddressing,
    settings: &ClusterSettings,
) -> Vec<String> {
    let (host, port) = &addressing.announce[i];
    vec![
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
    ]
}

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

/// Admin connections: short timeouts, direct to a node.
fn admin() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
    }
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
        });
        // Dropping `topology` on error kills every process.
        let began = Instant::now();
        create_cluster(
            &cli,
            &addressing.node_ports,
            ready_timeout.min(CREATE_TIMEOUT),
        )
        .await?;
        let left = ready_timeout.saturating_sub(began.elapsed());
        topology.wait_cluster_ready(left).await?;
        Ok(topology)
    }

    /// Starts a `cluster` topology as containers ([`super::container::start_cluster_run`]:
    /// every node in the Toxiproxy container's network namespace, announced at its
    /// replication proxy `nX-repl`), then `redis-cli --cluster create` from this machine
    /// on the nodes' published ports and the same readiness wait as the local cluster. On
    /// error every container and the network are removed.
    ///
    /// # Errors
    /// As [`super::container::start_cluster_run`]; [`TopologyError::ServerNotFound`] without
    /// `redis-cli` on `PATH`; [`TopologyError::ClusterNotReady`] /
    /// [`TopologyError::ClusterCreateHung`] as [`Topology::start_cluster`].
    pub async fn start_docker_cluster(
        persistence: super::Persistence,
        docker: &super::DockerOptions,
        settings: &ClusterSettings,
        key_prefix: &str,
    ) -> Result<Self, TopologyError> {
        settings.check_to_start()?;
        #[cfg(feature = "docker")]
        {
            let cli = find_redis_cli(None)?;
            let run = super::container::start_cluster_run(persistence, docker, settings).await?;
            let direct = run.ports.direct.clone();
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
                    announce: run.ports.addressing().announce,
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

    /// The cluster's settings (`cluster` kind only).
    pub fn cluster_settings(&self) -> Option<ClusterSettings> {
        self.cluster.as_ref().map(|g| g.settings)
    }

    /// The endpoint clients lock on for `cluster`: one endpoint `cluster` whose seeds are the
    /// nodes' URLs in `seeds` (proxies or the nodes), and whose address map sends each
    /// announced address to `seeds[i]`'s host and port.
    pub(crate) fn cluster_endpoint(&self, seeds: &[NodeEndpoint]) -> Option<NodeEndpoint> {
        let group = self.cluster.as_ref()?;
        let address_map = group
            .announce
            .iter()
            .zip(seeds)
            .filter_map(|(a, s)| {
                let to = crate::node::host_port(&s.url).ok()?;
                (a != &to).then(|| (a.clone(), to))
            })
            .collect();
        let seed_urls = seeds.iter().map(|s| s.url.clone()).collect::<Vec<_>>();
        Some(
            NodeEndpoint::new("cluster", seed_urls[0].clone()).with_cluster(ClusterRouting {
                seeds: seed_urls,
                address_map,
            }),
        )
    }

    /// The shards as a live node reports them now (`CLUSTER NODES`, asked of each node in
    /// turn until one answers; nodes flagged failing left out).
    ///
    /// # Errors
    /// [`TopologyError::ClusterNotReady`] when no node answers or the reply does not parse
    /// (`cluster` kind only: else an empty list).
    pub async fn cluster_layout(&self) -> Result<Vec<ShardLayout>, TopologyError> {
        let Some(group) = &self.cluster else {
            return Ok(Vec::new());
        };
        let mut last = String::from("no node");
        for node in self.data_endpoints() {
            let asked = async {
                let mut conn = node.connect_direct(&admin()).await?;
                redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query_async::<String>(&mut conn)
                    .await
            };
            match asked.await {
                Ok(text) => {
                    return parse_cluster_nodes(&text, &group.announce).map_err(|reason| {
                        TopologyError::ClusterNotReady {
                            waited_ms: 0,
                            reason: format!("{}: {reason}", node.name),
                        }
                    })
                }
                Err(e) => last = format!("{}: {e}", node.name),
            }
        }
        Err(TopologyError::ClusterNotReady {
            waited_ms: 0,
            reason: format!("no node answered CLUSTER NODES (last: {last})"),
        })
    }

    /// The node serving `resource`'s slot now (its keys are hash-tagged, see
    /// [`resource_slot`]).
    ///
    /// # Errors
    /// As [`Topology::cluster_layout`]; [`TopologyError::ClusterNotReady`] when no shard owns
    /// the slot.
    pub async fn cluster_primary_of(&self, resource: &str) -> Result<String, TopologyError> {
        let slot = resource_slot(resource);
        self.cluster_layout()
            .await?
            .into_iter()
            .find(|s| s.owns(slot))
            .map(|s| s.primary)
            .ok_or_else(|| TopologyError::ClusterNotReady {
                waited_ms: 0,
                reason: format!("no live primary serves slot {slot} (resource {resource})"),
            })
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
            let field = super::sentinel::info_field;
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

/// Runs `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes` (bounded).
async fn create_cluster(cli: &Path, ports: &[u16], timeout: Duration) -> Result<(), TopologyError> {
    let mut cmd = tokio::process::Command::new(cli);
    cmd.arg("--cluster").arg("create");
    for p in ports {
        cmd.arg(format!("127.0.0.1:{p}"));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_follow_the_specification() {
        // Examples from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot("123456789"), 0x31C3 % SLOTS);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
        assert_ne!(key_slot("foo{}{bar}"), key_slot("bar"));
        assert_eq!(
            key_slot("lockbench:single:lock:{r0}"),
            key_slot("lockbench:single-fenced:fence:{r0}")
        );
        assert_eq!(resource_slot("r0"), key_slot("r0"));
    }

    #[test]
    fn cluster_nodes_become_shards() {
        let announce: Vec<(String, u16)> = (1..=6)
            .map(|i| ("127.0.0.1".to_string(), 7000 + i))
            .collect();
        let text = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
a4 127.0.0.1:7004@17004 slave a2 0 0 2 connected
a5 127.0.0.1:7005@17005 slave a3 0 0 3 connected
a6 127.0.0.1:7006@17006 slave a1 0 0 1 connected
";
        let shards = parse_cluster_nodes(text, &announce).unwrap();
        assert_eq!(shards.len(), 3);
        assert_eq!(shards[0].primary, "n1");
        assert_eq!(shards[0].replicas, vec!["n6".to_string()]);
        assert_eq!(shards[2].slots, vec![(10923, 16383)]);
        assert!(shards[1].owns(5461) && !shards[1].owns(5460));
        let failed = text.replace("myself,master", "master,fail");
        let shards = parse_cluster_nodes(&failed, &announce).unwrap();
        assert_eq!(
            shards.len(),
            2,
            "a failing primary's shard has no live primary"
        );
        assert!(
            parse_cluster_nodes("a1 10.0.0.1:1@2 master - 0 0 1 connected 0-1", &announce)
                .unwrap_err()
                .contains("not announced")
        );
    }

    #[test]
    fn settings_are_checked() {
        assert!(ClusterSettings::default().validate().is_ok());
        let two = ClusterSettings {
            shards: 2,
            ..ClusterSettings::default()
        };
        assert!(two.validate().unwrap_err().contains("3 to 50 shards"));
    }

    #[test]
    fn nodes_announce_their_given_address_and_bus_port() {
        let a = ClusterAddressing {
            node_ports: vec![7001],
            bus_ports: vec![17001],
            announce: vec![("127.0.0.1".into(), 4001)],
        };
        let lines = node_lines(0, &a, &ClusterSettings::default());
        assert!(lines.contains(&"cluster-announce-port 4001".to_string()));
        assert!(lines.contains(&"cluster-announce-bus-port 17001".to_string()));
        assert!(lines.contains(&"cluster-node-timeout 1500".to_string()));
    }
}
