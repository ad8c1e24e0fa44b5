//! The servers a test runs on ([`TopologySpec`]) and the checks of its server-side settings:
//! PostgreSQL `key=value` settings, Redis Cluster seeds, TLS files.

use serde::{Deserialize, Serialize};

use super::{Test, TestError};
use crate::node::{redact_url, TlsFiles};
use crate::topology::{ClusterSettings, Persistence, PoolerSettings, TopologyKind};

/// The servers a test runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// `single`, `five`, `sentinel`, `postgres`, `etcd` or `external`.
    pub kind: TopologyKind,
    /// Node URLs for `external` (never started, stopped or flushed by the suite); passwords
    /// are redacted when written.
    #[serde(default, serialize_with = "serialize_redacted_urls")]
    pub urls: Vec<String>,
    /// `external` only, instead of `urls`: seed URLs of a Redis Cluster the suite did not
    /// start (one endpoint `cluster`; lock keys hash-tagged so key and fence share a slot).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_redacted_urls"
    )]
    pub cluster_seeds: Vec<String>,
    /// Persistence of local nodes.
    #[serde(default)]
    pub persistence: Persistence,
    /// Prefix of every key the test writes; strategy `s` writes under `<key_prefix><s>:`.
    pub key_prefix: String,
    /// Reach the nodes directly instead of through the embedded Toxiproxy (no faults then).
    #[serde(default)]
    pub direct: bool,
    /// `postgres` only: a pooler (PgBouncer) between the clients and the server; the client
    /// proxy `n1` then leads to the pooler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooler: Option<PoolerSettings>,
    /// `postgres` only: server settings `key=value` (`postgres -c key=value`), e.g.
    /// `idle_session_timeout=2s`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pg_settings: Vec<String>,
    /// `cluster` only: shards and node timeout (default 3 shards, 1500 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterSettings>,
    /// `external` only: CA and client certificate files for the `rediss://` nodes (paths;
    /// read and parsed when the test is checked, and again when it starts).
    #[serde(default, skip_serializing_if = "TlsFiles::is_empty")]
    pub tls: TlsFiles,
}

/// Checks one server setting: `key=value`, the key a PostgreSQL parameter name (letters,
/// digits, `_` and `.`, not starting with a digit), the value not empty.
///
/// # Errors
/// A message naming the setting and the shape it needs.
pub fn check_pg_setting(setting: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "server setting `{setting}`: {why}; give key=value, e.g. idle_session_timeout=2s"
        ))
    };
    let Some((key, value)) = setting.split_once('=') else {
        return bad("no `=`");
    };
    let key = key.trim();
    if key.is_empty()
        || key.starts_with(|c: char| c.is_ascii_digit())
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return bad("the key must be a parameter name (letters, digits, `_`, `.`)");
    }
    if value.trim().is_empty() {
        return bad("the value is empty");
    }
    Ok(())
}

impl Test {
    /// `--cluster` seeds: external topology only, not with `--url`, `redis://`/`rediss://`
    /// URLs that parse, and `--direct` (a cluster client follows `MOVED` to the addresses the
    /// nodes announce, past any proxy lockbench would put in front of the seeds).
    pub(super) fn check_cluster_seeds(&self) -> Result<(), TestError> {
        let spec = &self.topology;
        if spec.cluster_seeds.is_empty() {
            return Ok(());
        }
        let invalid = |m: String| Err(TestError::Invalid(m));
        if spec.kind != TopologyKind::External {
            return invalid(format!(
                "--cluster (seed URLs of a Redis Cluster lockbench did not start) is for \
                 --topology external, this test has {} (--topology cluster starts one)",
                spec.kind
            ));
        }
        if !spec.urls.is_empty() {
            return invalid(
                "--cluster and --url together: give the cluster's seed nodes with --cluster \
                 only (the cluster client finds the other nodes itself)"
                    .into(),
            );
        }
        let endpoints = crate::topology::external::parse_endpoints(&spec.cluster_seeds)
            .map_err(|e| TestError::Invalid(format!("--cluster: {e}")))?;
        if let Some(e) = endpoints
            .iter()
            .find(|e| !(e.url.starts_with("redis://") || e.url.starts_with("rediss://")))
        {
            return invalid(format!(
                "--cluster {}: seed nodes need a redis:// or rediss:// URL",
                e.redacted_url()
            ));
        }
        if !spec.direct {
            return invalid(
                "--cluster needs --direct: the cluster client follows MOVED/ASK to the \
                 addresses the nodes announce, so a proxy in front of the seeds would not \
                 carry the traffic"
                    .into(),
            );
        }
        for &s in &self.strategies {
            if s.is_adapter() || s.service() != crate::strategy::LockService::Redis {
                return invalid(format!(
                    "--strategy {s} on --cluster: lockbench's own Redis strategies run on a \
                     Redis Cluster"
                ));
            }
        }
        Ok(())
    }

    /// The `--tls-*` files: external topology only, cert and key together, each file read
    /// and parsed, every URL `rediss://`, no adapter strategy (its own client would not get
    /// them), and through the proxies only to a node at 127.0.0.1 (the proxy's address is
    /// what the certificate check sees).
    pub(super) fn check_tls(&self) -> Result<(), TestError> {
        let spec = &self.topology;
        if spec.tls.is_empty() {
            return Ok(());
        }
        let invalid = |m: String| Err(TestError::Invalid(m));
        if spec.kind != TopologyKind::External {
            return invalid(format!(
                "--tls-ca/--tls-cert/--tls-key are for --topology external (nodes lockbench \
                 did not start), this test has {}",
                spec.kind
            ));
        }
        spec.tls
            .load()
            .map_err(|e| TestError::Invalid(e.to_string()))?;
        if let Some(s) = self.strategies.iter().find(|s| s.is_adapter()) {
            return invalid(format!(
                "--strategy {s} with --tls-*: an adapter opens its own connections and is not \
                 given the certificate files"
            ));
        }
        for url in spec.urls.iter().chain(&spec.cluster_seeds) {
            if !url.starts_with("rediss://") {
                return invalid(format!(
                    "--url {}: --tls-ca/--tls-cert/--tls-key are for TLS nodes: write the URL \
                     as rediss://host:port",
                    redact_url(url)
                ));
            }
            let proxied_host_ok =
                crate::node::host_port(url).is_ok_and(|(host, _)| host == "127.0.0.1");
            if !spec.direct && !proxied_host_ok && spec.cluster_seeds.is_empty() {
                return invalid(format!(
                    "--url {}: add --direct: through lockbench's proxy the client reaches \
                     127.0.0.1, and the server certificate names {}",
                    redact_url(url),
                    crate::node::host_port(url).map_or_else(|_| "another host".into(), |(h, _)| h)
                ));
            }
        }
        Ok(())
    }
}

fn serialize_redacted_urls<S: serde::Serializer>(urls: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(urls.iter().map(|u| redact_url(u)))
}
