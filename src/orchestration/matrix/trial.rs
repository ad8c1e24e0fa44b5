//! One trial of one cell: the trial's test run by the runner
//! ([`crate::orchestration::runner::Runner`], on the matrix's [`Backend`]) in its own
//! directory, on its own freshly started topology (trials never share nodes or keys), read back as a [`TrialRecord`].

use std::path::Path;

use tokio::sync::watch;

use super::fault::FaultClass;
use super::plan::MatrixPlan;
use super::record::{TrialRecord, TrialStatus};
use crate::orchestration::runner::{Backend, Progress, Runner};
use crate::results::RunDir;
use crate::strategy::StrategyKind;

/// Which trial of which cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrialKey {
    /// The cell's strategy (row).
    pub strategy: StrategyKind,
    /// The cell's fault class (column).
    pub fault: FaultClass,
    /// 1-based trial number.
    pub trial: u32,
}

/// Runs trial `trial` (1-based) of `strategy × fault` on `backend` under
/// `matrix_dir/trials/<strategy>/<fault>/t<trial>/` (a run directory like any chaos scenario's: `summary.json`,
/// `checker.json`, `<strategy>/history.jsonl`, `nodes/`). A trial that cannot run is recorded
/// as failed with its error; a Ctrl-C while it runs records it as interrupted.
pub async fn run_trial(
    plan: &MatrixPlan,
    backend: &Backend,
    key: TrialKey,
    matrix_dir: &Path,
    shutdown: watch::Receiver<bool>,
    progress: impl FnMut(Progress<'_>),
) -> TrialRecord {
    let TrialKey {
        strategy,
        fault,
        trial,
    } = key;
    let test = plan.test(strategy, fault, trial);
    let seed = test.workload.seed;
    let parent = matrix_dir
        .join("trials")
        .join(strategy.name())
        .join(fault.name());
    let dir = match RunDir::create_named(&parent, &format!("t{trial}")) {
        Ok(d) => d,
        Err(e) => {
            return TrialRecord::not_run(
                trial,
                seed,
                format!("trials/{strategy}/{fault}/t{trial}"),
                TrialStatus::Failed,
                Some(e.to_string()),
            )
        }
    };
    let rel = dir
        .path()
        .strip_prefix(std::path::absolute(matrix_dir).unwrap_or_else(|_| matrix_dir.to_path_buf()))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| dir.path().to_string_lossy().into_owned());
    let runner = Runner {
        backend: backend.clone(),
        ..Runner::local(shutdown.clone())
    };
    let result = runner.run(&test, &dir, progress).await;
    match result {
        Ok(outcome) => match outcome.strategies.first() {
            Some(s) if !outcome.interrupted => TrialRecord::from_summary(trial, seed, rel, s),
            _ => TrialRecord::not_run(trial, seed, rel, TrialStatus::Interrupted, None),
        },
        Err(e) if *shutdown.borrow() => TrialRecord::not_run(
            trial,
            seed,
            rel,
            TrialStatus::Interrupted,
            Some(e.to_string()),
        ),
        Err(e) => TrialRecord::not_run(trial, seed, rel, TrialStatus::Failed, Some(e.to_string())),
    }
}
