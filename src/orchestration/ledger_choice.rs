//! `--ledger`: where a run keeps its ledger. The embedded SQLite file (default), a PostgreSQL
//! database given by URL, or a `postgres` server lockbench starts for the run in
//! `<run>/ledger-postgres/` (the same code as the `postgres` topology's node) and stops on every
//! way out. The ledger layer only ever gets a URL ([`LedgerBackend`]); starting a server is
//! decided here.

use std::path::Path;
use std::str::FromStr;

use crate::ledger::{LedgerBackend, LedgerError, PgLedgerUrl};
use crate::topology::{LocalNode, LocalNodeConfig, ServerProgram, TopologyError};

/// Errors of getting a run's ledger database ready.
#[derive(Debug, thiserror::Error)]
pub enum LedgerChoiceError {
    /// The `postgres` server for the ledger did not start.
    #[error("the ledger's postgres server: {0}")]
    Server(#[from] TopologyError),
    /// The URL given with `--ledger` is bad or its server is not reachable.
    #[error(transparent)]
    Database(#[from] LedgerError),
}

/// What `--ledger` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LedgerChoice {
    /// `sqlite`: `ledger.sqlite` in each strategy's directory.
    #[default]
    Sqlite,
    /// `postgres://user@host:port/db`: a schema of the run's own in that database.
    Postgres(PgLedgerUrl),
    /// `postgres`: a `postgres` server lockbench starts for the run.
    StartPostgres,
}

impl FromStr for LedgerChoice {
    type Err = String;

    /// `sqlite`, `postgres`, or a `postgres://` / `postgresql://` URL (checked by
    /// [`PgLedgerUrl::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "sqlite" => Ok(LedgerChoice::Sqlite),
            "postgres" => Ok(LedgerChoice::StartPostgres),
            url if url.contains("://") => PgLedgerUrl::parse(url)
                .map(LedgerChoice::Postgres)
                .map_err(|e| e.to_string()),
            other => Err(format!(
                "unknown ledger {other:?}: use sqlite, postgres (lockbench starts one) or a \
                 postgres://user@host:port/db URL"
            )),
        }
    }
}

impl LedgerChoice {
    /// Checks that the database of a URL answers (bounded by
    /// [`crate::ledger::PG_CONNECT_TIMEOUT`]); nothing to check for the others.
    ///
    /// # Errors
    /// [`LedgerError::Unreachable`] naming the URL.
    pub async fn probe(&self) -> Result<(), LedgerError> {
        match self {
            LedgerChoice::Postgres(url) => url.probe().await,
            LedgerChoice::Sqlite | LedgerChoice::StartPostgres => Ok(()),
        }
    }

    /// Gets the database ready for a run in `run_dir`: probes a URL, or starts a `postgres`
    /// server in `<run_dir>/ledger-postgres/`.
    ///
    /// # Errors
    /// [`LedgerChoiceError::Database`] when a URL's server does not answer,
    /// [`LedgerChoiceError::Server`] when the server does not start (not installed, `initdb`
    /// failed, …).
    pub async fn open(&self, run_dir: &Path) -> Result<LedgerDatabase, LedgerChoiceError> {
        match self {
            LedgerChoice::Sqlite => Ok(LedgerDatabase::sqlite()),
            LedgerChoice::Postgres(url) => {
                url.probe().await?;
                Ok(LedgerDatabase {
                    backend: LedgerBackend::Postgres(url.clone()),
                    server: None,
                })
            }
            LedgerChoice::StartPostgres => {
                let config = LocalNodeConfig {
                    program: ServerProgram::Postgres,
                    ..LocalNodeConfig::new("ledger-postgres")
                };
                let node = LocalNode::start(&config, run_dir).await?;
                let url = PgLedgerUrl::parse(&node.endpoint().url)?;
                Ok(LedgerDatabase {
                    backend: LedgerBackend::Postgres(url),
                    server: Some(node),
                })
            }
        }
    }
}

/// A run's ledger database, ready: the backend experiments open their ledgers on, and the
/// server started for it (if any; dropping this kills it).
#[derive(Debug)]
pub struct LedgerDatabase {
    backend: LedgerBackend,
    server: Option<LocalNode>,
}

impl LedgerDatabase {
    /// The SQLite file (also what an unaudited run gets: it opens no ledger).
    pub fn sqlite() -> Self {
        Self {
            backend: LedgerBackend::Sqlite,
            server: None,
        }
    }

    /// Where the strategies' ledgers go.
    pub fn backend(&self) -> &LedgerBackend {
        &self.backend
    }

    /// For `summary.json`: `sqlite`, the URL (password redacted), or the started server's URL
    /// followed by `(started by lockbench)`.
    pub fn describe(&self) -> String {
        match &self.server {
            Some(_) => format!("{} (started by lockbench)", self.backend.describe()),
            None => self.backend.describe(),
        }
    }

    /// Stops the server lockbench started (fast shutdown, bounded), if any.
    pub async fn stop(mut self) {
        if let Some(mut node) = self.server.take() {
            if let Err(e) = node.stop().await {
                tracing::warn!("stopping the ledger's postgres server: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_parse_and_anything_else_is_refused() {
        assert!(matches!("sqlite".parse(), Ok(LedgerChoice::Sqlite)));
        assert!(matches!(
            "postgres".parse(),
            Ok(LedgerChoice::StartPostgres)
        ));
        match "postgres://bench:pw@10.0.0.5:5433/ledgers".parse::<LedgerChoice>() {
            Ok(LedgerChoice::Postgres(u)) => {
                assert_eq!(u.redacted(), "postgres://bench:***@10.0.0.5:5433/ledgers")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            "mysql".parse::<LedgerChoice>().unwrap_err(),
            "unknown ledger \"mysql\": use sqlite, postgres (lockbench starts one) or a \
             postgres://user@host:port/db URL"
        );
        let e = "postgres://:pw@/db".parse::<LedgerChoice>().unwrap_err();
        assert!(e.starts_with("--ledger postgres://:***@/db: "), "{e}");
    }
}
