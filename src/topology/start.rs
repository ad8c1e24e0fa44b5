//! Starting a local or docker [`Topology`]: every kind's nodes, concurrently, ready when they
//! answer.

use std::path::PathBuf;
use std::time::Duration;

use super::{
    cluster, pgbouncer, ports, ClusterAddressing, ClusterSettings, DockerOptions, EtcdMember,
    LocalNode, LocalNodeConfig, Persistence, PoolerSettings, SentinelAddressing, SentinelOptions,
    ServerProgram, Topology, TopologyError, TopologyKind, DEFAULT_KEY_PREFIX,
    DEFAULT_START_TIMEOUT,
};

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
        // One arm per topology, no wildcard: a new one is refused here until it says how it
        // starts.
        match kind {
            TopologyKind::Single | TopologyKind::Five => {
                Self::start_nodes(kind, ServerProgram::Redis, Vec::new(), options).await
            }
            TopologyKind::Postgres => {
                let mut topology = Self::start_nodes(
                    kind,
                    ServerProgram::Postgres,
                    options.pg_settings.clone(),
                    options,
                )
                .await?;
                if let Some(settings) = options.pooler {
                    let server = format!("127.0.0.1:{}", topology.local[0].port());
                    topology.start_pooler(settings, server, options).await?;
                }
                Ok(topology)
            }
            TopologyKind::Sentinel => {
                let ports = (0..3)
                    .map(|_| ports::pick_free_port())
                    .collect::<Result<Vec<u16>, _>>()?;
                Self::start_sentinel(
                    options,
                    &SentinelOptions::default(),
                    &SentinelAddressing::direct(&ports),
                )
                .await
            }
            TopologyKind::Cluster => Self::start_local_cluster(options).await,
            TopologyKind::Etcd => {
                let peers = (0..3)
                    .map(|_| ports::pick_free_port())
                    .collect::<Result<Vec<u16>, _>>()?;
                let advertise = peers
                    .iter()
                    .map(|p| format!("127.0.0.1:{p}"))
                    .collect::<Vec<_>>();
                Self::start_etcd(options, &peers, &advertise).await
            }
            TopologyKind::External => Err(TopologyError::NotLocal { kind }),
        }
    }

    /// A local Redis Cluster, started again on fresh ports when a start fails in a way a
    /// second start can fix ([`cluster::start_again`]).
    async fn start_local_cluster(options: &LocalTopologyOptions) -> Result<Self, TopologyError> {
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

    /// The `local_node_count` nodes of `kind`, each running `program` with `extra_config`,
    /// started concurrently; if one fails, the others are killed.
    async fn start_nodes(
        kind: TopologyKind,
        program: ServerProgram,
        extra_config: Vec<String>,
        options: &LocalTopologyOptions,
    ) -> Result<Self, TopologyError> {
        let count = kind
            .local_node_count()
            .ok_or(TopologyError::NotLocal { kind })?;
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
        Ok(Self::of_local_nodes(kind, local, &options.key_prefix))
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
            let (containers, run) =
                super::container::start_run(count, persistence, options).await?;
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
}
