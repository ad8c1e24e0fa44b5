//! Writing report files atomically (temporary name + rename), so a reader never sees half a file.

use std::fs;
use std::path::Path;

use super::error::ReportError;

/// Writes `bytes` to `path` through `.<name>.tmp` in the same directory, then renames.
///
/// # Errors
/// [`ReportError::Write`] naming the path that failed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, bytes).map_err(|source| ReportError::Write {
        path: tmp.clone(),
        source,
    })?;
    fs::rename(&tmp, path).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Checks that `dir` exists and is a directory before a writer starts drawing.
///
/// # Errors
/// [`ReportError::NotFound`] or [`ReportError::NotADirectory`].
pub(crate) fn check_output_dir(dir: &Path) -> Result<(), ReportError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(ReportError::NotADirectory {
            path: dir.to_path_buf(),
        }),
        Err(_) => Err(ReportError::NotFound {
            path: dir.to_path_buf(),
        }),
    }
}
