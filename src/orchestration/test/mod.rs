//! A test as one value: Jepsen's map of topology + client (strategy options) + workload +
//! nemesis + checker, with what the claim expects. `lockbench run` builds one from flags,
//! `lockbench chaos` from a scenario file, the matrix one per trial; the
//! [`runner`](super::runner) runs any of them the same way.
//!
//! Every default lives in [`defaults`]. The resolved test (no default left implicit, passwords
//! redacted) is written to `config.json`, and `lockbench run --config <config.json>` reads it
//! back and runs the same test again in a new directory.

mod client;
mod descriptors;
pub mod problem;
mod rules;
mod topology;
mod validate;
mod warnings;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use client::ClientSpec;
pub use problem::{Field, Problem};
pub use topology::{check_pg_setting, TopologySpec};

use super::expectation::Expectation;
use crate::driver::{StopCondition, Workload, WorkloadError};
use crate::nemesis::FaultStep;
use crate::strategy::{StrategyKind, StrategyOptions};
use crate::topology::TopologyKind;

/// The one source of defaults for `run`, `chaos` and the matrix. A scenario file or the matrix
/// that needs another value sets it explicitly.
pub mod defaults {
    use std::time::Duration;

    use crate::node::ConnectOptions;
    use crate::strategy::RetryPolicy;

    /// Acquire retry: [`RetryPolicy::default`] (3 attempts, 5 ms apart plus up to 5 ms of
    /// jitter, no overall timeout).
    pub fn retry() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// Connect 1 s, reply 500 ms ([`ConnectOptions::default`]).
    pub fn connect() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// Redlock's clock-drift factor (the Redis distributed-lock page suggests 0.01).
    pub const DRIFT_FACTOR: f64 = 0.01;

    /// Prefix of every key a test writes; each strategy adds `<strategy>:`.
    pub const KEY_PREFIX: &str = crate::topology::DEFAULT_KEY_PREFIX;

    /// Workload seed.
    pub const SEED: u64 = 1;

    /// Per-node operation timeout for a TTL: [`crate::strategy::StrategyOptions::default_node_timeout`]
    /// (TTL/10, 1 ms to 500 ms).
    pub fn node_timeout(ttl: Duration) -> Duration {
        crate::strategy::StrategyOptions::default_node_timeout(ttl)
    }
}

/// Errors in a test; each names the option to fix (as a `run` flag: the CLI and
/// `run --config` report them).
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// Workload values out of range.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// Any other invalid combination.
    #[error("{0}")]
    Invalid(String),
    /// A `config.json` that cannot be read or is not a test.
    #[error("{}: {message}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What the checker does with the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckerSpec {
    /// Record history and ledger and check them (`false`: `run --no-audit`, a pure speed run
    /// with no verdict).
    pub audit: bool,
}

/// One test: topology, strategies (run one after another, each on the same workload and
/// schedule), client options, workload, nemesis schedule, checker, and the verdict the claim
/// predicts per strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Test {
    /// Name: part of the result directory's name.
    pub name: String,
    /// The claim a scenario tests (`None` for a plain `run`).
    #[serde(default)]
    pub claim: Option<String>,
    /// Longer explanation.
    #[serde(default)]
    pub description: String,
    /// The servers.
    pub topology: TopologySpec,
    /// Strategies, each once.
    pub strategies: Vec<StrategyKind>,
    /// How clients take locks.
    pub client: ClientSpec,
    /// Clients, contention, pacing, stop condition, seed.
    pub workload: Workload,
    /// Fault schedule, offsets from each strategy's start.
    #[serde(default)]
    pub nemesis: Vec<FaultStep>,
    /// Auditing.
    pub checker: CheckerSpec,
    /// Expected verdict per strategy name.
    #[serde(default)]
    pub expect: BTreeMap<String, Expectation>,
    /// The clients spread over `lockbench worker` processes (`run --workers N`, a scenario's
    /// `workers = N`); `None`: every client in this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersSpec>,
    /// Where the strategies' ledgers live when it is not the default (`run --ledger`):
    /// `postgres` (a server lockbench starts for the run) or a `postgres://` URL, its password
    /// redacted. `None`: `ledger.sqlite` per strategy (`postgres` for a test with workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
    /// The container images when the test ran on `--backend docker` (`chaos`, `matrix`);
    /// `None`: local processes. The runner records the backend a test ran on here, so that
    /// `run --config` reruns it on the same images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerImages>,
}

/// The images of a test run on Docker containers ([`Test::docker`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerImages {
    /// The Redis image (`name:tag`).
    pub redis_image: String,
    /// The Toxiproxy image.
    pub toxiproxy_image: String,
}

/// How many worker processes run a test's clients, and what starts them
/// (`docs/workers.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkersSpec {
    /// Worker processes, at least 1.
    pub workers: u32,
    /// What starts them.
    #[serde(default)]
    pub launcher: crate::orchestration::workers::launcher::LauncherKind,
}

impl Test {
    /// Options of one strategy of this test. Its keys are `<key_prefix><strategy>:…`, so the
    /// strategies of one test never see each other's keys.
    pub fn strategy_options(&self, kind: StrategyKind) -> StrategyOptions {
        StrategyOptions {
            kind,
            ttl: self.client.ttl,
            retry: self.client.retry,
            watchdog: self.client.watchdog,
            drift_factor: self.client.drift_factor,
            key_prefix: format!("{}{kind}:", self.topology.key_prefix),
            node_timeout: self.client.node_timeout,
            adapter_log: None,
            pg_pool: self.client.pg_pool,
            adapter_command: (kind == StrategyKind::AdapterCommand)
                .then(|| self.client.adapter_argv())
                .flatten(),
            hash_tag: self.topology.kind == TopologyKind::Cluster
                || !self.topology.cluster_seeds.is_empty(),
            adapter_shared: false,
        }
    }

    /// The planned run time of each strategy (`None` for an op count).
    pub fn duration(&self) -> Option<Duration> {
        match self.workload.stop {
            StopCondition::Duration(d) => Some(d),
            StopCondition::Ops(_) => None,
        }
    }

    /// This test as trial `trial` (1-based) of several runs it: the seed `seed + trial − 1`,
    /// so trial 1 is the test as written and every other trial draws different hold times,
    /// resources and retry jitter.
    pub fn trial(&self, trial: u32) -> Test {
        let mut t = self.clone();
        t.workload.seed = self
            .workload
            .seed
            .wrapping_add(u64::from(trial.saturating_sub(1)));
        t
    }

    /// Reads a run's `config.json` (or any file holding one test as JSON).
    ///
    /// # Errors
    /// [`TestError::Config`] when it cannot be read or is not a test, or when it holds a
    /// redacted password (config files never store one: give the URL again).
    pub fn load(path: &Path) -> Result<Self, TestError> {
        let err = |message: String| TestError::Config {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let test: Test = serde_json::from_str(&text).map_err(|e| {
            err(format!(
                "not a lockbench test (a run's config.json): {e} (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if let Some(u) = test.topology.urls.iter().find(|u| u.contains(":***@")) {
            return Err(err(format!(
                "--url {u}: config.json never stores passwords; put the password back into \
                 `topology.urls` in a copy of the file"
            )));
        }
        if let Some(u) = test
            .topology
            .cluster_seeds
            .iter()
            .find(|u| u.contains(":***@"))
        {
            return Err(err(format!(
                "--cluster {u}: config.json never stores passwords; put the password back into \
                 `topology.cluster_seeds` in a copy of the file"
            )));
        }
        if let Some(u) = test.ledger.as_ref().filter(|u| u.contains(":***@")) {
            return Err(err(format!(
                "--ledger {u}: config.json never stores passwords; put the password back into \
                 `ledger` in a copy of the file"
            )));
        }
        Ok(test)
    }
}
