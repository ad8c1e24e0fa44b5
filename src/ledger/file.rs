//! Reading a finished ledger (the checker's side).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::{FenceMode, LedgerError, LedgerEvent, RejectReason};

pub struct LedgerFile {
    conn: Connection,
    path: PathBuf,
    mode: FenceMode,
}

impl LedgerFile {
    /// Opens `path` read-only.
    ///
    /// Errors: [`LedgerError::Open`], [`LedgerError::Format`] if `meta` lacks a valid `fence_mode`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        let path = path.as_ref().to_path_buf();
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| LedgerError::Open {
            path: path.clone(),
            source,
        })?;
        let format = |detail: String| LedgerError::Format {
            path: path.clone(),
            detail,
        };
        let mode: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'fence_mode'", [], |r| {
                r.get(0)
            })
            .map_err(|e| format(format!("no fence_mode in meta ({e})")))?;
        let mode = mode.parse().map_err(format)?;
        Ok(Self { conn, path, mode })
    }

    /// The fence mode the run used.
    pub fn mode(&self) -> FenceMode {
        self.mode
    }

    /// Final counter per resource, sorted by resource.
    pub fn counters(&self) -> Result<Vec<(String, i64)>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare("SELECT resource, counter FROM resources ORDER BY resource")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Calls `f` on every event in commit order, streaming (constant memory).
    pub fn for_each_event(&self, f: impl FnMut(LedgerEvent)) -> Result<(), LedgerError> {
        self.for_each_event_after(0, f)
    }

    /// Calls `f` on every event committed after `seq` (`events.seq > seq`), in commit order.
    /// Reading a ledger that a run is still writing (WAL: a reader sees whole commits only)
    /// gives each commit once when called again with the last `seq` `f` saw: the live metrics'
    /// ledger watch does that.
    pub fn for_each_event_after(
        &self,
        seq: i64,
        mut f: impl FnMut(LedgerEvent),
    ) -> Result<(), LedgerError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, time_us, section_id, client, resource, fencing_token, step, value, accepted, reason
             FROM events WHERE seq > ?1 ORDER BY seq",
        )?;
        let mut rows = stmt.query([seq])?;
        while let Some(r) = rows.next()? {
            let step: String = r.get(6)?;
            let reason: Option<String> = r.get(9)?;
            let bad = |d: String| LedgerError::Format {
                path: self.path.clone(),
                detail: d,
            };
            f(LedgerEvent {
                seq: r.get(0)?,
                time_us: r.get::<_, i64>(1)? as u64,
                section_id: r.get::<_, i64>(2)? as u64,
                client: r.get(3)?,
                resource: r.get(4)?,
                fencing_token: r.get::<_, Option<i64>>(5)?.map(|t| t as u64),
                step: step.parse().map_err(bad)?,
                value: r.get(7)?,
                accepted: r.get(8)?,
                reason: match reason.as_deref() {
                    None => None,
                    Some("stale") => Some(RejectReason::Stale),
                    Some("duplicate") => Some(RejectReason::Duplicate),
                    Some(o) => return Err(bad(format!("unknown reason {o:?}"))),
                },
            });
        }
        Ok(())
    }
}
