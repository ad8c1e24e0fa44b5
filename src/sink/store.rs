//! The sink's table and what a request does to it, synchronous: one transaction per step.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::{Charge, Outcome, SinkError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY, time_us INTEGER NOT NULL, job TEXT NOT NULL,
    client INTEGER NOT NULL, section_id INTEGER NOT NULL, idempotency_key TEXT,
    outcome TEXT NOT NULL, charge_id INTEGER);
CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, charge_id INTEGER) WITHOUT ROWID;
";

/// Where a keyed request stands after [`SinkStore::claim_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key is new: it is now in flight and the request goes on to [`SinkStore::apply`].
    Fresh,
    /// The key's first request is still in flight: recorded as a conflict (`409`).
    InFlight,
    /// The key was applied as this charge: recorded as a replay.
    Applied(i64),
}

/// The sink's SQLite table (`sink.sqlite`).
pub struct SinkStore {
    conn: Connection,
    path: PathBuf,
}

impl SinkStore {
    /// Creates the table at `path` (a new or empty file), WAL, `synchronous = NORMAL`.
    ///
    /// # Errors
    /// [`SinkError::Open`]; [`SinkError::NotEmpty`] when it already holds requests.
    pub fn create(path: &Path) -> Result<SinkStore, SinkError> {
        let open = |source| SinkError::Open {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(open)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(open)?;
        conn.execute_batch(SCHEMA).map_err(open)?;
        let held: i64 = conn.query_row("SELECT count(*) FROM requests", [], |r| r.get(0))?;
        if held > 0 {
            return Err(SinkError::NotEmpty {
                path: path.to_path_buf(),
            });
        }
        Ok(SinkStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Folds the WAL into the file (at the end of a run, so the file alone is the table).
    ///
    /// # Errors
    /// [`SinkError::Sql`].
    pub fn checkpoint(&self) -> Result<(), SinkError> {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }

    /// The first step of a request with an idempotency key, at `time_us` on the run clock:
    /// marks a new key in flight, or records the repeat of a known one.
    ///
    /// # Errors
    /// [`SinkError::Sql`].
    pub fn claim_key(
        &mut self,
        time_us: u64,
        charge: &Charge,
        key: &str,
    ) -> Result<KeyClaim, SinkError> {
        let tx = self.conn.transaction()?;
        let known: Option<Option<i64>> = tx
            .query_row(
                "SELECT charge_id FROM idempotency WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()?;
        let claim = match known {
            None => {
                tx.execute(
                    "INSERT INTO idempotency (key, charge_id) VALUES (?1, NULL)",
                    [key],
                )?;
                KeyClaim::Fresh
            }
            Some(None) => {
                insert(&tx, time_us, charge, Some(key), Outcome::Conflict, None)?;
                KeyClaim::InFlight
            }
            Some(Some(id)) => {
                insert(&tx, time_us, charge, Some(key), Outcome::Replayed, Some(id))?;
                KeyClaim::Applied(id)
            }
        };
        tx.commit()?;
        Ok(claim)
    }

    /// Applies every `(time_us, charge)` without a key in one transaction, as
    /// [`apply`](Self::apply) would one by one (synthetic runs for benchmarks).
    ///
    /// # Errors
    /// [`SinkError::Sql`].
    pub fn apply_batch(&mut self, charges: &[(u64, Charge)]) -> Result<(), SinkError> {
        let tx = self.conn.transaction()?;
        for (time_us, charge) in charges {
            let id = insert(&tx, *time_us, charge, None, Outcome::Applied, None)?;
            tx.execute("UPDATE requests SET charge_id = ?1 WHERE seq = ?1", [id])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Applies a charge at `time_us` (for a keyed request, after a [`KeyClaim::Fresh`]) and
    /// returns its id (the `seq` of its row).
    ///
    /// # Errors
    /// [`SinkError::Sql`].
    pub fn apply(
        &mut self,
        time_us: u64,
        charge: &Charge,
        key: Option<&str>,
    ) -> Result<i64, SinkError> {
        let tx = self.conn.transaction()?;
        let id = insert(&tx, time_us, charge, key, Outcome::Applied, None)?;
        tx.execute("UPDATE requests SET charge_id = ?1 WHERE seq = ?1", [id])?;
        if let Some(k) = key {
            tx.execute(
                "UPDATE idempotency SET charge_id = ?1 WHERE key = ?2",
                params![id, k],
            )?;
        }
        tx.commit()?;
        Ok(id)
    }
}

fn insert(
    tx: &rusqlite::Transaction<'_>,
    time_us: u64,
    charge: &Charge,
    key: Option<&str>,
    outcome: Outcome,
    charge_id: Option<i64>,
) -> Result<i64, SinkError> {
    tx.execute(
        "INSERT INTO requests (time_us, job, client, section_id, idempotency_key, outcome, \
         charge_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            time_us as i64,
            charge.job,
            charge.client,
            charge.section_id as i64,
            key,
            <&'static str>::from(outcome),
            charge_id
        ],
    )?;
    Ok(tx.last_insert_rowid())
}
