//! A test as one value: Jepsen's map of topology + client (strategy options) + workload +
//! nemesis + checker, with what the claim expects. `lockbench run` builds one from flags,
//! `lockbench chaos` from a scenario file, the matrix one per trial; the
//! [`runner`](super::runner) runs any of them the same way.
//!
//! Every default lives in [`defaults`]. The resolved test (no default left implicit, passwords
//! redacted) is written to `config.json`, and `lockbench run --config <config.json>` reads it
//! back and runs the same test again in a new directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::expectation::Expectation;
use crate::driver::{Pacing, StopCondition, Workload, WorkloadError};
use crate::nemesis::FaultStep;
use crate::node::{redact_url, ConnectOptions, TlsFiles};
use crate::strategy::{PgPool, RetryPolicy, StrategyError, StrategyKind, StrategyOptions};
use crate::topology::{ClusterSettings, Persistence, PoolerSettings, TopologyKind};

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
    fn check_cluster_seeds(&self) -> Result<(), TestError> {
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
    fn check_tls(&self) -> Result<(), TestError> {
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

/// How every client takes its locks: what [`StrategyOptions`] gets besides the strategy and
/// its key prefix, and the connection timeouts. Durations are ms in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Lease TTL.
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Acquire retry policy.
    pub retry: RetryPolicy,
    /// Renew held leases every TTL/3.
    pub watchdog: bool,
    /// Redlock clock-drift factor: drift = TTL × factor + 2 ms.
    pub drift_factor: f64,
    /// Bound on one command to one node, connect included.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
    /// Connect and reply timeouts of every client connection.
    pub connect: ConnectOptions,
    /// PostgreSQL strategies: an application-side pool the clients borrow a connection from
    /// per operation (`run --pg-pool`); `None`: a session per client.
    #[serde(default)]
    pub pg_pool: Option<PgPool>,
    /// The command line of the strategy `adapter:command` (`run --adapter 'command args…'`,
    /// scenario key `workload.adapter`): split as a POSIX shell would (quotes, backslashes), no
    /// shell is run. `None` when no strategy needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
}

impl ClientSpec {
    /// The defaults of [`defaults`] for a lease of `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            retry: defaults::retry(),
            watchdog: false,
            drift_factor: defaults::DRIFT_FACTOR,
            node_timeout: defaults::node_timeout(ttl),
            connect: defaults::connect(),
            pg_pool: None,
            adapter: None,
        }
    }

    /// [`adapter`](Self::adapter) as a program and its arguments (`None` when unset, empty,
    /// or unbalanced quotes: [`Test::validate`] says which).
    pub fn adapter_argv(&self) -> Option<Vec<String>> {
        self.adapter
            .as_deref()
            .and_then(shlex::split)
            .filter(|a| !a.is_empty())
    }
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
        Ok(test)
    }

    /// Checks combinations a parser cannot see, naming the `run` flag to change.
    ///
    /// # Errors
    /// [`TestError`] naming the option.
    pub fn validate(&self) -> Result<(), TestError> {
        self.validate_for(None)
    }

    /// [`Self::validate`] for a run whose clients are spread over `workers` worker processes
    /// (`run --workers N`; `None`: all in this process): the descriptor budget is then checked
    /// per process ([`Self::check_descriptor_budget_for`]).
    ///
    /// # Errors
    /// [`TestError`] naming the option.
    pub fn validate_for(&self, workers: Option<u32>) -> Result<(), TestError> {
        self.check_bounds()?;
        self.workload.validate()?;
        let invalid = |m: String| Err(TestError::Invalid(m));
        if self.strategies.is_empty() {
            return invalid("--strategy needs at least one name".into());
        }
        // Each strategy writes into `<run>/<strategy>/`: a repeat would overwrite the first.
        for (i, s) in self.strategies.iter().enumerate() {
            if self.strategies[..i].contains(s) {
                return invalid(format!(
                    "--strategy lists {s} twice: name each strategy once (to repeat a run, run \
                     lockbench again; every run gets its own directory)"
                ));
            }
        }
        let c = &self.client;
        let wants_command = self.strategies.contains(&StrategyKind::AdapterCommand);
        match (&c.adapter, wants_command) {
            (Some(cmd), true) if c.adapter_argv().is_none() => {
                return invalid(format!(
                    "--adapter {cmd:?}: not a command line (empty, or a quote left open)"
                ))
            }
            (Some(cmd), false) => {
                return invalid(format!(
                    "--adapter {cmd:?} is set but no strategy runs it: add adapter:command to \
                     the strategies"
                ))
            }
            _ => {}
        }
        if c.retry.attempts == 0 {
            return invalid("--retry-attempts must be at least 1 (1 = no retry)".into());
        }
        if c.ttl.is_zero() {
            return invalid("--ttl must be above 0".into());
        }
        if c.node_timeout.is_zero() {
            return invalid("--node-timeout must be above 0".into());
        }
        if !(0.0..1.0).contains(&c.drift_factor) {
            return invalid("--drift-factor must be in [0, 1), e.g. 0.01".into());
        }
        let kind = self.topology.kind;
        for &s in &self.strategies {
            kind.check_shape(s)
                .map_err(|why| TestError::Invalid(format!("--strategy {s}: {why}")))?;
            self.strategy_options(s).validate().map_err(|e| match e {
                StrategyError::TtlTooShort { .. } => TestError::Invalid(format!("--ttl: {e}")),
                StrategyError::InvalidOptions(m) => TestError::Invalid(m),
                other => TestError::Invalid(other.to_string()),
            })?;
            kind.check_serves(s)
                .map_err(|m| TestError::Invalid(format!("--strategy: {m}")))?;
            if kind == TopologyKind::External {
                for url in &self.topology.urls {
                    crate::topology::pairing::check_url_serves(url, s).map_err(|why| {
                        TestError::Invalid(format!("--url {}: {why}", redact_url(url)))
                    })?;
                }
            }
            if let Some(f) = self
                .per_client_fault()
                .filter(|_| self.workload.shared_connection && s.is_adapter())
            {
                return invalid(format!(
                    "--shared-connection with {s} and a {}: the fault acts on the target \
                     client's own adapter process (SIGKILL, SIGSTOP, its own proxies), which \
                     every client sharing it would suffer too: give each client its own adapter \
                     process",
                    f.fault.name()
                ));
            }
            if self.workload.shared_connection
                && s.service() == crate::strategy::LockService::Postgres
            {
                return invalid(format!(
                    "--shared-connection with {s}: a PostgreSQL advisory lock belongs to its \
                     session, and one session re-grants a lock it holds to every client sharing \
                     it (advisory locks are re-entrant): give each client its own connection"
                ));
            }
        }
        self.check_adapter_processes("--adapter-processes")
            .map_err(TestError::Invalid)?;
        self.check_cluster_seeds()?;
        match (
            kind,
            self.topology.urls.is_empty() && self.topology.cluster_seeds.is_empty(),
        ) {
            (TopologyKind::External, true) => {
                return invalid(
                    "--topology external needs --url redis://host:port (repeat for each node)"
                        .into(),
                )
            }
            (TopologyKind::External, false) if self.topology.key_prefix.is_empty() => {
                return invalid(
                    "--key-prefix must not be empty with --topology external: lockbench \
                     writes lock keys and INCRs fencing counters in your keyspace (default \
                     `lockbench:`)"
                        .into(),
                )
            }
            (TopologyKind::External, false) if self.topology.urls.is_empty() => {}
            (TopologyKind::External, false) => {
                // A URL that does not parse is bad input, found before anything starts.
                crate::topology::external::parse_endpoints(&self.topology.urls)
                    .map_err(|e| TestError::Invalid(format!("--url: {e}")))?;
                let postgres = self
                    .strategies
                    .iter()
                    .any(|s| s.service() == crate::strategy::LockService::Postgres);
                if postgres && self.topology.urls.len() > 1 {
                    return invalid(format!(
                        "--url is given {} times, but a PostgreSQL advisory lock lives on one \
                         server (lockbench would check every URL and lock only on the first): \
                         give one postgres:// URL",
                        self.topology.urls.len()
                    ));
                }
            }
            (_, false) => return invalid("--url is only for --topology external".into()),
            _ => {}
        }
        self.check_tls()?;
        if kind != TopologyKind::Postgres {
            if self.topology.pooler.is_some() {
                return invalid(format!(
                    "--pooler needs --topology postgres (PgBouncer pools PostgreSQL sessions), \
                     this test has {kind}"
                ));
            }
            if !self.topology.pg_settings.is_empty() {
                return invalid(format!(
                    "--pg-setting needs --topology postgres (a server lockbench starts), this \
                     test has {kind}"
                ));
            }
        }
        if self.client.pg_pool.is_some() {
            for &kind in &self.strategies {
                if kind.service() != crate::strategy::LockService::Postgres {
                    return invalid(format!(
                        "--pg-pool is for the PostgreSQL strategies (a pool of PostgreSQL \
                         connections), not {kind}"
                    ));
                }
                self.strategy_options(kind)
                    .validate()
                    .map_err(|e| TestError::Invalid(format!("--pg-pool: {e}")))?;
            }
        }
        if let Some(c) = &self.topology.cluster {
            if kind != TopologyKind::Cluster {
                return invalid(format!(
                    "--shards and --cluster-node-timeout need --topology cluster, this test has \
                     {kind}"
                ));
            }
            c.validate().map_err(TestError::Invalid)?;
        }
        if let Some(p) = &self.topology.pooler {
            p.validate()
                .map_err(|m| TestError::Invalid(format!("--pool-size: {m}")))?;
        }
        for setting in &self.topology.pg_settings {
            check_pg_setting(setting)
                .map_err(|m| TestError::Invalid(format!("--pg-setting: {m}")))?;
        }
        if self.topology.direct && !self.nemesis.is_empty() {
            return invalid(
                "--direct reaches the nodes without their proxies, so the nemesis cannot inject \
                 faults: drop --direct or the fault schedule"
                    .into(),
            );
        }
        self.check_descriptor_budget_for("--clients", workers)
            .map_err(TestError::Invalid)
    }

    /// Every duration of this test by the `run` flag that sets it.
    fn times(&self) -> Vec<(&'static str, Duration)> {
        let (c, w) = (&self.client, &self.workload);
        let mut out = vec![
            ("--ttl", c.ttl),
            ("--hold", w.hold.max()),
            ("--retry-delay", c.retry.delay),
            ("--retry-jitter", c.retry.jitter),
            ("--node-timeout", c.node_timeout),
            ("--connect-timeout", c.connect.connect_timeout),
            ("--response-timeout", c.connect.response_timeout),
        ];
        if let StopCondition::Duration(d) = w.stop {
            out.push(("--duration", d));
        }
        if let Some(t) = c.retry.acquire_timeout {
            out.push(("--acquire-timeout", t));
        }
        out
    }

    /// Refuses a duration longer than [`crate::duration_ms::LONGEST`] (24 h): the parsers
    /// refuse them already; a `config.json` (whole ms) is checked here.
    fn check_bounds(&self) -> Result<(), TestError> {
        let longest = crate::duration_ms::LONGEST;
        if let Some((flag, d)) = self.times().into_iter().find(|(_, d)| *d > longest) {
            return Err(TestError::Invalid(format!(
                "{flag} {} is longer than 24h, the longest duration lockbench takes",
                humantime::format_duration(d)
            )));
        }
        for (i, step) in self.nemesis.iter().enumerate() {
            step.check_bounds().map_err(|p| {
                TestError::Invalid(format!("nemesis[{i}] ({}): {}", step.fault, p.message))
            })?;
        }
        Ok(())
    }

    /// Checks every nemesis step against a run of its clients in `workers` worker processes
    /// ([`FaultStep::check`] with [`crate::nemesis::StepContext::workers`]): `worker:I` in range
    /// and on a fault it takes, no `holder` or client-id target. Topologies whose nodes
    /// lockbench does not start are checked for the worker rules only.
    ///
    /// # Errors
    /// `nemesis[i] (fault): what is wrong`.
    pub fn check_steps_with_workers(&self, workers: u32) -> Result<(), String> {
        let nodes = crate::nemesis::check::node_names(self.topology.kind).unwrap_or_default();
        let ctx = crate::nemesis::StepContext {
            topology: self.topology.kind,
            nodes: &nodes,
            clients: self.workload.clients,
            resources: self.workload.resources,
            run: self.duration().unwrap_or(crate::duration_ms::LONGEST),
            workers,
        };
        for (i, step) in self.nemesis.iter().enumerate() {
            step.check(&ctx)
                .map_err(|p| format!("nemesis[{i}] ({}): {}", step.fault, p.message))?;
        }
        Ok(())
    }

    /// The first nemesis step that acts on one client's own adapter process or links
    /// (client-crash: SIGKILL; client-pause: SIGSTOP; a partition of clients: its own
    /// proxies), if any.
    fn per_client_fault(&self) -> Option<&FaultStep> {
        self.nemesis.iter().find(|f| {
            matches!(
                f.fault,
                crate::nemesis::FaultKind::ClientCrash | crate::nemesis::FaultKind::ClientPause
            ) || f.cuts_clients()
        })
    }

    /// Refuses `adapter_processes` below the client count (processes serving several clients)
    /// with an adapter strategy and a fault that acts on one client's own adapter process:
    /// `client-crash` (SIGKILL), `client-pause` (SIGSTOP), a partition of clients (their own
    /// proxies). Every client sharing the process would suffer it too.
    ///
    /// # Errors
    /// One sentence naming the setting (`setting`: `--adapter-processes`, or `` `adapter_processes`
    /// = `` in a file), the strategy, the fault and the way out.
    pub fn check_adapter_processes(&self, setting: &str) -> Result<(), String> {
        let Some(n) = self.workload.adapter_processes else {
            return Ok(());
        };
        let clients = self.workload.clients;
        let Some(s) = self.strategies.iter().find(|s| s.is_adapter()) else {
            return Ok(());
        };
        match self.per_client_fault() {
            Some(f) if n < clients => Err(format!(
                "{setting} {n} with {s}, {clients} clients and a {}: the fault acts on the \
                 target client's own adapter process (SIGKILL, SIGSTOP, its own proxies), and \
                 {n} processes serve several clients each, who would all suffer it: drop it \
                 (one process per client) or raise it to {clients}",
                f.fault.name()
            )),
            _ => Ok(()),
        }
    }

    /// Refuses a client count this process cannot hold open (see
    /// [`crate::topology::limits`]): the one capacity check of `run`, `chaos` and the matrix
    /// (scenario files and matrix trials come through [`super::scenario::validate`]).
    /// `clients` names the setting in the message (`--clients`, or `` `clients` `` in a file).
    ///
    /// # Errors
    /// One sentence: the descriptors needed, the hard limit, and the most clients it allows.
    pub fn check_descriptor_budget(&self, clients: &str) -> Result<(), String> {
        self.check_descriptor_budget_for(clients, None)
    }

    /// [`Self::check_descriptor_budget`] for clients spread over `workers` worker processes:
    /// each worker holds its share's connections; this process (the coordinator) holds the
    /// embedded proxy's two descriptors per proxied connection; a local node holds one per
    /// client that connects to it (its `maxclients` is its limit less 32). The first of
    /// those that does not fit is refused, naming the process.
    ///
    /// # Errors
    /// One sentence: which process, the descriptors it needs, the limit, the most clients.
    pub fn check_descriptor_budget_for(
        &self,
        clients: &str,
        workers: Option<u32>,
    ) -> Result<(), String> {
        if self.workload.shared_connection {
            return Ok(());
        }
        if let Some(n) = workers {
            return match crate::topology::limits::raise_nofile_limit() {
                Ok(limit) => self.check_split_descriptor_budget(clients, n, limit),
                Err(_) => Ok(()), // cannot tell; the connects will say so
            };
        }
        let Ok(limit) = crate::topology::limits::raise_nofile_limit() else {
            return Ok(()); // cannot tell; the connects will say so
        };
        let per_client = self.connections_per_client();
        let proxied = !self.topology.direct;
        let most = limit.max_clients(proxied, per_client);
        if u64::from(self.workload.clients) <= most {
            return Ok(());
        }
        let each = per_client * if proxied { 3 } else { 1 };
        let flag = clients.starts_with("--");
        Err(format!(
            "{clients} {} needs about {} descriptors ({each} per client{}), but this process may \
             open {} (hard limit, `ulimit -Hn`): use at most {most} clients{}",
            self.workload.clients,
            u64::from(self.workload.clients) * each + crate::topology::limits::RESERVED_DESCRIPTORS,
            if proxied {
                ": its connection and the embedded proxy's two"
            } else {
                ""
            },
            limit.hard,
            if proxied && flag { ", or --direct" } else { "" },
        ))
    }

    /// Connections one client opens: one per node for quorum strategies and cluster clients,
    /// else one.
    fn connections_per_client(&self) -> u64 {
        let nodes = match self.topology.kind {
            TopologyKind::External => {
                (self.topology.urls.len() + self.topology.cluster_seeds.len()) as u64
            }
            TopologyKind::Five => 5,
            // A cluster client connects to every primary (one connection per node at most).
            TopologyKind::Cluster => self.topology.cluster.unwrap_or_default().node_count() as u64,
            _ => 1,
        };
        let cluster = self.topology.kind == TopologyKind::Cluster;
        self.strategies
            .iter()
            .map(|k| if k.is_quorum() || cluster { nodes } else { 1 })
            .max()
            .unwrap_or(1)
    }

    /// The per-process budget of [`Self::check_descriptor_budget_for`] with `workers`, every
    /// process under `limit`.
    fn check_split_descriptor_budget(
        &self,
        clients: &str,
        workers: u32,
        limit: crate::topology::limits::NofileLimit,
    ) -> Result<(), String> {
        use crate::topology::limits::RESERVED_DESCRIPTORS;
        let total = u64::from(self.workload.clients);
        let per_client = self.connections_per_client();
        let proxied = !self.topology.direct;
        let room = limit.soft.saturating_sub(RESERVED_DESCRIPTORS);
        let share = total.div_ceil(u64::from(workers.max(1)));
        let mut needs = vec![(
            format!("each worker ({share} clients)"),
            share * per_client,
            room,
            room / per_client * u64::from(workers.max(1)),
        )];
        if proxied {
            needs.push((
                "the coordinator's embedded proxy (two descriptors per proxied connection)"
                    .to_string(),
                2 * total * per_client,
                room,
                room / (2 * per_client),
            ));
        }
        if self.topology.kind != TopologyKind::External {
            // Every client that uses a node connects to it once; its maxclients is its limit
            // less Redis's own 32.
            let node_room = limit.soft.saturating_sub(32);
            needs.push((
                "a local node (one connection per client)".to_string(),
                total,
                node_room,
                node_room,
            ));
        }
        for (who, need, room, most) in needs {
            if need > room {
                return Err(format!(
                    "{clients} {total} over {workers} workers: {who} needs about {need} \
                     descriptors, but a process here may open {} (hard limit, `ulimit -Hn`): use \
                     at most {most} clients{}",
                    limit.hard,
                    if proxied && clients.starts_with("--") {
                        ", or --direct"
                    } else {
                        ""
                    },
                ));
            }
        }
        Ok(())
    }

    /// Settings that are legal but will not measure what the user probably wants, one
    /// sentence each (printed as warnings before the run starts).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let hold = self.workload.hold.max();
        let ttl = self.client.ttl;
        let expiring: Vec<String> = self
            .strategies
            .iter()
            .filter(|k| k.has_ttl())
            .map(ToString::to_string)
            .collect();
        if hold > ttl && !self.client.watchdog && !expiring.is_empty() {
            out.push(format!(
                "--hold {} is longer than --ttl {}: leases will expire inside the critical \
                 section, so expect mutual-exclusion violations unless fenced ({}); use \
                 --watchdog or a longer --ttl to measure the lock itself",
                self.workload.hold,
                humantime::format_duration(ttl),
                expiring.join(", ")
            ));
        }
        let in_flight_default = Workload::DEFAULT_IN_FLIGHT;
        if self.workload.in_flight == 0 && self.workload.clients > in_flight_default {
            out.push(format!(
                "--in-flight 0 lets all {} clients acquire at once: the harness's own queueing \
                 can then outlast --ttl {} and show as stuck or unavailable resources; keep \
                 --in-flight {in_flight_default} (the default) to measure the lock",
                self.workload.clients,
                humantime::format_duration(ttl)
            ));
        }
        let redis_nodes = self.topology.kind.service() == Some(crate::strategy::LockService::Redis);
        if self.topology.persistence != Persistence::None && !redis_nodes {
            out.push(format!(
                "--persistence {} applies to the Redis nodes lockbench starts; topology {} \
                 ignores it (its servers keep their own durability settings)",
                self.topology.persistence, self.topology.kind
            ));
        }
        if self.client.watchdog {
            // `run` refuses these; a scenario file or a matrix column runs them unwatched.
            for s in &self.strategies {
                if let Err(why) = s.watchable() {
                    out.push(format!("--watchdog with {s}: {why}; {s} runs unwatched"));
                }
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::HoldTime;

    fn test() -> Test {
        Test {
            name: "t".into(),
            claim: None,
            description: String::new(),
            topology: TopologySpec {
                kind: TopologyKind::Single,
                urls: vec![],
                persistence: Persistence::None,
                key_prefix: defaults::KEY_PREFIX.into(),
                direct: false,
                pooler: None,
                pg_settings: Vec::new(),
                cluster: None,
                tls: TlsFiles::default(),
                cluster_seeds: Vec::new(),
            },
            strategies: vec![StrategyKind::Single],
            client: ClientSpec {
                node_timeout: Duration::from_millis(50),
                ..ClientSpec::with_ttl(Duration::from_secs(1))
            },
            workload: Workload {
                clients: 4,
                resources: 4,
                hold: HoldTime::Fixed(Duration::ZERO),
                stop: StopCondition::Duration(Duration::from_secs(2)),
                pacing: Pacing::Closed,
                seed: 1,
                shared_connection: false,
                in_flight: Workload::DEFAULT_IN_FLIGHT,
                adapter_processes: None,
            },
            nemesis: vec![],
            checker: CheckerSpec { audit: true },
            expect: BTreeMap::new(),
            workers: None,
        }
    }

    #[test]
    fn repeats_zero_retries_and_empty_external_prefix_are_rejected() {
        assert!(test().validate().is_ok());
        let mut c = test();
        c.strategies = vec![
            StrategyKind::Single,
            StrategyKind::Redlock,
            StrategyKind::Single,
        ];
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--strategy lists single twice"), "{e}");
        let mut c = test();
        c.client.retry.attempts = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--retry-attempts"));
        let mut c = test();
        c.topology.kind = TopologyKind::External;
        c.topology.urls = vec!["redis://127.0.0.1:6379".into()];
        c.topology.key_prefix = String::new();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--key-prefix"));
        // Local nodes are lockbench's own: an empty prefix is allowed there.
        let mut c = test();
        c.topology.key_prefix = String::new();
        assert!(c.validate().is_ok());
    }

    #[test]
    fn config_json_never_holds_a_password() {
        let mut c = test();
        c.topology.kind = TopologyKind::External;
        c.topology.urls = vec!["redis://alice:hunter2@127.0.0.1:6379".into()];
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            !text.contains("hunter2") && text.contains("alice:***"),
            "{text}"
        );
        // Read back, the redacted URL is refused with what to do.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, &text).unwrap();
        let e = Test::load(&path).unwrap_err().to_string();
        assert!(e.contains("never stores passwords"), "{e}");
    }

    #[test]
    fn a_test_reads_back_equal_from_its_json() {
        let mut t = test();
        t.claim = Some("c".into());
        t.workload.pacing = Pacing::Open { rate_per_s: 250.0 };
        t.client.retry.acquire_timeout = Some(Duration::from_millis(700));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&t).unwrap()).unwrap();
        assert_eq!(Test::load(&path).unwrap(), t);
        std::fs::write(&path, "{\"name\": \"x\"}\n").unwrap();
        let e = Test::load(&path).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: not a lockbench test", path.display())),
            "{e}"
        );
    }

    #[test]
    fn each_strategy_gets_its_own_key_prefix_and_trials_their_own_seed() {
        let t = test();
        assert_eq!(
            t.strategy_options(StrategyKind::Redlock).key_prefix,
            "lockbench:redlock:"
        );
        assert_eq!(t.trial(1), t);
        assert_eq!(t.trial(3).workload.seed, 3);
    }

    #[test]
    fn a_config_json_past_the_bounds_is_refused_naming_the_flag() {
        let huge = Duration::from_millis(u64::MAX);
        let mut t = test();
        t.client.ttl = huge;
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--ttl ") && e.contains("longer than 24h"),
            "{e}"
        );
        let mut t = test();
        t.workload.stop = StopCondition::Duration(huge);
        let e = t.validate().unwrap_err().to_string();
        assert!(e.starts_with("--duration "), "{e}");
        let mut t = test();
        let mut step = FaultStep::new(
            crate::nemesis::FaultKind::ClientPause,
            crate::nemesis::Target::Clients(vec![0]),
        );
        step.duration = Some(huge);
        t.nemesis = vec![step];
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("nemesis[0] (client-pause): `duration` = ") && e.contains("24h"),
            "{e}"
        );
    }

    #[test]
    fn a_client_crash_of_adapter_clients_sharing_one_process_is_refused() {
        let mut t = test();
        t.strategies = vec![StrategyKind::AdapterRedisPy];
        t.workload.shared_connection = true;
        let crash = FaultStep::new(
            crate::nemesis::FaultKind::ClientCrash,
            crate::nemesis::Target::Clients(vec![0]),
        );
        t.nemesis = vec![crash.clone()];
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--shared-connection with adapter:redis-py and a client-crash"),
            "{e}"
        );
        // A pause would SIGSTOP the shared process, stalling every client: refused too.
        t.nemesis = vec![FaultStep::new(
            crate::nemesis::FaultKind::ClientPause,
            crate::nemesis::Target::Clients(vec![0]),
        )];
        let e = t.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--shared-connection with adapter:redis-py and a client-pause"),
            "{e}"
        );
        t.nemesis = vec![crash.clone()];
        // Each client with its own process, or a built-in strategy: accepted.
        t.workload.shared_connection = false;
        assert!(t.validate().is_ok(), "{:?}", t.validate());
        t.workload.shared_connection = true;
        t.strategies = vec![StrategyKind::Single];
        assert!(t.validate().is_ok(), "{:?}", t.validate());
    }

    #[test]
    fn faults_on_one_clients_process_are_refused_when_adapter_processes_serve_several() {
        let mut t = test();
        t.strategies = vec![StrategyKind::AdapterRedisPy];
        t.workload.adapter_processes = Some(2);
        for kind in [
            crate::nemesis::FaultKind::ClientCrash,
            crate::nemesis::FaultKind::ClientPause,
        ] {
            t.nemesis = vec![FaultStep::new(
                kind,
                crate::nemesis::Target::Clients(vec![0]),
            )];
            let e = t.validate().unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "--adapter-processes 2 with adapter:redis-py, 4 clients and a {}",
                    kind.name()
                )),
                "{e}"
            );
        }
        // One process per client, a built-in strategy, or a fault on the nodes: accepted.
        t.workload.adapter_processes = Some(4);
        assert!(t.validate().is_ok(), "{:?}", t.validate());
        t.workload.adapter_processes = Some(2);
        t.strategies = vec![StrategyKind::Single];
        assert!(t.validate().is_ok(), "{:?}", t.validate());
        t.strategies = vec![StrategyKind::AdapterRedisPy];
        t.nemesis = vec![FaultStep::new(
            crate::nemesis::FaultKind::Kill,
            crate::nemesis::Target::AllNodes,
        )];
        assert!(t.validate().is_ok(), "{:?}", t.validate());
    }

    #[test]
    fn direct_runs_take_no_faults() {
        let mut t = test();
        t.topology.direct = true;
        t.nemesis = vec![FaultStep::new(
            crate::nemesis::FaultKind::Kill,
            crate::nemesis::Target::AllNodes,
        )];
        let e = t.validate().unwrap_err().to_string();
        assert!(e.contains("--direct"), "{e}");
    }

    #[test]
    fn warns_about_hold_past_ttl_or_run_and_tiny_rates() {
        assert!(test().warnings().is_empty());
        let mut c = test();
        c.workload.hold = HoldTime::Fixed(Duration::from_secs(3));
        let w = c.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("leases will expire inside the critical section"));
        assert!(w[1].contains("not shorter than the run"));
        c.client.watchdog = true;
        assert_eq!(c.warnings().len(), 1, "the watchdog renews: no TTL warning");
        let mut c = test();
        c.workload.pacing = Pacing::Open { rate_per_s: 0.5 };
        let w = c.warnings();
        assert!(w[0].contains("starts about 1 attempt(s)"), "{w:?}");
    }

    #[test]
    fn no_in_flight_limit_for_thousands_of_clients_is_named() {
        let mut t = test();
        t.workload.in_flight = 0;
        assert!(t.warnings().is_empty(), "4 clients never queue");
        t.workload.clients = 5000;
        let w = t.warnings();
        assert!(
            w.iter()
                .any(|w| w.starts_with("--in-flight 0 lets all 5000 clients acquire at once")),
            "{w:?}"
        );
    }

    #[test]
    fn persistence_on_a_server_that_is_not_redis_is_named() {
        let mut t = test();
        t.topology.persistence = Persistence::AofAlways;
        assert!(t.warnings().is_empty(), "redis nodes take it");
        t.topology.kind = TopologyKind::Postgres;
        t.strategies = vec![StrategyKind::PgAdvisory];
        let w = t.warnings();
        assert!(
            w.iter().any(|w| w
                .starts_with("--persistence aof-always applies to the Redis nodes lockbench starts; topology postgres ignores it")),
            "{w:?}"
        );
    }

    #[test]
    fn a_watchdog_with_nothing_to_watch_is_named() {
        let mut t = test();
        t.strategies = vec![StrategyKind::NoTtl, StrategyKind::PgAdvisory];
        t.client.watchdog = true;
        let w = t.warnings();
        assert!(
            w.iter()
                .any(|w| w.starts_with("--watchdog with no-ttl: its lock has no TTL")),
            "{w:?}"
        );
        assert!(!w.iter().any(|w| w.contains("pg-advisory")), "{w:?}");
    }

    #[test]
    fn workers_split_the_descriptor_budget_and_the_refusal_names_the_process_that_overflows() {
        let limit = crate::topology::limits::NofileLimit {
            soft: 20_000,
            hard: 20_000,
        };
        let mut t = test();
        t.topology.kind = TopologyKind::Single;
        t.strategies = vec![StrategyKind::Single];
        let check = |t: &Test, clients: u32, workers: u32| {
            let mut t = t.clone();
            t.workload.clients = clients;
            t.check_split_descriptor_budget("--clients", workers, limit)
        };
        // Proxied: the coordinator's proxy holds 2 per client, (20,000 - 256) / 2 = 9,872.
        assert!(check(&t, 9_872, 6).is_ok());
        let e = check(&t, 9_873, 6).unwrap_err();
        assert!(
            e.contains("embedded proxy") && e.contains("at most 9872"),
            "{e}"
        );
        assert!(e.contains("--direct"), "{e}");
        // Direct: the node holds one per client, 20,000 - 32.
        t.topology.direct = true;
        assert!(check(&t, 19_968, 6).is_ok());
        let e = check(&t, 19_969, 6).unwrap_err();
        assert!(
            e.contains("a local node") && e.contains("at most 19968"),
            "{e}"
        );
        // External nodes: only the workers count: 6 x 19,744.
        t.topology.kind = TopologyKind::External;
        t.topology.urls = vec!["redis://10.0.0.1:6379".into()];
        assert!(check(&t, 118_464, 6).is_ok());
        let e = check(&t, 118_465, 6).unwrap_err();
        assert!(e.contains("each worker (19745 clients)"), "{e}");
    }
}
