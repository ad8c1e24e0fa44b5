//! Chaos runs: a scenario file's topology (behind Toxiproxy) + each strategy + the nemesis
//! schedule + the checker, compared with the verdict the scenario expects.
//!
//! Layout of one scenario's directory (itself a run directory that `lockbench report` reads):
//!
//! ```text
//! <dir>/summary.json          RunSummary (config = the scenario), rewritten as it goes
//! <dir>/<strategy>.hgrm       acquire latency percentiles
//! <dir>/<strategy>/           history.jsonl, ledger.sqlite, checker.json
//! <dir>/checker.json          strategy → full checker report
//! <dir>/expectations.json     strategy → expected vs observed
//! <dir>/nodes/                the local redis-server / redis-sentinel dirs and logs
//! ```
//!
//! [`Backend::Docker`] runs the same scenario with containers (no `nodes/` logs then: see
//! `docker logs` while it runs).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Mutex};

use crate::checker::{CheckReport, Verdict};
use crate::driver::{DriverContext, Pacing, StopCondition, Workload};
use crate::history::FaultWindow;
use crate::nemesis::{self, FaultRecord, Nemesis, ProxiedTopology, ProxyOptions};
use crate::node::ConnectOptions;
use crate::orchestration::experiment::{self, Nemesis as NemesisHook, NemesisStart};
use crate::orchestration::scenario::{Expectation, FaultKind, Scenario, Target};
use crate::results::{CheckSummary, RunDir, RunStatus, RunSummary, StrategySummary};
use crate::strategy::{RetryPolicy, StrategyKind, StrategyOptions};
use crate::topology::{DockerOptions, LocalTopologyOptions, TopologyKind};

/// Errors that stop a scenario (a fault that did not happen, a topology that did not start).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The topology or its proxies did not start, or a fault could not be injected/healed.
    #[error("{scenario}: {source}")]
    Nemesis {
        /// Scenario name.
        scenario: String,
        /// Why.
        source: nemesis::NemesisError,
    },
    /// A strategy run failed.
    #[error("{scenario} / {strategy}: {source}")]
    Experiment {
        /// Scenario name.
        scenario: String,
        /// Strategy name.
        strategy: String,
        /// Why.
        source: experiment::ExperimentError,
    },
    /// A result file could not be written.
    #[error(transparent)]
    Results(#[from] crate::results::RunDirError),
}

/// Expected vs observed for one strategy of a scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectationCheck {
    /// Strategy name.
    pub strategy: String,
    /// The verdict the checker gave.
    pub observed: Verdict,
    /// What the scenario expected (`None` = no expectation written).
    pub expected: Option<Expectation>,
    /// `true` when every part of the expectation held; `None` without an expectation.
    pub met: Option<bool>,
    /// What did not hold, one sentence each.
    pub mismatches: Vec<String>,
    /// The strategy's run was stopped by Ctrl-C / SIGTERM: its partial results are kept but
    /// not judged (`met` is `None`).
    #[serde(default)]
    pub interrupted: bool,
}

/// Compares a checker report with an expectation.
pub fn compare(
    strategy: &str,
    report: &CheckReport,
    expected: Option<&Expectation>,
) -> ExpectationCheck {
    let counts = CheckSummary::from_report(report).anomaly_counts;
    let observed_name = report.verdict.to_string();
    let mut mismatches = Vec::new();
    if let Some(e) = expected {
        if e.verdict != observed_name {
            mismatches.push(format!("verdict {observed_name}, expected {}", e.verdict));
        }
        for kind in &e.anomalies {
            if counts.get(kind).copied().unwrap_or(0) == 0 {
                mismatches.push(format!("no {kind}, expected some"));
            }
        }
        for kind in &e.absent {
            if let Some(n) = counts.get(kind).filter(|&&n| n > 0) {
                mismatches.push(format!("{n} × {kind}, expected none"));
            }
        }
    }
    ExpectationCheck {
        strategy: strategy.to_string(),
        observed: report.verdict,
        expected: expected.cloned(),
        met: expected.map(|_| mismatches.is_empty()),
        mismatches,
        interrupted: false,
    }
}

/// What a scenario run reports as it goes, for a progress line on a terminal.
#[derive(Debug, Clone, Copy)]
pub enum ChaosProgress<'a> {
    /// Docker backend: containers and network are being started; every name starts with this tag.
    Containers(&'a str),
    /// A strategy starts (its clients connect, then the schedule runs).
    Strategy(&'a str),
    /// About once a second while a strategy runs.
    Tick {
        /// The strategy running.
        strategy: &'a str,
        /// Time since its start.
        elapsed: Duration,
        /// Its planned run time (`workload.duration`).
        duration: Duration,
        /// Successful acquisitions so far.
        acquired: u64,
        /// Errors so far.
        errors: u64,
        /// Faults injected and not yet healed, e.g. `client-pause client:0,client:1`.
        active_faults: &'a [String],
    },
}

/// Faults open right now, by window id (label: kind and targets).
type ActiveFaults = Arc<std::sync::Mutex<BTreeMap<u64, String>>>;

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioOutcome {
    /// Scenario name.
    pub name: String,
    /// The claim it tests.
    pub claim: String,
    /// Per-strategy metrics and verdicts (as in `summary.json`).
    pub strategies: Vec<StrategySummary>,
    /// Per-strategy expectation checks.
    pub expectations: Vec<ExpectationCheck>,
    /// Stopped early by Ctrl-C / SIGTERM.
    pub interrupted: bool,
}

impl ScenarioOutcome {
    /// True when every written expectation held.
    pub fn all_met(&self) -> bool {
        self.expectations.iter().all(|e| e.met != Some(false))
    }
}

fn strategy_options(s: &Scenario, kind: StrategyKind) -> StrategyOptions {
    let w = &s.workload;
    let mut opts = StrategyOptions::new(kind, w.ttl);
    opts.retry = RetryPolicy {
        attempts: w.retry_attempts,
        delay: w.retry_delay,
        jitter: w.retry_delay / 2,
        acquire_timeout: w.acquire_timeout,
    };
    opts.watchdog = w.watchdog;
    opts.key_prefix = format!("lockbench:{}:{kind}:", s.name);
    if let Some(t) = w.node_timeout {
        opts.node_timeout = t;
    }
    opts
}

fn workload(s: &Scenario) -> Workload {
    let w = &s.workload;
    Workload {
        clients: w.clients,
        resources: w.resources,
        hold: w.hold,
        stop: StopCondition::Duration(w.duration),
        pacing: w
            .rate
            .map_or(Pacing::Closed, |rate_per_s| Pacing::Open { rate_per_s }),
        seed: s.seed,
        shared_connection: false,
        in_flight: Workload::DEFAULT_IN_FLIGHT,
    }
}

/// Builds the nemesis hook for one strategy: runs the scenario's schedule against the shared
/// [`Nemesis`], logging every window into that strategy's history, and heals everything
/// before it returns (also on shutdown).
fn schedule_hook(
    nemesis: Arc<Mutex<Nemesis>>,
    scenario: &Scenario,
    shutdown: watch::Receiver<bool>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
    active: ActiveFaults,
) -> NemesisHook {
    let steps = scenario.nemesis.clone();
    Box::new(move |n: NemesisStart| {
        // A client absent from time zero must not slip an attempt in before the schedule
        // task first runs: the hook is called before the clients start, so mark such clients
        // absent here, synchronously (the schedule then records the window as usual).
        for step in steps
            .iter()
            .filter(|s| s.fault == FaultKind::ClientAbsent && s.at.is_zero())
        {
            if let Target::Clients(ids) = &step.target {
                for &i in ids {
                    n.controls.set_absent(i as usize, true);
                }
            }
        }
        Box::pin(async move {
            let clock = n.history.clock();
            let history = n.history.clone();
            let record = move |r: FaultRecord| {
                if let Ok(mut open) = active.lock() {
                    if r.end.is_none() {
                        open.insert(r.id, format!("{} {}", r.kind, r.targets.join(",")));
                    } else {
                        open.remove(&r.id);
                    }
                }
                history.record_fault(FaultWindow {
                    id: r.id,
                    kind: r.kind.clone(),
                    targets: r.targets.clone(),
                    start_us: clock.us_at(r.start),
                    end_us: r.end.map(|e| clock.us_at(e)),
                });
            };
            let mut nem = nemesis.lock().await;
            if let Err(e) = nemesis::run_schedule(
                &mut nem,
                &steps,
                &n.controls,
                n.start.into_std(),
                shutdown,
                record,
            )
            .await
            {
                errors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e.to_string());
            }
        })
    })
}

/// Where a scenario's nodes and Toxiproxy run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Backend {
    /// redis-server processes of this machine and the embedded Toxiproxy server.
    #[default]
    Local,
    /// One Redis container per node and a Toxiproxy container on a network of the run's own
    /// ([`ProxiedTopology::start_docker`]). The options' `run_tag` is replaced by one made from
    /// the scenario's run id ([`crate::topology::docker::run_tag`]).
    Docker(DockerOptions),
}

impl Backend {
    /// `local` or `docker`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Docker(_) => "docker",
        }
    }

    /// The backend a scenario on `topology` runs on: containers exist for the Redis
    /// topologies (`single`, `five`, `sentinel`) only, so under [`Backend::Docker`] a
    /// `postgres` or `etcd` scenario runs on [`Backend::Local`] (its `summary.json` then says
    /// `"backend": "local"`).
    pub fn for_topology(&self, topology: TopologyKind) -> Backend {
        match (self, topology) {
            (Backend::Docker(_), TopologyKind::Postgres | TopologyKind::Etcd) => Backend::Local,
            _ => self.clone(),
        }
    }
}

/// Runs one scenario into `dir` (a fresh run directory) on the local backend.
///
/// Every fault is healed and every process and proxy is gone when this returns, also on error
/// or when `shutdown` flips (the run then ends as interrupted, with partial results kept).
///
/// # Errors
/// [`ChaosError`] when the topology does not start, a fault cannot be injected, or files
/// cannot be written.
pub async fn run_scenario(
    scenario: &Scenario,
    dir: &RunDir,
    shutdown: watch::Receiver<bool>,
    progress: impl FnMut(ChaosProgress<'_>),
) -> Result<ScenarioOutcome, ChaosError> {
    run_scenario_on(&Backend::Local, scenario, dir, shutdown, progress).await
}

/// [`run_scenario`] on a chosen [`Backend`]. With [`Backend::Docker`], `progress` is first
/// called with [`ChaosProgress::Containers`] (the prefix of every container and network name
/// of this run), and every container and the network are removed when this returns.
///
/// # Errors
/// As [`run_scenario`]; a docker topology that does not start (no engine, image missing:
/// run `docker/build-images.sh`) is a [`ChaosError::Nemesis`].
pub async fn run_scenario_on(
    backend: &Backend,
    scenario: &Scenario,
    dir: &RunDir,
    shutdown: watch::Receiver<bool>,
    mut progress: impl FnMut(ChaosProgress<'_>),
) -> Result<ScenarioOutcome, ChaosError> {
    let nem_err = |source| ChaosError::Nemesis {
        scenario: scenario.name.clone(),
        source,
    };
    let requested = backend;
    let backend = &requested.for_topology(scenario.topology);
    if backend != requested {
        tracing::warn!(
            "{}: topology `{}` has no container image; it runs on the local backend",
            scenario.name,
            scenario.topology
        );
    }
    let mut summary = RunSummary::start(
        dir.run_id(),
        serde_json::json!({ "scenario": scenario, "backend": backend.name() }),
    );
    dir.write_json("summary.json", &summary)?;
    let mut local = LocalTopologyOptions::new(dir.file("nodes"));
    local.persistence = scenario.persistence;
    let started = match backend {
        Backend::Local => {
            ProxiedTopology::start(scenario.topology, &local, &ProxyOptions::default()).await
        }
        Backend::Docker(options) => {
            let mut options = options.clone();
            options.run_tag = crate::topology::docker::run_tag(dir.run_id());
            progress(ChaosProgress::Containers(&options.run_tag));
            ProxiedTopology::start_docker(scenario.topology, &local, &options).await
        }
    };
    let proxied = match started {
        Ok(p) => p,
        Err(e) => {
            summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
            summary.status = RunStatus::Failed;
            summary.error = Some(e.to_string());
            dir.write_json("summary.json", &summary)?;
            return Err(nem_err(e));
        }
    };
    let nemesis = Arc::new(Mutex::new(Nemesis::new(proxied)));
    let result = run_strategies(
        scenario,
        dir,
        &mut summary,
        &nemesis,
        shutdown,
        &mut progress,
    )
    .await;
    // Tear down whatever happened: heal, remove proxies, stop every process.
    let mut nem = match Arc::try_unwrap(nemesis) {
        Ok(m) => m.into_inner(),
        Err(_) => unreachable!("every schedule hook has finished"),
    };
    let healed = nem.heal_all(|_| {}).await;
    nem.into_proxied().shutdown().await;
    summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
    match &result {
        Ok(o) if o.interrupted => summary.status = RunStatus::Interrupted,
        Ok(_) => summary.status = RunStatus::Completed,
        Err(e) => {
            summary.status = RunStatus::Failed;
            summary.error = Some(e.to_string());
        }
    }
    dir.write_json("summary.json", &summary)?;
    let outcome = result?;
    healed.map_err(nem_err)?;
    Ok(outcome)
}

async fn run_strategies(
    scenario: &Scenario,
    dir: &RunDir,
    summary: &mut RunSummary,
    nemesis: &Arc<Mutex<Nemesis>>,
    shutdown: watch::Receiver<bool>,
    progress: &mut impl FnMut(ChaosProgress<'_>),
) -> Result<ScenarioOutcome, ChaosError> {
    let mut outcome = ScenarioOutcome {
        name: scenario.name.clone(),
        claim: scenario.claim.clone(),
        strategies: Vec::new(),
        expectations: Vec::new(),
        interrupted: false,
    };
    let endpoints = nemesis.lock().await.proxied().endpoints();
    let mut connect = ConnectOptions::default();
    if let Some(t) = scenario.workload.response_timeout {
        connect.response_timeout = t;
    }
    if let Some(t) = scenario.workload.connect_timeout {
        connect.connect_timeout = t;
    }
    let ctx = DriverContext {
        endpoints,
        connect,
        workload: workload(scenario),
        shutdown: shutdown.clone(),
        connect_progress: None,
    };
    let mut checks = serde_json::Map::new();
    for &kind in &scenario.strategies {
        if *shutdown.borrow() {
            outcome.interrupted = true;
            break;
        }
        let name = kind.to_string();
        progress(ChaosProgress::Strategy(&name));
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let active = ActiveFaults::default();
        let hook = schedule_hook(
            nemesis.clone(),
            scenario,
            shutdown.clone(),
            errors.clone(),
            active.clone(),
        );
        let index = summary.strategies.len();
        summary.strategies.push(StrategySummary {
            strategy: name.clone(),
            ..StrategySummary::default()
        });
        let on_tick = |c: &crate::driver::Collector, elapsed: Duration| {
            summary.strategies[index] = c.summary(&name, elapsed);
            if let Err(e) = dir.write_progress(summary, &name, &c.acquire_ok) {
                tracing::warn!("cannot rewrite results: {e}");
            }
            let open: Vec<String> = active
                .lock()
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            let s = &summary.strategies[index];
            progress(ChaosProgress::Tick {
                strategy: &name,
                elapsed,
                duration: scenario.workload.duration,
                acquired: s.acquired,
                errors: s.errors,
                active_faults: &open,
            });
        };
        let opts = strategy_options(scenario, kind);
        let exp = experiment::run(&ctx, &opts, &dir.file(&name), true, Some(hook), on_tick)
            .await
            .map_err(|source| ChaosError::Experiment {
                scenario: scenario.name.clone(),
                strategy: name.clone(),
                source,
            })?;
        let nemesis_errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(first) = nemesis_errors.first() {
            return Err(ChaosError::Nemesis {
                scenario: scenario.name.clone(),
                source: nemesis::NemesisError::Unsupported {
                    fault: "schedule".into(),
                    reason: first.clone(),
                },
            });
        }
        summary.strategies[index].cut_sections = exp.run.cut_sections;
        if let Some(report) = &exp.check {
            summary.strategies[index].check = Some(CheckSummary::from_report(report));
            checks.insert(
                name.clone(),
                serde_json::to_value(report).unwrap_or_default(),
            );
            dir.write_json("checker.json", &checks)?;
            let mut expectation = compare(&name, report, scenario.expect.get(&name));
            if exp.run.interrupted {
                // Partial data: kept, not judged against the claim.
                expectation.met = None;
                expectation.mismatches.clear();
                expectation.interrupted = true;
            }
            outcome.expectations.push(expectation);
            dir.write_json("expectations.json", &outcome.expectations)?;
        }
        dir.write_json("summary.json", &*summary)?;
        if exp.run.interrupted {
            outcome.interrupted = true;
            break;
        }
    }
    outcome.strategies = summary.strategies.clone();
    Ok(outcome)
}

/// Creates the directory for one scenario: `root/<time>-<name>` for a single file, or
/// `root/<batch>/<name>` inside a batch directory.
///
/// # Errors
/// [`crate::results::RunDirError`].
pub fn scenario_dir(
    parent: &Path,
    scenario: &Scenario,
) -> Result<RunDir, crate::results::RunDirError> {
    RunDir::create_named(parent, &scenario.name)
}
