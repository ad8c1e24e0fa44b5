//! A Redis node as the rest of the suite sees it: a name, a URL, and how to connect to it.
//!
//! Every strategy, nemesis and driver connects through [`NodeEndpoint::connect`], so the
//! connect and response timeouts are the same everywhere. The redis crate's own defaults
//! (1 s connect, 500 ms response) make a latency toxic above 500 ms look like an error, so
//! they are always set explicitly here.
//!
//! An endpoint may carry a [`SentinelLookup`]: then every (re)connect first asks the Sentinels
//! `SENTINEL GET-MASTER-ADDR-BY-NAME` and connects to the address they return (keeping the
//! URL's scheme, credentials and database), and refuses a node whose `ROLE` is not `master`.
//! A client that reconnects after a failover therefore follows the new primary.
//!
//! An endpoint may instead carry a [`ClusterRouting`]: then it names a whole Redis Cluster
//! ([`NodeEndpoint::connect_cluster`]), reached through seed URLs, with each node's announced
//! address remapped at connect time (to its client proxy), so `MOVED`/`ASK` redirections still
//! work while every client connection passes through the proxy.
//!
//! An endpoint may carry [`ClientTls`] (a CA and, for mutual TLS, a client certificate and
//! key, read from the `--tls-*` files by [`TlsFiles::load`]): its `rediss://` connections,
//! single node or cluster, then trust that CA instead of the system's roots and present the
//! client certificate.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::AsyncConnectionConfig;

/// Connection timeouts used for every connection the suite opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConnectOptions {
    /// Time allowed to open a TCP connection and finish the handshake (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub connect_timeout: Duration,
    /// Time allowed for one command's reply (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub response_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(1000),
            response_timeout: Duration::from_millis(500),
        }
    }
}

/// The PEM files of the `--tls-ca`, `--tls-cert` and `--tls-key` flags (paths only; what
/// a test's `config.json` records). All empty: TLS, if a URL asks for it (`rediss://`), trusts
/// the system's root certificates and presents no client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// CA certificate(s) the server's certificate must chain to, instead of the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// Client certificate (chain) for mutual TLS; only with `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PKCS#8, PKCS#1 or SEC1 PEM); only with `cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

/// Why a `--tls-*` file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    /// Only one of certificate and key was given.
    #[error("--tls-cert and --tls-key go together (mutual TLS needs both the client certificate and its key)")]
    CertWithoutKey,
    /// The file could not be read.
    #[error("--tls-{flag} {}: cannot read it: {source}", path.display())]
    Unreadable {
        /// `ca`, `cert` or `key`.
        flag: &'static str,
        /// The file as given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file was read but holds no usable PEM item of the kind needed.
    #[error("--tls-{flag} {}: {reason}", path.display())]
    Malformed {
        /// `ca`, `cert` or `key`.
        flag: &'static str,
        /// The file as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl TlsFiles {
    /// True when no file is given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    /// Reads and parses every file given: the CA and the client certificate must hold at least
    /// one PEM certificate each, the key one PEM private key. `None` when no file is given.
    ///
    /// # Errors
    /// [`TlsFileError::CertWithoutKey`] when only one of cert and key is given;
    /// [`TlsFileError::Unreadable`] / [`TlsFileError::Malformed`] naming the file.
    pub fn load(&self) -> Result<Option<Arc<ClientTls>>, TlsFileError> {
        if self.is_empty() {
            return Ok(None);
        }
        let root_cert = match &self.ca {
            Some(path) => Some(read_certificates("ca", path)?),
            None => None,
        };
        let client = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some((read_certificates("cert", cert)?, read_key(key)?)),
            (None, None) => None,
            _ => return Err(TlsFileError::CertWithoutKey),
        };
        Ok(Some(Arc::new(ClientTls { root_cert, client })))
    }
}

fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|source| TlsFileError::Unreadable {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

fn read_certificates(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let pem = read_pem(flag, path)?;
    let malformed = |reason: String| TlsFileError::Malformed {
        flag,
        path: path.to_path_buf(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(format!("not a PEM certificate file: {e}")))?;
    if certificates.is_empty() {
        return Err(malformed(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    if flag == "ca" {
        let mut roots = rustls::RootCertStore::empty();
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| malformed(format!("not a usable CA certificate: {e}")))?;
        }
    }
    Ok(pem)
}

fn read_key(path: &Path) -> Result<Vec<u8>, TlsFileError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivateKeyDer;
    let pem = read_pem("key", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsFileError::Malformed {
        flag: "key",
        path: path.to_path_buf(),
        reason: format!("holds no PEM private key: {e}"),
    })?;
    Ok(pem)
}

/// TLS material for `rediss://` connections, read by [`TlsFiles::load`]: PEM bytes, checked
/// to parse. `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// CA certificate(s) to trust instead of the system's roots.
    root_cert: Option<Vec<u8>>,
    /// Client certificate chain and private key, for mutual TLS.
    client: Option<(Vec<u8>, Vec<u8>)>,
}

impl ClientTls {
    /// True when a client certificate is presented (mutual TLS).
    pub fn is_mutual(&self) -> bool {
        self.client.is_some()
    }

    /// The redis crate's form.
    fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_cert.clone(),
        }
    }
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("custom_ca", &self.root_cert.is_some())
            .field("mutual", &self.client.is_some())
            .finish()
    }
}

/// How to find the current primary of a Sentinel-monitored group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelLookup {
    /// The monitored group's name (`sentinel monitor <name> …`).
    pub master_name: String,
    /// `redis://host:port` URLs of the Sentinels, asked in order until one answers.
    pub sentinels: Vec<String>,
}

impl SentinelLookup {
    /// Asks the Sentinels in order for the primary's address (`host`, `port`); the first that
    /// answers with an address wins.
    ///
    /// # Errors
    /// A [`redis::RedisError`] describing the last failure when no Sentinel gave an address.
    pub async fn primary_addr(
        &self,
        opts: &ConnectOptions,
    ) -> Result<(String, u16), redis::RedisError> {
        let mut last: Option<redis::RedisError> = None;
        for url in &self.sentinels {
            let sentinel = NodeEndpoint::new("sentinel", url.clone());
            let answer = async {
                let mut conn = sentinel.connect_direct(opts).await?;
                let reply: Option<(String, String)> = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master_name)
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, redis::RedisError>(reply)
            };
            match answer.await {
                Ok(Some((host, port))) => match port.parse::<u16>() {
                    Ok(port) => return Ok((host, port)),
                    Err(_) => {
                        last = Some(lookup_error(format!(
                            "sentinel {} returned port {port:?}",
                            redact_url(url)
                        )))
                    }
                },
                Ok(None) => {
                    last = Some(lookup_error(format!(
                        "sentinel {} does not monitor a master named {:?}",
                        redact_url(url),
                        self.master_name
                    )))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| lookup_error("no sentinel URLs configured".into())))
    }
}

/// How the cluster client retries a request that met a redirection, `TRYAGAIN`, `CLUSTERDOWN`
/// or a connection error: at most this many retries (the crate's default is 16)…
pub const CLUSTER_RETRIES: u32 = 2;
/// …waiting at least this long before a retry, in ms (the crate's default, 1280 ms, would
/// outlast a short lease by itself)…
pub const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 10;
/// …and at most this long, in ms.
pub const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 100;

/// How to reach a Redis Cluster: where to ask for the slot map, and which address to connect
/// to for each address the nodes announce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRouting {
    /// `redis://host:port` URLs asked for the slot map (any node of the cluster, or its proxy).
    pub seeds: Vec<String>,
    /// (announced `host`, `port`) → (`host`, `port`) to connect to instead (a node's client
    /// proxy). Applied by the crate at connect time only: its slot map keeps the announced
    /// addresses, so `MOVED`/`ASK` replies still name known nodes.
    pub address_map: Vec<((String, u16), (String, u16))>,
}

fn lookup_error(message: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, "sentinel lookup failed", message))
}

/// Why a node URL could not be read or rewritten ([`host_port`], [`with_host_port`]). Every
/// variant carries the URL with its password redacted, never the password itself.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The text is not a URL.
    #[error("{url}: {source}")]
    Parse {
        /// The URL, password redacted.
        url: String,
        /// What the URL parser said.
        source: url::ParseError,
    },
    /// The URL has no host part.
    #[error("{url}: no host")]
    NoHost {
        /// The URL, password redacted.
        url: String,
    },
    /// The new host is not a valid host.
    #[error("{url}: bad host {host:?}: {source}")]
    BadHost {
        /// The URL, password redacted.
        url: String,
        /// The host that was refused.
        host: String,
        /// What the URL parser said.
        source: url::ParseError,
    },
    /// The URL's scheme cannot carry a port.
    #[error("{url}: cannot set a port")]
    NoPort {
        /// The URL, password redacted.
        url: String,
    },
}

fn parse_url(url: &str) -> Result<url::Url, UrlError> {
    url::Url::parse(url).map_err(|source| UrlError::Parse {
        url: redact_url(url),
        source,
    })
}

/// Replaces host and port of a `redis://` URL, keeping scheme, credentials, path and query.
///
/// # Errors
/// [`UrlError`] when the URL does not parse, the host is invalid or the scheme takes no port.
pub fn with_host_port(url: &str, host: &str, port: u16) -> Result<String, UrlError> {
    let mut parsed = parse_url(url)?;
    parsed
        .set_host(Some(host))
        .map_err(|source| UrlError::BadHost {
            url: redact_url(url),
            host: host.to_string(),
            source,
        })?;
    parsed.set_port(Some(port)).map_err(|_| UrlError::NoPort {
        url: redact_url(url),
    })?;
    Ok(parsed.to_string())
}

/// Host and port of a `redis://` URL (port 6379 when absent).
///
/// # Errors
/// [`UrlError`] when the URL does not parse or has no host.
pub fn host_port(url: &str) -> Result<(String, u16), UrlError> {
    let parsed = parse_url(url)?;
    let host = parsed
        .host_str()
        .ok_or_else(|| UrlError::NoHost {
            url: redact_url(url),
        })?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok((host, parsed.port().unwrap_or(6379)))
}

/// One Redis node: a display name (`n1`, `primary`, …) and its `redis://` or `rediss://` URL.
///
/// The URL may carry an ACL user and password; [`fmt::Display`] and [`NodeEndpoint::redacted_url`]
/// never show the password, so an endpoint can be logged or written to a result file as is.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// Short name used in logs, histories and fault targets.
    pub name: String,
    /// Full connection URL, possibly with credentials. Never log this field directly.
    /// With a [`SentinelLookup`], only its scheme, credentials and database are used (the
    /// host and port come from the Sentinels at each connect).
    pub url: String,
    /// Find the node through Sentinel at every connect (the current primary of a group).
    pub sentinel: Option<SentinelLookup>,
    /// The endpoint is a whole Redis Cluster ([`NodeEndpoint::connect_cluster`]).
    pub cluster: Option<ClusterRouting>,
    /// CA and client certificate for `rediss://` connections (system roots when `None`).
    pub tls: Option<Arc<ClientTls>>,
}

impl NodeEndpoint {
    /// Builds an endpoint from a name and URL.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            sentinel: None,
            cluster: None,
            tls: None,
        }
    }

    /// The same endpoint, its `rediss://` connections using `tls`.
    pub fn with_tls(mut self, tls: Option<Arc<ClientTls>>) -> Self {
        self.tls = tls;
        self
    }

    /// The same endpoint, naming a whole Redis Cluster reached through `routing`.
    pub fn with_cluster(mut self, routing: ClusterRouting) -> Self {
        self.cluster = Some(routing);
        self
    }

    /// Opens a cluster connection (endpoints with a [`ClusterRouting`] only): the slot map is
    /// read from the seeds, every node connection uses `opts`' connect and response timeouts
    /// (the crate has no response timeout by default), and retries are bounded by
    /// [`CLUSTER_RETRIES`], [`CLUSTER_MIN_RETRY_WAIT_MS`] and [`CLUSTER_MAX_RETRY_WAIT_MS`].
    ///
    /// # Errors
    /// A [`redis::RedisError`]: no cluster routing on this endpoint, bad seed URL, no seed
    /// reachable, no slot map.
    pub async fn connect_cluster(
        &self,
        opts: &ConnectOptions,
    ) -> Result<ClusterConnection, redis::RedisError> {
        let Some(routing) = &self.cluster else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "not a cluster endpoint",
                self.to_string(),
            )));
        };
        let map = routing
            .address_map
            .iter()
            .map(|((h, p), (to_h, to_p))| {
                (
                    redis::cluster::NodeAddress::new(h.as_str(), *p),
                    redis::cluster::NodeAddress::new(to_h.as_str(), *to_p),
                )
            })
            .collect();
        let mut builder = ClusterClientBuilder::new(routing.seeds.iter().map(String::as_str));
        if let Some(tls) = &self.tls {
            builder = builder.certs(tls.certificates());
        }
        builder
            .connection_timeout(opts.connect_timeout)
            .response_timeout(opts.response_timeout)
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
            .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
            .node_address_map(map)
            .build()?
            .get_async_connection()
            .await
    }

    /// The same endpoint, resolved through `lookup` at every connect.
    pub fn with_sentinel(mut self, lookup: SentinelLookup) -> Self {
        self.sentinel = Some(lookup);
        self
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }

    /// Opens one multiplexed connection with the given timeouts. With a [`SentinelLookup`],
    /// asks the Sentinels for the primary first, connects there and checks `ROLE` is `master`.
    ///
    /// # Errors
    /// Any [`redis::RedisError`]: bad URL, refused or timed-out connect, failed AUTH; with
    /// Sentinel, no Sentinel answering, or a `READONLY` error when the node returned is not
    /// (yet) a primary.
    pub async fn connect(
        &self,
        opts: &ConnectOptions,
    ) -> Result<MultiplexedConnection, redis::RedisError> {
        let Some(lookup) = &self.sentinel else {
            return self.connect_direct(opts).await;
        };
        let (host, port) = lookup.primary_addr(opts).await?;
        let url =
            with_host_port(&self.url, &host, port).map_err(|e| lookup_error(e.to_string()))?;
        let node = NodeEndpoint::new(self.name.clone(), url).with_tls(self.tls.clone());
        let mut conn = node.connect_direct(opts).await?;
        let role: redis::Value = redis::cmd("ROLE").query_async(&mut conn).await?;
        let is_master = matches!(&role, redis::Value::Array(items)
            if matches!(items.first(), Some(redis::Value::BulkString(b)) if b.as_slice() == b"master"));
        if !is_master {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
                "sentinel returned a node that is not a primary",
                format!("{host}:{port} (failover in progress?)"),
            )));
        }
        Ok(conn)
    }

    /// Opens a connection to the URL itself, ignoring any Sentinel lookup.
    ///
    /// # Errors
    /// As [`NodeEndpoint::connect`].
    pub async fn connect_direct(
        &self,
        opts: &ConnectOptions,
    ) -> Result<MultiplexedConnection, redis::RedisError> {
        let client = match &self.tls {
            Some(tls) => redis::Client::build_with_tls(self.url.as_str(), tls.certificates())?,
            None => redis::Client::open(self.url.as_str())?,
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(opts.connect_timeout))
            .set_response_timeout(Some(opts.response_timeout));
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

impl fmt::Debug for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeEndpoint")
            .field("name", &self.name)
            .field("url", &self.redacted_url())
            .field("sentinel", &self.sentinel.as_ref().map(|s| &s.master_name))
            .field("tls", &self.tls)
            .finish()
    }
}

impl fmt::Display for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.redacted_url())
    }
}

/// Replaces the password part of `scheme://user:password@host…` with `***`.
///
/// URLs without credentials, or with a user only, are returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let redacted_userinfo = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None if !userinfo.is_empty() && url[..scheme_end].starts_with("redis") => {
            // `redis://:password@host` has an empty user; `redis://password@host` is
            // read by some clients as a password, so hide it too.
            "***".to_string()
        }
        None => userinfo.to_string(),
    };
    format!(
        "{}://{}{}",
        &url[..scheme_end],
        redacted_userinfo,
        &rest[at..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_password_and_keeps_user() {
        assert_eq!(
            redact_url("redis://alice:s3cret@10.0.0.1:6380/0"),
            "redis://alice:***@10.0.0.1:6380/0"
        );
        assert_eq!(
            redact_url("rediss://:s3cret@host:6379"),
            "rediss://:***@host:6379"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:7000"),
            "redis://127.0.0.1:7000"
        );
        assert_eq!(redact_url("redis://s3cret@host"), "redis://***@host");
    }

    #[test]
    fn host_port_and_with_host_port() {
        assert_eq!(
            host_port("redis://u:p@10.0.0.1:7000/2").unwrap(),
            ("10.0.0.1".to_string(), 7000)
        );
        assert_eq!(host_port("redis://h").unwrap(), ("h".to_string(), 6379));
        assert_eq!(
            with_host_port("redis://u:p@10.0.0.1:7000/2", "127.0.0.1", 41000).unwrap(),
            "redis://u:p@127.0.0.1:41000/2"
        );
        assert!(host_port("not a url").is_err());
    }

    #[test]
    fn display_and_debug_never_show_password() {
        let e = NodeEndpoint::new("n1", "redis://bob:hunter2@h:1");
        assert!(!format!("{e}").contains("hunter2"));
        assert!(!format!("{e:?}").contains("hunter2"));
    }
}
