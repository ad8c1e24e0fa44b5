//! The one runner: starts a [`Test`]'s topology (local processes or containers, behind the
//! embedded Toxiproxy unless direct), runs each strategy with the nemesis schedule and the
//! checker, holds each verdict against the test's expectation, and tears everything down,
//! writing results as it goes. `run`, `chaos` and the matrix all come through here.
//!
//! Layout of a test's directory (a run directory that `lockbench report` reads):
//!
//! ```text
//! <dir>/config.json           the resolved Test (`lockbench run --config` reruns it)
//! <dir>/summary.json          RunSummary (config = the Test + backend), rewritten as it goes
//! <dir>/<strategy>.hgrm       acquire latency percentiles
//! <dir>/<strategy>/           history.jsonl, ledger.sqlite, checker.json
//! <dir>/checker.json          strategy → full checker report
//! <dir>/expectations.json     strategy → expected vs observed (tests with a claim)
//! <dir>/nodes/                the local servers' directories and logs
//! ```
//!
//! The run in steps: [`nodes`] starts the topology and tears it down, [`strategies`] runs
//! each strategy in turn (its schedule from [`schedule`]), [`record`] writes what a test and
//! each strategy measured.

mod nodes;
mod record;
mod schedule;
mod strategies;

use std::time::Duration;

use tokio::sync::watch;

use super::expectation::ExpectationCheck;
use super::experiment;
use super::ledger_choice::{LedgerChoice, LedgerChoiceError, LedgerDatabase};
use super::test::Test;
use super::workers::coordinator::WorkersPlan;
use crate::driver::ConnectProgress;
use crate::nemesis;
use crate::results::{LiveMetrics, RunDir, StrategySummary};
use crate::topology::{DockerOptions, TopologyKind};

/// Errors that stop a test (a topology that did not start, a fault that did not happen, a
/// strategy's clients that could not connect, a result file that could not be written).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The topology or its proxies did not start, or external nodes could not be reached.
    #[error("{test}: {source}")]
    Topology {
        /// Test name.
        test: String,
        /// Why.
        source: crate::topology::TopologyError,
    },
    /// A fault could not be injected or healed.
    #[error("{test}: {source}")]
    Nemesis {
        /// Test name.
        test: String,
        /// Why.
        source: nemesis::NemesisError,
    },
    /// A strategy run failed.
    #[error("{test} / {strategy}: {source}")]
    Experiment {
        /// Test name.
        test: String,
        /// Strategy name.
        strategy: String,
        /// Why.
        source: experiment::ExperimentError,
    },
    /// A result file could not be written.
    #[error(transparent)]
    Results(#[from] crate::results::RunDirError),
    /// A multi-worker strategy run failed (workers not launched or not ready, merge failed).
    #[error("{test} / {strategy}: {source}")]
    Workers {
        /// Test name.
        test: String,
        /// Strategy name.
        strategy: String,
        /// Why.
        source: super::workers::WorkersError,
    },
    /// The ledger's database (`--ledger`) is not reachable or its server did not start.
    #[error("{test}: {source}")]
    Ledger {
        /// Test name.
        test: String,
        /// Why.
        source: LedgerChoiceError,
    },
}

/// Where a test's nodes and Toxiproxy run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Backend {
    /// Server processes of this machine and the embedded Toxiproxy server.
    #[default]
    Local,
    /// One Redis container per node and a Toxiproxy container on a network of the run's own
    /// ([`ProxiedTopology::start_docker`]). The options' `run_tag` is replaced by one made from
    /// the run id ([`crate::topology::docker::run_tag`]).
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

    /// The backend a test on `topology` runs on: containers exist for the Redis topologies
    /// (`single`, `five`, `sentinel`) only, so under [`Backend::Docker`] a `postgres`, `etcd`
    /// or `external` test runs on [`Backend::Local`] (its `summary.json` then says
    /// `"backend": "local"`).
    pub fn for_topology(&self, topology: TopologyKind) -> Backend {
        match (self, topology) {
            (
                Backend::Docker(_),
                TopologyKind::Postgres | TopologyKind::Etcd | TopologyKind::External,
            ) => Backend::Local,
            _ => self.clone(),
        }
    }
}

/// What a test reports as it goes, for a progress line or bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
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
        /// Its planned run time (`None` when it stops after an op count).
        duration: Option<Duration>,
        /// Its metrics so far.
        summary: &'a StrategySummary,
        /// Faults injected and not yet healed, e.g. `client-pause client:0,client:1`.
        active_faults: &'a [String],
    },
}

/// How to run: where, when to stop, and what to show.
#[derive(Clone)]
pub struct Runner {
    /// Where nodes and Toxiproxy run.
    pub backend: Backend,
    /// Becomes `true` on Ctrl-C / SIGTERM: the test ends as interrupted, partial results kept.
    pub shutdown: watch::Receiver<bool>,
    /// Point `results/latest` at the directory once it has measured something (a single run;
    /// not the scenarios of a batch or the trials of a matrix).
    pub link_latest: bool,
    /// Called as many clients connect (see [`DriverContext::connect_progress`]).
    pub connect_progress: Option<ConnectProgress>,
    /// Where the strategies' ledgers go (`--ledger`; default the SQLite file).
    pub ledger: LedgerChoice,
    /// `--metrics`: the live metrics every test of this runner updates (ops, latency, holders,
    /// faults, harness lag, checker anomalies, proxy bytes); `None` = off.
    pub metrics: Option<LiveMetrics>,
    /// `--workers N`: each strategy's clients run in N `lockbench worker` processes
    /// ([`super::workers`]); `None` = in this process.
    pub workers: Option<WorkersPlan>,
}

impl Runner {
    /// A local runner that never links `latest` and shows no connect progress.
    pub fn local(shutdown: watch::Receiver<bool>) -> Self {
        Self {
            backend: Backend::Local,
            shutdown,
            link_latest: false,
            connect_progress: None,
            ledger: LedgerChoice::Sqlite,
            metrics: None,
            workers: None,
        }
    }
}

/// The result of one test.
#[derive(Debug, Clone)]
pub struct TestOutcome {
    /// Test name.
    pub name: String,
    /// The claim it tests (empty for a plain run).
    pub claim: String,
    /// Per-strategy metrics and verdicts (as in `summary.json`).
    pub strategies: Vec<StrategySummary>,
    /// Per-strategy expectation checks (audited tests only; `expected` is `None` where the
    /// test wrote no expectation).
    pub expectations: Vec<ExpectationCheck>,
    /// Stopped early by Ctrl-C / SIGTERM.
    pub interrupted: bool,
}

impl TestOutcome {
    /// True when every written expectation held.
    pub fn all_met(&self) -> bool {
        self.expectations.iter().all(|e| e.met != Some(false))
    }
}

impl Runner {
    /// Runs `test` into `dir` (a fresh run directory): writes `config.json`, then
    /// `summary.json`, `checker.json` and `expectations.json` as it goes.
    ///
    /// Every fault is healed and every process and proxy is gone when this returns, also on
    /// error or when `shutdown` flips (the run then ends as interrupted, partial results
    /// kept). On error `summary.json` says `failed` with the reason, and keeps the strategies
    /// measured before it.
    ///
    /// # Errors
    /// [`RunError`] when the topology does not start, a fault cannot be injected, a strategy's
    /// clients cannot connect, or files cannot be written.
    pub async fn run(
        &self,
        test: &Test,
        dir: &RunDir,
        mut progress: impl FnMut(Progress<'_>),
    ) -> Result<TestOutcome, RunError> {
        let backend = self.backend.for_topology(test.topology.kind);
        if backend != self.backend {
            tracing::warn!(
                "{}: topology `{}` has no container image; it runs on the local backend",
                test.name,
                test.topology.kind
            );
        }
        let mut summary = record::start(test, dir, &backend)?;
        let plan = match self.workers_plan(test) {
            Ok(p) => p,
            Err(source) => {
                let e = RunError::Workers {
                    test: test.name.clone(),
                    strategy: "-".into(),
                    source,
                };
                record::fail(dir, &mut summary, &e)?;
                return Err(e);
            }
        };
        let ledger = self
            .open_ledger(test, dir, plan.as_ref(), &mut summary)
            .await?;
        let nodes = match self
            .start(test, &backend, dir, plan.as_ref(), &mut progress)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                ledger.stop().await;
                record::fail(dir, &mut summary, &e)?;
                return Err(e);
            }
        };
        let endpoints = nodes.endpoints().await;
        let traffic = nodes.watch_traffic(self.metrics.as_ref()).await;
        if test.topology.kind == TopologyKind::Cluster {
            record::cluster_layout(test, dir, &mut summary, &nodes).await?;
        }
        let result = self
            .run_strategies(
                test,
                dir,
                &mut summary,
                endpoints,
                &nodes,
                ledger.backend(),
                plan.as_ref(),
                &mut progress,
            )
            .await;
        ledger.stop().await;
        if let Some((live, id)) = traffic {
            // The proxies' last counts, before they are removed.
            live.unwatch_traffic(id).await;
        }
        // Tear down whatever happened: heal, remove proxies, stop every process.
        let healed = nodes.tear_down().await;
        record::finish(dir, &mut summary, &result)?;
        let outcome = result?;
        healed.map_err(|source| RunError::Nemesis {
            test: test.name.clone(),
            source,
        })?;
        Ok(outcome)
    }

    /// The ledger's database (`--ledger`; with workers in several processes one they can all
    /// write), opened first: a bad one stops the test before any server starts. Tests without
    /// an audit get the SQLite file. A database other than SQLite is named in `summary.json`.
    ///
    /// # Errors
    /// [`RunError::Ledger`] (then `summary.json` says `failed`), [`RunError::Results`].
    async fn open_ledger(
        &self,
        test: &Test,
        dir: &RunDir,
        plan: Option<&WorkersPlan>,
        summary: &mut crate::results::RunSummary,
    ) -> Result<LedgerDatabase, RunError> {
        // Workers in several processes need one ledger they can all write.
        let choice = match (plan, &self.ledger) {
            (Some(_), LedgerChoice::Sqlite) => LedgerChoice::StartPostgres,
            (_, l) => l.clone(),
        };
        if !test.checker.audit {
            return Ok(LedgerDatabase::sqlite());
        }
        let ledger = match choice.open(dir.path()).await {
            Ok(l) => l,
            Err(source) => {
                let e = RunError::Ledger {
                    test: test.name.clone(),
                    source,
                };
                record::fail(dir, summary, &e)?;
                return Err(e);
            }
        };
        if !matches!(choice, LedgerChoice::Sqlite) {
            summary.config["ledger"] = ledger.describe().into();
            dir.write_json("summary.json", &*summary)?;
        }
        Ok(ledger)
    }

    /// The workers of `test`: `--workers` (this runner's), else the test's own
    /// (`workers = N` in its scenario); `None`: its clients run in this process.
    ///
    /// # Errors
    /// [`super::workers::WorkersError::Launch`] when the launcher cannot be set up.
    fn workers_plan(
        &self,
        test: &Test,
    ) -> Result<Option<WorkersPlan>, super::workers::WorkersError> {
        if let Some(plan) = &self.workers {
            return Ok(Some(plan.clone()));
        }
        test.workers
            .map(|spec| {
                Ok(WorkersPlan {
                    workers: spec.workers,
                    launcher: super::workers::launcher::Launcher::of_kind(spec.launcher)?,
                })
            })
            .transpose()
    }
}
