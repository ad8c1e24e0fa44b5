//! The ledger: the protected resource every critical section writes to, an embedded SQLite file
//! (`results/<run>/ledger.sqlite`) or a schema in a PostgreSQL database ([`LedgerBackend`],
//! `--ledger`; module `pg`), that applies the fencing check itself and logs every step in its
//! own commit order.
//!
//! A critical section is: [`Ledger::begin`] → [`Ledger::read`] the counter → hold (plus any
//! injected pause) → [`Ledger::write`] counter + 1 → [`Ledger::end`]. Each step is one atomic unit
//! logged as one row of `events`, numbered by the ledger's own commit sequence `seq`.
//!
//! ## Fencing
//! In [`FenceMode::Fenced`] the check is in SQL: a begin or write with token `t` succeeds only
//! `WHERE resource = ? AND (fence IS NULL OR fence <= t)` and raises `fence` to `t`, so the holder's
//! own later steps with the same token still pass and a lower (stale) token is rejected and logged
//! with `accepted = 0, reason = 'stale'`. A section without a token is an error in fenced mode
//! ([`LedgerError::MissingToken`]). In [`FenceMode::Unfenced`] every write is accepted and `fence`
//! stays `NULL`. A write whose section has an idempotency key that was already applied is not
//! applied again (`accepted = 0, reason = 'duplicate'`).
//!
//! ## Schema (`sqlite3 ledger.sqlite 'select * from events'`)
//! ```sql
//! CREATE TABLE meta      (key TEXT PRIMARY KEY, value TEXT NOT NULL);
//!     -- ('fence_mode', 'fenced' | 'unfenced'), ('schema_version', '1')
//! CREATE TABLE resources (resource TEXT PRIMARY KEY,
//!                         counter  INTEGER NOT NULL DEFAULT 0,  -- the protected counter
//!                         fence    INTEGER) WITHOUT ROWID;      -- highest token accepted (fenced mode)
//! CREATE TABLE idempotency (key TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID; -- applied write per key
//! CREATE TABLE events (
//!     seq             INTEGER PRIMARY KEY,  -- ledger commit order, 1, 2, 3, …
//!     time_us         INTEGER NOT NULL,     -- µs on the run clock (same clock as history.jsonl)
//!     section_id      INTEGER NOT NULL,     -- one critical section (unique per run)
//!     client          INTEGER NOT NULL,
//!     resource        TEXT    NOT NULL,
//!     fencing_token   INTEGER,              -- NULL for unfenced strategies
//!     step            TEXT    NOT NULL,     -- 'begin' | 'read' | 'write' | 'end' | 'crash'
//!     value           INTEGER,              -- read: counter seen; write: value written
//!     accepted        INTEGER NOT NULL,     -- 1 = took effect, 0 = rejected
//!     reason          TEXT,                 -- why rejected: 'stale' | 'duplicate'
//!     idempotency_key TEXT);
//! ```
//! `crash` is logged by the driver when a client dies inside its section (the holder is gone).
//!
//! ## Concurrency
//! [`Ledger`] is a cheap `Clone` async handle; one dedicated thread owns the connection (WAL,
//! `synchronous = NORMAL`) and is fed through a channel; it applies queued steps in queue
//! order in group commits and answers each awaited step after its commit (`batch`: how
//! batches gather, and the fast path without savepoints). A critical section waits for
//! nothing: its entry ([`Ledger::enter`]: begin, read) and its exit ([`Ledger::leave`]: write
//! the value read + 1, end) are queued, and the ledger thread keeps the value each section
//! read until its write. This is the same as a client that reads, then writes what it read +
//! 1: the channel is FIFO and every client sends from the same order of events (a client's
//! release, and so the next holder's entry, is sent after its exit), so each step sees
//! exactly the state that all steps sent before it left, as a synchronous call at send time
//! would. The ledger's latency never stretches a section. [`LedgerStore`] is the same logic,
//! synchronous, one transaction per step.
//!
//! Files: `store` (schema, step logic, the `events` writer), `batch` (the ledger thread and
//! its SQLite backend), `pg_url` (a PostgreSQL ledger's URL, checked, and its connection),
//! `pg` (the PostgreSQL backend: the same tables and check, one function
//! call per batch, copied into `ledger.sqlite` at close), `file` (reading a finished ledger).

mod backend;
mod batch;
mod file;
mod pg;
mod pg_url;
mod step;
mod store;
#[cfg(test)]
mod tests;

pub use backend::{copy_shared_schema, create_shared_schema, LedgerBackend, PendingLedger};
pub use file::LedgerFile;
pub use pg_url::{PgLedgerUrl, PG_CONNECT_TIMEOUT};
pub use step::{FenceMode, LedgerEvent, RejectReason, SectionRef, Step, StepOutcome};
pub use store::LedgerStore;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::history::RunClock;
use batch::{BatchBackend, Msg, Request, SqliteBatches, Steps};

/// Errors of the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database could not be opened or created.
    #[error("ledger {path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The file already holds events; each run needs a fresh ledger.
    #[error("ledger {path} already holds events from another run; use a new results directory")]
    NotEmpty { path: PathBuf },
    /// The file is not a lockbench ledger (missing table or bad value).
    #[error("ledger {path}: not a lockbench ledger: {detail}")]
    Format { path: PathBuf, detail: String },
    /// A statement failed.
    #[error("ledger SQL error: {0}")]
    Sql(#[from] rusqlite::Error),
    /// Fenced mode needs a fencing token on every section.
    #[error("ledger is fenced but section {section_id} has no fencing token; use a fenced strategy or an unfenced ledger")]
    MissingToken { section_id: u64 },
    /// The ledger thread could not start or commit a group of steps.
    #[error("ledger group commit failed: {detail}")]
    GroupCommit { detail: String },
    /// The ledger thread has stopped ([`Ledger::close`] was called, or it panicked).
    #[error("ledger is closed")]
    Closed,
    /// A `--ledger` URL that is not a usable PostgreSQL URL (`url` has its password redacted).
    #[error("--ledger {url}: {reason}")]
    BadUrl { url: String, reason: String },
    /// The ledger's PostgreSQL server could not be reached (`url` has its password redacted).
    #[error("ledger database {url} cannot be reached: {detail}")]
    Unreachable { url: String, detail: String },
    /// A PostgreSQL ledger statement failed: `what` was being done, `detail` is the server's
    /// code and message.
    #[error("PostgreSQL ledger: {what}: {detail}")]
    Postgres { what: String, detail: String },
}

/// Where the ledger thread sends a request's outcomes.
type StepReply = oneshot::Receiver<Result<Vec<StepOutcome>, LedgerError>>;

struct LedgerInner {
    tx: mpsc::Sender<Msg>,
    thread: Mutex<Option<JoinHandle<Result<(), LedgerError>>>>,
    mode: FenceMode,
    path: PathBuf,
    /// Steps that did not commit (or could not be queued); see [`Ledger::failed_steps`].
    failed: Arc<AtomicU64>,
    /// Requests queued and not yet committed; see [`Ledger::queued`].
    queued: Arc<AtomicU64>,
    /// Set by [`Ledger::close`]: the thread drains at the normal priority.
    closing: Arc<AtomicBool>,
    clock: RunClock,
    /// Other processes write the same ledger ([`Ledger::is_shared`]).
    shared: bool,
}

/// Async, `Clone` handle on the ledger thread.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<LedgerInner>,
}

impl Ledger {
    /// Creates the ledger file (new or empty) at `path` and starts its thread; steps are stamped
    /// with `clock` (the run clock shared with the history) when the client issues them.
    ///
    /// Errors: [`LedgerError::Open`], [`LedgerError::NotEmpty`].
    pub fn open(
        path: impl AsRef<Path>,
        mode: FenceMode,
        clock: RunClock,
    ) -> Result<Ledger, LedgerError> {
        let path = path.as_ref().to_path_buf();
        let store = LedgerStore::create(&path, mode)?;
        Self::start(SqliteBatches::new(store), path, mode, clock, false)
    }

    /// Starts the ledger thread on `backend`.
    fn start(
        backend: impl BatchBackend + Send + 'static,
        path: PathBuf,
        mode: FenceMode,
        clock: RunClock,
        shared: bool,
    ) -> Result<Ledger, LedgerError> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let failed = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicU64::new(0));
        let closing = Arc::new(AtomicBool::new(false));
        let counters = (failed.clone(), queued.clone(), closing.clone());
        let thread = std::thread::Builder::new()
            .name("ledger".into())
            .spawn(move || batch::serve(backend, rx, counters))
            .map_err(|e| LedgerError::Format {
                path: path.clone(),
                detail: format!("cannot start ledger thread: {e}"),
            })?;
        Ok(Ledger {
            inner: Arc::new(LedgerInner {
                tx,
                thread: Mutex::new(Some(thread)),
                mode,
                path,
                failed,
                queued,
                closing,
                clock,
                shared,
            }),
        })
    }

    /// The fence mode.
    pub fn mode(&self) -> FenceMode {
        self.inner.mode
    }

    /// The file path (for a PostgreSQL ledger: where its copy is written at close).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Steps that failed to commit or could not be queued (e.g. disk full, ledger closed). A
    /// ledger with missing steps cannot support a verdict.
    pub fn failed_steps(&self) -> u64 {
        self.inner.failed.load(Ordering::Relaxed)
    }

    /// Requests waiting for the ledger thread right now (a measure of how far behind it is).
    pub fn queued(&self) -> u64 {
        self.inner.queued.load(Ordering::Relaxed)
    }

    /// Begin step; `accepted = false` if fenced out (the section should still run its steps,
    /// whose writes will be rejected and counted as stale writes rejected).
    pub async fn begin(&self, s: &SectionRef) -> Result<StepOutcome, LedgerError> {
        self.call_one(Step::Begin, s, None).await
    }

    /// Read step: the counter value.
    pub async fn read(&self, s: &SectionRef) -> Result<i64, LedgerError> {
        Ok(self.call_one(Step::Read, s, None).await?.value.unwrap_or(0))
    }

    /// Enters a critical section: begin then read, applied back to back and queued without
    /// waiting. The ledger thread keeps the value read for [`leave`](Self::leave); the outcome
    /// is in the ledger file (a fenced-out begin is logged as rejected). A failure is counted
    /// in [`failed_steps`](Self::failed_steps).
    pub fn enter(&self, s: &SectionRef) {
        let _ = self.send(s, Steps::two(Step::Begin, Step::Read), false);
    }

    /// [`enter`](Self::enter), returning the counter value read once both steps committed
    /// (a section that needs the value, e.g. to name the job it charges for).
    ///
    /// # Errors
    /// [`LedgerError`] when the steps did not commit (counted in
    /// [`failed_steps`](Self::failed_steps)).
    pub async fn enter_read(&self, s: &SectionRef) -> Result<i64, LedgerError> {
        let rx = self.send(s, Steps::two(Step::Begin, Step::Read), true);
        let outcomes = Self::wait(rx).await?;
        Ok(outcomes.get(1).and_then(|o| o.value).unwrap_or(0))
    }

    /// Write step: set the counter to `value` (the value read + 1).
    pub async fn write(&self, s: &SectionRef, value: i64) -> Result<StepOutcome, LedgerError> {
        self.call_one(Step::Write, s, Some(value)).await
    }

    /// End step; `crashed = true` when the holder died inside the section.
    pub async fn end(&self, s: &SectionRef, crashed: bool) -> Result<StepOutcome, LedgerError> {
        let step = if crashed { Step::Crash } else { Step::End };
        self.call_one(step, s, None).await
    }

    /// Leaves a critical section entered with [`enter`](Self::enter): writes the value it
    /// read plus one (read-modify-write, so a section that overlapped another loses its
    /// increment), then ends, queued without waiting for the commit. The ledger's order is still the order
    /// of the calls: anything the caller does afterwards (its release, and so the next
    /// holder's entry) reaches the ledger thread after these steps. A failure is counted in
    /// [`failed_steps`](Self::failed_steps).
    pub fn leave(&self, s: &SectionRef) {
        let _ = self.send(s, Steps::two(Step::Write, Step::End), false);
    }

    /// Whether other processes write this ledger too ([`LedgerBackend::PostgresShared`]). The
    /// queue order that makes [`leave`](Self::leave) safe without waiting holds within one
    /// process only: a client of a shared ledger awaits its exit
    /// ([`leave_committed`](Self::leave_committed)) before it releases the lock, so the next
    /// holder, in any process, reads what it wrote.
    pub fn is_shared(&self) -> bool {
        self.inner.shared
    }

    /// [`leave`](Self::leave), returning once the write and the end have committed. A failure
    /// is counted in [`failed_steps`](Self::failed_steps).
    pub async fn leave_committed(&self, s: &SectionRef) {
        let rx = self.send(s, Steps::two(Step::Write, Step::End), true);
        if let Err(e) = Self::wait(rx).await {
            tracing::debug!("ledger exit failed: {e}");
        }
    }

    /// Stops the thread after the queued steps and checkpoints the WAL (a PostgreSQL ledger:
    /// copies it into the SQLite file at [`path`](Self::path)); later calls return
    /// [`LedgerError::Closed`]. Blocking (joins the thread): call from outside async code or
    /// via `spawn_blocking`. Closing twice is a no-op.
    ///
    /// # Errors
    /// What the copy of a PostgreSQL ledger met ([`LedgerError::Postgres`], [`LedgerError::Sql`]);
    /// [`LedgerError::Closed`] when the thread panicked.
    pub fn close(&self) -> Result<(), LedgerError> {
        self.inner.closing.store(true, Ordering::Relaxed);
        let _ = self.inner.tx.send(Msg::Close);
        let handle = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match handle {
            Some(h) => h.join().map_err(|_| LedgerError::Closed)?,
            None => Ok(()),
        }
    }

    async fn call_one(
        &self,
        step: Step,
        s: &SectionRef,
        value: Option<i64>,
    ) -> Result<StepOutcome, LedgerError> {
        let rx = self.send(s, Steps::one(step, value), true);
        Ok(Self::wait(rx).await?[0])
    }

    /// Queues `steps`; returns the receiver of their outcomes when `reply` is asked for, or
    /// `Err(Closed)` (counted as failed steps) when the thread is gone.
    fn send(
        &self,
        s: &SectionRef,
        steps: Steps,
        reply: bool,
    ) -> Result<Option<StepReply>, LedgerError> {
        let (tx, rx) = if reply {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let n = steps.len();
        self.inner.queued.fetch_add(1, Ordering::Relaxed);
        let sent = self.inner.tx.send(Msg::Step(Request {
            section: s.clone(),
            time_us: self.inner.clock.now_us(),
            steps,
            reply: tx,
        }));
        if sent.is_err() {
            self.inner.queued.fetch_sub(1, Ordering::Relaxed);
            self.inner.failed.fetch_add(n, Ordering::Relaxed);
            return Err(LedgerError::Closed);
        }
        Ok(rx)
    }

    async fn wait(
        rx: Result<Option<StepReply>, LedgerError>,
    ) -> Result<Vec<StepOutcome>, LedgerError> {
        let rx = rx?.ok_or(LedgerError::Closed)?;
        rx.await.map_err(|_| LedgerError::Closed)?
    }
}
