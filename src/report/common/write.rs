//! Writing report files atomically through [`crate::atomic_file`], so a reader never sees half a file.

use std::fs;
use std::path::Path;

use crate::atomic_file::AtomicWriteError;
use crate::report::error::ReportError;

/// Writes `bytes` to `path` atomically ([`crate::atomic_file::write`]: `.<name>.tmp` in the same
/// directory, then rename).
///
/// # Errors
/// [`ReportError::Write`] naming the path that failed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    crate::atomic_file::write(path, bytes).map_err(|e| match e {
        AtomicWriteError::Io { path, source } => ReportError::Write { path, source },
        // `write` takes bytes: nothing to serialize.
        AtomicWriteError::Json { path, source } => ReportError::Write {
            path,
            source: source.into(),
        },
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
