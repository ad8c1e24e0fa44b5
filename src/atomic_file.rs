//! Writing a result file atomically: the one writer behind every file of a run directory
//! (`summary.json`, `checker.json`, `expectations.json`, `.hgrm`, matrix and report exports).
//!
//! The bytes go to `.<name>.tmp` in the target's directory, which is then renamed over the
//! target. A rename within one directory replaces the file in one step, so a reader (a report
//! drawn while the run goes on, `lockbench check` on a live run) or a run killed mid-write sees
//! the previous file or the new one, never half of one. The temporary file is removed when the
//! write fails. No `fsync`: the guarantee is against concurrent readers and killed processes,
//! not against power loss.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Errors of [`write()`] and [`write_json`].
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// The temporary file could not be written, or not renamed over the target.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The path that failed: the temporary file when writing it failed, else the target.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The value could not be serialized to JSON (nothing was written).
    #[error("cannot serialize {}: {source}", path.display())]
    Json {
        /// The target path.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
}

/// The temporary file [`write()`] goes through for `path`: `.<file name>.tmp` next to it.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Writes `bytes` to `path` atomically (temporary file in the same directory, then rename).
///
/// # Errors
/// [`AtomicWriteError::Io`] naming the temporary file when it cannot be written (missing
/// directory, no permission, disk full), or the target when the rename fails.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    let tmp = temp_path(path);
    if let Err(source) = fs::write(&tmp, bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(AtomicWriteError::Io { path: tmp, source });
    }
    fs::rename(&tmp, path).map_err(|source| {
        let _ = fs::remove_file(&tmp);
        AtomicWriteError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Writes `value` to `path` as pretty JSON followed by a newline, atomically ([`write()`]).
///
/// # Errors
/// [`AtomicWriteError::Json`] when `value` does not serialize (e.g. a map with non-string
/// keys); [`AtomicWriteError::Io`] as [`write()`].
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), AtomicWriteError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| AtomicWriteError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checker.json");
        fs::write(&path, b"old").unwrap();
        write_json(&path, &serde_json::json!({"verdict": "valid"})).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"), "{text:?}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["verdict"], "valid");
        assert_eq!(temp_path(&path), dir.path().join(".checker.json.tmp"));
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn a_missing_directory_names_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone/summary.json");
        let err = write(&path, b"x").unwrap_err();
        assert!(err.to_string().contains(".summary.json.tmp"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn a_failed_rename_keeps_the_old_file_and_removes_the_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory at the target: the rename fails.
        let path = dir.path().join("matrix.json");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("keep"), b"x").unwrap();
        let err = write(&path, b"{}").unwrap_err();
        assert!(err.to_string().contains("matrix.json"), "{err}");
        assert!(path.join("keep").exists());
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn a_value_that_does_not_serialize_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let err = write_json(&path, &bad).unwrap_err();
        assert!(matches!(err, AtomicWriteError::Json { .. }), "{err}");
        assert!(!path.exists() && !temp_path(&path).exists());
    }
}
