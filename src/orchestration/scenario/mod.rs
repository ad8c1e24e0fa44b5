//! Scenario files: `chaos/<name>.toml` = topology + strategies + workload + nemesis schedule +
//! the verdict the seeds' claim predicts.
//!
//! ```toml
//! name = "naive-del-pause"
//! claim = "no owner token: a stalled holder's DEL frees someone else's lock"
//! topology = "single"            # single | five | sentinel | postgres | etcd
//! # postgres only: pg_settings = ["idle_session_timeout=2s"], and a pooler in front:
//! # [pooler]  kind = "pgbouncer", pool_mode = "transaction", pool_size = 2, reset = "none"
//! strategies = ["naive-del", "single"]
//! seed = 7
//!
//! [workload]
//! clients = 6
//! resources = 1
//! hold = "20ms"                   # or "5ms..20ms"
//! ttl = "300ms"
//! duration = "6s"
//!
//! [[nemesis]]
//! at = "1s"                       # offset from the strategy's start
//! duration = "800ms"              # heal after this long (omit for instant faults)
//! fault = "client-pause"
//! target = "clients:0,1"
//!
//! [expect.naive-del]
//! verdict = "invalid"
//! anomalies = ["mutex-violation"]
//! ```
//!
//! Every error names the file, line and column (`file:line:col`): the `toml` crate reports
//! syntax and type errors with a span, and [`validate`] names the key of every semantic error
//! (a node the topology lacks, a fault past the end, a key the fault does not take), which
//! [`locate`] finds in the text. `lockbench chaos --list-faults` prints the fault
//! [`catalogue`].

pub mod catalogue;
pub mod locate;
pub mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::driver::workload::parse_duration;
use crate::driver::{HoldTime, Pacing, StopCondition, Workload};
use crate::nemesis::FaultStep;
use crate::orchestration::expectation::Expectation;
use crate::orchestration::test::{defaults, CheckerSpec, ClientSpec, Test, TopologySpec};
use crate::strategy::StrategyKind;
use crate::topology::{Persistence, PoolerSettings, TopologyKind};

/// Errors loading a scenario file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A syntax, type or unknown-key error at a known place.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong (names the key).
        message: String,
    },
    /// A value that parses but makes no sense (e.g. a fault after the run ends), at the key it
    /// is about.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key (of its table when the key is missing; 1 if unknown).
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A directory with no `.toml` files.
    #[error("{0}: no scenario files (*.toml) found")]
    Empty(PathBuf),
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| parse_duration(&s).map_err(serde::de::Error::custom))
        .transpose()
}

fn de_hold<'de, D: Deserializer<'de>>(d: D) -> Result<HoldTime, D::Error> {
    let s = String::deserialize(d)?;
    HoldTime::from_str(&s).map_err(serde::de::Error::custom)
}

fn default_seed() -> u64 {
    defaults::SEED
}

/// The workload part of a scenario. Durations are strings (`"300ms"`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioWorkload {
    /// Concurrent clients.
    pub clients: u32,
    /// Distinct resources.
    pub resources: u32,
    /// Time inside the critical section.
    #[serde(deserialize_with = "de_hold")]
    pub hold: HoldTime,
    /// Lease TTL.
    #[serde(
        deserialize_with = "de_duration",
        serialize_with = "crate::duration_ms::serialize"
    )]
    pub ttl: Duration,
    /// Run time per strategy.
    #[serde(
        deserialize_with = "de_duration",
        serialize_with = "crate::duration_ms::serialize"
    )]
    pub duration: Duration,
    /// Acquire attempts (1 = no retry; default: [`defaults::retry`]).
    #[serde(default)]
    pub retry_attempts: Option<u32>,
    /// Delay between attempts (default: [`defaults::retry`]).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub retry_delay: Option<Duration>,
    /// Upper bound of the random extra wait added to each delay (default:
    /// [`defaults::retry`]).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub retry_jitter: Option<Duration>,
    /// Overall acquire timeout.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub acquire_timeout: Option<Duration>,
    /// Lease renewal every TTL/3.
    #[serde(default)]
    pub watchdog: bool,
    /// Per-node op timeout (default [`StrategyOptions::default_node_timeout`]: TTL/10, 1 to 500 ms).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub node_timeout: Option<Duration>,
    /// Per-command reply timeout.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub response_timeout: Option<Duration>,
    /// TCP connect timeout per client connection (default 1 s; many clients may need more).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub connect_timeout: Option<Duration>,
    /// Open-loop rate, ops/s.
    #[serde(default)]
    pub rate: Option<f64>,
    /// `postgres` only: the clients borrow a connection per operation from one pool of this
    /// many connections (`run --pg-pool`), for `pg-advisory` and `pg-advisory-wait`.
    #[serde(default)]
    pub pg_pool: Option<u32>,
    /// What that pool does to a connection before lending it again: `"fast"` (default) or
    /// `"clean"` (`run --pg-pool-recycle`); needs `pg_pool`.
    #[serde(default)]
    pub pg_pool_recycle: Option<crate::strategy::PgPoolRecycle>,
    /// The command line of the strategy `adapter:command`, as `run --adapter` takes it
    /// (`"python3 my_adapter.py --flag"`; split as a POSIX shell would, no shell run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// `adapter:*` strategies: how many adapter processes serve the clients, as `run
    /// --adapter-processes N` (default: one per client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_processes: Option<u32>,
    /// What each critical section protects, as `run --work`: `"row"` (default) or
    /// `"external"` (one call to the side-effect sink per section).
    #[serde(default)]
    pub work: crate::driver::WorkKind,
    /// `external` work: every call carries the job's idempotency key, as `run --idempotency-key`.
    #[serde(default)]
    pub idempotency_key: bool,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (defaults to the file stem).
    #[serde(default)]
    pub name: String,
    /// The claim from the reference articles this scenario tests.
    pub claim: String,
    /// Longer explanation.
    #[serde(default)]
    pub description: String,
    /// Topology kind.
    pub topology: TopologyKind,
    /// Persistence of local nodes.
    #[serde(default)]
    pub persistence: Persistence,
    /// `postgres` only: a pooler in front of the server, a table
    /// `[pooler] kind = "pgbouncer"`, `pool_mode = "session" | "transaction"` (default
    /// transaction), `pool_size = N` (default 20), `reset = "default" | "discard-all" | "none"`
    /// (what PgBouncer runs on a server connection it takes back; default PgBouncer's own).
    #[serde(default)]
    pub pooler: Option<PoolerSettings>,
    /// `postgres` only: server settings, `["key=value", …]` (`postgres -c key=value`).
    #[serde(default)]
    pub pg_settings: Vec<String>,
    /// `cluster` only: a table `[cluster] shards = N` (default 3), `node_timeout_ms = M`
    /// (`cluster-node-timeout`, default 1500).
    #[serde(default)]
    pub cluster: Option<crate::topology::ClusterSettings>,
    /// Strategies, run one after another with the same workload and schedule.
    pub strategies: Vec<StrategyKind>,
    /// Seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Workload.
    pub workload: ScenarioWorkload,
    /// Fault schedule (the nemesis' own steps, checked by [`FaultStep::check`]).
    #[serde(default)]
    pub nemesis: Vec<FaultStep>,
    /// Expected verdicts per strategy name.
    #[serde(default)]
    pub expect: BTreeMap<String, Expectation>,
    /// Run the clients in this many `lockbench worker` processes, as `run --workers N`
    /// (`chaos --workers N` sets it for every file); targets `worker:I` need it.
    #[serde(default)]
    pub workers: Option<u32>,
    /// What starts the workers (`"processes"`, the default); needs `workers`.
    #[serde(default)]
    pub launcher: Option<crate::orchestration::workers::launcher::LauncherKind>,
    /// Where it was loaded from.
    #[serde(skip)]
    pub path: PathBuf,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}

/// `message` about the value on `line` (1-based), prefixed with that line's key (`` `ttl`:
/// ``) unless it names the key already: a value's own error (a duration too long, a bad
/// duration) does not know which key it was read for.
fn with_key(text: &str, line: usize, message: &str) -> String {
    let key = text
        .lines()
        .nth(line.saturating_sub(1))
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('[') && !k.contains(' '));
    match key {
        Some(k) if !message.contains(&format!("`{k}`")) => format!("`{k}`: {message}"),
        _ => message.to_string(),
    }
}

impl Scenario {
    /// Parses scenario text; `path` is used in messages.
    ///
    /// # Errors
    /// [`ScenarioError::Parse`] with line and column, or [`ScenarioError::Invalid`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        Self::parse_as(text, path, None)
    }

    /// As [`Scenario::parse`], with `workers` (`chaos --workers N`) in place of the file's
    /// own `workers`: every step is checked against a run in that many worker processes.
    ///
    /// # Errors
    /// As [`Scenario::parse`].
    pub fn parse_as(text: &str, path: &Path, workers: Option<u32>) -> Result<Self, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((1, 1), |sp| line_col(text, sp.start));
            ScenarioError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: with_key(text, line, e.message().trim()),
            }
        })?;
        s.path = path.to_path_buf();
        if workers.is_some() {
            s.workers = workers;
        }
        if s.name.is_empty() {
            s.name = path
                .file_stem()
                .map(|x| x.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        validate::validate(&s).map_err(|(place, message)| {
            let (line, column) = locate::Locator::new(text).find(&place).unwrap_or((1, 1));
            ScenarioError::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                message,
            }
        })?;
        Ok(s)
    }

    /// Checks what this scenario needs of this machine beyond the server programs: a
    /// `link = "bus"` step needs `nft` and the privilege to create tables (root or
    /// `CAP_NET_ADMIN`, [`crate::topology::bus_cut::check_available`]). Kept out of
    /// [`Scenario::parse`], so a file reads the same on every machine.
    ///
    /// # Errors
    /// [`ScenarioError::Invalid`] at the first such step's `link` key.
    pub fn check_machine(&self) -> Result<(), ScenarioError> {
        let Some(i) = self
            .nemesis
            .iter()
            .position(|f| f.link == Some(crate::nemesis::Link::Bus))
        else {
            return Ok(());
        };
        let Err(why) = crate::topology::bus_cut::check_available() else {
            return Ok(());
        };
        let place = locate::Place::Nemesis(i, Some("link".into()));
        let (line, column) = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|text| locate::Locator::new(&text).find(&place))
            .unwrap_or((1, 1));
        Err(ScenarioError::Invalid {
            path: self.path.clone(),
            line,
            column,
            message: format!(
                "nemesis[{i}] ({}): `link = \"bus\"` cuts the cluster bus with kernel packet \
                 drops: {why}",
                self.nemesis[i].fault
            ),
        })
    }

    /// Reads and parses one file.
    ///
    /// # Errors
    /// [`ScenarioError`].
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        Self::load_as(path, None)
    }

    fn load_as(path: &Path, workers: Option<u32>) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_as(&text, path, workers)
    }

    /// Loads one file, or every `*.toml` in a directory (sorted by name). All files are parsed
    /// before any is run, so one bad file stops the batch before anything starts.
    ///
    /// # Errors
    /// The first [`ScenarioError`], or [`ScenarioError::Empty`].
    pub fn load_all(path: &Path) -> Result<Vec<Self>, ScenarioError> {
        Self::load_all_as(path, None)
    }

    /// As [`Scenario::load_all`], each file checked as run in `workers` worker processes when
    /// given ([`Scenario::parse_as`]).
    ///
    /// # Errors
    /// As [`Scenario::load_all`].
    pub fn load_all_as(path: &Path, workers: Option<u32>) -> Result<Vec<Self>, ScenarioError> {
        if !path.is_dir() {
            return Ok(vec![Self::load_as(path, workers)?]);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| ScenarioError::Read {
                path: path.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(ScenarioError::Empty(path.to_path_buf()));
        }
        files.iter().map(|f| Self::load_as(f, workers)).collect()
    }

    /// The test this scenario describes: every value the file leaves out comes from
    /// [`defaults`] (the same defaults `lockbench run` uses), on local nodes behind the
    /// proxies, audited.
    pub fn to_test(&self) -> Test {
        let w = &self.workload;
        // Every key the file leaves out takes the value `ClientSpec::with_ttl` resolves.
        let base = ClientSpec::with_ttl(w.ttl);
        Test {
            name: self.name.clone(),
            claim: Some(self.claim.clone()),
            description: self.description.clone(),
            topology: TopologySpec {
                kind: self.topology,
                urls: Vec::new(),
                persistence: self.persistence,
                key_prefix: defaults::KEY_PREFIX.to_string(),
                direct: false,
                pooler: self.pooler,
                pg_settings: self.pg_settings.clone(),
                cluster: match (self.topology, self.cluster) {
                    (crate::topology::TopologyKind::Cluster, c) => Some(c.unwrap_or_default()),
                    (_, c) => c,
                },
                tls: Default::default(),
                cluster_seeds: Vec::new(),
            },
            strategies: self.strategies.clone(),
            client: ClientSpec {
                retry: crate::strategy::RetryPolicy {
                    attempts: w.retry_attempts.unwrap_or(base.retry.attempts),
                    delay: w.retry_delay.unwrap_or(base.retry.delay),
                    jitter: w.retry_jitter.unwrap_or(base.retry.jitter),
                    acquire_timeout: w.acquire_timeout,
                },
                watchdog: w.watchdog,
                node_timeout: w.node_timeout.unwrap_or(base.node_timeout),
                connect: crate::node::ConnectOptions {
                    connect_timeout: w.connect_timeout.unwrap_or(base.connect.connect_timeout),
                    response_timeout: w.response_timeout.unwrap_or(base.connect.response_timeout),
                },
                pg_pool: w.pg_pool.map(|size| crate::strategy::PgPool {
                    size,
                    recycle: w.pg_pool_recycle.unwrap_or_default(),
                }),
                adapter: w.adapter.clone(),
                ..base
            },
            workload: Workload {
                clients: w.clients,
                resources: w.resources,
                hold: w.hold,
                stop: StopCondition::Duration(w.duration),
                pacing: w
                    .rate
                    .map_or(Pacing::Closed, |rate_per_s| Pacing::Open { rate_per_s }),
                seed: self.seed,
                shared_connection: false,
                in_flight: Workload::DEFAULT_IN_FLIGHT,
                adapter_processes: w.adapter_processes,
                work: w.work,
                idempotency_key: w.idempotency_key,
            },
            nemesis: self.nemesis.clone(),
            checker: CheckerSpec { audit: true },
            expect: self.expect.clone(),
            workers: self
                .workers
                .map(|workers| crate::orchestration::test::WorkersSpec {
                    workers,
                    launcher: self.launcher.unwrap_or_default(),
                }),
            ledger: None,
            docker: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::{FailoverMethod, FaultKind, PartitionMode, Target};

    const GOOD: &str = r#"
claim = "no owner token: a stalled holder's DEL frees someone else's lock"
topology = "single"
strategies = ["naive-del", "single"]

[workload]
clients = 4
resources = 1
hold = "5ms..20ms"
ttl = "300ms"
duration = "5s"

[[nemesis]]
at = "1s"
duration = "800ms"
fault = "client-pause"
target = "clients:0,1"

[expect.naive-del]
verdict = "invalid"
anomalies = ["mutex-violation"]
"#;

    #[test]
    fn parses_a_good_file() {
        let s = Scenario::parse(GOOD, Path::new("chaos/x.toml")).unwrap();
        assert_eq!(s.name, "x");
        assert_eq!(s.strategies.len(), 2);
        assert_eq!(s.nemesis[0].target, Target::Clients(vec![0, 1]));
        assert_eq!(s.workload.ttl, Duration::from_millis(300));
        assert_eq!(s.expect["naive-del"].verdict, "invalid");
    }

    #[test]
    fn holder_targets_client_faults_only() {
        let holder = GOOD.replace("clients:0,1", "holder");
        let s = Scenario::parse(&holder, Path::new("f.toml")).unwrap();
        assert_eq!(s.nemesis[0].target, Target::Holder);
        let on_node = holder.replace("fault = \"client-pause\"", "fault = \"pause-node\"");
        let err = Scenario::parse(&on_node, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:17:") && err.contains("targets nodes"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let bad = GOOD.replace("resources = 1", "resources = 1\nholdd = \"1ms\"");
        let err = Scenario::parse(&bad, Path::new("chaos/x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("chaos/x.toml:9:"), "{err}");
        assert!(err.contains("holdd"), "{err}");
    }

    #[test]
    fn bad_duration_names_line() {
        let bad = GOOD.replace("ttl = \"300ms\"", "ttl = \"300 parsecs\"");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.toml:10:"), "{err}");
        assert!(err.contains("300 parsecs"), "{err}");
    }

    #[test]
    fn unknown_strategy_and_fault_are_rejected_with_line() {
        let bad = GOOD.replace("\"naive-del\", \"single\"", "\"naive-del\", \"paxos\"");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:4:") && err.contains("paxos"),
            "{err}"
        );
        let bad = GOOD.replace("client-pause", "meteor");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("f.toml:16:") && err.contains("meteor"),
            "{err}"
        );
    }

    #[test]
    fn semantic_errors_are_clear() {
        let bad = GOOD.replace("clients:0,1", "clients:0,9");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("client 9 does not exist"), "{err}");
        let bad = GOOD.replace("at = \"1s\"", "at = \"9s\"");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not before the end"), "{err}");
        let bad = GOOD.replace("[\"mutex-violation\"]", "[\"mutex-violatoin\"]");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown anomaly \"mutex-violatoin\""), "{err}");
        let bad = GOOD.replace("[expect.naive-del]", "[expect.redlock]");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("redlock is not in `strategies`"), "{err}");
    }

    #[test]
    fn every_reference_is_checked_with_file_line_col() {
        let five = GOOD
            .replace("topology = \"single\"", "topology = \"five\"")
            .replace(
                "fault = \"client-pause\"\ntarget = \"clients:0,1\"",
                "fault = \"kill\"\ntarget = \"n7\"",
            );
        let err = Scenario::parse(&five, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.toml:17:10: "), "{err}");
        assert!(
            err.contains("no node n7 in topology five (nodes: n1, n2, n3, n4, n5)"),
            "{err}"
        );
        let cases = [
            (
                GOOD.replace("\"naive-del\", \"single\"", "\"single\", \"single\""),
                "f.toml:4:",
                "lists single twice",
            ),
            (
                GOOD.replace("duration = \"5s\"", "duration = \"5s\"\nretry_attempts = 0"),
                "f.toml:12:",
                "`retry_attempts` must be at least 1",
            ),
            (
                GOOD.replace("duration = \"800ms\"", "duration = \"4500ms\""),
                "f.toml:15:",
                "after the end of the run",
            ),
            (
                GOOD.replace(
                    "target = \"clients:0,1\"",
                    "target = \"clients:0,1\"\nmode = \"refuse\"",
                ),
                "f.toml:18:",
                "`mode` is not a parameter of client-pause",
            ),
            (
                GOOD.replace(
                    "fault = \"client-pause\"\ntarget = \"clients:0,1\"",
                    "fault = \"failover\"\ntarget = \"primary\"",
                ),
                "f.toml:16:",
                "needs topology sentinel",
            ),
            (
                GOOD.replace("topology = \"single\"", "topology = \"external\""),
                "f.toml:3:",
                "must be \"single\", \"five\", \"sentinel\", \"postgres\" or \"etcd\"",
            ),
        ];
        for (text, at, needle) in cases {
            let err = Scenario::parse(&text, Path::new("f.toml"))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(at) && err.contains(needle),
                "{at} {needle}: {err}"
            );
        }
    }

    /// One rule, two vocabularies: the scenario names the key at its line, `run` the flag.
    #[test]
    fn a_shared_rule_names_the_key_in_a_file_and_the_flag_in_run() {
        let cases = [
            (
                "clients = 4",
                "clients = 0",
                "f.toml:7:11: `clients` must be at least 1",
                "--clients must be at least 1",
            ),
            (
                "ttl = \"300ms\"",
                "ttl = \"2ms\"",
                "f.toml:10:7: `ttl` with strategy naive-del: TTL 2ms",
                "--ttl with strategy naive-del: TTL 2ms",
            ),
        ];
        for (was, is, in_file, in_run) in cases {
            let text = GOOD.replace(was, is);
            let err = Scenario::parse(&text, Path::new("f.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(in_file), "{err}");
            // The same test, as `run` would check it.
            let mut s: Scenario = toml::from_str(&text).unwrap();
            s.path = "f.toml".into();
            let e = s.to_test().validate().unwrap_err().to_string();
            assert!(e.starts_with(in_run), "{e}");
        }
    }

    #[test]
    fn a_parsed_step_round_trips_through_json() {
        let text = GOOD
            .replace("topology = \"single\"", "topology = \"sentinel\"")
            .replace("\"naive-del\", \"single\"", "\"single\"")
            .replace("[expect.naive-del]", "[expect.single]")
            .replace("anomalies = [\"mutex-violation\"]", "")
            .replace(
                "[[nemesis]]",
                "[[nemesis]]\nat = \"500ms\"\nduration = 1200\nfault = \"latency\"\ntarget = \"n2\"\n\
                 latency = \"500us\"\njitter = \"1ms 250us\"\nlink = \"replication\"\n\n\
                 [[nemesis]]\nat = \"2s\"\nduration = \"1s\"\nfault = \"partition\"\n\
                 target = \"primary\"\nmode = \"refuse\"\n\n\
                 [[nemesis]]\nat = \"3s\"\nfault = \"failover\"\ntarget = \"primary\"\n\
                 method = \"sentinel\"\n\n[[nemesis]]",
            );
        let s = Scenario::parse(&text, Path::new("f.toml")).unwrap();
        assert_eq!(s.nemesis.len(), 4);
        assert_eq!(s.nemesis[0].fault, FaultKind::Latency);
        assert_eq!(s.nemesis[0].latency, Some(Duration::from_micros(500)));
        assert_eq!(s.nemesis[0].duration, Some(Duration::from_millis(1200)));
        assert_eq!(s.nemesis[1].mode, Some(PartitionMode::Refuse));
        assert_eq!(s.nemesis[2].method, Some(FailoverMethod::Sentinel));
        for step in &s.nemesis {
            let json = serde_json::to_string(step).unwrap();
            let back: FaultStep = serde_json::from_str(&json).unwrap();
            assert_eq!(&back, step, "{json}");
        }
    }

    #[test]
    fn a_bad_parameter_value_is_named_with_its_line() {
        let bad = GOOD.replace(
            "fault = \"client-pause\"\ntarget = \"clients:0,1\"",
            "fault = \"partition\"\ntarget = \"n1\"\nmode = \"sideways\"",
        );
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:18:")
                && err.contains("`mode` must be \"blackhole\" or \"refuse\", not \"sideways\""),
            "{err}"
        );
        let bad = GOOD.replace("duration = \"800ms\"", "duration = \"8 fortnights\"");
        let err = Scenario::parse(&bad, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:15:") && err.contains("8 fortnights"),
            "{err}"
        );
    }

    #[test]
    fn shipped_scenarios_pass_validation() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
        let all = Scenario::load_all(&dir).unwrap();
        assert!(all.len() >= 13, "{}", all.len());
    }
}
