//! Scenario files: `chaos/<name>.toml` = topology + strategies + workload + nemesis schedule +
//! the verdict the seeds' claim predicts.
//!
//! ```toml
//! name = "naive-del-pause"
//! claim = "no owner token: a stalled holder's DEL frees someone else's lock"
//! topology = "single"            # single | five | sentinel
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
use crate::driver::HoldTime;
use crate::strategy::StrategyKind;
use crate::topology::{Persistence, TopologyKind};

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

fn de_target<'de, D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
    let s = String::deserialize(d)?;
    Target::from_str(&s).map_err(serde::de::Error::custom)
}

fn default_seed() -> u64 {
    1
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
    /// Acquire attempts (1 = no retry).
    #[serde(default = "default_attempts")]
    pub retry_attempts: u32,
    /// Delay between attempts.
    #[serde(
        default = "default_retry_delay",
        deserialize_with = "de_duration",
        serialize_with = "crate::duration_ms::serialize"
    )]
    pub retry_delay: Duration,
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
}

fn default_attempts() -> u32 {
    1
}

fn default_retry_delay() -> Duration {
    Duration::from_millis(10)
}

/// Fault kinds of the nemesis catalogue.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Deserialize,
    Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FaultKind {
    /// Latency (+ jitter) toxic on the target nodes' proxies.
    Latency,
    /// Cut the target links: `mode = "blackhole"` (timeout toxic) or `"refuse"` (proxy disabled).
    Partition,
    /// kill -9 the target nodes; restart after `duration` (empty without persistence).
    Kill,
    /// SIGSTOP the target nodes; SIGCONT after `duration`.
    PauseNode,
    /// Fail the Sentinel primary over (`method = "kill-primary"` or `"sentinel"`).
    Failover,
    /// Jump the target nodes' clocks forward by `delta` (every key's TTL shortened by delta).
    ClockJump,
    /// Pause the target clients for `duration`, freezing their lease renewal (a GC pause).
    ClientPause,
    /// Make the target clients' critical sections `extra` longer; renewal keeps running.
    SlowWork,
    /// The target clients crash the next time they hold a lease (no release). For a strategy
    /// with a crash point inside its acquire (`setnx-expire`), the crash lands there, in the
    /// next acquire: after `SETNX` set the key, before `PEXPIRE` gives it an expiry.
    ClientCrash,
    /// The target clients make no new acquire attempt for `duration` (a client that has not
    /// started yet, or is away); an acquire already under way and a lease already held go on
    /// as usual. With `at = "0s"` a client joins the run only at the end of the window, so it
    /// has no attempt of its own in flight (or left behind on a node) when a fault strikes.
    ClientAbsent,
}

/// What a fault acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Target {
    /// Named nodes (`n1`, `primary`, …).
    Nodes(Vec<String>),
    /// The largest minority of nodes (2 of 5, 0 of 1).
    Minority,
    /// A majority of nodes (3 of 5).
    Majority,
    /// Every node.
    AllNodes,
    /// The Sentinel primary.
    Primary,
    /// Client ids.
    Clients(Vec<u32>),
    /// The client(s) inside a critical section when the fault starts; if none is inside at
    /// that instant, the first to enter one (client faults only).
    Holder,
}

impl FromStr for Target {
    type Err = String;

    /// `n1` · `n1,n2` · `minority` · `majority` · `all` · `primary` · `client:0` · `clients:0,1`
    /// · `holder`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let list = |rest: &str| -> Result<Vec<u32>, String> {
            rest.split(',')
                .map(|x| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("bad client id {x:?} in target {s:?}"))
                })
                .collect()
        };
        Ok(match s {
            "minority" => Target::Minority,
            "majority" => Target::Majority,
            "all" => Target::AllNodes,
            "primary" => Target::Primary,
            "holder" => Target::Holder,
            _ if s.starts_with("clients:") => Target::Clients(list(&s[8..])?),
            _ if s.starts_with("client:") => Target::Clients(list(&s[7..])?),
            _ if !s.is_empty() => Target::Nodes(s.split(',').map(|n| n.trim().to_string()).collect()),
            _ => {
                return Err(
                    "empty target: use n1, n1,n2, minority, majority, all, primary, client:0, clients:0,1 or holder"
                        .into(),
                )
            }
        })
    }
}

/// One step of the nemesis schedule.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultStep {
    /// Start, as an offset from the strategy's start.
    #[serde(
        deserialize_with = "de_duration",
        serialize_with = "crate::duration_ms::serialize"
    )]
    pub at: Duration,
    /// How long until the fault is healed; `None` for instant faults (crash, clock jump).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub duration: Option<Duration>,
    /// Which fault.
    pub fault: FaultKind,
    /// What it acts on.
    #[serde(deserialize_with = "de_target")]
    pub target: Target,
    /// Latency toxic value.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub latency: Option<Duration>,
    /// Latency toxic jitter.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub jitter: Option<Duration>,
    /// Partition mode: `blackhole` or `refuse`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Partition link: `client` (client↔node, default) or `replication` (primary↔replica).
    #[serde(default)]
    pub link: Option<String>,
    /// Failover method: `kill-primary` or `sentinel`.
    #[serde(default)]
    pub method: Option<String>,
    /// Clock jump size.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub delta: Option<Duration>,
    /// Extra critical-section time for slow-work.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub extra: Option<Duration>,
    /// For `kill`: stay down at least this long before restarting (delayed restart).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub restart_after: Option<Duration>,
}

impl FaultStep {
    /// A step of `fault` on `target` at offset 0 with no parameters set (for code that builds
    /// schedules by hand; scenario files set the fields they need).
    pub fn new(fault: FaultKind, target: Target) -> Self {
        Self {
            at: Duration::ZERO,
            duration: None,
            fault,
            target,
            latency: None,
            jitter: None,
            mode: None,
            link: None,
            method: None,
            delta: None,
            extra: None,
            restart_after: None,
        }
    }
}

/// What the seeds' claim predicts for one strategy.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// `valid`, `invalid` or `unknown`.
    pub verdict: String,
    /// Anomaly kinds that must appear (e.g. `mutex-violation`, `stale-write-rejected`).
    #[serde(default)]
    pub anomalies: Vec<String>,
    /// Anomaly kinds that must NOT appear (e.g. `stale-write-accepted` for a fenced strategy).
    #[serde(default)]
    pub absent: Vec<String>,
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
    /// Strategies, run one after another with the same workload and schedule.
    pub strategies: Vec<StrategyKind>,
    /// Seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Workload.
    pub workload: ScenarioWorkload,
    /// Fault schedule.
    #[serde(default)]
    pub nemesis: Vec<FaultStep>,
    /// Expected verdicts per strategy name.
    #[serde(default)]
    pub expect: BTreeMap<String, Expectation>,
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

impl Scenario {
    /// Parses scenario text; `path` is used in messages.
    ///
    /// # Errors
    /// [`ScenarioError::Parse`] with line and column, or [`ScenarioError::Invalid`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((1, 1), |sp| line_col(text, sp.start));
            ScenarioError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: e.message().trim().to_string(),
            }
        })?;
        s.path = path.to_path_buf();
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

    /// Reads and parses one file.
    ///
    /// # Errors
    /// [`ScenarioError`].
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Loads one file, or every `*.toml` in a directory (sorted by name). All files are parsed
    /// before any is run, so one bad file stops the batch before anything starts.
    ///
    /// # Errors
    /// The first [`ScenarioError`], or [`ScenarioError::Empty`].
    pub fn load_all(path: &Path) -> Result<Vec<Self>, ScenarioError> {
        if !path.is_dir() {
            return Ok(vec![Self::load(path)?]);
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
        files.iter().map(|f| Self::load(f)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn shipped_scenarios_pass_validation() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
        let all = Scenario::load_all(&dir).unwrap();
        assert!(all.len() >= 13, "{}", all.len());
    }
}
