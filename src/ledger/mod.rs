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

mod batch;
mod file;
mod pg;
mod pg_url;
mod store;

pub use file::LedgerFile;
pub use pg_url::{PgLedgerUrl, PG_CONNECT_TIMEOUT};
pub use store::LedgerStore;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
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

/// Whether the ledger applies the fencing check.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = unknown_fence_mode
)]
pub enum FenceMode {
    /// Reject begins/writes whose token is lower than one already accepted.
    Fenced,
    /// Accept every write.
    Unfenced,
}

impl FenceMode {
    /// `fenced` / `unfenced`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The `FromStr` error of [`FenceMode`].
fn unknown_fence_mode(s: &str) -> String {
    format!("unknown fence mode {s:?} (expected fenced or unfenced)")
}

/// One step of a critical section, as logged in `events.step`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = unknown_step
)]
pub enum Step {
    Begin,
    Read,
    Write,
    End,
    /// The holder died inside the section.
    Crash,
}

impl Step {
    /// The name stored in SQL.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The `FromStr` error of [`Step`].
fn unknown_step(s: &str) -> String {
    format!("unknown step {s:?}")
}

/// Why a step was rejected (`events.reason`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum RejectReason {
    /// The token is lower than one already accepted (fenced mode).
    Stale,
    /// The section's idempotency key was already applied.
    Duplicate,
}

impl RejectReason {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Identifies one critical section in every step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionRef {
    /// Unique per run (the driver numbers sections).
    pub section_id: u64,
    /// Client id (same as in the history).
    pub client: u32,
    /// Resource name (same as in the history).
    pub resource: String,
    /// Fencing token of the lease, if the strategy issues one.
    pub fencing_token: Option<u64>,
    /// Optional idempotency key: a second write with the same key is not applied.
    pub idempotency_key: Option<String>,
}

/// Result of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepOutcome {
    /// The step's `events.seq` (commit order).
    pub seq: i64,
    /// Whether it took effect (always true for read, end, crash, and in unfenced mode for begin).
    pub accepted: bool,
    /// Counter value read (read step) or written (write step).
    pub value: Option<i64>,
}

/// One row of `events`, as the checker reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEvent {
    pub seq: i64,
    pub time_us: u64,
    pub section_id: u64,
    pub client: u32,
    pub resource: String,
    pub fencing_token: Option<u64>,
    pub step: Step,
    pub value: Option<i64>,
    pub accepted: bool,
    pub reason: Option<RejectReason>,
}

/// Which database holds a run's ledger.
#[derive(Debug, Clone, Default)]
pub enum LedgerBackend {
    /// The embedded SQLite file (`ledger.sqlite` in the strategy's directory).
    #[default]
    Sqlite,
    /// A new schema in this PostgreSQL database, copied into `ledger.sqlite` at close.
    Postgres(PgLedgerUrl),
    /// An existing schema made by [`create_shared_schema`] that several processes (the
    /// workers of a multi-worker run) write to at once: each batch is numbered by the database
    /// under a table lock, a section's exit is awaited before its client goes on
    /// ([`Ledger::is_shared`]), and nothing is copied at close ([`copy_shared_schema`] does it
    /// once every writer is done).
    PostgresShared {
        /// The database.
        url: PgLedgerUrl,
        /// The schema's name.
        schema: String,
    },
}

/// Creates a fresh ledger schema in `url`'s database for several writers
/// ([`LedgerBackend::PostgresShared`]) and returns its name. Bounded by [`PG_CONNECT_TIMEOUT`].
///
/// # Errors
/// [`LedgerError::Unreachable`], [`LedgerError::Postgres`] when the schema cannot be created.
pub async fn create_shared_schema(
    url: &PgLedgerUrl,
    mode: FenceMode,
) -> Result<String, LedgerError> {
    pg::create_shared(url, mode).await
}

/// Copies a shared ledger schema into a new SQLite ledger at `path` (what the checker reads),
/// once every writer is done. Blocking: call via `spawn_blocking`.
///
/// # Errors
/// [`LedgerError::NotEmpty`] when `path` holds events, [`LedgerError::Unreachable`],
/// [`LedgerError::Postgres`], [`LedgerError::Open`], [`LedgerError::Sql`].
pub fn copy_shared_schema(url: &PgLedgerUrl, schema: &str, path: &Path) -> Result<(), LedgerError> {
    pg::copy_shared(url, schema, path)
}

impl LedgerBackend {
    /// Gets the storage of a ledger whose file (or copy) is `path` ready, without starting it:
    /// for PostgreSQL, connects (bounded by [`PG_CONNECT_TIMEOUT`]) and creates the schema, so
    /// its errors come before any client starts; for SQLite, nothing yet (the file is created
    /// by [`PendingLedger::start`]).
    ///
    /// # Errors
    /// [`LedgerError::Unreachable`], [`LedgerError::Postgres`] (schema not created),
    /// [`LedgerError::NotEmpty`] when the copy's `path` already exists.
    pub async fn prepare(
        &self,
        path: impl AsRef<Path>,
        mode: FenceMode,
    ) -> Result<PendingLedger, LedgerError> {
        let path = path.as_ref().to_path_buf();
        let url = match self {
            LedgerBackend::Sqlite => return Ok(PendingLedger(Pending::Sqlite { path, mode })),
            LedgerBackend::Postgres(url) => url.clone(),
            LedgerBackend::PostgresShared { url, schema } => {
                let (url, schema) = (url.clone(), schema.clone());
                let backend =
                    tokio::task::spawn_blocking(move || pg::PgBatches::attach(&url, &schema, mode))
                        .await
                        .map_err(|e| LedgerError::Postgres {
                            what: "attaching to the shared ledger".into(),
                            detail: e.to_string(),
                        })??;
                return Ok(PendingLedger(Pending::Postgres {
                    backend: Box::new(backend),
                    path,
                    mode,
                    shared: true,
                }));
            }
        };
        if path.exists() {
            return Err(LedgerError::NotEmpty { path });
        }
        let copy_to = path.clone();
        let backend =
            tokio::task::spawn_blocking(move || pg::PgBatches::create(&url, mode, &copy_to))
                .await
                .map_err(|e| LedgerError::Postgres {
                    what: "creating the ledger".into(),
                    detail: e.to_string(),
                })??;
        Ok(PendingLedger(Pending::Postgres {
            backend: Box::new(backend),
            path,
            mode,
            shared: false,
        }))
    }

    /// `sqlite`, or the URL with its password redacted.
    pub fn describe(&self) -> String {
        match self {
            LedgerBackend::Sqlite => "sqlite".into(),
            LedgerBackend::Postgres(url) => url.redacted().into(),
            LedgerBackend::PostgresShared { url, schema } => {
                format!("{} schema {schema} (shared)", url.redacted())
            }
        }
    }
}

/// A ledger made ready by [`LedgerBackend::prepare`], started with the run clock.
pub struct PendingLedger(Pending);

enum Pending {
    /// An SQLite file to create at `path`.
    Sqlite { path: PathBuf, mode: FenceMode },
    /// A PostgreSQL schema, created (copied to `path` at close) or attached to (`shared`).
    Postgres {
        backend: Box<pg::PgBatches>,
        path: PathBuf,
        mode: FenceMode,
        shared: bool,
    },
}

impl PendingLedger {
    /// Starts the ledger thread; steps are stamped with `clock`.
    ///
    /// # Errors
    /// As [`Ledger::open`].
    pub fn start(self, clock: RunClock) -> Result<Ledger, LedgerError> {
        match self.0 {
            Pending::Sqlite { path, mode } => Ledger::open(path, mode, clock),
            Pending::Postgres {
                backend,
                path,
                mode,
                shared,
            } => Ledger::start(*backend, path, mode, clock, shared),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant_names::assert_names_match_serde;

    #[test]
    fn step_and_mode_names_match_serde() {
        assert_names_match_serde::<FenceMode>();
        assert_names_match_serde::<Step>();
        assert_names_match_serde::<RejectReason>();
        assert_eq!(
            "strict".parse::<FenceMode>().unwrap_err(),
            "unknown fence mode \"strict\" (expected fenced or unfenced)"
        );
        assert_eq!(
            "commit".parse::<Step>().unwrap_err(),
            "unknown step \"commit\""
        );
    }

    fn sec(id: u64, client: u32, token: Option<u64>) -> SectionRef {
        SectionRef {
            section_id: id,
            client,
            resource: "r".into(),
            fencing_token: token,
            idempotency_key: None,
        }
    }

    #[test]
    fn fenced_rejects_lower_tokens_and_lets_holder_write_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Fenced).unwrap();
        let a = sec(1, 1, Some(5));
        let b = sec(2, 2, Some(6));
        assert!(l.begin(&a, 1).unwrap().accepted);
        assert_eq!(l.read(&a, 2).unwrap(), 0);
        assert!(l.begin(&b, 3).unwrap().accepted);
        assert_eq!(l.read(&b, 4).unwrap(), 0);
        assert!(l.write(&b, 1, 5).unwrap().accepted);
        assert!(l.write(&b, 2, 6).unwrap().accepted, "same token passes");
        let stale = l.write(&a, 1, 7).unwrap();
        assert!(!stale.accepted);
        assert!(!l.begin(&sec(3, 3, Some(4)), 8).unwrap().accepted);
        assert!(matches!(
            l.write(&sec(4, 1, None), 1, 9),
            Err(LedgerError::MissingToken { section_id: 4 })
        ));
        drop(l);
        let f = LedgerFile::open(dir.path().join("l.sqlite")).unwrap();
        assert_eq!(f.mode(), FenceMode::Fenced);
        assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 2)]);
        let mut evs = Vec::new();
        f.for_each_event(|e| evs.push(e)).unwrap();
        assert_eq!(evs.len(), 8);
        assert_eq!(evs[6].reason, Some(RejectReason::Stale));
        assert_eq!(
            (evs[6].step, evs[6].accepted, evs[6].client),
            (Step::Write, false, 1)
        );
        assert_eq!(
            evs.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn unfenced_accepts_all_and_idempotency_key_dedupes() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Unfenced).unwrap();
        let mut a = sec(1, 1, Some(9));
        a.idempotency_key = Some("k1".into());
        assert!(l.write(&a, 1, 1).unwrap().accepted);
        let dup = l.write(&a, 2, 2).unwrap();
        assert!(!dup.accepted);
        assert!(l.write(&sec(2, 2, Some(1)), 5, 3).unwrap().accepted);
        drop(l);
        let f = LedgerFile::open(dir.path().join("l.sqlite")).unwrap();
        assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 5)]);
        let mut reasons = Vec::new();
        f.for_each_event(|e| reasons.push(e.reason)).unwrap();
        assert_eq!(reasons, vec![None, Some(RejectReason::Duplicate), None]);
        // A used file cannot be reused for another run.
        assert!(matches!(
            LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Unfenced),
            Err(LedgerError::NotEmpty { .. })
        ));
    }

    #[tokio::test]
    async fn queued_sections_write_what_they_read_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let ledger = Ledger::open(&path, FenceMode::Unfenced, RunClock::start()).unwrap();
        let s = |id: u64, client: u32, resource: &str| SectionRef {
            section_id: id,
            client,
            resource: resource.into(),
            fencing_token: None,
            idempotency_key: None,
        };
        // One after the other on r: 1, 2, 3.
        for id in 0..3 {
            ledger.enter(&s(id, 0, "r"));
            ledger.leave(&s(id, 0, "r"));
        }
        // Two sections inside q at once: both read 0 and write 1 (one increment lost).
        ledger.enter(&s(10, 1, "q"));
        ledger.enter(&s(11, 2, "q"));
        ledger.leave(&s(10, 1, "q"));
        ledger.leave(&s(11, 2, "q"));
        let l2 = ledger.clone();
        tokio::task::spawn_blocking(move || l2.close())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ledger.failed_steps(), 0);
        let f = LedgerFile::open(&path).unwrap();
        assert_eq!(
            f.counters().unwrap(),
            vec![("q".to_string(), 1), ("r".to_string(), 3)]
        );
        let mut writes = Vec::new();
        f.for_each_event(|e| {
            if e.step == Step::Write {
                writes.push((e.section_id, e.value));
            }
        })
        .unwrap();
        assert_eq!(
            writes,
            vec![
                (0, Some(1)),
                (1, Some(2)),
                (2, Some(3)),
                (10, Some(1)),
                (11, Some(1))
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_step_is_undone_alone_and_the_rest_of_its_batch_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let ledger = Ledger::open(&path, FenceMode::Fenced, RunClock::start()).unwrap();
        let s = |id: u64, token: Option<u64>| SectionRef {
            section_id: id,
            client: id as u32,
            resource: "r".into(),
            fencing_token: token,
            idempotency_key: None,
        };
        // Queued without waiting, so they land in one batch: the fast path fails on the
        // tokenless section, rolls back, and the careful path commits the two good sections.
        ledger.enter(&s(1, Some(1)));
        ledger.leave(&s(1, Some(1)));
        ledger.enter(&s(2, None));
        ledger.leave(&s(2, None));
        ledger.enter(&s(3, Some(3)));
        ledger.leave(&s(3, Some(3)));
        let l2 = ledger.clone();
        tokio::task::spawn_blocking(move || l2.close())
            .await
            .unwrap()
            .unwrap();
        // begin, read and write of section 2 fail (no token; its read then finds no value).
        assert!(ledger.failed_steps() >= 2, "{}", ledger.failed_steps());
        let f = LedgerFile::open(&path).unwrap();
        assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 2)]);
        let mut sections = Vec::new();
        f.for_each_event(|e| {
            if e.step == Step::Write {
                sections.push((e.section_id, e.value, e.accepted));
            }
        })
        .unwrap();
        assert_eq!(sections, vec![(1, Some(1), true), (3, Some(2), true)]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_ledger_serializes_concurrent_clients() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let ledger = Ledger::open(&path, FenceMode::Fenced, RunClock::start()).unwrap();
        // 16 clients, each with increasing tokens from a shared counter, under a tokio mutex
        // (a perfect lock): the counter must end at exactly the number of sections.
        let lock = Arc::new(tokio::sync::Mutex::new(0u64));
        let mut tasks = Vec::new();
        for c in 0..16u32 {
            let ledger = ledger.clone();
            let lock = lock.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..20u64 {
                    let mut g = lock.lock().await;
                    *g += 1;
                    let s = SectionRef {
                        section_id: c as u64 * 1000 + i,
                        client: c,
                        resource: "r".into(),
                        fencing_token: Some(*g),
                        idempotency_key: None,
                    };
                    assert!(ledger.begin(&s).await.unwrap().accepted);
                    let v = ledger.read(&s).await.unwrap();
                    assert!(ledger.write(&s, v + 1).await.unwrap().accepted);
                    ledger.end(&s, false).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let l2 = ledger.clone();
        tokio::task::spawn_blocking(move || l2.close())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            ledger.read(&sec(1, 1, Some(1))).await,
            Err(LedgerError::Closed)
        ));
        let f = LedgerFile::open(&path).unwrap();
        assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 320)]);
        let mut n = 0;
        f.for_each_event(|_| n += 1).unwrap();
        assert_eq!(n, 320 * 4);
    }
}
