//! [`LedgerBackend`]: which database holds a run's ledger, and getting it ready before the
//! clients start ([`PendingLedger`]).

use std::path::{Path, PathBuf};

use super::{pg, FenceMode, Ledger, LedgerError, PgLedgerUrl};
use crate::history::RunClock;

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
