//! `results/<run-id>/`: created when a run starts, files rewritten atomically as it goes.
//!
//! Every file is written to a temporary name and renamed into place ([`crate::atomic_file`]),
//! so a reader (or a run killed mid-write) never sees half a file. `results/latest` is a
//! relative symlink to the newest run directory.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::atomic_file::AtomicWriteError;

/// Errors creating or writing a run directory.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// The directory or a file in it could not be created or written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The results root (or a directory above it) is a file.
    #[error("{} is a file, not a directory: pass a directory for results (it is created if missing)", path.display())]
    NotADirectory {
        /// The file in the way.
        path: PathBuf,
    },
    /// The results root (or the nearest directory above it that exists) takes no new
    /// directory: read-only, not ours, or a pseudo file system.
    #[error("{}: cannot create a run directory there ({source}): pass a writable --results directory", path.display())]
    NotWritable {
        /// The directory that refused.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A value could not be serialized to JSON.
    #[error("cannot serialize {name}: {source}")]
    Json {
        /// File name being written.
        name: String,
        /// The underlying error.
        source: serde_json::Error,
    },
}

impl RunDirError {
    fn from_atomic(e: AtomicWriteError, name: &str) -> Self {
        match e {
            AtomicWriteError::Io { path, source } => RunDirError::Io { path, source },
            AtomicWriteError::Json { source, .. } => RunDirError::Json {
                name: name.to_string(),
                source,
            },
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One run's output directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
    run_id: String,
    path: PathBuf,
}

impl RunDir {
    /// Creates `root/<UTC time>-<name>/` (adding `-2`, `-3`, … if taken) and points
    /// `root/latest` at it.
    ///
    /// # Errors
    /// [`RunDirError::NotADirectory`] when `root` or a directory above it is a file;
    /// [`RunDirError::Io`] when `root` cannot be created or written (read-only disk, no
    /// permission).
    pub fn create(root: &Path, name: &str) -> Result<Self, RunDirError> {
        let dir = Self::create_unlinked(root, name)?;
        dir.point_latest()?;
        Ok(dir)
    }

    /// Creates `root/<UTC time>-<name>/` like [`RunDir::create`] but leaves `root/latest`
    /// alone: call [`RunDir::point_latest`] once the run has measured something, so a run that
    /// fails to start never becomes `latest`.
    ///
    /// # Errors
    /// As [`RunDir::create`].
    pub fn create_unlinked(root: &Path, name: &str) -> Result<Self, RunDirError> {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        Self::create_named(root, &format!("{stamp}-{name}"))
    }

    /// Checks that `root` can hold run directories: no file at `root` or above it, and the
    /// nearest directory of them that exists (the current one when none does) takes a new
    /// directory (one is made and removed). `run`, `chaos` and `matrix` call this before
    /// anything starts, so a results directory they cannot use is bad input for all three.
    ///
    /// # Errors
    /// [`RunDirError::NotADirectory`] naming the file in the way;
    /// [`RunDirError::NotWritable`] naming the directory that refused.
    pub fn check_root(root: &Path) -> Result<(), RunDirError> {
        let mut nearest = Path::new(".");
        for dir in root.ancestors().filter(|p| !p.as_os_str().is_empty()) {
            match fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => {
                    nearest = dir;
                    break;
                }
                Ok(_) => {
                    return Err(RunDirError::NotADirectory {
                        path: dir.to_path_buf(),
                    })
                }
                Err(_) => continue,
            }
        }
        let probe = nearest.join(format!(".lockbench-write-check-{}", std::process::id()));
        match fs::create_dir(&probe) {
            Ok(()) => {
                let _ = fs::remove_dir(&probe);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(RunDirError::NotWritable {
                path: nearest.to_path_buf(),
                source,
            }),
        }
    }

    /// Creates `parent/<name>/` (adding `-2`, … if taken) without touching `latest`: one
    /// scenario's directory inside a batch directory.
    ///
    /// # Errors
    /// [`RunDirError::Io`] when it cannot be created.
    pub fn create_named(parent: &Path, name: &str) -> Result<Self, RunDirError> {
        Self::check_root(parent)?;
        fs::create_dir_all(parent).map_err(io_err(parent))?;
        // Absolute, so paths handed to other processes (redis-server runs in its own dir) hold.
        let parent = &std::path::absolute(parent).map_err(io_err(parent))?;
        let base = sanitize(name);
        let mut run_id = base.clone();
        let mut n = 1;
        loop {
            let candidate = parent.join(&run_id);
            match fs::create_dir(&candidate) {
                Ok(()) => {
                    return Ok(Self {
                        root: parent.to_path_buf(),
                        run_id,
                        path: candidate,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    n += 1;
                    run_id = format!("{base}-{n}");
                }
                Err(e) => return Err(io_err(&candidate)(e)),
            }
        }
    }

    /// Opens an existing run directory (for `lockbench check` / `report`).
    ///
    /// # Errors
    /// [`RunDirError::Io`] with `NotFound` when `path` is not a directory.
    pub fn open(path: &Path) -> Result<Self, RunDirError> {
        let meta = fs::metadata(path).map_err(io_err(path))?;
        if !meta.is_dir() {
            return Err(io_err(path)(io::Error::new(
                io::ErrorKind::NotFound,
                "not a run directory",
            )));
        }
        let path = path.to_path_buf();
        let run_id = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Self { root, run_id, path })
    }

    /// The directory name, e.g. `20261129T101500Z-single`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Path of a file inside the run directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `bytes` to `name` atomically ([`crate::atomic_file::write`]).
    ///
    /// # Errors
    /// [`RunDirError::Io`] when the file cannot be written or renamed.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), RunDirError> {
        crate::atomic_file::write(&self.file(name), bytes)
            .map_err(|e| RunDirError::from_atomic(e, name))
    }

    /// Writes `value` as pretty JSON to `name` atomically ([`crate::atomic_file::write_json`]).
    ///
    /// # Errors
    /// [`RunDirError::Json`] or [`RunDirError::Io`].
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<(), RunDirError> {
        crate::atomic_file::write_json(&self.file(name), value)
            .map_err(|e| RunDirError::from_atomic(e, name))
    }

    /// Rewrites the files a running strategy keeps current: `summary.json` and
    /// `<strategy>.hgrm` (successful-acquire latency, values in µs).
    ///
    /// # Errors
    /// [`RunDirError`] from either write.
    pub fn write_progress(
        &self,
        summary: &super::RunSummary,
        strategy: &str,
        acquire_ok: &hdrhistogram::Histogram<u64>,
    ) -> Result<(), RunDirError> {
        self.write_json("summary.json", summary)?;
        self.write(
            &format!("{strategy}.hgrm"),
            super::hgrm::percentile_distribution(acquire_ok).as_bytes(),
        )
    }

    /// Removes the servers' data directories (`nodes/<node>/data`: an etcd member's
    /// preallocated 64 MB WAL, a PostgreSQL cluster's ~40 MB) once a run is over, keeping
    /// their logs and configuration; returns the bytes it freed. For runs whose servers'
    /// data nobody reads afterwards (matrix trials and probes: a quick matrix kept ~3 GB).
    ///
    /// # Errors
    /// [`RunDirError::Io`] when a data directory cannot be removed.
    pub fn remove_server_data(&self) -> Result<u64, RunDirError> {
        let nodes = self.path().join("nodes");
        let Ok(entries) = fs::read_dir(&nodes) else {
            return Ok(0); // no local servers (external or docker topology)
        };
        let mut freed = 0;
        for node in entries.flatten() {
            let data = node.path().join("data");
            if data.is_dir() {
                freed += disk_usage(&data);
                fs::remove_dir_all(&data).map_err(io_err(&data))?;
            }
        }
        Ok(freed)
    }

    /// Points `root/latest` at this directory (relative link, replaced atomically).
    ///
    /// # Errors
    /// [`RunDirError::Io`] when the link cannot be written.
    pub fn point_latest(&self) -> Result<(), RunDirError> {
        let link = self.root.join("latest");
        let tmp = self.root.join(format!(".latest.{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&self.run_id, &tmp).map_err(io_err(&tmp))?;
        fs::rename(&tmp, &link).map_err(io_err(&link))
    }
}

/// Bytes under `path` (files only; unreadable entries count 0).
fn disk_usage(path: &Path) -> u64 {
    fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_usage(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Keeps `[A-Za-z0-9._-]`, replaces everything else with `-` (directory and file names).
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The run directories (those holding a `summary.json`) strictly below `path`, at most
/// `depth` levels down, sorted: a batch of scenarios one level down, a matrix's trials four
/// (`trials/<strategy>/<fault>/t<k>`). A run directory's own subdirectories are not searched.
pub fn run_dirs_below(path: &Path, depth: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![path.to_path_buf()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
                if !p.is_dir() || p.is_symlink() {
                    continue;
                }
                if p.join("summary.json").is_file() {
                    found.push(p);
                } else {
                    next.push(p);
                }
            }
        }
        level = next;
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_unique_dirs_and_latest_follows_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let a = RunDir::create(tmp.path(), "single").unwrap();
        let b = RunDir::create(tmp.path(), "single").unwrap();
        assert_ne!(a.run_id(), b.run_id());
        let latest = fs::read_link(tmp.path().join("latest")).unwrap();
        assert_eq!(latest, PathBuf::from(b.run_id()));
        b.write_json("summary.json", &serde_json::json!({"x": 1}))
            .unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&fs::read(tmp.path().join("latest/summary.json")).unwrap())
                .unwrap();
        assert_eq!(back["x"], 1);
        assert!(!b.file(".summary.json.tmp").exists());
    }

    #[test]
    fn sanitizes_names() {
        assert_eq!(sanitize("a b/c"), "a-b-c");
    }

    #[test]
    fn unwritable_root_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let err = RunDir::create(&file, "x").unwrap_err();
        assert!(err.to_string().contains("not-a-dir"), "{err}");
        assert!(err.to_string().contains("is a file"), "{err}");
        // A file above the root is named too.
        let err = RunDir::create(&file.join("sub"), "x").unwrap_err();
        assert!(
            err.to_string()
                .contains("not-a-dir is a file, not a directory"),
            "{err}"
        );
    }

    #[test]
    fn unlinked_dirs_leave_latest_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let a = RunDir::create(tmp.path(), "a").unwrap();
        let b = RunDir::create_unlinked(tmp.path(), "b").unwrap();
        let latest = || fs::read_link(tmp.path().join("latest")).unwrap();
        assert_eq!(latest(), PathBuf::from(a.run_id()));
        b.point_latest().unwrap();
        assert_eq!(latest(), PathBuf::from(b.run_id()));
    }
}
