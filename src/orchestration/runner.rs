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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};

use super::expectation::{compare, ExpectationCheck};
use super::experiment::{self, Nemesis as NemesisHook, NemesisStart};
use super::ledger_choice::{LedgerChoice, LedgerChoiceError, LedgerDatabase};
use super::test::Test;
use super::workers::coordinator::WorkersPlan;
use super::workers::faults::WorkerFaults;
use crate::driver::{Collector, ConnectProgress, DriverContext};
use crate::history::FaultWindow;
use crate::ledger::LedgerBackend;
use crate::nemesis::{self, FaultKind, FaultStep, Nemesis, Target};
use crate::node::NodeEndpoint;
use crate::results::{
    CheckSummary, LiveMetrics, ProgressWriter, RunDir, RunStatus, RunSummary, StrategySummary,
};
use crate::topology::{
    DockerOptions, LocalTopologyOptions, ProxiedTopology, ProxyOptions, Topology, TopologyError,
    TopologyKind,
};

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

/// The cluster's shards at the start of a run and, for each resource `r0`.., its slot and
/// the shard serving it: `{"shards": [{primary, replicas, slots}], "resources": {"r0":
/// {"slot": 12, "shard": 0, "primary": "n1"}}}`.
fn cluster_layout_json(
    shards: &[crate::topology::ShardLayout],
    resources: u32,
) -> serde_json::Value {
    let per_resource: serde_json::Map<String, serde_json::Value> = (0..resources)
        .map(|i| {
            let name = crate::driver::workload::Workload::resource_name(i);
            let slot = crate::topology::cluster::resource_slot(&name);
            let shard = shards.iter().position(|s| s.owns(slot));
            let primary = shard.map(|i| shards[i].primary.clone());
            (
                name,
                serde_json::json!({ "slot": slot, "shard": shard, "primary": primary }),
            )
        })
        .collect();
    serde_json::json!({ "shards": shards, "resources": per_resource })
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

/// The servers of a running test: behind the proxies (with the nemesis that owns them), or
/// reached directly.
enum Nodes {
    Direct(Box<Topology>),
    Proxied(Arc<Mutex<Nemesis>>),
}

/// Faults open right now, by window id (label: kind and targets).
type ActiveFaults = Arc<std::sync::Mutex<BTreeMap<u64, String>>>;

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
        dir.write_json("config.json", test)?;
        let mut config =
            serde_json::to_value(test).map_err(|source| crate::results::RunDirError::Json {
                name: "summary.json".into(),
                source,
            })?;
        config["backend"] = backend.name().into();
        let mut summary = RunSummary::start(dir.run_id(), config);
        dir.write_json("summary.json", &summary)?;

        let fail = |summary: &mut RunSummary, e: &RunError| {
            summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
            summary.status = RunStatus::Failed;
            summary.error = Some(e.to_string());
            dir.write_json("summary.json", &*summary)
        };
        let plan = match self.workers_plan(test) {
            Ok(p) => p,
            Err(source) => {
                let e = RunError::Workers {
                    test: test.name.clone(),
                    strategy: "-".into(),
                    source,
                };
                fail(&mut summary, &e)?;
                return Err(e);
            }
        };
        // Workers in several processes need one ledger they can all write.
        let choice = match (&plan, &self.ledger) {
            (Some(_), LedgerChoice::Sqlite) => LedgerChoice::StartPostgres,
            (_, l) => l.clone(),
        };
        // The ledger's database first: a bad one stops the test before any server starts.
        let ledger = if test.checker.audit {
            match choice.open(dir.path()).await {
                Ok(l) => l,
                Err(source) => {
                    let e = RunError::Ledger {
                        test: test.name.clone(),
                        source,
                    };
                    fail(&mut summary, &e)?;
                    return Err(e);
                }
            }
        } else {
            LedgerDatabase::sqlite()
        };
        if test.checker.audit && !matches!(choice, LedgerChoice::Sqlite) {
            summary.config["ledger"] = ledger.describe().into();
            dir.write_json("summary.json", &summary)?;
        }
        let nodes = match self
            .start(test, &backend, dir, plan.as_ref(), &mut progress)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                ledger.stop().await;
                fail(&mut summary, &e)?;
                return Err(e);
            }
        };
        let endpoints = match &nodes {
            Nodes::Direct(t) => t.endpoints(),
            Nodes::Proxied(n) => n.lock().await.proxied().endpoints(),
        };
        // The embedded proxies' bytes, read at every scrape while this test runs.
        let traffic = match (&self.metrics, &nodes) {
            (Some(live), Nodes::Proxied(n)) => {
                let probe = n.lock().await.proxied().traffic_probe();
                match probe {
                    Some(p) => Some((live, live.watch_traffic(p).await)),
                    None => None,
                }
            }
            _ => None,
        };
        if test.topology.kind == TopologyKind::Cluster {
            let layout = match &nodes {
                Nodes::Direct(t) => t.cluster_layout().await,
                Nodes::Proxied(n) => n.lock().await.proxied().topology().cluster_layout().await,
            };
            match layout {
                Ok(shards) => {
                    summary.config["cluster_layout"] =
                        cluster_layout_json(&shards, test.workload.resources);
                    dir.write_json("summary.json", &summary)?;
                }
                Err(e) => tracing::warn!("{}: cluster layout not recorded: {e}", test.name),
            }
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
        let healed = match nodes {
            Nodes::Direct(t) => {
                t.shutdown().await;
                Ok(())
            }
            Nodes::Proxied(nemesis) => {
                let mut nem = match Arc::try_unwrap(nemesis) {
                    Ok(m) => m.into_inner(),
                    Err(_) => unreachable!("every schedule hook has finished"),
                };
                let healed = nem.heal_all(|_| {}).await;
                nem.into_proxied().shutdown().await;
                healed
            }
        };
        summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
        match &result {
            Ok(o) if o.interrupted => summary.status = RunStatus::Interrupted,
            Ok(_) => summary.status = RunStatus::Completed,
            Err(e) => {
                summary.status = RunStatus::Failed;
                summary.error = Some(e.to_string());
            }
        }
        if let Err(w) = dir.write_json("summary.json", &summary) {
            // A failed run's own error says more (a full disk fails both); the file then still
            // says `running`, which `lockbench check` recognises once this process is gone.
            if result.is_ok() {
                return Err(w.into());
            }
            tracing::error!("{w}: summary.json still says running");
        }
        let outcome = result?;
        healed.map_err(|source| RunError::Nemesis {
            test: test.name.clone(),
            source,
        })?;
        Ok(outcome)
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

    /// Starts the topology: external nodes reached (and proxied unless direct), local nodes
    /// started (processes or containers), behind the proxies unless direct; with workers,
    /// each worker gets proxies of its own (`nX-wI`) where the topology allows them.
    async fn start(
        &self,
        test: &Test,
        backend: &Backend,
        dir: &RunDir,
        plan: Option<&WorkersPlan>,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<Nodes, RunError> {
        let topology_err = |source| RunError::Topology {
            test: test.name.clone(),
            source,
        };
        let spec = &test.topology;
        let local = LocalTopologyOptions {
            persistence: spec.persistence,
            key_prefix: spec.key_prefix.clone(),
            pooler: spec.pooler,
            pg_settings: spec.pg_settings.clone(),
            cluster: spec.cluster.unwrap_or_default(),
            ..LocalTopologyOptions::new(dir.file("nodes"))
        };
        // Workers on other hosts reach the proxies by this host's name: they listen on every
        // address then (the `kubernetes` launcher).
        let proxy_options = match self.workers.as_ref().and_then(|w| w.launcher.worker_host()) {
            Some(_) => ProxyOptions {
                listen_host: "0.0.0.0".into(),
                ..ProxyOptions::default()
            },
            None => ProxyOptions::default(),
        };
        let proxied = match (spec.kind, spec.direct, backend) {
            (TopologyKind::External, direct, _) => {
                let tls = spec
                    .tls
                    .load()
                    .map_err(|e| topology_err(TopologyError::from(e)))?;
                let t = if spec.cluster_seeds.is_empty() {
                    Topology::external_with_tls(
                        &spec.urls,
                        &spec.key_prefix,
                        &test.client.connect,
                        tls,
                    )
                    .await
                } else {
                    Topology::external_cluster(
                        &spec.cluster_seeds,
                        &spec.key_prefix,
                        &test.client.connect,
                        tls,
                    )
                    .await
                }
                .map_err(topology_err)?;
                if direct {
                    return Ok(Nodes::Direct(Box::new(t)));
                }
                ProxiedTopology::wrap(t, &proxy_options).await
            }
            (kind, true, _) => {
                return Topology::start_local(kind, &local)
                    .await
                    .map(|t| Nodes::Direct(Box::new(t)))
                    .map_err(topology_err)
            }
            (kind, false, Backend::Local) => {
                ProxiedTopology::start(kind, &local, &proxy_options).await
            }
            (kind, false, Backend::Docker(options)) => {
                let mut options = options.clone();
                options.run_tag = crate::topology::docker::run_tag(dir.run_id());
                progress(Progress::Containers(&options.run_tag));
                ProxiedTopology::start_docker(kind, &local, &options).await
            }
        };
        let mut proxied = proxied.map_err(topology_err)?;
        // A partition of clients cuts them off through proxies of their own (a shared
        // connection has none to cut: its steps fail naming that).
        if test.nemesis.iter().any(FaultStep::cuts_clients) && !test.workload.shared_connection {
            if let Err(e) = proxied.add_client_links(test.workload.clients).await {
                proxied.shutdown().await;
                return Err(topology_err(e));
            }
        }
        // Workers of their own links, so that one worker can be cut off and another not. A
        // topology that cannot give them (docker) runs without them when no step needs them.
        if let Some(plan) = plan {
            let needed = test
                .nemesis
                .iter()
                .any(|s| matches!(s.target, Target::Worker { .. }));
            if let Err(e) = proxied.add_worker_links(plan.workers).await {
                if needed {
                    proxied.shutdown().await;
                    return Err(topology_err(e));
                }
                tracing::info!("{}: workers share the node proxies ({e})", test.name);
            }
        }
        Ok(Nodes::Proxied(Arc::new(Mutex::new(Nemesis::new(proxied)))))
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_strategies(
        &self,
        test: &Test,
        dir: &RunDir,
        summary: &mut RunSummary,
        endpoints: Vec<NodeEndpoint>,
        nodes: &Nodes,
        ledger: &LedgerBackend,
        plan: Option<&WorkersPlan>,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<TestOutcome, RunError> {
        let mut outcome = TestOutcome {
            name: test.name.clone(),
            claim: test.claim.clone().unwrap_or_default(),
            strategies: Vec::new(),
            expectations: Vec::new(),
            interrupted: false,
        };
        let shutdown = &self.shutdown;
        // Each client's own proxies, when a step cuts clients off (see `start`).
        let client_endpoints = match nodes {
            Nodes::Proxied(n) => {
                let nem = n.lock().await;
                let p = nem.proxied();
                (0..p.client_link_count())
                    .filter_map(|i| p.client_endpoints(i))
                    .collect()
            }
            Nodes::Direct(_) => Vec::new(),
        };
        let ctx = DriverContext {
            endpoints,
            client_endpoints,
            connect: test.client.connect,
            workload: test.workload.clone(),
            shutdown: shutdown.clone(),
            connect_progress: self.connect_progress.clone(),
        };
        let mut checks = serde_json::Map::new();
        // `results/latest` follows this run from its first measurement on.
        let mut measuring = false;
        for &kind in &test.strategies {
            if *shutdown.borrow() {
                outcome.interrupted = true;
                break;
            }
            let name = kind.to_string();
            progress(Progress::Strategy(&name));
            let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
            let active = ActiveFaults::default();
            let hook = match nodes {
                Nodes::Proxied(nemesis) if !test.nemesis.is_empty() => Some(schedule_hook(
                    nemesis.clone(),
                    test,
                    shutdown.clone(),
                    errors.clone(),
                    active.clone(),
                    self.metrics.clone(),
                )),
                _ => None,
            };
            let index = summary.strategies.len();
            summary.strategies.push(StrategySummary {
                strategy: name.clone(),
                ..StrategySummary::default()
            });
            let mut ticked = false;
            let writer = ProgressWriter::start(dir);
            let meter = self.metrics.as_ref().map(|m| m.strategy(&name));
            // The checker's streaming part, on the ledger this run writes.
            let watcher = meter
                .as_ref()
                .filter(|_| test.checker.audit)
                .map(|m| m.watch_ledger(dir.file(&name).join("ledger.sqlite")));
            let mut on_tick = |c: &Collector, elapsed: Duration| {
                ticked = true;
                summary.strategies[index] = StrategySummary::from_collector(c, &name, elapsed);
                if let Some(m) = &meter {
                    m.update(&summary.strategies[index], c);
                }
                if self.link_latest && !std::mem::replace(&mut measuring, true) {
                    if let Err(e) = dir.point_latest() {
                        tracing::warn!("{e}");
                    }
                }
                writer.submit(summary, &name, &c.acquire_ok);
                let open: Vec<String> = active
                    .lock()
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default();
                progress(Progress::Tick {
                    strategy: &name,
                    elapsed,
                    duration: test.duration(),
                    summary: &summary.strategies[index],
                    active_faults: &open,
                });
            };
            let exp = match plan {
                Some(plan) => {
                    // Each worker through its own proxies when it has them.
                    let (endpoints, faults) = match nodes {
                        Nodes::Proxied(n) => {
                            let nem = n.lock().await;
                            let own: Option<Vec<Vec<NodeEndpoint>>> = (0..plan.workers)
                                .map(|i| nem.proxied().worker_endpoints(i))
                                .collect();
                            let faults = (!test.nemesis.is_empty()).then(|| WorkerFaults {
                                nemesis: n.clone(),
                                steps: test.nemesis.clone(),
                            });
                            (own.unwrap_or_else(|| vec![ctx.endpoints.clone()]), faults)
                        }
                        Nodes::Direct(_) => (vec![ctx.endpoints.clone()], None),
                    };
                    match super::workers::coordinator::run_strategy(
                        plan,
                        test,
                        kind,
                        &endpoints,
                        faults.as_ref(),
                        test.checker.audit,
                        ledger,
                        &dir.file(&name),
                        shutdown.clone(),
                        &mut on_tick,
                    )
                    .await
                    {
                        Ok((exp, workers)) => {
                            on_tick(&exp.run.collector, exp.run.elapsed);
                            summary.config["workers"] =
                                serde_json::to_value(&workers).unwrap_or_default();
                            Ok(exp)
                        }
                        Err(source) => Err(RunError::Workers {
                            test: test.name.clone(),
                            strategy: name.clone(),
                            source,
                        }),
                    }
                }
                None => experiment::run_with_ledger(
                    &ctx,
                    &test.strategy_options(kind),
                    &dir.file(&name),
                    test.checker.audit,
                    ledger,
                    hook,
                    on_tick,
                )
                .await
                .map_err(|source| RunError::Experiment {
                    test: test.name.clone(),
                    strategy: name.clone(),
                    source,
                }),
            };
            let exp = match exp {
                Ok(e) => e,
                Err(e) => {
                    if !ticked {
                        // Never measured: no blank row in the summary or the table.
                        summary.strategies.remove(index);
                    }
                    return Err(e);
                }
            };
            // Its last snapshot lands before this run's own writes of `summary.json`.
            writer.finish();
            // The ledger is closed (or copied from PostgreSQL): the last read counts all of it.
            if let Some(w) = watcher {
                w.finish();
            }
            let nemesis_errors =
                std::mem::take(&mut *errors.lock().unwrap_or_else(|p| p.into_inner()));
            if let Some(first) = nemesis_errors.into_iter().next() {
                return Err(RunError::Nemesis {
                    test: test.name.clone(),
                    source: first,
                });
            }
            summary.strategies[index].cut_sections = exp.run.cut_sections;
            if let Some(report) = &exp.check {
                let check = CheckSummary::from_report(report);
                if let Some(m) = &meter {
                    m.checked(&check);
                }
                summary.strategies[index].check = Some(check);
                checks.insert(
                    name.clone(),
                    serde_json::to_value(report).unwrap_or_default(),
                );
                dir.write_json("checker.json", &checks)?;
                let mut expectation = compare(&name, report, test.expect.get(&name));
                if exp.run.interrupted {
                    // Partial data: kept, not judged against the claim.
                    expectation.met = None;
                    expectation.mismatches.clear();
                    expectation.interrupted = true;
                }
                outcome.expectations.push(expectation);
                if test.claim.is_some() {
                    dir.write_json("expectations.json", &outcome.expectations)?;
                }
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
}

/// Builds the nemesis hook for one strategy: runs the test's schedule against the shared
/// [`Nemesis`], logging every window into that strategy's history, and heals everything
/// before it returns (also on shutdown).
fn schedule_hook(
    nemesis: Arc<Mutex<Nemesis>>,
    test: &Test,
    shutdown: watch::Receiver<bool>,
    errors: Arc<std::sync::Mutex<Vec<nemesis::NemesisError>>>,
    active: ActiveFaults,
    live: Option<LiveMetrics>,
) -> NemesisHook {
    let steps = test.nemesis.clone();
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
            let history = n.history.clone();
            let record = move |w: FaultWindow| {
                if let Ok(mut open) = active.lock() {
                    let opened = w.end_us.is_none();
                    // A window is recorded open once and closed once (same id).
                    let counted = if opened {
                        open.insert(w.id, format!("{} {}", w.kind, w.targets.join(",")))
                            .is_none()
                    } else {
                        open.remove(&w.id).is_some()
                    };
                    if let (true, Some(live)) = (counted, &live) {
                        live.fault(&w.kind, opened);
                    }
                }
                history.record_fault(w);
            };
            let mut nem = nemesis.lock().await;
            if let Err(e) = nemesis::run_schedule(
                &mut nem,
                &steps,
                &n.controls,
                n.history.clock(),
                shutdown,
                record,
            )
            .await
            {
                errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
            }
        })
    })
}
