//! `work.json`: the work a run's sections did, written in its directory by a run of any work
//! but `row`, so the checker (and `lockbench check` later) judges what that work can take.

use std::path::Path;

use super::CheckError;
use crate::work::WorkKind;

/// The file a run directory names its work in (`{"work": "compute"}`), written by a run of
/// any work but `row`; none (a run before work kinds, or `row` work) is `row`.
pub const WORK_FILE: &str = "work.json";

/// What `work.json` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkMarker {
    /// The work every section of the run did.
    pub work: WorkKind,
}

/// The work of the run in `dir` ([`WORK_FILE`]; `row` when there is none).
///
/// Errors: [`CheckError::Work`] for a `work.json` that cannot be read or parsed.
pub fn read_work(dir: &Path) -> Result<WorkKind, CheckError> {
    let path = dir.join(WORK_FILE);
    if !path.exists() {
        return Ok(WorkKind::Row);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| CheckError::Work {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let marker: WorkMarker = serde_json::from_str(&text).map_err(|e| CheckError::Work {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(marker.work)
}
