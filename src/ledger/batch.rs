//! The ledger thread: takes queued requests in FIFO order and applies them in group commits.
//!
//! **Gathering.** Requests nobody waits for (every step of a driver's critical section) gather
//! for up to [`GATHER`] or [`MAX_BATCH`] requests before one commit; a request whose caller
//! awaits its outcome ends the gathering at once, so an awaited step waits at most one poll
//! interval plus its commit. Each commit writes every page it dirtied to the WAL, and with
//! many resources those pages are scattered (one `resources` page per section at 1 ms
//! batches over 100,000 resources), so larger, rarer commits cut the ledger's cost per
//! section. The steps carry their clients' times, so gathering changes no recorded time.
//!
//! **Fast and careful paths.** A batch first runs with no savepoint per step (a savepoint and
//! its release are two more statements per step). No step is expected to fail, so when one
//! does, the transaction is rolled back and the batch runs again with a savepoint per step:
//! the failing step is undone alone and reported to its request, the others commit. Both paths
//! apply the same steps in the same order, so the commit order is the queue order either way.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::store::{apply_step, EventLog, LedgerStore};
use super::{LedgerError, SectionRef, Step, StepOutcome};
use crate::recording::RecordingPriority;

/// Where the ledger thread sends a request's outcomes.
pub(super) type ReplyTo = oneshot::Sender<Result<Vec<StepOutcome>, LedgerError>>;

/// One or two steps of one section, applied back to back (no other client's step between).
#[derive(Debug, Clone, Copy)]
pub(super) struct Steps {
    steps: [(Step, Option<i64>); 2],
    len: usize,
}

impl Steps {
    /// One step with an optional value.
    pub(super) fn one(step: Step, value: Option<i64>) -> Self {
        Self {
            steps: [(step, value); 2],
            len: 1,
        }
    }

    /// Two steps without values (`enter`: begin, read; `leave`: write the read + 1, end).
    pub(super) fn two(first: Step, second: Step) -> Self {
        Self {
            steps: [(first, None), (second, None)],
            len: 2,
        }
    }

    pub(super) fn as_slice(&self) -> &[(Step, Option<i64>)] {
        &self.steps[..self.len]
    }

    pub(super) fn len(&self) -> u64 {
        self.len as u64
    }
}

/// A request from a client to the ledger thread.
pub(super) struct Request {
    pub(super) section: SectionRef,
    /// When the client issued the request (µs on the run clock): the time logged for its steps,
    /// so the ledger thread's own queueing never shows up as the client's timing.
    pub(super) time_us: u64,
    pub(super) steps: Steps,
    /// `None`: nobody waits for the outcome (a failure is still counted).
    pub(super) reply: Option<ReplyTo>,
}

/// What the channel to the ledger thread carries.
pub(super) enum Msg {
    Step(Request),
    Close,
}

/// Most requests committed together in one group commit.
const MAX_BATCH: usize = 8192;

/// Longest time requests nobody awaits gather before their commit.
const GATHER: Duration = Duration::from_millis(10);

/// Backlog (queued requests) at which the ledger thread leaves idle priority to catch up, and
/// at which it returns to it (see [`crate::recording`]); ~100 B each.
const BACKLOG_HIGH: u64 = 100_000;
const BACKLOG_LOW: u64 = 10_000;

/// How long the ledger thread sleeps when nothing is queued.
const IDLE_POLL: Duration = Duration::from_millis(1);

/// What the ledger thread applies its batches to: the SQLite file ([`SqliteBatches`]) or a
/// PostgreSQL schema (`super::pg`).
pub(super) trait BatchBackend {
    /// Applies `batch` (drained) in one commit, in queue order, and answers every request after
    /// the commit. Returns the number of steps that did not commit.
    fn run_batch(&mut self, batch: &mut Vec<Request>) -> u64;

    /// Called once after the last batch (checkpoint, copy of the result).
    ///
    /// # Errors
    /// What the backend could not finish.
    fn finish(&mut self) -> Result<(), LedgerError>;
}

/// The SQLite backend: the store and what the thread keeps between batches.
pub(super) struct SqliteBatches {
    store: LedgerStore,
    state: SectionState,
}

impl SqliteBatches {
    pub(super) fn new(store: LedgerStore) -> Self {
        Self {
            store,
            state: SectionState::default(),
        }
    }
}

impl BatchBackend for SqliteBatches {
    fn run_batch(&mut self, batch: &mut Vec<Request>) -> u64 {
        run_batch(&mut self.store, batch, &mut self.state)
    }

    /// Checkpoints the WAL into the file (best effort: the WAL file is still a valid ledger).
    fn finish(&mut self) -> Result<(), LedgerError> {
        let _ = self
            .store
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        Ok(())
    }
}

/// The thread's loop: gather, apply, commit, answer; on `Close` (or when every handle is
/// gone) commit what is queued and [`finish`](BatchBackend::finish). Polled, not woken: a
/// sender never pays for waking this thread (a futex call per step on the clients' thread).
pub(super) fn serve(
    mut backend: impl BatchBackend,
    rx: mpsc::Receiver<Msg>,
    (failed, queued, draining): (Arc<AtomicU64>, Arc<AtomicU64>, Arc<AtomicBool>),
) -> Result<(), LedgerError> {
    let mut priority = RecordingPriority::new(BACKLOG_HIGH, BACKLOG_LOW);
    let mut batch: Vec<Request> = Vec::with_capacity(MAX_BATCH);
    let mut gathering_since = Instant::now();
    let mut awaited = false;
    let mut closing = false;
    while !closing {
        let due = match rx.try_recv() {
            Ok(Msg::Step(r)) => {
                if batch.is_empty() {
                    gathering_since = Instant::now();
                }
                awaited |= r.reply.is_some();
                batch.push(r);
                batch.len() >= MAX_BATCH
            }
            Ok(Msg::Close) | Err(mpsc::TryRecvError::Disconnected) => {
                closing = true;
                true
            }
            Err(mpsc::TryRecvError::Empty) => {
                let hurry = awaited || draining.load(Ordering::Relaxed);
                priority.adjust(queued.load(Ordering::Relaxed), hurry);
                let due = !batch.is_empty() && (awaited || gathering_since.elapsed() >= GATHER);
                if !due {
                    std::thread::sleep(IDLE_POLL);
                }
                due
            }
        };
        if due && !batch.is_empty() {
            let n = batch.len() as u64;
            let lost = backend.run_batch(&mut batch);
            failed.fetch_add(lost, Ordering::Relaxed);
            let left = queued.fetch_sub(n, Ordering::Relaxed).saturating_sub(n);
            priority.adjust(left, draining.load(Ordering::Relaxed));
            awaited = false;
        }
    }
    priority.adjust(0, true);
    backend.finish()
}

/// What the thread keeps between batches.
#[derive(Default)]
struct SectionState {
    /// Section id → the counter value its read step saw, until its write.
    reads: HashMap<u64, i64>,
    /// Resources whose row a committed batch created.
    known: HashSet<String>,
}

/// Applies a batch in one transaction and answers every request after the commit. Returns the
/// number of steps that did not commit. A write step without a value writes the value its
/// section's read saw + 1.
fn run_batch(store: &mut LedgerStore, batch: &mut Vec<Request>, state: &mut SectionState) -> u64 {
    let first_seq = store.next_seq;
    let mut undo = Vec::new();
    let fast = apply_batch_once(store, batch, state, Some(&mut undo));
    let (results, lost, commit) = match fast {
        Ok(done) => done,
        Err(()) => {
            // Put back what the fast pass changed, newest first.
            for (id, before) in undo.into_iter().rev() {
                match before {
                    Some(v) => state.reads.insert(id, v),
                    None => state.reads.remove(&id),
                };
            }
            store.next_seq = first_seq;
            match apply_batch_once(store, batch, state, None) {
                Ok(done) => done,
                Err(()) => unreachable!("the careful path reports step errors per request"),
            }
        }
    };
    let lost = match &commit {
        Ok(()) => {
            for r in batch.iter() {
                if !state.known.contains(&r.section.resource) {
                    state.known.insert(r.section.resource.clone());
                }
            }
            lost
        }
        Err(_) => {
            store.next_seq = first_seq;
            batch.iter().map(|r| r.steps.len()).sum()
        }
    };
    for (r, res) in batch.drain(..).zip(results) {
        let res = match &commit {
            Ok(()) => res,
            Err(e) => Err(LedgerError::GroupCommit { detail: e.clone() }),
        };
        if let Some(reply) = r.reply {
            let _ = reply.send(res);
        }
    }
    lost
}

/// Outcomes per request, steps that failed, and the commit's result (an error as text).
type BatchOutcome = (
    Vec<Result<Vec<StepOutcome>, LedgerError>>,
    u64,
    Result<(), String>,
);

/// One pass of [`run_batch`]. The fast pass (`undo` given) aborts at the first failing step
/// (`Err(())`, transaction rolled back; `undo` holds each changed read's previous value); the
/// careful pass (`undo = None`) gives every step a savepoint and keeps failures per request.
fn apply_batch_once(
    store: &mut LedgerStore,
    batch: &[Request],
    state: &mut SectionState,
    mut undo: Option<&mut Vec<(u64, Option<i64>)>>,
) -> Result<BatchOutcome, ()> {
    let mode = store.mode;
    let careful = undo.is_none();
    let mut log = EventLog::starting_at(store.next_seq);
    let tx = match store.conn.transaction() {
        Ok(tx) => tx,
        Err(e) => return Ok(nothing_committed(batch, &e)),
    };
    let mut results = Vec::with_capacity(batch.len());
    let mut lost = 0;
    // Resources whose row this pass has made sure of (known to exist from then on).
    let mut ensured: HashSet<&str> = HashSet::new();
    for r in batch {
        let mut outcomes = Vec::new();
        let mut error = None;
        let id = r.section.section_id;
        for &(step, value) in r.steps.as_slice() {
            let is_known = state.known.contains(&r.section.resource)
                || ensured.contains(r.section.resource.as_str());
            let value = match (step, value) {
                (Step::Write, None) => Some(state.reads.get(&id).copied().unwrap_or(0) + 1),
                _ => value,
            };
            let res = if careful {
                (|| {
                    tx.prepare_cached("SAVEPOINT step")?.execute([])?;
                    let out = apply_step(
                        &tx, mode, &mut log, step, &r.section, value, r.time_us, is_known,
                    );
                    if out.is_err() {
                        tx.prepare_cached("ROLLBACK TO step")?.execute([])?;
                    }
                    tx.prepare_cached("RELEASE step")?.execute([])?;
                    out
                })()
            } else {
                let out = apply_step(
                    &tx, mode, &mut log, step, &r.section, value, r.time_us, is_known,
                );
                if out.is_err() {
                    return Err(()); // dropping `tx` rolls the pass back
                }
                out
            };
            let before = match step {
                Step::Read => match &res {
                    Ok(o) => Some(state.reads.insert(id, o.value.unwrap_or(0))),
                    Err(_) => None,
                },
                Step::End | Step::Crash => Some(state.reads.remove(&id)),
                Step::Begin | Step::Write => None,
            };
            if let (Some(undo), Some(before)) = (undo.as_deref_mut(), before) {
                undo.push((id, before));
            }
            if res.is_ok() && !is_known && !matches!(step, Step::End | Step::Crash) {
                ensured.insert(&r.section.resource);
            }
            match res {
                Ok(o) => {
                    if r.reply.is_some() {
                        outcomes.push(o);
                    }
                }
                Err(e) => {
                    lost += 1;
                    error.get_or_insert(e);
                }
            }
        }
        results.push(match error {
            None => Ok(outcomes),
            Some(e) => Err(e),
        });
    }
    if let Err(e) = log.flush(&tx) {
        if !careful {
            return Err(());
        }
        return Ok(nothing_committed(batch, &e));
    }
    let commit = tx.commit().map_err(|e| e.to_string());
    if commit.is_ok() {
        store.next_seq = log.next_seq();
    }
    Ok((results, lost, commit))
}

/// The outcome of a batch none of whose steps could commit (`e`: why).
fn nothing_committed(batch: &[Request], e: &rusqlite::Error) -> BatchOutcome {
    let detail = e.to_string();
    let results = batch
        .iter()
        .map(|_| {
            Err(LedgerError::GroupCommit {
                detail: detail.clone(),
            })
        })
        .collect();
    let steps = batch.iter().map(|r| r.steps.len()).sum();
    (results, steps, Err(detail))
}
