//! Validated run options, built from the CLI (or, later, a scenario file) before anything starts.
//!
//! [`RunConfig`] is also written to `results/<run>/config.json`, with passwords redacted, so
//! a result directory says exactly what produced it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::driver::{Workload, WorkloadError};
use crate::node::{redact_url, ConnectOptions};
use crate::strategy::{RetryPolicy, StrategyError, StrategyKind, StrategyOptions};
use crate::topology::{Persistence, TopologyKind};

/// Errors in a run configuration; each names the option to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Workload values out of range.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// Any other invalid combination.
    #[error("{0}")]
    Invalid(String),
}

/// Which Redis nodes a run talks to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopologyConfig {
    /// `single`, `five` or `external`.
    pub kind: TopologyKind,
    /// Node URLs for `external` (never started, stopped or flushed by the suite).
    #[serde(serialize_with = "serialize_redacted_urls")]
    pub urls: Vec<String>,
    /// Persistence of local nodes.
    pub persistence: Persistence,
    /// Prefix of every key the suite writes, e.g. `lockbench:`.
    pub key_prefix: String,
}

fn serialize_redacted_urls<S: serde::Serializer>(urls: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(urls.iter().map(|u| redact_url(u)))
}

/// Everything a `lockbench run` needs, validated.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    /// Run name, used in the result directory name.
    pub name: String,
    /// The nodes.
    pub topology: TopologyConfig,
    /// Strategies to run one after another, each with the same workload.
    pub strategies: Vec<StrategyKind>,
    /// Lease TTL, ms in JSON.
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Acquire retry policy.
    pub retry: RetryPolicy,
    /// Renew leases every TTL/3 while held.
    pub watchdog: bool,
    /// Redlock clock-drift factor (spec default 0.01).
    pub drift_factor: f64,
    /// Per-node operation timeout, ms in JSON (the CLI's default is
    /// [`StrategyOptions::default_node_timeout`] of the TTL).
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
    /// Clients, contention, pacing, stop condition.
    pub workload: Workload,
    /// Connection timeouts.
    pub connect: ConnectOptions,
    /// Root of result directories (default `results/`).
    pub results_root: PathBuf,
    /// Reach the nodes directly, not through the embedded Toxiproxy.
    pub direct: bool,
}

impl RunConfig {
    /// Checks combinations the parsers cannot see.
    ///
    /// # Errors
    /// [`ConfigError`] naming the option.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.workload.validate()?;
        if self.strategies.is_empty() {
            return Err(ConfigError::Invalid(
                "--strategy needs at least one name".into(),
            ));
        }
        if self.ttl.is_zero() {
            return Err(ConfigError::Invalid("--ttl must be above 0".into()));
        }
        if self.node_timeout.is_zero() {
            return Err(ConfigError::Invalid(
                "--node-timeout must be above 0".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.drift_factor) {
            return Err(ConfigError::Invalid(
                "--drift-factor must be in [0, 1), e.g. 0.01".into(),
            ));
        }
        for &kind in &self.strategies {
            self.strategy_options(kind)
                .validate()
                .map_err(|e| match e {
                    StrategyError::TtlTooShort { .. } => {
                        ConfigError::Invalid(format!("--ttl: {e}"))
                    }
                    StrategyError::InvalidOptions(m) => ConfigError::Invalid(m),
                    other => ConfigError::Invalid(other.to_string()),
                })?;
        }
        match (self.topology.kind, self.topology.urls.is_empty()) {
            (TopologyKind::External, true) => {
                return Err(ConfigError::Invalid(
                    "--topology external needs --url redis://host:port (repeat for each node)"
                        .into(),
                ))
            }
            (TopologyKind::External, false) => {}
            (_, false) => {
                return Err(ConfigError::Invalid(
                    "--url is only for --topology external".into(),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// Strategy options for one strategy of this run. Keys get `<prefix><strategy>:` so the
    /// strategies of one run never see each other's keys.
    pub fn strategy_options(&self, kind: StrategyKind) -> StrategyOptions {
        StrategyOptions {
            kind,
            ttl: self.ttl,
            retry: self.retry,
            watchdog: self.watchdog,
            drift_factor: self.drift_factor,
            key_prefix: format!("{}{}:", self.topology.key_prefix, kind),
            node_timeout: self.node_timeout,
        }
    }
}
