//! Running a scenario's N trials, each into its own run directory, and its record in
//! `chaos.json`.

use std::path::PathBuf;

use anyhow::Result;

use lockbench::driver::DriverError;
use lockbench::orchestration::experiment::ExperimentError;
use lockbench::orchestration::runner::{Progress as RunProgress, RunError, Runner};
use lockbench::orchestration::test::Test;
use lockbench::orchestration::trials::{self, ExpectationTally, TrialResult};
use lockbench::results::RunDir;
use lockbench::strategy::StrategyError;

use super::render::{render, render_tallies, render_trial, Progress};
use super::ChaosArgs;
use crate::cli::exit;

/// A scenario error as the user should read it: a connect failure names the client count and
/// the scenario's `connect_timeout` (the nodes are lockbench's own, so they are up).
fn explain(e: &RunError, test: &Test) -> String {
    if let RunError::Experiment {
        source: ExperimentError::Driver(DriverError::Connect { client, source, .. }),
        ..
    } = e
    {
        if matches!(source, StrategyError::AdapterRefused { .. }) {
            return format!("error: {}: {source}", test.name);
        }
        let timeout = test.client.connect.connect_timeout;
        return format!(
            "error: {}: {} clients could not all connect within connect_timeout {} (client \
             {client} failed first: {source}): the nodes were started by lockbench and are up; \
             raise `connect_timeout` in [workload] or lower `clients`",
            test.name,
            test.workload.clients,
            humantime::format_duration(timeout)
        );
    }
    exit::render_std(e)
}

/// What every trial of one `lockbench chaos` shares: its options, the runner, the batch
/// directory (a directory of scenarios, or several trials) and the trial count N.
pub(super) struct Batch<'a> {
    pub(super) args: &'a ChaosArgs,
    pub(super) runner: Runner,
    pub(super) parent: Option<RunDir>,
    pub(super) n: u32,
}

impl Batch<'_> {
    /// Runs the N trials of one scenario (fewer when interrupted), printing each, then its
    /// k/N lines.
    pub(super) async fn scenario<'t>(&self, scenario: &'t Test) -> Result<ScenarioTrials<'t>> {
        let mut runs = ScenarioTrials {
            scenario,
            results: Vec::new(),
            dirs: Vec::new(),
            tallies: Vec::new(),
            failures: Vec::new(),
            measured: Vec::new(),
        };
        for trial in 1..=self.n {
            if *self.runner.shutdown.borrow() {
                break;
            }
            if self.trial(&mut runs, trial).await? {
                break;
            }
        }
        runs.tallies = trials::tally(scenario, self.n, &runs.results);
        if self.n > 1 {
            print!("{}", render_tallies(&scenario.name, &runs.tallies));
        }
        Ok(runs)
    }

    /// Runs one trial into its own directory and records it in `runs`. Returns whether it
    /// was interrupted (then no further trial starts).
    async fn trial(&self, runs: &mut ScenarioTrials<'_>, trial: u32) -> Result<bool> {
        let (scenario, n) = (runs.scenario, self.n);
        let run = scenario.trial(trial);
        let seed = run.workload.seed;
        let dir = match &self.parent {
            Some(p) if n > 1 => RunDir::create_named(
                &p.path().join(&scenario.name),
                &trials::trial_dir_name(trial, n),
            )?,
            Some(p) => RunDir::create_named(p.path(), &scenario.name)?,
            None => RunDir::create_unlinked(&self.args.results, &scenario.name)?,
        };
        let label = if n > 1 {
            format!("{} trial {trial}/{n} (seed {seed})", scenario.name)
        } else {
            scenario.name.clone()
        };
        eprintln!("{label}: {}", dir.path().display());
        let progress = Progress::new(&label, self.args.no_progress);
        // A single scenario's directory becomes `results/latest` once it measures
        // something (a scenario whose nodes do not start never does).
        let linked = std::cell::Cell::new(self.parent.is_some());
        let link = || {
            if !linked.replace(true) {
                if let Err(e) = dir.point_latest() {
                    eprintln!("warning: {e}");
                }
            }
        };
        let result = self
            .runner
            .run(&run, &dir, |event| {
                if matches!(event, RunProgress::Tick { .. }) {
                    link();
                }
                progress.show(event);
            })
            .await;
        progress.finish();
        runs.dirs.push(dir.path().to_path_buf());
        let outcome = match result {
            Ok(o) => {
                link();
                if n > 1 {
                    print!("{}", render_trial(trial, n, seed, &o));
                } else {
                    print!("{}", render(&o));
                }
                crate::cli::report::after_run(dir.path());
                runs.measured.push(dir.path().to_path_buf());
                Some(o)
            }
            Err(e) => {
                eprintln!("{}", explain(&e, scenario));
                if n > 1 {
                    println!("  trial {trial}/{n} (seed {seed}): failed to run: {e}");
                }
                runs.failures
                    .push(format!("{} trial {trial}: {e}", scenario.name));
                None
            }
        };
        let interrupted = outcome.as_ref().is_some_and(|o| o.interrupted);
        runs.results.push(TrialResult {
            trial,
            seed,
            outcome,
        });
        Ok(interrupted)
    }
}

/// The trials of one scenario, as run.
pub(super) struct ScenarioTrials<'a> {
    pub(super) scenario: &'a Test,
    pub(super) results: Vec<TrialResult>,
    /// Each trial's run directory, in trial order (also those that failed to run).
    pub(super) dirs: Vec<PathBuf>,
    pub(super) tallies: Vec<ExpectationTally>,
    /// Trials that failed to run, one line each.
    pub(super) failures: Vec<String>,
    /// The directories of the trials that ran (the comparison report reads them).
    pub(super) measured: Vec<PathBuf>,
}

impl ScenarioTrials<'_> {
    /// The scenario's record in `chaos.json`: k/N per expectation, then every trial.
    pub(super) fn to_json(&self, n: u32) -> serde_json::Value {
        let runs: Vec<serde_json::Value> = self
            .results
            .iter()
            .zip(&self.dirs)
            .map(|(t, dir)| {
                serde_json::json!({
                    "trial": t.trial,
                    "seed": t.seed,
                    "dir": dir,
                    "ran": t.outcome.is_some(),
                    "interrupted": t.outcome.as_ref().is_some_and(|o| o.interrupted),
                    "expectations": t.outcome.as_ref().map(|o| &o.expectations),
                })
            })
            .collect();
        serde_json::json!({
            "scenario": self.scenario.name,
            "claim": self.scenario.claim.as_deref().unwrap_or_default(),
            "trials": n,
            "interrupted": self.results.iter().any(|t| t.outcome.as_ref().is_some_and(|o| o.interrupted))
                || (self.results.len() as u32) < n,
            "expectations": self.tallies,
            "runs": runs,
        })
    }
}
