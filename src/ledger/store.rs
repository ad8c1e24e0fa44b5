//! The ledger's storage: the schema, the step logic (the fencing check in SQL) and the writer
//! of the `events` log.
//!
//! A step's effect on the resource (fence check, counter read or write, idempotency) runs as
//! SQL statements at once; its `events` row gets its `seq` at once too (the ledger is the
//! only writer, so it numbers rows itself) but is inserted with the other rows of the same
//! transaction in multi-row `INSERT`s just before the commit ([`EventLog::flush`]). Nothing
//! reads `events` inside a transaction, so the file holds exactly what one `INSERT` per step
//! would have written, for a fraction of the statements.

use std::path::Path;
use std::sync::OnceLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::{FenceMode, LedgerError, RejectReason, SectionRef, Step, StepOutcome};

/// The schema. `resources` and `idempotency` are keyed by text and stored `WITHOUT ROWID`
/// (one B-tree each, not a table plus an index: half the pages a scattered update dirties).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resources (resource TEXT PRIMARY KEY, counter INTEGER NOT NULL DEFAULT 0, fence INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, time_us INTEGER NOT NULL, section_id INTEGER NOT NULL,
    client INTEGER NOT NULL, resource TEXT NOT NULL, fencing_token INTEGER, step TEXT NOT NULL,
    value INTEGER, accepted INTEGER NOT NULL, reason TEXT, idempotency_key TEXT);
";

/// WAL pages between automatic checkpoints (16,384 × 4 KiB = 64 MiB). Each checkpoint copies
/// the hot pages back and fsyncs; at SQLite's default (1,000 pages) it was a fifth of the
/// ledger thread's CPU. The ledger is checkpointed (TRUNCATE) when it closes.
const LEDGER_WAL_PAGES: i64 = 16_384;

/// Synchronous ledger: one transaction per step, caller-supplied timestamps. Used by
/// [`Ledger`](super::Ledger)'s thread, by hand-built test ledgers and by the synthetic history
/// generator.
pub struct LedgerStore {
    pub(super) conn: Connection,
    pub(super) mode: FenceMode,
    /// The `seq` the next event row gets (1 in a new ledger).
    pub(super) next_seq: i64,
}

impl LedgerStore {
    /// Creates the schema in a new or empty file at `path` and records the mode.
    ///
    /// Errors: [`LedgerError::Open`], [`LedgerError::NotEmpty`] if it already holds events.
    pub fn create(path: impl AsRef<Path>, mode: FenceMode) -> Result<Self, LedgerError> {
        let path = path.as_ref();
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "wal_autocheckpoint", LEDGER_WAL_PAGES)
            .map_err(open_err)?;
        conn.execute_batch(SCHEMA).map_err(open_err)?;
        let used: i64 = conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .map_err(open_err)?;
        if used > 0 {
            return Err(LedgerError::NotEmpty {
                path: path.to_path_buf(),
            });
        }
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('fence_mode', ?1), ('schema_version', '1')",
            [mode.as_str()],
        )
        .map_err(open_err)?;
        Ok(Self {
            conn,
            mode,
            next_seq: 1,
        })
    }

    /// The fence mode.
    pub fn mode(&self) -> FenceMode {
        self.mode
    }

    /// Begin step at `time_us`. In fenced mode it is rejected if a higher token was accepted.
    pub fn begin(&mut self, s: &SectionRef, time_us: u64) -> Result<StepOutcome, LedgerError> {
        self.one(Step::Begin, s, None, time_us)
    }

    /// Read step: returns the counter.
    pub fn read(&mut self, s: &SectionRef, time_us: u64) -> Result<i64, LedgerError> {
        Ok(self.one(Step::Read, s, None, time_us)?.value.unwrap_or(0))
    }

    /// Write step: sets the counter to `value` unless fenced out or a duplicate.
    pub fn write(
        &mut self,
        s: &SectionRef,
        value: i64,
        time_us: u64,
    ) -> Result<StepOutcome, LedgerError> {
        self.one(Step::Write, s, Some(value), time_us)
    }

    /// End step (`crashed = true` logs `crash`: the holder died inside).
    pub fn end(
        &mut self,
        s: &SectionRef,
        crashed: bool,
        time_us: u64,
    ) -> Result<StepOutcome, LedgerError> {
        let step = if crashed { Step::Crash } else { Step::End };
        self.one(step, s, None, time_us)
    }

    /// Applies many steps `(step, section, value, time_us)` in order in one transaction (bulk
    /// loading, e.g. synthetic histories); any error rolls the whole batch back.
    pub fn apply_batch<'a>(
        &mut self,
        steps: impl IntoIterator<Item = (Step, &'a SectionRef, Option<i64>, u64)>,
    ) -> Result<Vec<StepOutcome>, LedgerError> {
        let tx = self.conn.transaction()?;
        let mut log = EventLog::starting_at(self.next_seq);
        let mut out = Vec::new();
        for (step, s, value, time_us) in steps {
            out.push(apply_step(
                &tx, self.mode, &mut log, step, s, value, time_us, false,
            )?);
        }
        log.flush(&tx)?;
        tx.commit()?;
        self.next_seq = log.next_seq();
        Ok(out)
    }

    fn one(
        &mut self,
        step: Step,
        s: &SectionRef,
        value: Option<i64>,
        time_us: u64,
    ) -> Result<StepOutcome, LedgerError> {
        Ok(self.apply_batch([(step, s, value, time_us)])?[0])
    }
}

/// One `events` row waiting for its `INSERT`.
struct EventRow<'a> {
    seq: i64,
    time_us: u64,
    section: &'a SectionRef,
    step: Step,
    value: Option<i64>,
    accepted: bool,
    reason: Option<RejectReason>,
}

/// The event rows of one transaction, numbered as they are logged and inserted by
/// [`flush`](Self::flush) before the commit.
pub(super) struct EventLog<'a> {
    next_seq: i64,
    pending: Vec<EventRow<'a>>,
}

/// Rows per multi-row `INSERT` (11 parameters each); a shorter tail is inserted in the
/// power-of-two chunks below this, so at most six distinct statements are ever prepared.
const ROWS_PER_INSERT: usize = 32;

/// `INSERT INTO events … VALUES (…), (…)` for `rows` rows (a power of two ≤ [`ROWS_PER_INSERT`]).
fn insert_sql(rows: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=ROWS_PER_INSERT.trailing_zeros())
            .map(|k| {
                let row = format!("({})", ["?"; 11].join(", "));
                format!(
                    "INSERT INTO events(seq, time_us, section_id, client, resource, fencing_token, \
                     step, value, accepted, reason, idempotency_key) VALUES {}",
                    vec![row; 1 << k].join(", ")
                )
            })
            .collect()
    });
    &all[rows.trailing_zeros() as usize]
}

impl<'a> EventLog<'a> {
    /// An empty log whose first row gets `seq`.
    pub(super) fn starting_at(seq: i64) -> Self {
        Self {
            next_seq: seq,
            pending: Vec::new(),
        }
    }

    /// The `seq` the next row would get.
    pub(super) fn next_seq(&self) -> i64 {
        self.next_seq
    }

    /// Inserts every pending row, in `seq` order.
    pub(super) fn flush(&mut self, conn: &Connection) -> Result<(), rusqlite::Error> {
        let mut rest = &self.pending[..];
        while !rest.is_empty() {
            let n = if rest.len() >= ROWS_PER_INSERT {
                ROWS_PER_INSERT
            } else {
                1 << (usize::BITS - 1 - rest.len().leading_zeros())
            };
            let (chunk, tail) = rest.split_at(n);
            let mut stmt = conn.prepare_cached(insert_sql(n))?;
            for (i, row) in chunk.iter().enumerate() {
                let at = i * 11;
                let s = row.section;
                stmt.raw_bind_parameter(at + 1, row.seq)?;
                stmt.raw_bind_parameter(at + 2, row.time_us as i64)?;
                stmt.raw_bind_parameter(at + 3, s.section_id as i64)?;
                stmt.raw_bind_parameter(at + 4, s.client)?;
                stmt.raw_bind_parameter(at + 5, &s.resource)?;
                stmt.raw_bind_parameter(at + 6, s.fencing_token.map(|t| t as i64))?;
                stmt.raw_bind_parameter(at + 7, row.step.as_str())?;
                stmt.raw_bind_parameter(at + 8, row.value)?;
                stmt.raw_bind_parameter(at + 9, row.accepted)?;
                stmt.raw_bind_parameter(at + 10, row.reason.map(RejectReason::as_str))?;
                stmt.raw_bind_parameter(at + 11, &s.idempotency_key)?;
            }
            stmt.raw_execute()?;
            rest = tail;
        }
        self.pending.clear();
        Ok(())
    }
}

/// Runs one step inside the caller's transaction and logs its row in `log`. `known_resource`:
/// the resource's row is known to exist already (skips the `INSERT OR IGNORE`). On an error
/// nothing is logged and `log`'s numbering is unchanged (a savepoint around the call undoes
/// the statements).
#[allow(clippy::too_many_arguments)]
pub(super) fn apply_step<'a>(
    conn: &Connection,
    mode: FenceMode,
    log: &mut EventLog<'a>,
    step: Step,
    s: &'a SectionRef,
    value: Option<i64>,
    time_us: u64,
    known_resource: bool,
) -> Result<StepOutcome, LedgerError> {
    let token = s.fencing_token.map(|t| t as i64);
    if mode == FenceMode::Fenced && token.is_none() && matches!(step, Step::Begin | Step::Write) {
        return Err(LedgerError::MissingToken {
            section_id: s.section_id,
        });
    }
    if !known_resource && !matches!(step, Step::End | Step::Crash) {
        conn.prepare_cached("INSERT OR IGNORE INTO resources(resource) VALUES (?1)")?
            .execute([&s.resource])?;
    }
    let mut logged_value = value;
    let mut reason = None;
    let accepted = match step {
        Step::Begin => match mode {
            FenceMode::Fenced => {
                conn.prepare_cached(
                    "UPDATE resources SET fence = ?2 WHERE resource = ?1 AND (fence IS NULL OR fence <= ?2)",
                )?
                .execute(params![s.resource, token])?
                    == 1
            }
            FenceMode::Unfenced => true,
        },
        Step::Read => {
            let v: i64 = conn
                .prepare_cached("SELECT counter FROM resources WHERE resource = ?1")?
                .query_row([&s.resource], |r| r.get(0))?;
            logged_value = Some(v);
            true
        }
        Step::Write => {
            let dup = match &s.idempotency_key {
                Some(k) => conn
                    .prepare_cached("SELECT seq FROM idempotency WHERE key = ?1")?
                    .query_row([k], |r| r.get::<_, i64>(0))
                    .optional()?
                    .is_some(),
                None => false,
            };
            if dup {
                reason = Some(RejectReason::Duplicate);
                false
            } else {
                let changed = match mode {
                    FenceMode::Fenced => conn
                        .prepare_cached(
                            "UPDATE resources SET counter = ?2, fence = ?3 WHERE resource = ?1 AND (fence IS NULL OR fence <= ?3)",
                        )?
                        .execute(params![s.resource, value, token])?,
                    FenceMode::Unfenced => conn
                        .prepare_cached("UPDATE resources SET counter = ?2 WHERE resource = ?1")?
                        .execute(params![s.resource, value])?,
                };
                changed == 1
            }
        }
        Step::End | Step::Crash => true,
    };
    if !accepted && reason.is_none() {
        reason = Some(RejectReason::Stale);
    }
    let seq = log.next_seq;
    if accepted && step == Step::Write {
        if let Some(k) = &s.idempotency_key {
            conn.prepare_cached("INSERT INTO idempotency(key, seq) VALUES (?1, ?2)")?
                .execute(params![k, seq])?;
        }
    }
    log.pending.push(EventRow {
        seq,
        time_us,
        section: s,
        step,
        value: logged_value,
        accepted,
        reason,
    });
    log.next_seq += 1;
    Ok(StepOutcome {
        seq,
        accepted,
        value: logged_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_statements_have_one_placeholder_per_column_of_every_row() {
        for rows in [1, 2, 4, 8, 16, 32] {
            assert_eq!(insert_sql(rows).matches('?').count(), rows * 11, "{rows}");
        }
    }

    #[test]
    fn a_flush_of_any_length_inserts_every_row_in_seq_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Unfenced).unwrap();
        let sections: Vec<SectionRef> = (0..77u64)
            .map(|id| SectionRef {
                section_id: id,
                client: id as u32 % 5,
                resource: format!("r{}", id % 3),
                fencing_token: None,
                idempotency_key: None,
            })
            .collect();
        let out = store
            .apply_batch(
                sections
                    .iter()
                    .map(|s| (Step::End, s, None, s.section_id * 10)),
            )
            .unwrap();
        assert_eq!(out.last().unwrap().seq, 77);
        let rows: Vec<(i64, i64, i64, String)> = store
            .conn
            .prepare("SELECT seq, time_us, section_id, resource FROM events ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 77);
        for (i, (seq, time_us, id, resource)) in rows.into_iter().enumerate() {
            assert_eq!(
                (seq, time_us, id, resource),
                (i as i64 + 1, i as i64 * 10, i as i64, format!("r{}", i % 3))
            );
        }
        // The next transaction goes on numbering where this one stopped.
        assert_eq!(store.begin(&sections[0], 999).unwrap().seq, 78);
    }
}
