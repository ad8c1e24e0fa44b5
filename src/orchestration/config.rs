//! Validated run options, built from the CLI (or, later, a scenario file) before anything starts.
//!
//! [`RunConfig`] is also written to `results/<run>/config.json`, with passwords redacted, so
//! a result directory says exactly what produced it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::driver::{Pacing, StopCondition, Workload, WorkloadError};
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
        // Each strategy writes into `<run>/<strategy>/`: a repeat would overwrite the first.
        for (i, s) in self.strategies.iter().enumerate() {
            if self.strategies[..i].contains(s) {
                return Err(ConfigError::Invalid(format!(
                    "--strategy lists {s} twice: name each strategy once (to repeat a run, run \
                     lockbench again; every run gets its own directory)"
                )));
            }
        }
        if self.retry.attempts == 0 {
            return Err(ConfigError::Invalid(
                "--retry-attempts must be at least 1 (1 = no retry)".into(),
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
            self.topology
                .kind
                .check_shape(kind)
                .map_err(|why| ConfigError::Invalid(format!("--strategy {kind}: {why}")))?;
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
        for &kind in &self.strategies {
            self.topology
                .kind
                .check_serves(kind)
                .map_err(|m| ConfigError::Invalid(format!("--strategy: {m}")))?;
            if self.topology.kind == TopologyKind::External {
                for url in &self.topology.urls {
                    crate::topology::pairing::check_url_serves(url, kind).map_err(|why| {
                        ConfigError::Invalid(format!(
                            "--url {}: {why}",
                            crate::node::redact_url(url)
                        ))
                    })?;
                }
            }
            if self.workload.shared_connection
                && kind.service() == crate::strategy::LockService::Postgres
            {
                return Err(ConfigError::Invalid(format!(
                    "--shared-connection with {kind}: a PostgreSQL advisory lock belongs to its \
                     session, and one session re-grants a lock it holds to every client sharing \
                     it (advisory locks are re-entrant): give each client its own connection"
                )));
            }
        }
        match (self.topology.kind, self.topology.urls.is_empty()) {
            (TopologyKind::External, true) => {
                return Err(ConfigError::Invalid(
                    "--topology external needs --url redis://host:port (repeat for each node)"
                        .into(),
                ))
            }
            (TopologyKind::External, false) if self.topology.key_prefix.is_empty() => {
                return Err(ConfigError::Invalid(
                    "--key-prefix must not be empty with --topology external: lockbench \
                     writes lock keys and INCRs fencing counters in your keyspace (default \
                     `lockbench:`)"
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
        self.check_descriptor_budget()
    }

    /// Refuses a client count this process cannot hold open (see [`crate::topology::limits`]).
    fn check_descriptor_budget(&self) -> Result<(), ConfigError> {
        if self.workload.shared_connection {
            return Ok(());
        }
        let Ok(limit) = crate::topology::limits::raise_nofile_limit() else {
            return Ok(()); // cannot tell; the connects will say so
        };
        let nodes = match self.topology.kind {
            TopologyKind::External => self.topology.urls.len() as u64,
            TopologyKind::Five => 5,
            _ => 1,
        };
        let per_client = self
            .strategies
            .iter()
            .map(|k| if k.is_quorum() { nodes } else { 1 })
            .max()
            .unwrap_or(1);
        let proxied = !self.direct;
        let most = limit.max_clients(proxied, per_client);
        if u64::from(self.workload.clients) > most {
            let each = per_client * if proxied { 3 } else { 1 };
            return Err(ConfigError::Invalid(format!(
                "--clients {} needs about {} descriptors ({each} per client{}), but this process may \
                 open {} (hard limit, `ulimit -Hn`): use at most {most} clients{}",
                self.workload.clients,
                u64::from(self.workload.clients) * each
                    + crate::topology::limits::RESERVED_DESCRIPTORS,
                if proxied {
                    ": its connection and the embedded proxy's two"
                } else {
                    ""
                },
                limit.hard,
                if proxied { ", or --direct" } else { "" },
            )));
        }
        Ok(())
    }

    /// Settings that are legal but will not measure what the user probably wants, one
    /// sentence each (printed as warnings before the run starts).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let hold = self.workload.hold.max();
        let expiring: Vec<String> = self
            .strategies
            .iter()
            .filter(|k| k.has_ttl())
            .map(ToString::to_string)
            .collect();
        if hold > self.ttl && !self.watchdog && !expiring.is_empty() {
            out.push(format!(
                "--hold {} is longer than --ttl {}: leases will expire inside the critical \
                 section, so expect mutual-exclusion violations unless fenced ({}); use \
                 --watchdog or a longer --ttl to measure the lock itself",
                self.workload.hold,
                humantime::format_duration(self.ttl),
                expiring.join(", ")
            ));
        }
        if let StopCondition::Duration(d) = self.workload.stop {
            if hold >= d {
                out.push(format!(
                    "--hold {} is not shorter than the run (-d {}): sections still inside at the \
                     end get a grace period, then are cut and counted as cut",
                    self.workload.hold,
                    humantime::format_duration(d)
                ));
            }
            if let Pacing::Open { rate_per_s } = self.workload.pacing {
                let expected = rate_per_s * d.as_secs_f64();
                if expected < self.workload.clients as f64 {
                    out.push(format!(
                        "--rate {rate_per_s} ops/s for {} starts about {} attempt(s) per \
                         strategy: fewer than the {} clients, so some clients never run",
                        humantime::format_duration(d),
                        expected.floor() as u64,
                        self.workload.clients
                    ));
                }
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::HoldTime;

    fn config() -> RunConfig {
        RunConfig {
            name: "t".into(),
            topology: TopologyConfig {
                kind: TopologyKind::Single,
                urls: vec![],
                persistence: Persistence::None,
                key_prefix: "lockbench:".into(),
            },
            strategies: vec![StrategyKind::Single],
            ttl: Duration::from_secs(1),
            retry: RetryPolicy::default(),
            watchdog: false,
            drift_factor: 0.01,
            node_timeout: Duration::from_millis(50),
            workload: Workload {
                clients: 4,
                resources: 4,
                hold: HoldTime::Fixed(Duration::ZERO),
                stop: StopCondition::Duration(Duration::from_secs(2)),
                pacing: Pacing::Closed,
                seed: 1,
                shared_connection: false,
                in_flight: Workload::DEFAULT_IN_FLIGHT,
            },
            connect: ConnectOptions::default(),
            results_root: "results".into(),
            direct: false,
        }
    }

    #[test]
    fn repeats_zero_retries_and_empty_external_prefix_are_rejected() {
        assert!(config().validate().is_ok());
        let mut c = config();
        c.strategies = vec![
            StrategyKind::Single,
            StrategyKind::Redlock,
            StrategyKind::Single,
        ];
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--strategy lists single twice"), "{e}");
        let mut c = config();
        c.retry.attempts = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--retry-attempts"));
        let mut c = config();
        c.topology.kind = TopologyKind::External;
        c.topology.urls = vec!["redis://127.0.0.1:6379".into()];
        c.topology.key_prefix = String::new();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--key-prefix"));
        // Local nodes are lockbench's own: an empty prefix is allowed there.
        let mut c = config();
        c.topology.key_prefix = String::new();
        assert!(c.validate().is_ok());
    }

    #[test]
    fn config_json_never_holds_a_password() {
        let mut c = config();
        c.topology.kind = TopologyKind::External;
        c.topology.urls = vec!["redis://alice:hunter2@127.0.0.1:6379".into()];
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            !text.contains("hunter2") && text.contains("alice:***"),
            "{text}"
        );
    }

    #[test]
    fn warns_about_hold_past_ttl_or_run_and_tiny_rates() {
        assert!(config().warnings().is_empty());
        let mut c = config();
        c.workload.hold = HoldTime::Fixed(Duration::from_secs(3));
        let w = c.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("leases will expire inside the critical section"));
        assert!(w[1].contains("not shorter than the run"));
        c.watchdog = true;
        assert_eq!(c.warnings().len(), 1, "the watchdog renews: no TTL warning");
        let mut c = config();
        c.workload.pacing = Pacing::Open { rate_per_s: 0.5 };
        let w = c.warnings();
        assert!(w[0].contains("starts about 1 attempt(s)"), "{w:?}");
    }
}
