//! External nodes: Redis servers given by URL that the suite uses but never starts, stops or
//! flushes.
//!
//! Accepted URLs: `redis://[user[:password]@]host[:port][/db]` and the TLS form `rediss://…`
//! (rustls with the system's root certificates). Nodes are named `n1`, `n2`, … in the order
//! given. Errors name the node through [`NodeEndpoint`]'s `Display`, which hides the password.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::node::{redact_url, ClientTls, ConnectOptions, NodeEndpoint};
use crate::strategy::LockService;

use super::local::ping;
use super::program::{EtcdMember, ServerProgram};

/// The server behind a URL that is not a Redis one: `postgres://` / `postgresql://` is a
/// PostgreSQL server (user's own: lockbench only takes advisory locks and creates its fencing
/// sequence there, never drops or truncates anything), `http://` / `https://` an etcd member.
/// The scheme decides ([`LockService::of_url`]).
pub fn non_redis_program(url: &str) -> Option<ServerProgram> {
    match LockService::of_url(url)? {
        LockService::Postgres => Some(ServerProgram::Postgres),
        LockService::Etcd => Some(ServerProgram::Etcd(EtcdMember {
            peer_port: 0,
            advertise_peer: String::new(),
            initial_cluster: String::new(),
            cluster_token: String::new(),
        })),
        LockService::Redis => None,
    }
}
use super::{Topology, TopologyError, TopologyKind};

/// Checks each URL's form and builds endpoints `n1..nN`.
///
/// # Errors
/// [`TopologyError::NoExternalUrls`] for an empty list; [`TopologyError::InvalidUrl`] for a
/// scheme other than `redis`/`rediss`, a URL the redis crate cannot parse, or a URL given twice.
pub fn parse_endpoints(urls: &[String]) -> Result<Vec<NodeEndpoint>, TopologyError> {
    if urls.is_empty() {
        return Err(TopologyError::NoExternalUrls);
    }
    let mut seen = HashSet::new();
    let mut endpoints = Vec::with_capacity(urls.len());
    for (i, raw) in urls.iter().enumerate() {
        let url = raw.trim();
        let invalid = |reason: String| TopologyError::InvalidUrl {
            url: redact_url(url),
            reason,
        };
        if let Some(program) = non_redis_program(url) {
            if matches!(program, ServerProgram::Postgres) {
                // Options, user and database as the driver will read them.
                url.parse::<tokio_postgres::Config>().map_err(|e| {
                    invalid(scrub(&crate::strategy::describe_postgres_error(&e), url))
                })?;
            }
            let (host, port) = crate::node::host_port(url).map_err(|e| invalid(e.to_string()))?;
            if !seen.insert(format!("{host}:{port}")) {
                return Err(invalid(
                    "the same host and port is given twice; each node must be listed once".into(),
                ));
            }
            endpoints.push(NodeEndpoint::new(format!("n{}", i + 1), url));
            continue;
        }
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(invalid(
                "external nodes need a redis:// or rediss:// URL, e.g. redis://user:password@host:6379 \
                 (postgres://… for pg-advisory, http://host:2379 for etcd-lease)"
                    .into(),
            ));
        }
        let info = url
            .into_connection_info()
            .map_err(|e| invalid(scrub(&e.to_string(), url)))?;
        if !seen.insert(info.addr().to_string()) {
            return Err(invalid(
                "the same host and port is given twice; each node must be listed once".into(),
            ));
        }
        endpoints.push(NodeEndpoint::new(format!("n{}", i + 1), url));
    }
    Ok(endpoints)
}

/// Gives every endpoint `tls` (the `--tls-*` files). With files given, every URL must be
/// `rediss://`: a plain `redis://` node would ignore them, and the user asked for TLS.
///
/// # Errors
/// [`TopologyError::InvalidUrl`] naming the first URL that is not `rediss://`.
pub fn with_tls(
    endpoints: Vec<NodeEndpoint>,
    tls: Option<Arc<ClientTls>>,
) -> Result<Vec<NodeEndpoint>, TopologyError> {
    let Some(tls) = tls else {
        return Ok(endpoints);
    };
    endpoints
        .into_iter()
        .map(|e| {
            if e.url.starts_with("rediss://") {
                Ok(e.with_tls(Some(tls.clone())))
            } else {
                Err(TopologyError::InvalidUrl {
                    url: e.redacted_url(),
                    reason: "--tls-ca/--tls-cert/--tls-key are for TLS nodes: write the URL as \
                             rediss://host:port"
                        .into(),
                })
            }
        })
        .collect()
}

/// PINGs every endpoint concurrently, each bounded by `opts` (connect + response timeout).
///
/// # Errors
/// [`TopologyError::Unreachable`] for the first node (in list order) that did not answer.
pub async fn check_reachable(
    endpoints: &[NodeEndpoint],
    opts: &ConnectOptions,
) -> Result<(), TopologyError> {
    if endpoints.iter().any(|e| e.url.starts_with("rediss://")) {
        install_crypto_provider();
    }
    let bound = opts.connect_timeout + opts.response_timeout + Duration::from_millis(100);
    let results = futures::future::join_all(endpoints.iter().map(|endpoint| async move {
        if let Some(program) = non_redis_program(&endpoint.url) {
            return program
                .probe(&endpoint.url, bound)
                .await
                .map_err(|e| scrub(&e, &endpoint.url));
        }
        match tokio::time::timeout(bound, ping(endpoint, opts)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(scrub(&e.to_string(), &endpoint.url)),
            Err(_) => Err(format!("no answer to PING within {} ms", bound.as_millis())),
        }
    }))
    .await;
    for (endpoint, result) in endpoints.iter().zip(results) {
        if let Err(reason) = result {
            return Err(TopologyError::Unreachable {
                node: endpoint.to_string(),
                reason,
            });
        }
    }
    Ok(())
}

/// One endpoint `cluster` for a Redis Cluster reached through `seeds` (their URLs, in order;
/// no address remapping: the nodes' announced addresses are used as they are).
pub fn cluster_endpoint(seeds: &[NodeEndpoint], tls: Option<Arc<ClientTls>>) -> NodeEndpoint {
    let urls: Vec<String> = seeds.iter().map(|s| s.url.clone()).collect();
    NodeEndpoint::new("cluster", urls[0].clone())
        .with_cluster(crate::node::ClusterRouting {
            seeds: urls,
            address_map: Vec::new(),
        })
        .with_tls(tls)
}

/// Opens a cluster connection through the seeds and PINGs, bounded by `opts` (connect +
/// response timeout, plus the client's bounded retries).
///
/// # Errors
/// [`TopologyError::Unreachable`] naming the cluster endpoint (first seed, password hidden).
pub async fn check_cluster_reachable(
    endpoint: &NodeEndpoint,
    opts: &ConnectOptions,
) -> Result<(), TopologyError> {
    if endpoint.url.starts_with("rediss://") {
        install_crypto_provider();
    }
    let bound = 2 * (opts.connect_timeout + opts.response_timeout) + Duration::from_millis(500);
    let answer = async {
        let mut conn = endpoint.connect_cluster(opts).await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    let reason = match tokio::time::timeout(bound, answer).await {
        Ok(Ok(_)) => return Ok(()),
        Ok(Err(e)) => scrub(&e.to_string(), &endpoint.url),
        Err(_) => format!("no answer to PING within {} ms", bound.as_millis()),
    };
    Err(TopologyError::Unreachable {
        node: endpoint.to_string(),
        reason,
    })
}

/// Makes rustls use `ring` even if another crate in the build enables a second provider
/// (rustls refuses to choose between two on its own).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Removes the URL's password from an error message, in case a library quoted it.
fn scrub(message: &str, url: &str) -> String {
    match password_of(url) {
        Some(password) if !password.is_empty() => message.replace(password, "***"),
        _ => message.to_string(),
    }
}

/// The password part of `scheme://user:password@host…`, if any. A lone `redis://secret@host`
/// counts as a password (some clients read it so, and [`redact_url`] hides it); in any other
/// scheme (`postgres://user@host/db`) it is the user, which a server's "role … does not
/// exist" must be able to name.
fn password_of(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    match userinfo.find(':') {
        Some(colon) => Some(&userinfo[colon + 1..]),
        None if url.starts_with("redis") => Some(userinfo),
        None => None,
    }
}

impl Topology {
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
        let endpoints = with_tls(parse_endpoints(urls)?, tls)?;
        check_reachable(&endpoints, timeouts).await?;
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
        let seeds = with_tls(parse_endpoints(seeds)?, tls.clone())?;
        let endpoint = cluster_endpoint(&seeds, tls);
        check_cluster_reachable(&endpoint, timeouts).await?;
        Ok(Self {
            external: vec![endpoint],
            ..Self::of_local_nodes(TopologyKind::External, Vec::new(), key_prefix)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn accepts_redis_and_rediss_with_acl_user() {
        let eps = parse_endpoints(&urls(&[
            "redis://127.0.0.1:7001",
            "redis://alice:s3cret@10.0.0.2:7002/0",
            "rediss://bob:pw@example.com:6380",
        ]))
        .unwrap();
        let names: Vec<&str> = eps.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2", "n3"]);
        assert_eq!(eps[1].url, "redis://alice:s3cret@10.0.0.2:7002/0");
    }

    #[test]
    fn rejects_other_schemes_without_leaking_password() {
        let err = parse_endpoints(&urls(&["ftp://u:hunter2@h:1"])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("redis://"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }

    #[test]
    fn postgres_and_etcd_urls_are_accepted_and_named_in_order() {
        let e = parse_endpoints(&urls(&[
            "postgres://u:pw@db:5432/x",
            "http://m1:2379",
            "http://m2:2379",
        ]))
        .unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "n1");
        assert!(!e[0].to_string().contains("pw"), "{}", e[0]);
        assert!(matches!(
            non_redis_program(&e[0].url),
            Some(ServerProgram::Postgres)
        ));
        assert!(matches!(
            non_redis_program(&e[2].url),
            Some(ServerProgram::Etcd(_))
        ));
        let dup = parse_endpoints(&urls(&["http://m1:2379", "http://m1:2379"])).unwrap_err();
        assert!(dup.to_string().contains("twice"), "{dup}");
    }

    #[test]
    fn rejects_empty_list_and_duplicates() {
        assert!(matches!(
            parse_endpoints(&[]),
            Err(TopologyError::NoExternalUrls)
        ));
        let err = parse_endpoints(&urls(&["redis://h:1", "redis://x:y@h:1"])).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn password_is_found_and_scrubbed() {
        assert_eq!(password_of("redis://a:pw@h:1/0"), Some("pw"));
        assert_eq!(password_of("redis://h:1"), None);
        assert_eq!(password_of("redis://secret@h:1"), Some("secret"));
        assert_eq!(password_of("postgres://alice@h/db"), None);
        assert_eq!(password_of("postgres://alice:pw@h/db"), Some("pw"));
        assert_eq!(scrub("auth pw failed", "redis://a:pw@h"), "auth *** failed");
    }
}
