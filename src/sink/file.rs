//! Reading a finished `sink.sqlite`.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{Charge, Outcome, SinkError, SinkRequest};

/// Every request of the sink table at `path`, in the sink's order (`seq`).
///
/// # Errors
/// [`SinkError::Open`] when the file cannot be opened; [`SinkError::Format`] when it is not a
/// sink table or holds an outcome it does not know.
pub fn read_requests(path: &Path) -> Result<Vec<SinkRequest>, SinkError> {
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|source| {
            SinkError::Open {
                path: path.to_path_buf(),
                source,
            }
        })?;
    let format = |detail: String| SinkError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let mut stmt = conn
        .prepare(
            "SELECT seq, time_us, job, client, section_id, idempotency_key, outcome, charge_id \
             FROM requests ORDER BY seq",
        )
        .map_err(|e| format(e.to_string()))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, u32>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, Option<i64>>(7)?,
            ))
        })
        .map_err(|e| format(e.to_string()))?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, time_us, job, client, section_id, key, outcome, charge_id) =
            row.map_err(|e| format(e.to_string()))?;
        let outcome: Outcome = outcome
            .parse()
            .map_err(|_| format(format!("request {seq} has the outcome {outcome:?}")))?;
        out.push(SinkRequest {
            seq,
            time_us: time_us.max(0) as u64,
            charge: Charge {
                job,
                client,
                section_id: section_id.max(0) as u64,
            },
            idempotency_key: key,
            outcome,
            charge_id,
        });
    }
    Ok(out)
}
