//! Each strategy of a test in turn: its clients and schedule run (in this process or in
//! workers), its summary row updated at every tick, then its verdict recorded.

use std::sync::Arc;
use std::time::Duration;

use super::nodes::Nodes;
use super::record;
use super::schedule::{schedule_hook, ActiveFaults};
use super::{Progress, RunError, Runner, TestOutcome};
use crate::driver::{Collector, DriverContext};
use crate::ledger::LedgerBackend;
use crate::nemesis;
use crate::node::NodeEndpoint;
use crate::orchestration::experiment::{self, Experiment, Nemesis as NemesisHook};
use crate::orchestration::test::Test;
use crate::orchestration::workers::coordinator::{self, WorkersPlan, WorkersSummary};
use crate::results::{CheckSummary, ProgressWriter, RunDir, RunSummary, StrategySummary};
use crate::strategy::StrategyKind;

/// What every strategy of one test shares.
struct Shared<'a> {
    test: &'a Test,
    dir: &'a RunDir,
    nodes: &'a Nodes,
    ledger: &'a LedgerBackend,
    plan: Option<&'a WorkersPlan>,
    ctx: DriverContext,
}

/// One strategy run, measured: the experiment, its summary row, its live meter and the
/// schedule's errors.
struct Measured {
    exp: Experiment,
    index: usize,
    meter: Option<crate::results::StrategyMeter>,
    nemesis_errors: Vec<nemesis::NemesisError>,
}

impl Runner {
    /// Runs every strategy of `test` in turn against `nodes` and records each one's row in
    /// `summary` (written after each), its checker report and expectation. Stops at the first
    /// error, at `shutdown` or after an interrupted strategy (the outcome says interrupted).
    ///
    /// # Errors
    /// [`RunError`] when a strategy cannot run, its schedule failed, or files cannot be
    /// written.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_strategies(
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
        let shared = Shared {
            test,
            dir,
            nodes,
            ledger,
            plan,
            ctx: DriverContext {
                endpoints,
                // Each client's own proxies, when a step cuts clients off (see `start`).
                client_endpoints: nodes.client_endpoints().await,
                connect: test.client.connect,
                workload: test.workload.clone(),
                shutdown: self.shutdown.clone(),
                connect_progress: self.connect_progress.clone(),
            },
        };
        let mut checks = serde_json::Map::new();
        // `results/latest` follows this run from its first measurement on.
        let mut measuring = false;
        for &kind in &test.strategies {
            if *self.shutdown.borrow() {
                outcome.interrupted = true;
                break;
            }
            let name = kind.to_string();
            progress(Progress::Strategy(&name));
            let m = self
                .measure(&shared, kind, &name, summary, &mut measuring, progress)
                .await?;
            if let Some(first) = m.nemesis_errors.into_iter().next() {
                return Err(RunError::Nemesis {
                    test: test.name.clone(),
                    source: first,
                });
            }
            let exp = m.exp;
            summary.strategies[m.index].cut_sections = exp.run.cut_sections;
            if let Some(report) = &exp.check {
                let check = CheckSummary::from_report(report);
                if let Some(meter) = &m.meter {
                    meter.checked(&check);
                }
                summary.strategies[m.index].check = Some(check);
                let interrupted = exp.run.interrupted;
                record::check(
                    test,
                    dir,
                    &name,
                    report,
                    interrupted,
                    &mut checks,
                    &mut outcome,
                )?;
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

    /// Runs strategy `kind` (its schedule as the hook): a row of its own in `summary`,
    /// updated, written and shown at every tick; `results/latest` pointed here at the first
    /// tick of the run. A strategy that fails before its first tick leaves no row.
    ///
    /// # Errors
    /// [`RunError::Experiment`], [`RunError::Workers`].
    async fn measure(
        &self,
        shared: &Shared<'_>,
        kind: StrategyKind,
        name: &str,
        summary: &mut RunSummary,
        measuring: &mut bool,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<Measured, RunError> {
        let (test, dir) = (shared.test, shared.dir);
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let active = ActiveFaults::default();
        let hook = match shared.nodes {
            Nodes::Proxied(nemesis) if !test.nemesis.is_empty() => Some(schedule_hook(
                nemesis.clone(),
                test,
                self.shutdown.clone(),
                errors.clone(),
                active.clone(),
                self.metrics.clone(),
            )),
            _ => None,
        };
        let index = summary.strategies.len();
        summary.strategies.push(StrategySummary {
            strategy: name.to_string(),
            ..StrategySummary::default()
        });
        let mut ticked = false;
        let writer = ProgressWriter::start(dir);
        let meter = self.metrics.as_ref().map(|m| m.strategy(name));
        // The checker's streaming part, on the ledger this run writes.
        let watcher = meter
            .as_ref()
            .filter(|_| test.checker.audit)
            .map(|m| m.watch_ledger(dir.file(name).join("ledger.sqlite")));
        let on_tick = |c: &Collector, elapsed: Duration| {
            ticked = true;
            summary.strategies[index] = StrategySummary::from_collector(c, name, elapsed);
            if let Some(m) = &meter {
                m.update(&summary.strategies[index], c);
            }
            if self.link_latest && !std::mem::replace(measuring, true) {
                if let Err(e) = dir.point_latest() {
                    tracing::warn!("{e}");
                }
            }
            writer.submit(summary, name, &c.acquire_ok);
            let open: Vec<String> = active
                .lock()
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            progress(Progress::Tick {
                strategy: name,
                elapsed,
                duration: test.duration(),
                summary: &summary.strategies[index],
                active_faults: &open,
            });
        };
        let exp = match self.experiment(shared, kind, name, hook, on_tick).await {
            Ok((exp, workers)) => {
                if let Some(workers) = workers {
                    summary.config["workers"] = serde_json::to_value(&workers).unwrap_or_default();
                }
                exp
            }
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
        let nemesis_errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Measured {
            exp,
            index,
            meter,
            nemesis_errors,
        })
    }

    /// The strategy's clients: in this process (with the schedule as `hook`), or in the
    /// plan's workers, each through its own proxies when it has them (the workers' summary
    /// then returned too, after a last tick).
    ///
    /// # Errors
    /// [`RunError::Experiment`], [`RunError::Workers`].
    async fn experiment(
        &self,
        shared: &Shared<'_>,
        kind: StrategyKind,
        name: &str,
        hook: Option<NemesisHook>,
        mut on_tick: impl FnMut(&Collector, Duration),
    ) -> Result<(Experiment, Option<WorkersSummary>), RunError> {
        let test = shared.test;
        let Some(plan) = shared.plan else {
            return experiment::run_with_ledger(
                &shared.ctx,
                &test.strategy_options(kind),
                &shared.dir.file(name),
                test.checker.audit,
                shared.ledger,
                hook,
                on_tick,
            )
            .await
            .map(|exp| (exp, None))
            .map_err(|source| RunError::Experiment {
                test: test.name.clone(),
                strategy: name.to_string(),
                source,
            });
        };
        let (endpoints, faults) = shared
            .nodes
            .worker_endpoints(plan, test, &shared.ctx.endpoints)
            .await;
        match coordinator::run_strategy(
            plan,
            test,
            kind,
            &endpoints,
            faults.as_ref(),
            test.checker.audit,
            shared.ledger,
            &shared.dir.file(name),
            self.shutdown.clone(),
            &mut on_tick,
        )
        .await
        {
            Ok((exp, workers)) => {
                on_tick(&exp.run.collector, exp.run.elapsed);
                Ok((exp, Some(workers)))
            }
            Err(source) => Err(RunError::Workers {
                test: test.name.clone(),
                strategy: name.to_string(),
                source,
            }),
        }
    }
}
