//! The control API's server side: the board of workers (slots, registrations, clock probes,
//! the barrier, batches, reports, losses) and the axum handlers of `docs/workers.md`'s table.
//! Batches' history lines are appended to `<history_dir>/w<i>.history.jsonl` as they come.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::sync::watch;

use super::clock::{best_estimate, ClockEstimate, ClockProbe};
use super::coordinator::LostWorker;
use super::protocol::{
    Batch, BatchReply, ClockReading, Ready, Registration, Slot, Start, WireSecond, WorkerReport,
};
use super::unix_now_us;

/// Time from the barrier opening to time zero: every worker gets the answer before it.
pub(super) const START_LEAD: std::time::Duration = std::time::Duration::from_millis(500);

/// The longest the coordinator waits for every worker to register and connect its clients.
pub(super) const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(180);

#[derive(Default)]
pub(super) struct WorkerState {
    pub(super) pid: Option<u32>,
    pub(super) registered: bool,
    pub(super) ready: bool,
    pub(super) estimate: Option<ClockEstimate>,
    pub(super) probes: Vec<ClockProbe>,
    pub(super) last_heard: Option<std::time::Instant>,
    pub(super) events: u64,
    pub(super) seconds: BTreeMap<u32, WireSecond>,
    pub(super) report: Option<WorkerReport>,
    pub(super) lost: Option<LostWorker>,
    /// A `client-pause` of its process is open: its silence is the fault, not a loss.
    pub(super) paused_by_nemesis: bool,
    /// A `client-crash` of its process was injected (what to say when it is found lost).
    pub(super) killed_by_nemesis: Option<String>,
}

pub(super) struct Board {
    pub(super) slots: Vec<Slot>,
    pub(super) workers: Vec<WorkerState>,
    pub(super) start_unix_us: Option<u64>,
    pub(super) abort: Option<String>,
    pub(super) stop: bool,
}

pub(super) struct Shared {
    pub(super) board: Mutex<Board>,
    pub(super) opened: watch::Sender<bool>,
    pub(super) history_dir: PathBuf,
}

type AppState = Arc<Shared>;

fn bad(status: StatusCode, why: impl Into<String>) -> (StatusCode, String) {
    (status, why.into())
}

impl Shared {
    pub(super) fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|p| p.into_inner())
    }
}

async fn register(
    State(s): State<AppState>,
    Json(reg): Json<Registration>,
) -> Result<Json<Slot>, (StatusCode, String)> {
    let mut b = s.board();
    // A slot is free until its worker got ready; before the start, a worker asking for a
    // registered slot that is not ready replaces the one that registered (a Kubernetes pod
    // retried with the same completion index after the first died).
    let before_start = b.start_unix_us.is_none();
    let free = |b: &Board, i: usize| b.workers.get(i).is_some_and(|w| !w.registered);
    let replaceable = |b: &Board, i: usize| {
        before_start && b.workers.get(i).is_some_and(|w| w.registered && !w.ready)
    };
    let i = match reg.slot {
        Some(i) if free(&b, i as usize) || replaceable(&b, i as usize) => i as usize,
        Some(i) => {
            return Err(bad(
                StatusCode::CONFLICT,
                format!("slot {i} is taken or out of range"),
            ))
        }
        None => (0..b.workers.len())
            .find(|&i| free(&b, i))
            .ok_or_else(|| bad(StatusCode::CONFLICT, "every slot is taken"))?,
    };
    let w = &mut b.workers[i];
    w.registered = true;
    w.pid = Some(reg.pid);
    w.last_heard = Some(std::time::Instant::now());
    Ok(Json(b.slots[i].clone()))
}

async fn clock() -> Json<ClockReading> {
    Json(ClockReading {
        unix_us: unix_now_us(),
    })
}

async fn ready(
    State(s): State<AppState>,
    Json(r): Json<Ready>,
) -> Result<Json<Start>, (StatusCode, String)> {
    let offset_us = {
        let mut b = s.board();
        let n = b.workers.len();
        let w = b
            .workers
            .get_mut(r.worker as usize)
            .filter(|w| w.registered)
            .ok_or_else(|| {
                bad(
                    StatusCode::NOT_FOUND,
                    format!("worker {} is not registered", r.worker),
                )
            })?;
        let estimate = best_estimate(&r.probes)
            .ok_or_else(|| bad(StatusCode::BAD_REQUEST, "no usable clock probe"))?;
        w.estimate = Some(estimate);
        w.probes.extend(r.probes);
        w.ready = true;
        w.last_heard = Some(std::time::Instant::now());
        if b.workers.iter().filter(|w| w.ready).count() == n && b.start_unix_us.is_none() {
            b.start_unix_us = Some(unix_now_us() + START_LEAD.as_micros() as u64);
            let _ = s.opened.send(true);
        }
        estimate.offset_us
    };
    let mut opened = s.opened.subscribe();
    let _ = tokio::time::timeout(READY_WITHIN, opened.wait_for(|o| *o)).await;
    let b = s.board();
    Ok(Json(Start {
        start_unix_us: b.start_unix_us.unwrap_or(0),
        offset_us,
        abort: match (&b.abort, b.start_unix_us) {
            (Some(why), _) => Some(why.clone()),
            (None, None) => Some("the other workers did not get ready in time".into()),
            (None, Some(_)) => None,
        },
    }))
}

async fn events(
    State(s): State<AppState>,
    Json(batch): Json<Batch>,
) -> Result<Json<BatchReply>, (StatusCode, String)> {
    let path = s
        .history_dir
        .join(format!("w{}.history.jsonl", batch.worker));
    let mut b = s.board();
    let stop = b.stop || b.abort.is_some();
    let w = b
        .workers
        .get_mut(batch.worker as usize)
        .filter(|w| w.registered && w.lost.is_none())
        .ok_or_else(|| {
            bad(
                StatusCode::NOT_FOUND,
                format!("worker {} is not running", batch.worker),
            )
        })?;
    if !batch.events.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| {
                bad(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("{}: {e}", path.display()),
                )
            })?;
        let mut text = batch.events.join("\n");
        text.push('\n');
        f.write_all(text.as_bytes()).map_err(|e| {
            bad(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{}: {e}", path.display()),
            )
        })?;
        w.events += batch.events.len() as u64;
    }
    for sec in batch.seconds {
        w.seconds.insert(sec.second, sec);
    }
    w.probes.extend(batch.probe);
    w.last_heard = Some(std::time::Instant::now());
    Ok(Json(BatchReply { stop }))
}

async fn done(
    State(s): State<AppState>,
    Json(report): Json<WorkerReport>,
) -> Result<Json<BatchReply>, (StatusCode, String)> {
    let mut b = s.board();
    let w = b
        .workers
        .get_mut(report.worker as usize)
        .filter(|w| w.registered && w.lost.is_none())
        .ok_or_else(|| {
            bad(
                StatusCode::NOT_FOUND,
                format!("worker {} is not running", report.worker),
            )
        })?;
    for sec in &report.seconds {
        w.seconds.insert(sec.second, sec.clone());
    }
    w.report = Some(report);
    w.last_heard = Some(std::time::Instant::now());
    Ok(Json(BatchReply { stop: false }))
}

/// The control API's routes on `shared`.
pub(super) fn router(shared: AppState) -> Router {
    Router::new()
        .route("/register", post(register))
        .route("/clock", get(clock))
        .route("/ready", post(ready))
        .route("/events", post(events))
        .route("/done", post(done))
        .with_state(shared)
}
