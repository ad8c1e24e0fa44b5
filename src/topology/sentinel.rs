//! The `sentinel` topology: one primary (`n1`), replicas (`n2`, `n3`) with asynchronous
//! replication, and three `redis-sentinel` processes (`s1`..`s3`) that fail the primary over.
//!
//! Every process is a [`LocalNode`] (Sentinels are started from the `redis-sentinel` binary,
//! with `sentinel …` lines in their generated config), so the [`super::reaper`] tears them
//! down like data nodes.
//!
//! ## Addressing
//! [`SentinelAddressing`] says, for each data node, the address it is *announced* at
//! (`replica-announce-ip/port`, and `sentinel monitor` for the primary) and, for each replica,
//! the address it replicates from. The nemesis points both at Toxiproxy proxies (client
//! proxy `nX` for the announced address, replication proxy `nX-repl` for the replication
//! link), so whatever Sentinel returns to clients goes through Toxiproxy and replication lag
//! or a primary↔replica partition can be injected. [`SentinelAddressing::direct`] uses the
//! nodes' own ports (no proxies).
//!
//! ## Timings
//! `down-after-milliseconds` 1000 (a primary unreachable for 1 s is subjectively down), quorum
//! 2 of 3. `failover-timeout` is 60 s by default, not a few seconds: Sentinel "fixes" a replica
//! whose master address differs from the one it monitors (`+fix-slave-config`) once that
//! replica's config is older than the failover timeout, which would move replication off its
//! dedicated proxy after 3 s. A failover itself is not slowed by this (promotion takes ~1–2 s
//! after the primary is objectively down); only a *second* automatic failover of the same group
//! waits (2 × timeout), while `SENTINEL FAILOVER` is not limited. After a failover the other
//! replica replicates from the new primary's announced (client-proxy) address, as Sentinel
//! tells it to.
//!
//! Replication: `repl-diskless-sync-delay 0` (fast first sync), `repl-ping-replica-period 1`
//! and `repl-timeout 5`, so a black-holed replication link shows as `master_link_status:down`
//! within about 5 s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::local::{LocalNode, LocalNodeConfig};
use super::{LocalTopologyOptions, Topology, TopologyError, TopologyKind};
use crate::node::{ConnectOptions, NodeEndpoint, SentinelLookup};

/// How the Sentinel group is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelOptions {
    /// Name of the monitored group (default `lockbench`).
    pub master_name: String,
    /// Number of Sentinel processes (default 3).
    pub sentinels: usize,
    /// Sentinels that must agree the primary is down (default 2).
    pub quorum: usize,
    /// `down-after-milliseconds` (default 1000 ms).
    pub down_after: Duration,
    /// `failover-timeout` (default 60 s; see the module docs for why not less).
    pub failover_timeout: Duration,
    /// Bound on the wait for replicas in sync and Sentinels aware of each other (default 20 s).
    pub ready_timeout: Duration,
}

impl Default for SentinelOptions {
    fn default() -> Self {
        Self {
            master_name: "lockbench".to_string(),
            sentinels: 3,
            quorum: 2,
            down_after: Duration::from_millis(1000),
            failover_timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(20),
        }
    }
}

/// Ports and announced addresses of the data nodes; index 0 is the initial primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelAddressing {
    /// Port each data node listens on (127.0.0.1).
    pub node_ports: Vec<u16>,
    /// Address (`host`, `port`) each data node is announced at and Sentinel reaches it at.
    pub announce: Vec<(String, u16)>,
    /// For data node `i ≥ 1` (at index `i − 1`): the address it replicates from.
    pub replicate_from: Vec<(String, u16)>,
}

impl SentinelAddressing {
    /// No proxies: announce each node at its own port; replicas replicate from the primary.
    pub fn direct(node_ports: &[u16]) -> Self {
        let local = |p: u16| ("127.0.0.1".to_string(), p);
        Self {
            node_ports: node_ports.to_vec(),
            announce: node_ports.iter().map(|&p| local(p)).collect(),
            replicate_from: node_ports
                .iter()
                .skip(1)
                .map(|_| local(node_ports[0]))
                .collect(),
        }
    }
}

/// What a started Sentinel group needs to remember.
#[derive(Debug, Clone)]
pub(crate) struct SentinelGroup {
    master_name: String,
    announce: Vec<(String, u16)>,
}

impl SentinelGroup {
    /// The `primary` endpoint: the initial primary's announced address plus a Sentinel lookup.
    pub(crate) fn primary_endpoint(&self, sentinels: &[NodeEndpoint]) -> NodeEndpoint {
        let (host, port) = &self.announce[0];
        NodeEndpoint::new("primary", format!("redis://{host}:{port}")).with_sentinel(
            SentinelLookup {
                master_name: self.master_name.clone(),
                sentinels: sentinels.iter().map(|s| s.url.clone()).collect(),
            },
        )
    }
}

/// Finds `redis-sentinel`: beside the configured redis-server, else on `PATH`.
fn find_sentinel_binary(redis_server: Option<&Path>) -> Result<PathBuf, TopologyError> {
    let candidates: Vec<PathBuf> = match redis_server {
        Some(server) => vec![server.with_file_name("redis-sentinel")],
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("redis-sentinel"))
            .collect(),
    };
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or_else(|| TopologyError::SentinelNotFound {
            location: match redis_server {
                Some(server) => format!("beside {}", server.display()),
                None => "on PATH".to_string(),
            },
        })
}

/// The `redis.conf` lines of data node `i` (0 = primary).
pub(crate) fn data_node_lines(i: usize, addressing: &SentinelAddressing) -> Vec<String> {
    let (ann_host, ann_port) = &addressing.announce[i];
    let mut lines = vec![
        format!("replica-announce-ip {ann_host}"),
        format!("replica-announce-port {ann_port}"),
        "repl-diskless-sync-delay 0".to_string(),
        "repl-ping-replica-period 1".to_string(),
        "repl-timeout 5".to_string(),
    ];
    if i > 0 {
        let (host, port) = &addressing.replicate_from[i - 1];
        lines.push(format!("replicaof {host} {port}"));
    }
    lines
}

/// The `sentinel.conf` lines of every Sentinel.
pub(crate) fn sentinel_lines(opts: &SentinelOptions, primary: &(String, u16)) -> Vec<String> {
    let name = &opts.master_name;
    vec![
        format!(
            "sentinel monitor {name} {} {} {}",
            primary.0, primary.1, opts.quorum
        ),
        format!(
            "sentinel down-after-milliseconds {name} {}",
            opts.down_after.as_millis()
        ),
        format!(
            "sentinel failover-timeout {name} {}",
            opts.failover_timeout.as_millis()
        ),
        format!("sentinel parallel-syncs {name} 2"),
    ]
}

impl Topology {
    /// Starts a `sentinel` topology: data nodes `n1` (primary), `n2`.. (replicas) on
    /// `addressing.node_ports`, then `opts.sentinels` Sentinels `s1`.. on free ports, and waits
    /// (bounded by `opts.ready_timeout`) until every replica's link is up and every Sentinel
    /// knows every replica and every other Sentinel. On error every started process is killed.
    ///
    /// # Errors
    /// As [`LocalNode::start`]; [`TopologyError::SentinelNotFound`];
    /// [`TopologyError::SentinelNotReady`] naming what was missing.
    pub async fn start_sentinel(
        options: &LocalTopologyOptions,
        opts: &SentinelOptions,
        addressing: &SentinelAddressing,
    ) -> Result<Self, TopologyError> {
        let sentinel_binary = find_sentinel_binary(options.redis_server.as_deref())?;
        let node_config = |i: usize| LocalNodeConfig {
            port: Some(addressing.node_ports[i]),
            persistence: options.persistence,
            redis_server: options.redis_server.clone(),
            start_timeout: options.start_timeout,
            extra_config: data_node_lines(i, addressing),
            ..LocalNodeConfig::new(format!("n{}", i + 1))
        };
        let configs: Vec<LocalNodeConfig> =
            (0..addressing.node_ports.len()).map(node_config).collect();
        let local = futures::future::try_join_all(
            configs
                .iter()
                .map(|c| LocalNode::start(c, &options.base_dir)),
        )
        .await?;
        let sentinel_configs: Vec<LocalNodeConfig> = (1..=opts.sentinels)
            .map(|i| LocalNodeConfig {
                redis_server: Some(sentinel_binary.clone()),
                start_timeout: options.start_timeout,
                extra_config: sentinel_lines(opts, &addressing.announce[0]),
                ..LocalNodeConfig::new(format!("s{i}"))
            })
            .collect();
        let sentinels = futures::future::try_join_all(
            sentinel_configs
                .iter()
                .map(|c| LocalNode::start(c, &options.base_dir)),
        )
        .await?;
        let topology = Self {
            kind: TopologyKind::Sentinel,
            local,
            external: Vec::new(),
            key_prefix: options.key_prefix.clone(),
            sentinels,
            pooler: None,
            sentinel: Some(SentinelGroup {
                master_name: opts.master_name.clone(),
                announce: addressing.announce.clone(),
            }),
            cluster: None,
            #[cfg(feature = "docker")]
            containers: Vec::new(),
            #[cfg(feature = "docker")]
            sentinel_containers: Vec::new(),
            #[cfg(feature = "docker")]
            docker: None,
        };
        // Dropping `topology` on error kills every process.
        topology.wait_sentinel_ready(opts.ready_timeout).await?;
        Ok(topology)
    }

    /// Starts a `sentinel` topology as containers ([`super::container::start_sentinel_run`]):
    /// the run's network, a Toxiproxy container with proxies `n1`..`n3` and `n2-repl`,
    /// `n3-repl` already created, data nodes `n1` (primary), `n2`, `n3` and Sentinels `s1`..
    /// in its network namespace, every address `127.0.0.1:<port>` inside and on the host. Then
    /// waits as [`Topology::start_sentinel`] does (bounded by `opts.ready_timeout`).
    ///
    /// # Errors
    /// As [`Topology::start_docker`]; [`TopologyError::SentinelNotReady`]. On error every
    /// container and the network are removed.
    pub async fn start_docker_sentinel(
        persistence: super::Persistence,
        docker: &super::DockerOptions,
        opts: &SentinelOptions,
        key_prefix: &str,
    ) -> Result<Self, TopologyError> {
        #[cfg(feature = "docker")]
        {
            let run = super::container::start_sentinel_run(persistence, docker, opts).await?;
            let topology = Self {
                kind: TopologyKind::Sentinel,
                local: Vec::new(),
                external: Vec::new(),
                key_prefix: key_prefix.to_string(),
                sentinels: Vec::new(),
                pooler: None,
                sentinel: Some(SentinelGroup {
                    master_name: opts.master_name.clone(),
                    announce: run.ports.addressing().announce,
                }),
                cluster: None,
                containers: run.nodes,
                sentinel_containers: run.sentinels,
                docker: Some(run.run),
            };
            if let Err(e) = topology.wait_sentinel_ready(opts.ready_timeout).await {
                topology.shutdown().await;
                return Err(e);
            }
            Ok(topology)
        }
        #[cfg(not(feature = "docker"))]
        {
            let _ = (persistence, docker, opts, key_prefix);
            Err(TopologyError::DockerUnsupported {
                what: "this build".into(),
                reason: ": lockbench was built without the `docker` cargo feature (rebuild with `cargo build --features docker`)".into(),
            })
        }
    }

    /// Endpoints of the Sentinels (`s1`..), processes or containers; empty for other kinds.
    pub fn sentinel_endpoints(&self) -> Vec<NodeEndpoint> {
        #[cfg(feature = "docker")]
        if !self.sentinel_containers.is_empty() {
            return self
                .sentinel_containers
                .iter()
                .map(super::container::ContainerNode::endpoint)
                .collect();
        }
        self.sentinels.iter().map(LocalNode::endpoint).collect()
    }

    /// Sentinel processes, for the nemesis (empty for other kinds).
    pub fn sentinel_nodes_mut(&mut self) -> &mut [LocalNode] {
        &mut self.sentinels
    }

    /// The monitored group's name (`sentinel` kind only).
    pub fn master_name(&self) -> Option<&str> {
        self.sentinel.as_ref().map(|g| g.master_name.as_str())
    }

    /// The lookup clients use to find the primary (`sentinel` kind only).
    pub fn sentinel_lookup(&self) -> Option<SentinelLookup> {
        let group = self.sentinel.as_ref()?;
        Some(SentinelLookup {
            master_name: group.master_name.clone(),
            sentinels: self
                .sentinel_endpoints()
                .into_iter()
                .map(|e| e.url)
                .collect(),
        })
    }

    /// Name of the data node the Sentinels currently name as primary (`n1`..), mapped from the
    /// announced address. For `etcd`: the member that leads the Raft group now. For `cluster`:
    /// the primary serving the slot of the first resource, `r0` (what `target = "primary"`
    /// means there). For other
    /// kinds: `n1`.
    ///
    /// # Errors
    /// [`TopologyError::Redis`] when no Sentinel answers; [`TopologyError::UnknownNode`] when
    /// the address is not one of the announced ones.
    pub async fn current_primary(&self) -> Result<String, TopologyError> {
        if self.kind() == super::TopologyKind::Cluster {
            return self.cluster_primary_of(CLUSTER_PRIMARY_RESOURCE).await;
        }
        if self.kind() == super::TopologyKind::Etcd {
            return super::program::etcd_leader(&self.data_endpoints(), Duration::from_millis(500))
                .await
                .map_err(|reason| TopologyError::Unreachable {
                    node: "etcd members".into(),
                    reason,
                });
        }
        let (Some(group), Some(lookup)) = (&self.sentinel, self.sentinel_lookup()) else {
            return Ok("n1".to_string());
        };
        let opts = ConnectOptions::default();
        let (host, port) =
            lookup
                .primary_addr(&opts)
                .await
                .map_err(|source| TopologyError::Redis {
                    node: "sentinels".to_string(),
                    source,
                })?;
        group
            .announce
            .iter()
            .position(|(h, p)| *h == host && *p == port)
            .map(|i| format!("n{}", i + 1))
            .ok_or(TopologyError::UnknownNode {
                name: format!("{host}:{port}"),
                known: group
                    .announce
                    .iter()
                    .map(|(h, p)| format!("{h}:{p}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Waits (bounded) until every replica reports `master_link_status:up` and every Sentinel
    /// knows all replicas and all other Sentinels.
    ///
    /// # Errors
    /// [`TopologyError::SentinelNotReady`] naming what was still missing at the deadline.
    pub async fn wait_sentinel_ready(&self, timeout: Duration) -> Result<(), TopologyError> {
        let Some(group) = &self.sentinel else {
            return Ok(());
        };
        let start = Instant::now();
        let opts = ConnectOptions {
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_millis(500),
        };
        let replicas = self.data_endpoints().len().saturating_sub(1);
        let others = self.sentinel_endpoints().len().saturating_sub(1);
        loop {
            let missing = self.sentinel_missing(group, &opts, replicas, others).await;
            match missing {
                None => return Ok(()),
                Some(reason) if start.elapsed() >= timeout => {
                    return Err(TopologyError::SentinelNotReady {
                        waited_ms: start.elapsed().as_millis(),
                        reason,
                    })
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// `None` when ready, else what is missing.
    async fn sentinel_missing(
        &self,
        group: &SentinelGroup,
        opts: &ConnectOptions,
        replicas: usize,
        others: usize,
    ) -> Option<String> {
        for node in self.data_endpoints().iter().skip(1) {
            let info = match info_replication(node, opts).await {
                Ok(info) => info,
                Err(e) => return Some(format!("{}: {e}", node.name)),
            };
            if info_field(&info, "master_link_status") != Some("up") {
                return Some(format!("replica {} link is not up", node.name));
            }
        }
        for s in &self.sentinel_endpoints() {
            let check = async {
                let mut conn = s.connect(opts).await?;
                let reps: Vec<redis::Value> = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(&group.master_name)
                    .query_async(&mut conn)
                    .await?;
                let sens: Vec<redis::Value> = redis::cmd("SENTINEL")
                    .arg("SENTINELS")
                    .arg(&group.master_name)
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, redis::RedisError>((reps.len(), sens.len()))
            };
            match check.await {
                Ok((r, o)) if r >= replicas && o >= others => {}
                Ok((r, o)) => {
                    return Some(format!(
                    "sentinel {} knows {r}/{replicas} replicas and {o}/{others} other sentinels",
                    s.name
                ))
                }
                Err(e) => return Some(format!("sentinel {}: {e}", s.name)),
            }
        }
        None
    }
}

/// The resource whose shard's primary is "the primary" of a `cluster` topology.
pub const CLUSTER_PRIMARY_RESOURCE: &str = "r0";

/// `INFO replication` of one node.
///
/// # Errors
/// Connection or command errors.
pub async fn info_replication(
    endpoint: &NodeEndpoint,
    opts: &ConnectOptions,
) -> Result<String, redis::RedisError> {
    let mut conn = endpoint.connect_direct(opts).await?;
    redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut conn)
        .await
}

/// The value of `field:value` in an INFO reply.
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addressing() -> SentinelAddressing {
        SentinelAddressing {
            node_ports: vec![7001, 7002, 7003],
            announce: vec![
                ("127.0.0.1".into(), 8001),
                ("127.0.0.1".into(), 8002),
                ("127.0.0.1".into(), 8003),
            ],
            replicate_from: vec![("127.0.0.1".into(), 9002), ("127.0.0.1".into(), 9003)],
        }
    }

    #[test]
    fn replicas_replicate_from_their_own_address_and_announce_the_proxy() {
        let a = addressing();
        let primary = data_node_lines(0, &a);
        assert!(primary.contains(&"replica-announce-port 8001".to_string()));
        assert!(!primary.iter().any(|l| l.starts_with("replicaof")));
        let n3 = data_node_lines(2, &a);
        assert!(n3.contains(&"replicaof 127.0.0.1 9003".to_string()));
        assert!(n3.contains(&"replica-announce-port 8003".to_string()));
    }

    #[test]
    fn sentinels_monitor_the_announced_primary() {
        let lines = sentinel_lines(&SentinelOptions::default(), &("127.0.0.1".into(), 8001));
        assert_eq!(lines[0], "sentinel monitor lockbench 127.0.0.1 8001 2");
        assert!(lines.contains(&"sentinel down-after-milliseconds lockbench 1000".to_string()));
    }

    #[test]
    fn direct_addressing_uses_node_ports() {
        let a = SentinelAddressing::direct(&[1, 2, 3]);
        assert_eq!(a.announce[2], ("127.0.0.1".to_string(), 3));
        assert_eq!(a.replicate_from, vec![("127.0.0.1".to_string(), 1); 2]);
    }

    #[test]
    fn info_field_reads_values() {
        let info = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n";
        assert_eq!(info_field(info, "master_link_status"), Some("up"));
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "nope"), None);
    }
}
