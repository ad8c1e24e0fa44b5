//! One trial of one cell: the trial's test run by the runner
//! ([`crate::orchestration::runner::Runner`], on the matrix's [`Backend`]) in its own
//! directory, on its own freshly started topology (trials never share nodes or keys), read back as a [`TrialRecord`]
//! with its fault episodes judged ([`judge_episodes`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::episode::{self, EpisodeOutcome, EpisodeSpec};
use super::fault::FaultClass;
use super::plan::MatrixPlan;
use super::record::{TrialRecord, TrialStatus};
use super::setup::MatrixRow;
use crate::checker::{self, CheckError, CheckOptions, CheckReport};
use crate::history::{read_history, HistoryError, HistoryEvent};
use crate::orchestration::runner::{Progress, Runner};
use crate::results::{HarnessHealth, RunDir};

/// Why a trial's episodes could not be judged (its evidence could not be read back).
#[derive(Debug, thiserror::Error)]
pub enum EpisodeEvidenceError {
    /// `history.jsonl` could not be opened or read (a truncated last line included: the run
    /// did not finish writing it).
    #[error(transparent)]
    History(#[from] HistoryError),
    /// `checker.json` could not be read or is not a checker report.
    #[error("checker report {path}: {reason}")]
    Report { path: PathBuf, reason: String },
    /// The checker listed only some anomalies and re-checking the run to list them all failed.
    #[error(transparent)]
    Check(#[from] CheckError),
}

/// Which trial of which cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrialKey {
    /// The cell's row (strategy, and how it reaches PostgreSQL).
    pub row: MatrixRow,
    /// The cell's fault class (column).
    pub fault: FaultClass,
    /// 1-based trial number.
    pub trial: u32,
}

/// Runs trial `trial` (1-based) of `row × fault` with `runner` (its backend, ledger, live
/// metrics and shutdown) under
/// `matrix_dir/trials/<row>/<fault>/t<trial>/` ([`MatrixRow::dir_name`]) (a run directory like any chaos scenario's: `summary.json`,
/// `checker.json`, `<strategy>/history.jsonl`, `nodes/`). A trial that cannot run is recorded
/// as failed with its error; a Ctrl-C while it runs records it as interrupted.
pub async fn run_trial(
    plan: &MatrixPlan,
    runner: Runner,
    key: TrialKey,
    matrix_dir: &Path,
    progress: impl FnMut(Progress<'_>),
) -> TrialRecord {
    let shutdown = runner.shutdown.clone();
    let TrialKey { row, fault, trial } = key;
    let strategy = row.strategy;
    let test = plan.test(row, fault, trial);
    let seed = test.workload.seed;
    let parent = matrix_dir
        .join("trials")
        .join(row.dir_name())
        .join(fault.name());
    let dir = match RunDir::create_named(&parent, &format!("t{trial}")) {
        Ok(d) => d,
        Err(e) => {
            return TrialRecord::not_run(
                trial,
                seed,
                format!("trials/{}/{fault}/t{trial}", row.dir_name()),
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
    let result = runner.run(&test, &dir, progress).await;
    discard_server_data(&dir);
    match result {
        Ok(outcome) => match outcome.strategies.first() {
            Some(s) if !outcome.interrupted => {
                let mut record = TrialRecord::from_summary(trial, seed, rel, s);
                let specs = plan.episode_specs(row, fault);
                let strategy_dir = dir.file(&strategy.to_string());
                let ttl = plan.lease_ttl(row, fault);
                judge_into(&mut record, strategy_dir, specs, ttl).await;
                let lag: Vec<u64> = s.timeline.iter().map(|p| p.harness_lag_max_us).collect();
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                episode::mark_harness_lag(
                    &mut record.episodes,
                    &lag,
                    HarnessHealth::lag_limit_us(ttl_ms),
                    ttl_ms * 1000,
                );
                record
            }
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

/// Judges a finished trial's episodes into `record` (off the async threads: it reads the
/// whole history). When its evidence cannot be read, the trial keeps no episodes and its
/// `unknown_reasons` say why.
async fn judge_into(
    record: &mut TrialRecord,
    strategy_dir: PathBuf,
    specs: Vec<EpisodeSpec>,
    ttl: Duration,
) {
    if specs.is_empty() {
        return;
    }
    let trial = record.trial;
    let judged = tokio::task::spawn_blocking(move || {
        judge_episodes(&strategy_dir, trial, &specs, ttl).map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(format!("the judging task failed: {e}")));
    match judged {
        Ok(episodes) => record.episodes = episodes,
        Err(e) => record
            .unknown_reasons
            .push(format!("fault episodes not judged: {e}")),
    }
}

/// The episodes `specs` of trial `trial`, judged ([`episode::assess`]) from a strategy's run
/// directory: its `history.jsonl` (operations and fault windows) and `checker.json` (the
/// anomalies). When the checker listed only some anomalies (its per-kind cap), the run is
/// checked again listing all of them, so no episode misses its damage. `ttl` is the
/// workload's lease TTL.
///
/// # Errors
/// [`EpisodeEvidenceError`] when the history or the report cannot be read, or the re-check fails.
pub fn judge_episodes(
    strategy_dir: &Path,
    trial: u32,
    specs: &[EpisodeSpec],
    ttl: Duration,
) -> Result<Vec<EpisodeOutcome>, EpisodeEvidenceError> {
    let mut ops = Vec::new();
    let mut windows = Vec::new();
    for event in read_history(strategy_dir.join("history.jsonl"))? {
        match event? {
            HistoryEvent::Op(op) => ops.push(op),
            HistoryEvent::Fault(w) => windows.push(w),
            HistoryEvent::Crash(_) | HistoryEvent::RunEnd(_) => {}
        }
    }
    let mut report = read_report(&strategy_dir.join("checker.json"))?;
    if report.anomalies_omitted > 0 {
        let all = CheckOptions {
            max_anomalies_per_kind: u64::MAX,
            ..CheckOptions::default()
        };
        report = checker::check_dir(strategy_dir, &all)?;
    }
    Ok(episode::assess(
        trial,
        specs,
        &ops,
        &windows,
        &report.anomalies,
        ttl,
    ))
}

fn read_report(path: &Path) -> Result<CheckReport, EpisodeEvidenceError> {
    let bad = |reason: String| EpisodeEvidenceError::Report {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
}

/// Frees the disk the trial's servers used (their logs stay): a matrix runs hundreds of trials,
/// and their data directories are never read again.
pub(super) fn discard_server_data(dir: &RunDir) {
    if let Err(e) = dir.remove_server_data() {
        tracing::warn!("{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::AnomalyKind;
    use crate::history::{write_events, FaultWindow, Op, OpFn, OpKind};
    use crate::matrix::Exposure;

    /// Client 1 holds r0 with token 5 from 1.9 s and is paused at 2 s for 0.6 s; client 2
    /// takes r0 at 2.95 s and gets token 5 again.
    fn history() -> Vec<HistoryEvent> {
        let acquire = |c: u32, inv_ms: u64, ok_ms: u64, i: u64| {
            [
                HistoryEvent::Op(
                    Op::new(c, OpKind::Invoke, OpFn::Acquire, "r0")
                        .with_ttl_ms(1000)
                        .at(i, inv_ms * 1000),
                ),
                HistoryEvent::Op(
                    Op::new(c, OpKind::Ok, OpFn::Acquire, "r0")
                        .with_owner(format!("c{c}"))
                        .with_token(5)
                        .with_ttl_ms(1000)
                        .with_deadline_us((inv_ms + 1000) * 1000)
                        .at(i + 1, ok_ms * 1000),
                ),
            ]
        };
        let pause = FaultWindow {
            id: 1,
            kind: "client-pause".into(),
            targets: vec!["client:1".into()],
            start_us: 2_000_000,
            end_us: None,
            detail: String::new(),
        };
        let mut events: Vec<HistoryEvent> = acquire(1, 1890, 1900, 0).into();
        events.push(HistoryEvent::Fault(pause.clone()));
        events.push(HistoryEvent::Fault(FaultWindow {
            end_us: Some(2_600_000),
            ..pause
        }));
        events.extend(acquire(2, 2940, 2950, 2));
        events
    }

    fn specs() -> Vec<EpisodeSpec> {
        vec![EpisodeSpec {
            index: 1,
            start: Duration::from_secs(2),
            heal: Duration::from_millis(2600),
            end: Duration::from_secs(4),
            exposure: Exposure::Holder,
        }]
    }

    /// Writes the history and its checker report (listing at most `cap` anomalies per kind).
    fn trial_dir(cap: u64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        write_events(&mut f, &history()).unwrap();
        let opts = CheckOptions {
            max_anomalies_per_kind: cap,
            ..CheckOptions::default()
        };
        let report = checker::check(&path, None, &opts).unwrap();
        std::fs::write(
            dir.path().join("checker.json"),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_trials_episodes_are_judged_from_its_history_and_checker_report() {
        let dir = trial_dir(100);
        let out = judge_episodes(dir.path(), 3, &specs(), Duration::from_secs(1)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].trial, 3);
        assert!(out[0].exposed, "{}", out[0].exposure);
        assert_eq!(out[0].heal_us, Some(2_600_000));
        assert_eq!(out[0].damage, vec![AnomalyKind::TokenDuplicate]);
        assert_eq!(out[0].recovery_us, Some(350_000));
    }

    #[test]
    fn anomalies_the_checker_did_not_list_are_found_again() {
        let dir = trial_dir(0);
        let listed: CheckReport = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("checker.json")).unwrap(),
        )
        .unwrap();
        assert!(listed.anomalies.is_empty() && listed.anomalies_omitted > 0);
        let out = judge_episodes(dir.path(), 1, &specs(), Duration::from_secs(1)).unwrap();
        assert_eq!(out[0].damage, vec![AnomalyKind::TokenDuplicate]);
    }

    #[tokio::test]
    async fn a_trial_whose_history_cannot_be_read_keeps_no_episodes_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = TrialRecord::not_run(1, 1, "t1".into(), TrialStatus::Completed, None);
        judge_into(
            &mut record,
            dir.path().to_path_buf(),
            specs(),
            Duration::from_secs(1),
        )
        .await;
        assert!(record.episodes.is_empty());
        assert_eq!(record.unknown_reasons.len(), 1);
        assert!(
            record.unknown_reasons[0].starts_with("fault episodes not judged: history file"),
            "{:?}",
            record.unknown_reasons
        );
        // A report that is not one is said so too.
        let dir = trial_dir(100);
        std::fs::write(dir.path().join("checker.json"), "{}").unwrap();
        let err = judge_episodes(dir.path(), 1, &specs(), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, EpisodeEvidenceError::Report { .. }), "{err}");
    }
}
