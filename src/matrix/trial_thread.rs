//! A matrix trial on a thread of its own: its own single-thread tokio runtime (the trial's
//! clients then have a core's worth of scheduling to themselves, as in a lone run), its own
//! topology and ports; the record comes back over a channel with the harness's health, read
//! from the trial's `summary.json`.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::record::{TrialRecord, TrialStatus};
use super::run::{Finished, Shared};
use super::trial::{self, TrialKey};
use crate::orchestration::runner::Runner;
use crate::results::RunSummary;

/// Runs one trial on a thread of its own with its own single-thread runtime (the trial's
/// clients then have a core's worth of scheduling to themselves, as in a lone run), and sends
/// its record back. A trial that panics comes back failed with the panic's message.
pub(super) fn spawn_trial(
    shared: &Shared,
    cell: usize,
    key: TrialKey,
    shutdown: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<Finished>,
) {
    let plan = Arc::clone(&shared.plan);
    let backend = shared.backend.clone();
    let dir = shared.dir.clone();
    let metrics = shared.metrics.clone();
    let ledger = shared.ledger.clone();
    let row = key.row.dir_name();
    let name = format!("trial-{row}-{}-t{}", key.fault, key.trial);
    let fallback_dir = format!("trials/{row}/{}/t{}", key.fault, key.trial);
    let seed = plan.workload.seed + u64::from(key.trial.saturating_sub(1));
    let spawned = std::thread::Builder::new().name(name).spawn({
        let tx = tx.clone();
        let fallback_dir = fallback_dir.clone();
        move || {
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the trial's runtime: {e}"))?;
                let runner = Runner {
                    backend,
                    metrics,
                    ledger,
                    ..Runner::local(shutdown)
                };
                Ok::<_, String>(rt.block_on(trial::run_trial(&plan, runner, key, &dir, |_| {})))
            }));
            let record = match run {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => failed(key.trial, seed, fallback_dir, e),
                Err(panic) => failed(
                    key.trial,
                    seed,
                    fallback_dir,
                    format!("the trial panicked: {}", panic_text(&panic)),
                ),
            };
            let lag = harness_lag(&dir.join(&record.dir));
            let _ = tx.send(Finished { cell, record, lag });
        }
    });
    if let Err(e) = spawned {
        let record = failed(
            key.trial,
            seed,
            fallback_dir,
            format!("cannot start a thread: {e}"),
        );
        let _ = tx.send(Finished {
            cell,
            record,
            lag: None,
        });
    }
}

fn failed(trial: u32, seed: u64, dir: String, error: String) -> TrialRecord {
    TrialRecord::not_run(trial, seed, dir, TrialStatus::Failed, Some(error))
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The harness note of a trial run directory's `summary.json` when its harness lagged
/// ([`crate::results::HarnessHealth::overloaded`]); `None` when it kept up or cannot be read.
pub fn harness_lag(run_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(run_dir.join("summary.json")).ok()?;
    let summary: RunSummary = serde_json::from_str(&text).ok()?;
    summary
        .strategies
        .iter()
        .find(|s| s.harness.overloaded)
        .map(|s| {
            s.harness
                .note
                .clone()
                .unwrap_or_else(|| "harness overloaded".into())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lagging_harness_is_read_from_the_trial_summary() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(harness_lag(tmp.path()), None, "no summary, no finding");
        let mut s = RunSummary::start("t1", serde_json::Value::Null);
        let mut strategy = crate::results::StrategySummary {
            strategy: "single".into(),
            ..Default::default()
        };
        s.strategies.push(strategy.clone());
        std::fs::write(
            tmp.path().join("summary.json"),
            serde_json::to_vec(&s).unwrap(),
        )
        .unwrap();
        assert_eq!(harness_lag(tmp.path()), None, "kept up");
        strategy.harness.overloaded = true;
        strategy.harness.note = Some("lagged up to 180 ms".into());
        s.strategies[0] = strategy;
        std::fs::write(
            tmp.path().join("summary.json"),
            serde_json::to_vec(&s).unwrap(),
        )
        .unwrap();
        assert_eq!(
            harness_lag(tmp.path()).as_deref(),
            Some("lagged up to 180 ms")
        );
    }
}
