//! Faults in a multi-worker run. The coordinator runs the test's whole nemesis schedule on its
//! own clock, whose time zero is the barrier's (the workers' run clocks are set to it through
//! their clock estimates), with the ordinary [`run_schedule`] against its topology: node faults
//! act on the shared proxies `nX` and on every worker's own `nX-wI`; `worker:I` targets act on
//! one worker's own proxies (`partition`, `latency`) or on its process (`client-pause`:
//! SIGSTOP/SIGCONT, `client-crash`: SIGKILL). Every window goes into the merged history
//! unwidened (the coordinator's clock is the timeline).
//!
//! **A paused worker is not lost.** While a `client-pause` of `worker:I` is open, the
//! coordinator does not count that worker's silence (the 5 s heartbeat rule), and its silence
//! clock restarts when the pause is healed: the pause is the fault being measured, not a lost
//! worker. Its clients' operations then complete when the process resumes, with the times its
//! own clock gives them, as any paused client's do. A worker crashed by the nemesis is lost
//! the ordinary way (its process exited), and `workers.json` says the nemesis killed it.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::api::Shared;
use super::merge::WorkerHistory;
use super::unix_now_us;
use crate::history::{FaultWindow, HistoryEvent, RunClock};
use crate::nemesis::{
    run_schedule, ClientControls, FaultKind, FaultStep, Nemesis, NemesisError, Target,
    WorkerProcess,
};

/// What a multi-worker run's coordinator needs to run the fault schedule: the nemesis of the
/// test's topology (shared with the runner, which heals and tears it down) and the steps.
#[derive(Clone)]
pub struct WorkerFaults {
    /// The topology's nemesis.
    pub nemesis: Arc<tokio::sync::Mutex<Nemesis>>,
    /// The schedule, offsets from time zero.
    pub steps: Vec<FaultStep>,
}

/// The schedule running for one strategy (a task holding the nemesis).
pub(super) struct Schedule {
    task: tokio::task::JoinHandle<Result<(), NemesisError>>,
    stop: watch::Sender<bool>,
    windows: Arc<Mutex<Vec<FaultWindow>>>,
}

impl Schedule {
    /// Starts `faults`' steps against `workers` (by slot), time zero at `start_unix_us` on this
    /// machine's clock.
    pub(super) fn start(
        faults: &WorkerFaults,
        shared: Arc<Shared>,
        workers: Vec<WorkerProcess>,
        start_unix_us: u64,
    ) -> Self {
        let now_unix = unix_now_us();
        let now = std::time::Instant::now();
        let origin = if start_unix_us >= now_unix {
            now + std::time::Duration::from_micros(start_unix_us - now_unix)
        } else {
            let late = std::time::Duration::from_micros(now_unix - start_unix_us);
            now.checked_sub(late).unwrap_or(now)
        };
        let clock = RunClock::from_instant(origin);
        let (stop, stop_rx) = watch::channel(false);
        let windows: Arc<Mutex<Vec<FaultWindow>>> = Arc::default();
        let kept = windows.clone();
        let nemesis = faults.nemesis.clone();
        let steps = faults.steps.clone();
        let task = tokio::spawn(async move {
            let mut nem = nemesis.lock().await;
            nem.set_workers(workers);
            let record = move |w: FaultWindow| {
                note_worker_window(&shared, &w);
                kept.lock().unwrap_or_else(|p| p.into_inner()).push(w);
            };
            let controls = ClientControls::new(0);
            let result = run_schedule(&mut nem, &steps, &controls, clock, stop_rx, record).await;
            nem.set_workers(Vec::new());
            result
        });
        Self {
            task,
            stop,
            windows,
        }
    }

    /// Stops the schedule (it heals everything it injected).
    pub(super) fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Stops the schedule, waits until it has healed everything, and returns its windows
    /// (each open and closed one, as a history records them) and how it ended.
    pub(super) async fn finish(self) -> (Vec<FaultWindow>, Result<(), NemesisError>) {
        self.stop();
        let result = self
            .task
            .await
            .unwrap_or_else(|e| Err(NemesisError::Task(e)));
        let windows = std::mem::take(&mut *self.windows.lock().unwrap_or_else(|p| p.into_inner()));
        (windows, result)
    }
}

/// The coordinator's fault windows as one more history to merge: on the common timeline
/// already, so with no clock bound.
pub(super) fn fault_history(windows: Vec<FaultWindow>) -> WorkerHistory {
    WorkerHistory {
        worker: u32::MAX - 1,
        events: windows.into_iter().map(HistoryEvent::Fault).collect(),
        bound_us: 0,
        lost_at_us: None,
    }
}

/// The worker a window acts on as a process (`client-pause` or `client-crash` on
/// `worker:I`): `(I, crash?)`.
fn process_fault(w: &FaultWindow) -> Option<(usize, bool)> {
    let crash = w.kind == FaultKind::ClientCrash.name();
    if !crash && w.kind != FaultKind::ClientPause.name() {
        return None;
    }
    match Target::from_str(w.targets.first()?).ok()? {
        Target::Worker {
            worker,
            nodes: None,
        } => Some((worker as usize, crash)),
        _ => None,
    }
}

/// Keeps the board's view of a worker in step with the faults on its process: paused while a
/// pause is open (its silence not counted; the clock restarts at the heal), killed by the
/// nemesis after a crash (said when it is found lost).
fn note_worker_window(shared: &Shared, w: &FaultWindow) {
    let Some((i, crash)) = process_fault(w) else {
        return;
    };
    let mut b = shared.board();
    let Some(state) = b.workers.get_mut(i) else {
        return;
    };
    if crash {
        state.killed_by_nemesis = Some(format!(
            "killed by the nemesis (client-crash {} at {:.3} s)",
            w.targets[0],
            w.start_us as f64 / 1e6
        ));
    } else if w.end_us.is_none() {
        state.paused_by_nemesis = true;
    } else {
        state.paused_by_nemesis = false;
        state.last_heard = Some(std::time::Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(kind: &str, target: &str, end_us: Option<u64>) -> FaultWindow {
        FaultWindow {
            id: 1,
            kind: kind.into(),
            targets: vec![target.into(), "client:2".into()],
            start_us: 1_000_000,
            end_us,
            detail: String::new(),
        }
    }

    #[test]
    fn only_a_pause_or_crash_of_a_worker_process_is_a_process_fault() {
        assert_eq!(
            process_fault(&window("client-pause", "worker:1", None)),
            Some((1, false))
        );
        assert_eq!(
            process_fault(&window("client-crash", "worker:0", Some(1))),
            Some((0, true))
        );
        assert_eq!(process_fault(&window("partition", "worker:1", None)), None);
        assert_eq!(
            process_fault(&window("partition", "worker:1/n1,n2", None)),
            None
        );
        assert_eq!(
            process_fault(&window("client-pause", "client:3", None)),
            None
        );
    }
}
