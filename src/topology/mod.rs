//! Topologies: the Redis nodes a run talks to, and their lifecycle.
//!
//! | kind | nodes | who owns them |
//! |---|---|---|
//! | `single` | `n1` | this process ([`LocalNode`]) |
//! | `five` | `n1`..`n5`, independent (no replication) | this process |
//! | `sentinel` | primary `n1`, replicas `n2`, `n3`, Sentinels `s1`..`s3` ([`sentinel`]) | this process |
//! | `postgres` | `n1`: one PostgreSQL server ([`program`]); with a pooler, PgBouncer in front of it ([`pgbouncer`]) | this process |
//! | `cluster` | `n1`..`n6` (3 shards by default): a Redis Cluster, each primary with one replica ([`cluster`]) | this process |
//! | `etcd` | `n1`..`n3`: an etcd cluster, peers advertised at their proxies ([`program`]) | this process |
//! | `external` | `n1`..`nN` from user URLs (`redis://`, `postgres://`, `http://` for etcd) | the user: never started, stopped or flushed |
//!
//! Any of them can run behind Toxiproxy, one proxy per node: [`ProxiedTopology`] ([`proxied`]),
//! the topology the nemesis injects network faults into.
//!
//! Which strategy runs on which topology is decided in [`pairing`] (the only file here that
//! asks the strategy layer). [`limits`] is the process's descriptor budget, which the local
//! nodes inherit.
//!
//! Local nodes are direct child processes tracked by the [`reaper`], so they are torn down on
//! normal exit, error, SIGINT/SIGTERM (cooperatively, through [`reaper::termination_signal`])
//! and panic ([`reaper::install_panic_hook`]). A `sentinel` kind (primary, replicas, sentinels)
//! fits the same shape: more [`LocalNode`]s with [`LocalNodeConfig::extra_config`] lines.
//!
//! With the `docker` feature, `single`, `five` and `sentinel` can also run as containers
//! ([`Topology::start_docker`], [`container`]); the nemesis reaches either kind of node (and
//! of Sentinel) through [`NodeHandle`].

pub mod cluster;
#[cfg(feature = "docker")]
pub mod container;
pub mod docker;
pub mod external;
pub mod handle;
pub mod limits;
pub mod local;
pub mod pairing;
pub mod pgbouncer;
pub mod ports;
pub mod program;
pub mod proxied;
pub mod reaper;
pub mod sentinel;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use cluster::{ClusterAddressing, ClusterSettings, ShardLayout};
pub use docker::DockerOptions;
pub use handle::NodeHandle;
pub use local::{LocalNode, LocalNodeConfig, Persistence, DEFAULT_START_TIMEOUT};
pub use pgbouncer::{PoolMode, PoolReset, PoolerKind, PoolerSettings};
pub use program::{EtcdMember, ServerProgram};
pub use proxied::{ProxiedTopology, ProxyLink, ProxyOptions, ToxiproxySource};
pub use sentinel::{SentinelAddressing, SentinelOptions};

use crate::node::{ConnectOptions, NodeEndpoint};
use crate::toxiproxy::{ToxiproxyClientError, ToxiproxyError};

/// Prefix of every key the suite writes, unless configured otherwise.
pub const DEFAULT_KEY_PREFIX: &str = "lockbench:";

/// Errors from starting, reaching, faulting and tearing down nodes.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// No redis-server binary where we looked.
    #[error("redis-server not found {location}: install it with `apt-get install redis-server`")]
    RedisServerNotFound {
        /// `on PATH` or `at /some/path`.
        location: String,
    },
    /// No binary of a non-Redis server (PostgreSQL, etcd) where we looked.
    #[error("{program} not found {location}: install it with `apt-get install {package}`")]
    ServerNotFound {
        /// The binary's name (`postgres`, `etcd`).
        program: &'static str,
        /// The Debian package to install.
        package: &'static str,
        /// `on PATH …` or `at /some/path`.
        location: String,
    },
    /// The port is already bound on 127.0.0.1.
    #[error(
        "port {port} in use on 127.0.0.1: pick another port, or leave it unset to get a free one"
    )]
    PortInUse {
        /// The port that was requested.
        port: u16,
    },
    /// A node's own port was taken by another process while the node was down, so it cannot
    /// come back on it (its clients and proxies know it by that port).
    #[error(
        "node {node} cannot restart: its port {port} on 127.0.0.1 was taken by another process while it was down"
    )]
    PortTakenWhileDown {
        /// Node name.
        node: String,
        /// The node's port.
        port: u16,
    },
    /// redis-server exited early or did not answer PING in time.
    #[error("redis-server node {node} on port {port} did not start: {reason}\n(log: {})\n{log_tail}", log_path.display())]
    NodeStart {
        /// Node name.
        node: String,
        /// Port it was told to listen on.
        port: u16,
        /// What went wrong (exit status or PING timeout).
        reason: String,
        /// Full log file.
        log_path: PathBuf,
        /// The last lines of its log files.
        log_tail: String,
    },
    /// A signal or operation on a node that has no running process.
    #[error("cannot {op} node {node}: it is not running")]
    NotRunning {
        /// Node name.
        node: String,
        /// The refused operation.
        op: &'static str,
    },
    /// kill(2) failed.
    #[error("cannot {op} node {node}: {source}")]
    Signal {
        /// Node name.
        node: String,
        /// The operation.
        op: &'static str,
        /// OS error.
        source: std::io::Error,
    },
    /// A filesystem or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// OS error.
        source: std::io::Error,
    },
    /// No redis-sentinel binary where we looked.
    #[error(
        "redis-sentinel not found {location}: install it with `apt-get install redis-sentinel`"
    )]
    SentinelNotFound {
        /// `on PATH` or `at /some/path`.
        location: String,
    },
    /// The Sentinel group did not come up (replicas in sync, Sentinels aware of each other).
    #[error("sentinel topology not ready within {waited_ms} ms: {reason}")]
    SentinelNotReady {
        /// How long we waited.
        waited_ms: u128,
        /// What was still missing.
        reason: String,
    },
    /// The Redis Cluster did not come up (created, every node `cluster_state:ok`, every
    /// replica linked), or its layout could not be read.
    #[error("redis cluster not ready after {waited_ms} ms: {reason}")]
    ClusterNotReady {
        /// How long we waited.
        waited_ms: u128,
        /// What failed or was still missing.
        reason: String,
    },
    /// `redis-cli --cluster create` did not finish within its bound
    /// ([`cluster::CREATE_TIMEOUT`]): on a loaded machine a node's cluster-bus handshake can
    /// time out (after the node timeout) and is never retried, so the nodes never agree and
    /// redis-cli waits forever. The start is tried again on fresh nodes.
    #[error("redis-cli --cluster create did not finish within {waited_ms} ms (the nodes never agreed on the cluster's configuration): {output}")]
    ClusterCreateHung {
        /// How long we waited.
        waited_ms: u128,
        /// The last lines redis-cli printed.
        output: String,
    },
    /// A topology name that is not one of [`TopologyKind::NAMES`].
    #[error("unknown topology `{given}`: valid names are {}", TopologyKind::NAMES.join(", "))]
    UnknownKind {
        /// What the user typed.
        given: String,
    },
    /// `start_local` was asked for a kind this process does not start.
    #[error("topology `{kind}` is not started locally: give its node URLs (Topology::external)")]
    NotLocal {
        /// The kind.
        kind: TopologyKind,
    },
    /// `external` with no URLs.
    #[error("the external topology needs at least one redis:// or rediss:// URL")]
    NoExternalUrls,
    /// A malformed external URL (shown with its password redacted).
    #[error("invalid node URL {url}: {reason}")]
    InvalidUrl {
        /// Redacted URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An external node did not answer PING.
    #[error("node {node} is unreachable: {reason}; check the URL, credentials and that the server is up")]
    Unreachable {
        /// `name (redacted url)`.
        node: String,
        /// Connection error or timeout.
        reason: String,
    },
    /// A `--tls-*` file could not be read or parsed.
    #[error(transparent)]
    TlsFile(#[from] crate::node::TlsFileError),
    /// An operation the suite never does to nodes it did not start.
    #[error("refusing to {op} external node {node}: the suite never starts, stops or flushes nodes it did not start")]
    ExternalRefused {
        /// The refused operation.
        op: &'static str,
        /// `name (redacted url)`.
        node: String,
    },
    /// No local node with this name.
    #[error("no local node named `{name}` (nodes: {known})")]
    UnknownNode {
        /// Requested name.
        name: String,
        /// Comma-separated list of local node names (empty for external topologies).
        known: String,
    },
    /// No Docker engine answered.
    #[error("no Docker engine reachable ({reason}): start dockerd or set DOCKER_HOST")]
    DockerUnavailable {
        /// The client's error.
        reason: String,
    },
    /// An image the docker backend needs is not present locally.
    #[error("docker image {image} not found: build the local images with `docker/build-images.sh`, or name other images with --redis-image / --toxiproxy-image (REDIS_IMAGE / TOXIPROXY_IMAGE)")]
    DockerImageMissing {
        /// `name:tag`.
        image: String,
    },
    /// A Docker API call failed.
    #[error("docker: {context}: {reason}")]
    Docker {
        /// What was being done (`starting container lb-…-n1 (redis:7)`).
        context: String,
        /// The engine's or client's error.
        reason: String,
    },
    /// The docker backend cannot do this (yet), or this build has no docker support.
    #[error("{what} is not supported with --backend docker{reason}")]
    DockerUnsupported {
        /// What was asked for.
        what: String,
        /// `` yet`` or why.
        reason: String,
    },
    /// A Redis command on a local node failed.
    #[error("node {node}: {source}")]
    Redis {
        /// `name (url)`.
        node: String,
        /// The redis error.
        source: redis::RedisError,
    },
    /// The Toxiproxy API of a [`ProxiedTopology`] refused or could not be reached.
    #[error("toxiproxy: {0}")]
    Toxiproxy(#[from] ToxiproxyClientError),
    /// The embedded Toxiproxy server of a [`ProxiedTopology`] did not start.
    #[error("embedded toxiproxy: {0}")]
    ToxiproxyServer(#[from] ToxiproxyError),
    /// A node or address a proxy cannot be made for.
    #[error("fault target {target}: {reason}")]
    ProxyTarget {
        /// The node name or address.
        target: String,
        /// What is wrong.
        reason: String,
    },
    /// A topology that cannot be put behind proxies this way.
    #[error("proxied topology: {reason}")]
    ProxyUnsupported {
        /// Why.
        reason: String,
    },
}

impl TopologyError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TopologyError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Which nodes a run uses. Parsed from and printed as `single`, `five`, `external`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum TopologyKind {
    /// One local node.
    Single,
    /// Five independent local nodes (for Redlock), no replication.
    Five,
    /// A primary, two replicas (async replication) and three Sentinels, all local.
    Sentinel,
    /// Nodes given by URL; never started, stopped or flushed by the suite.
    External,
    /// One local PostgreSQL server (`pg-advisory`, `pg-advisory-fenced`).
    Postgres,
    /// A three-member local etcd cluster (`etcd-lease`), peer traffic through proxies.
    Etcd,
    /// A local Redis Cluster: 3 primaries with one replica each by default.
    Cluster,
}

impl TopologyKind {
    /// Every valid name, in the order shown to users.
    pub const NAMES: [&'static str; 7] = [
        "single", "five", "sentinel", "external", "postgres", "etcd", "cluster",
    ];

    /// Number of nodes a local kind starts (`None` for external).
    pub fn local_node_count(self) -> Option<usize> {
        match self {
            TopologyKind::Single => Some(1),
            TopologyKind::Five => Some(5),
            TopologyKind::Sentinel => Some(3),
            TopologyKind::External => None,
            TopologyKind::Postgres => Some(1),
            TopologyKind::Etcd => Some(3),
            TopologyKind::Cluster => Some(ClusterSettings::default().node_count()),
        }
    }

    /// The kebab-case name (the serde name).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl FromStr for TopologyKind {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .find(|k| k.as_str() == wanted)
            .ok_or_else(|| TopologyError::UnknownKind {
                given: s.to_string(),
            })
    }
}

/// Options for [`Topology::start_local`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTopologyOptions {
    /// Directory that receives one subdirectory per node (`n1/`, `n2/`, …).
    pub base_dir: PathBuf,
    /// Persistence of every node.
    pub persistence: Persistence,
    /// redis-server binary; `None` searches `PATH`.
    pub redis_server: Option<PathBuf>,
    /// Bound on each node's wait for PING at start.
    pub start_timeout: Duration,
    /// Prefix of every key the suite writes (default [`DEFAULT_KEY_PREFIX`]).
    pub key_prefix: String,
    /// `postgres` only: a pooler between the clients and the server (none by default).
    pub pooler: Option<PoolerSettings>,
    /// `postgres` only: server settings `key=value`, each passed as `postgres -c key=value`.
    pub pg_settings: Vec<String>,
    /// `cluster` only: shards and node timeout.
    pub cluster: ClusterSettings,
}

impl LocalTopologyOptions {
    /// No persistence, redis-server from `PATH`, 5 s start timeout, prefix `lockbench:`.
    pub fn new(base_dir: impl Into<PathBuf>) -> Self {
        Self {
            base_dir: base_dir.into(),
            persistence: Persistence::None,
            redis_server: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            key_prefix: DEFAULT_KEY_PREFIX.to_string(),
            pooler: None,
            pg_settings: Vec::new(),
            cluster: ClusterSettings::default(),
        }
    }
}

/// The nodes of one run. Dropping it kills every local process; prefer [`Topology::shutdown`].
#[derive(Debug)]
pub struct Topology {
    kind: TopologyKind,
    local: Vec<LocalNode>,
    external: Vec<NodeEndpoint>,
    key_prefix: String,
    /// Sentinel processes (`sentinel` kind only).
    sentinels: Vec<LocalNode>,
    /// PgBouncer in front of `n1` (`postgres` kind with a pooler only): clients reach `n1`
    /// through it.
    pooler: Option<LocalNode>,
    /// How the Sentinel group was set up (`sentinel` kind only).
    sentinel: Option<sentinel::SentinelGroup>,
    /// How the Redis Cluster was set up (`cluster` kind only).
    cluster: Option<cluster::ClusterGroup>,
    /// Redis containers (`--backend docker`).
    #[cfg(feature = "docker")]
    containers: Vec<container::ContainerNode>,
    /// Sentinel containers (`--backend docker`, `sentinel` kind only).
    #[cfg(feature = "docker")]
    sentinel_containers: Vec<container::ContainerNode>,
    /// The docker run's Toxiproxy container and network (`--backend docker`).
    #[cfg(feature = "docker")]
    docker: Option<container::DockerRun>,
}

impl Topology {
    /// Starts the nodes of a local kind concurrently (`single`: `n1`; `five`: `n1`..`n5`) and
    /// returns once every node answers PING. If one node fails, the others are killed.
    ///
    /// # Errors
    /// [`TopologyError::NotLocal`] for `external`; otherwise as [`LocalNode::start`].
    pub async fn start_local(
        kind: TopologyKind,
        options: &LocalTopologyOptions,
    ) -> Result<Self, TopologyError> {
        if kind == TopologyKind::Sentinel {
            let ports = (0..3)
                .map(|_| ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()?;
            return Self::start_sentinel(
                options,
                &SentinelOptions::default(),
                &SentinelAddressing::direct(&ports),
            )
            .await;
        }
        if kind == TopologyKind::Cluster {
            let mut attempt = 1;
            loop {
                let (ports, bus) = ClusterAddressing::free_ports(options.cluster.node_count())?;
                let started = Self::start_cluster(
                    options,
                    &options.cluster,
                    &ClusterAddressing::direct(&ports, &bus),
                    cluster::READY_TIMEOUT,
                )
                .await;
                match started {
                    Err(e) if cluster::start_again(&e) && attempt < cluster::START_ATTEMPTS => {
                        tracing::warn!(attempt, "cluster start failed, starting again: {e}");
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        }
        if kind == TopologyKind::Etcd {
            let peers = (0..3)
                .map(|_| ports::pick_free_port())
                .collect::<Result<Vec<u16>, _>>()?;
            let advertise = peers
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect::<Vec<_>>();
            return Self::start_etcd(options, &peers, &advertise).await;
        }
        let count = kind
            .local_node_count()
            .ok_or(TopologyError::NotLocal { kind })?;
        let program = match kind {
            TopologyKind::Postgres => ServerProgram::Postgres,
            _ => ServerProgram::Redis,
        };
        let extra_config = match kind {
            TopologyKind::Postgres => options.pg_settings.clone(),
            _ => Vec::new(),
        };
        let configs: Vec<LocalNodeConfig> = (1..=count)
            .map(|i| LocalNodeConfig {
                persistence: options.persistence,
                redis_server: options.redis_server.clone(),
                start_timeout: options.start_timeout,
                program: program.clone(),
                extra_config: extra_config.clone(),
                ..LocalNodeConfig::new(format!("n{i}"))
            })
            .collect();
        let local = futures::future::try_join_all(
            configs
                .iter()
                .map(|config| LocalNode::start(config, &options.base_dir)),
        )
        .await?;
        let mut topology = Self::of_local_nodes(kind, local, &options.key_prefix);
        if let (TopologyKind::Postgres, Some(settings)) = (kind, options.pooler) {
            let server = format!("127.0.0.1:{}", topology.local[0].port());
            topology.start_pooler(settings, server, options).await?;
        }
        Ok(topology)
    }

    /// Starts PgBouncer (node `pooler`, in `<base_dir>/pooler/`) forwarding to `server`
    /// (`host:port`: the server, or a proxy in front of it), and returns once a `SELECT 1`
    /// through it is answered by the server. From then on [`Topology::endpoints`] is
    /// PgBouncer's, under the server's name `n1`.
    ///
    /// # Errors
    /// As [`LocalNode::start`] (`pgbouncer` not installed, not ready in time).
    pub async fn start_pooler(
        &mut self,
        settings: PoolerSettings,
        server: String,
        options: &LocalTopologyOptions,
    ) -> Result<(), TopologyError> {
        let config = LocalNodeConfig {
            start_timeout: options.start_timeout,
            program: ServerProgram::PgBouncer(pgbouncer::PgBouncerNode { settings, server }),
            ..LocalNodeConfig::new("pooler")
        };
        self.pooler = Some(LocalNode::start(&config, &options.base_dir).await?);
        Ok(())
    }

    /// The PgBouncer process in front of the server, if any.
    pub fn pooler(&self) -> Option<&LocalNode> {
        self.pooler.as_ref()
    }

    /// Starts a three-member etcd cluster `n1`..`n3` concurrently: member *i* listens for peers
    /// on 127.0.0.1:`peer_ports[i]` and tells its peers to use `advertise[i]` (`host:port`: its
    /// peer proxy, so a member can be cut off from its peers). Returns once every member
    /// reports healthy (the cluster has a leader). `options.redis_server`, when set, is the
    /// `etcd` binary.
    ///
    /// # Errors
    /// As [`LocalNode::start`]; on error the members started are killed.
    pub async fn start_etcd(
        options: &LocalTopologyOptions,
        peer_ports: &[u16],
        advertise: &[String],
    ) -> Result<Self, TopologyError> {
        let initial_cluster = advertise
            .iter()
            .enumerate()
            .map(|(i, a)| format!("n{}=http://{a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("lockbench-{:016x}", rand::random::<u64>());
        let configs: Vec<LocalNodeConfig> = peer_ports
            .iter()
            .zip(advertise)
            .enumerate()
            .map(|(i, (port, addr))| LocalNodeConfig {
                redis_server: options.redis_server.clone(),
                start_timeout: options.start_timeout.max(Duration::from_secs(15)),
                program: ServerProgram::Etcd(EtcdMember {
                    peer_port: *port,
                    advertise_peer: addr.clone(),
                    initial_cluster: initial_cluster.clone(),
                    cluster_token: token.clone(),
                }),
                ..LocalNodeConfig::new(format!("n{}", i + 1))
            })
            .collect();
        let local = futures::future::try_join_all(
            configs
                .iter()
                .map(|config| LocalNode::start(config, &options.base_dir)),
        )
        .await?;
        Ok(Self::of_local_nodes(
            TopologyKind::Etcd,
            local,
            &options.key_prefix,
        ))
    }

    /// A topology of local node processes only (no Sentinels, no containers).
    fn of_local_nodes(kind: TopologyKind, local: Vec<LocalNode>, key_prefix: &str) -> Self {
        Self {
            kind,
            local,
            external: Vec::new(),
            key_prefix: key_prefix.to_string(),
            sentinels: Vec::new(),
            pooler: None,
            sentinel: None,
            cluster: None,
            #[cfg(feature = "docker")]
            containers: Vec::new(),
            #[cfg(feature = "docker")]
            sentinel_containers: Vec::new(),
            #[cfg(feature = "docker")]
            docker: None,
        }
    }

    /// Uses existing servers: validates each `redis://` / `rediss://` URL and PINGs each node
    /// (bounded by the default [`ConnectOptions`]: 1 s connect, 500 ms reply).
    ///
    /// # Errors
    /// As [`Topology::external_with_timeouts`].
    pub async fn external(urls: &[String], key_prefix: &str) -> Result<Self, TopologyError> {
        Self::external_with_timeouts(urls, key_prefix, &ConnectOptions::default()).await
    }

    /// [`Topology::external`] with explicit PING timeouts (for slow or distant servers).
    ///
    /// # Errors
    /// [`TopologyError::NoExternalUrls`], [`TopologyError::InvalidUrl`], or
    /// [`TopologyError::Unreachable`] naming the node (password redacted).
    pub async fn external_with_timeouts(
        urls: &[String],
        key_prefix: &str,
        timeouts: &ConnectOptions,
    ) -> Result<Self, TopologyError> {
        Self::external_with_tls(urls, key_prefix, timeouts, None).await
    }

    /// [`Topology::external_with_timeouts`] whose `rediss://` nodes use `tls` (a CA instead
    /// of the system roots, and a client certificate for mutual TLS; see
    /// [`crate::node::TlsFiles::load`]). A certificate the server refuses, or a server
    /// certificate the CA does not sign, is found here by the PING.
    ///
    /// # Errors
    /// As [`Topology::external_with_timeouts`]; [`TopologyError::InvalidUrl`] for a
    /// `redis://` URL when `tls` is given (TLS files need `rediss://`).
    pub async fn external_with_tls(
        urls: &[String],
        key_prefix: &str,
        timeouts: &ConnectOptions,
        tls: Option<std::sync::Arc<crate::node::ClientTls>>,
    ) -> Result<Self, TopologyError> {
        let endpoints = external::with_tls(external::parse_endpoints(urls)?, tls)?;
        external::check_reachable(&endpoints, timeouts).await?;
        Ok(Self {
            kind: TopologyKind::External,
            local: Vec::new(),
            external: endpoints,
            key_prefix: key_prefix.to_string(),
            sentinels: Vec::new(),
            pooler: None,
            sentinel: None,
            cluster: None,
            #[cfg(feature = "docker")]
            containers: Vec::new(),
            #[cfg(feature = "docker")]
            sentinel_containers: Vec::new(),
            #[cfg(feature = "docker")]
            docker: None,
        })
    }

    /// A Redis Cluster the suite did not start, reached through `seeds` (`redis://` or
    /// `rediss://`; TLS ones use `tls`): one endpoint `cluster` whose clients read the slot map
    /// from the seeds and follow `MOVED`/`ASK` to the addresses the nodes announce. Returns
    /// once a cluster connection answers PING (bounded by `timeouts`). Like every external
    /// node, it is never started, stopped or flushed.
    ///
    /// # Errors
    /// [`TopologyError::NoExternalUrls`], [`TopologyError::InvalidUrl`] (also for a
    /// `redis://` seed when `tls` is given), [`TopologyError::Unreachable`] naming the seeds.
    pub async fn external_cluster(
        seeds: &[String],
        key_prefix: &str,
        timeouts: &ConnectOptions,
        tls: Option<std::sync::Arc<crate::node::ClientTls>>,
    ) -> Result<Self, TopologyError> {
        let seeds = external::with_tls(external::parse_endpoints(seeds)?, tls.clone())?;
        let endpoint = external::cluster_endpoint(&seeds, tls);
        external::check_cluster_reachable(&endpoint, timeouts).await?;
        Ok(Self {
            external: vec![endpoint],
            ..Self::of_local_nodes(TopologyKind::External, Vec::new(), key_prefix)
        })
    }

    /// Starts `single` or `five` as Redis containers, plus a Toxiproxy container, on a
    /// network of their own (see [`container`]); returns once every node answers PING and the
    /// Toxiproxy API answers. The proxies are created by the caller
    /// ([`ProxiedTopology::start_docker`]). `sentinel` is
    /// [`Topology::start_docker_sentinel`] with [`SentinelOptions::default`], `cluster`
    /// [`Topology::start_docker_cluster`] with `cluster` (both create their proxies
    /// themselves).
    ///
    /// # Errors
    /// [`TopologyError::DockerUnsupported`] for `external`, `postgres` and `etcd` (and when built without the
    /// `docker` feature); [`TopologyError::DockerUnavailable`],
    /// [`TopologyError::DockerImageMissing`], [`TopologyError::Docker`],
    /// [`TopologyError::NodeStart`]. On error nothing of the run is left.
    pub async fn start_docker(
        kind: TopologyKind,
        persistence: Persistence,
        options: &DockerOptions,
        cluster: &cluster::ClusterSettings,
        key_prefix: &str,
    ) -> Result<Self, TopologyError> {
        let count = match kind {
            TopologyKind::Single | TopologyKind::Five => kind.local_node_count().unwrap_or(1),
            TopologyKind::Sentinel => {
                return Self::start_docker_sentinel(
                    persistence,
                    options,
                    &SentinelOptions::default(),
                    key_prefix,
                )
                .await
            }
            TopologyKind::Cluster => {
                return Self::start_docker_cluster(persistence, options, cluster, key_prefix).await
            }
            TopologyKind::Postgres | TopologyKind::Etcd => {
                return Err(TopologyError::DockerUnsupported {
                    what: format!("topology `{kind}`"),
                    reason: " yet: use --backend local (the default), which starts it as local processes".into(),
                })
            }
            TopologyKind::External => {
                return Err(TopologyError::DockerUnsupported {
                    what: format!("topology `{kind}`"),
                    reason: ": external nodes are never started by the suite".into(),
                })
            }
        };
        #[cfg(feature = "docker")]
        {
            let (containers, run) = container::start_run(count, persistence, options).await?;
            Ok(Self {
                kind,
                local: Vec::new(),
                external: Vec::new(),
                key_prefix: key_prefix.to_string(),
                sentinels: Vec::new(),
                pooler: None,
                sentinel: None,
                cluster: None,
                containers,
                sentinel_containers: Vec::new(),
                docker: Some(run),
            })
        }
        #[cfg(not(feature = "docker"))]
        {
            let _ = (count, persistence, options, key_prefix);
            Err(TopologyError::DockerUnsupported {
                what: "this build".into(),
                reason: ": lockbench was built without the `docker` cargo feature (rebuild with `cargo build --features docker`)".into(),
            })
        }
    }

    /// The docker run's containers besides the nodes (`None` unless started by
    /// [`Topology::start_docker`]).
    #[cfg(feature = "docker")]
    pub fn docker_run(&self) -> Option<&container::DockerRun> {
        self.docker.as_ref()
    }

    /// Redis containers (empty unless started by [`Topology::start_docker`]).
    #[cfg(feature = "docker")]
    pub fn container_nodes(&self) -> &[container::ContainerNode] {
        &self.containers
    }

    /// True when the nodes are containers ([`Topology::start_docker`]).
    pub fn is_docker(&self) -> bool {
        #[cfg(feature = "docker")]
        {
            self.docker.is_some()
        }
        #[cfg(not(feature = "docker"))]
        {
            false
        }
    }

    /// Every data node, local process or container, for the nemesis.
    pub fn node_handles(&mut self) -> Vec<NodeHandle<'_>> {
        #[allow(unused_mut)]
        let mut out: Vec<NodeHandle<'_>> = self.local.iter_mut().map(NodeHandle::Local).collect();
        #[cfg(feature = "docker")]
        out.extend(self.containers.iter_mut().map(NodeHandle::Container));
        out
    }

    /// Every Sentinel, local process or container, for the nemesis (empty for other kinds).
    pub fn sentinel_handles(&mut self) -> Vec<NodeHandle<'_>> {
        #[allow(unused_mut)]
        let mut out: Vec<NodeHandle<'_>> =
            self.sentinels.iter_mut().map(NodeHandle::Local).collect();
        #[cfg(feature = "docker")]
        out.extend(
            self.sentinel_containers
                .iter_mut()
                .map(NodeHandle::Container),
        );
        out
    }

    /// The data node called `name`, local process or container, for the nemesis.
    ///
    /// # Errors
    /// As [`Topology::node_mut`].
    pub fn node_handle(&mut self, name: &str) -> Result<NodeHandle<'_>, TopologyError> {
        #[cfg(feature = "docker")]
        if !self.containers.is_empty() {
            let known = self
                .containers
                .iter()
                .map(|n| n.name().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return self
                .containers
                .iter_mut()
                .find(|n| n.name() == name)
                .map(NodeHandle::Container)
                .ok_or(TopologyError::UnknownNode {
                    name: name.to_string(),
                    known,
                });
        }
        self.node_mut(name).map(NodeHandle::Local)
    }

    /// The kind this topology was built as.
    pub fn kind(&self) -> TopologyKind {
        self.kind
    }

    /// The endpoints clients lock on: one per node, in order `n1`, `n2`, …; for `sentinel`,
    /// one endpoint `primary` that finds the current primary through the Sentinels at every
    /// connect (see [`Topology::data_endpoints`] for the nodes themselves); with a pooler,
    /// PgBouncer's address under the server's name `n1`.
    pub fn endpoints(&self) -> Vec<NodeEndpoint> {
        if let Some(group) = &self.sentinel {
            return vec![group.primary_endpoint(&self.sentinel_endpoints())];
        }
        if let Some(cluster) = self.cluster_endpoint(&self.data_endpoints()) {
            return vec![cluster];
        }
        if let (Some(pooler), Some(server)) = (&self.pooler, self.local.first()) {
            return vec![NodeEndpoint::new(server.name(), pooler.endpoint().url)];
        }
        self.data_endpoints()
    }

    /// One endpoint per data node (direct, not through Sentinel), in order `n1`, `n2`, ….
    pub fn data_endpoints(&self) -> Vec<NodeEndpoint> {
        #[cfg(feature = "docker")]
        if !self.containers.is_empty() {
            return self
                .containers
                .iter()
                .map(container::ContainerNode::endpoint)
                .collect();
        }
        if self.is_external() {
            self.external.clone()
        } else {
            self.local.iter().map(LocalNode::endpoint).collect()
        }
    }

    /// Prefix of every key the suite writes on these nodes.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// True for URLs given by the user (never started, stopped or flushed here).
    pub fn is_external(&self) -> bool {
        self.kind == TopologyKind::External
    }

    /// Local node processes (empty for external topologies).
    pub fn local_nodes(&self) -> &[LocalNode] {
        &self.local
    }

    /// Local node processes, for the nemesis (kill, restart, pause).
    pub fn local_nodes_mut(&mut self) -> &mut [LocalNode] {
        &mut self.local
    }

    /// The local node called `name`, for the nemesis.
    ///
    /// # Errors
    /// [`TopologyError::ExternalRefused`] on an external topology;
    /// [`TopologyError::UnknownNode`] listing the valid names.
    pub fn node_mut(&mut self, name: &str) -> Result<&mut LocalNode, TopologyError> {
        if self.is_external() {
            return Err(TopologyError::ExternalRefused {
                op: "fault",
                node: self.external_node_label(name),
            });
        }
        let known = self
            .local
            .iter()
            .map(|n| n.name().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        self.local
            .iter_mut()
            .find(|n| n.name() == name)
            .ok_or(TopologyError::UnknownNode {
                name: name.to_string(),
                known,
            })
    }

    /// FLUSHALL on every local node (to reset between runs).
    ///
    /// # Errors
    /// [`TopologyError::ExternalRefused`] on an external topology (nothing is sent);
    /// [`TopologyError::Redis`] if a node does not answer.
    pub async fn flush_all(&self) -> Result<(), TopologyError> {
        if self.is_external() {
            return Err(TopologyError::ExternalRefused {
                op: "FLUSHALL",
                node: self
                    .external
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let opts = ConnectOptions::default();
        for endpoint in self.data_endpoints() {
            let redis_err = |source| TopologyError::Redis {
                node: endpoint.to_string(),
                source,
            };
            let mut conn = endpoint.connect(&opts).await.map_err(redis_err)?;
            let _: () = redis::cmd("FLUSHALL")
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
        }
        Ok(())
    }

    /// Stops every local node gracefully and concurrently (SIGTERM, then SIGKILL after 5 s).
    /// Sentinels are stopped first, so they start no failover during teardown.
    /// Containers (docker backend) are removed, then the Toxiproxy container and the network.
    /// Does nothing to external nodes. Failures are logged; every process is gone afterwards
    /// (dropping a node SIGKILLs it; a container left by a failure is removed by the
    /// last-resort cleanup, [`docker::remove_all_blocking`]).
    pub async fn shutdown(mut self) {
        #[cfg(feature = "docker")]
        {
            // Sentinels first, so they start no failover during teardown.
            let removals = self.sentinel_containers.iter_mut().map(|c| c.remove());
            futures::future::join_all(removals).await;
            let removals = self.containers.iter_mut().map(|c| c.remove());
            futures::future::join_all(removals).await;
            if let Some(run) = self.docker.as_mut() {
                run.remove().await;
            }
        }
        let sentinel_stops = self.sentinels.iter_mut().map(|node| async move {
            if let Err(e) = node.stop().await {
                tracing::warn!("stopping sentinel {}: {e}", node.name());
            }
        });
        futures::future::join_all(sentinel_stops).await;
        // The pooler before the server it forwards to.
        if let Some(pooler) = self.pooler.as_mut() {
            if let Err(e) = pooler.stop().await {
                tracing::warn!("stopping the pooler: {e}");
            }
        }
        let stops = self.local.iter_mut().map(|node| async move {
            if let Err(e) = node.stop().await {
                tracing::warn!("stopping node {}: {e}", node.name());
            }
        });
        futures::future::join_all(stops).await;
    }

    fn external_node_label(&self, name: &str) -> String {
        self.external
            .iter()
            .find(|e| e.name == name)
            .map(ToString::to_string)
            .unwrap_or_else(|| name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_serde_names_and_parse_loosely() {
        crate::variant_names::assert_names_match_serde::<TopologyKind>();
        let listed: Vec<&str> = <TopologyKind as strum::VariantArray>::VARIANTS
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(listed, TopologyKind::NAMES);
        assert_eq!(
            " Five ".parse::<TopologyKind>().unwrap(),
            TopologyKind::Five
        );
        assert!(matches!(
            "seven".parse::<TopologyKind>(),
            Err(TopologyError::UnknownKind { .. })
        ));
    }

    #[test]
    fn kind_parses_displays_and_serializes() {
        for name in TopologyKind::NAMES {
            let kind: TopologyKind = name.parse().unwrap();
            assert_eq!(kind.to_string(), name);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
        }
        assert_eq!("Five".parse::<TopologyKind>().unwrap(), TopologyKind::Five);
    }

    #[test]
    fn unknown_kind_lists_valid_names() {
        let msg = "three".parse::<TopologyKind>().unwrap_err().to_string();
        assert!(msg.contains("`three`"), "{msg}");
        assert!(msg.contains("single, five, sentinel, external"), "{msg}");
    }

    #[test]
    fn node_counts() {
        assert_eq!(TopologyKind::Single.local_node_count(), Some(1));
        assert_eq!(TopologyKind::Five.local_node_count(), Some(5));
        assert_eq!(TopologyKind::Sentinel.local_node_count(), Some(3));
        assert_eq!(TopologyKind::External.local_node_count(), None);
    }
}
