//! [`TopologyError`]: what can go wrong starting, reaching, faulting and tearing down nodes.

use std::path::PathBuf;

use super::TopologyKind;
use crate::toxiproxy::{ToxiproxyClientError, ToxiproxyError};

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
    /// Cutting or healing the cluster bus with nft failed ([`bus_cut`]).
    #[error("cluster bus cut: {reason}")]
    BusCut {
        /// What `nft` said, or why it could not run.
        reason: String,
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
    /// A Redis Cluster of fewer than 3 or more than 50 shards (the count given); checked
    /// before anything starts ([`ClusterSettings::validate`](crate::topology::ClusterSettings::validate)).
    #[error(
        "--shards {0}: a Redis Cluster needs 3 to 50 shards (redis-cli --cluster create needs at least 3 primaries)"
    )]
    ClusterShards(usize),
    /// A cluster node timeout under 100 ms (the timeout given).
    #[error("cluster node timeout {0:?} is below 100 ms")]
    ClusterNodeTimeout(std::time::Duration),
    /// A PgBouncer pool of 0 server connections
    /// ([`PoolerSettings::validate`](crate::topology::PoolerSettings::validate)).
    #[error("pool size must be at least 1 (server connections PgBouncer opens)")]
    PoolSize,
    /// A strategy on a topology that runs another lock service ([`TopologyKind::check_serves`]).
    #[error("strategy {strategy} locks on {service}, but topology `{topology}` runs {runs}: use topology `{instead}`")]
    WrongService {
        /// The strategy's name.
        strategy: &'static str,
        /// The service it locks on.
        service: &'static str,
        /// The topology given.
        topology: TopologyKind,
        /// The service that topology runs.
        runs: &'static str,
        /// The strategy's own topology.
        instead: TopologyKind,
    },
    /// An `external` URL for another service than the strategy's (`check_url_serves`).
    #[error("the URL is for {url_service}, but strategy {strategy} locks on {service}")]
    WrongUrlService {
        /// The service the URL's scheme names.
        url_service: &'static str,
        /// The strategy's name.
        strategy: &'static str,
        /// The service it locks on.
        service: &'static str,
    },
    /// A shipped adapter's library on a topology of another shape than it locks on
    /// ([`TopologyKind::check_shape`]).
    #[error("{strategy} drives a library that locks on {what} and topology {topology} is not that: use topology {fits} (or external)")]
    AdapterShape {
        /// The strategy's name.
        strategy: &'static str,
        /// What the library locks on, in words.
        what: &'static str,
        /// The topology given.
        topology: TopologyKind,
        /// The topology that is that.
        fits: TopologyKind,
    },
    /// A quorum strategy on a Redis Cluster ([`TopologyKind::check_shape`]).
    #[error("{0} takes a quorum of independent Redis nodes and topology cluster is one Redis Cluster (each lock lives on one shard): use topology five")]
    QuorumOnCluster(&'static str),
    /// A strategy that waits for a replica on a topology without replicas
    /// ([`TopologyKind::check_shape`]).
    #[error("{strategy} waits for a replica to acknowledge each lock and topology {topology} has no replicas: use topology sentinel (or external, with a primary that has replicas)")]
    NoReplicas {
        /// The strategy's name.
        strategy: &'static str,
        /// The topology given.
        topology: TopologyKind,
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
