//! [`ReportError`]: what can go wrong reading run directories and writing reports.

use std::io;
use std::path::PathBuf;

/// Errors of the report layer. Path problems are found before any plotting starts.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results directory given on the command line does not exist.
    #[error("results directory {path} does not exist: pass a directory written by `lockbench run` (e.g. results/latest)")]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// A path given as a results directory is a file or something else.
    #[error("{path} is not a directory: pass a run directory such as results/<run-id>")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The directory has no `summary.json` (nor `report.json`).
    #[error("{path} has no summary.json: it is not a lockbench run directory, or the run died before writing one")]
    MissingSummary {
        /// The directory.
        path: PathBuf,
    },
    /// A file could not be read (permissions, I/O error).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A JSON file did not parse as the expected struct.
    #[error("cannot parse {path}: {source} ({})", parse_hint(source))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// A `.hgrm` percentile row did not parse.
    #[error("bad .hgrm row at line {line}: {message}")]
    Hgrm {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A value could not be serialized.
    #[error("cannot serialize {what}: {message}")]
    Serialize {
        /// What was being serialized.
        what: String,
        /// The underlying error.
        message: String,
    },
    /// plotters failed to draw a plot.
    #[error("cannot draw plot {plot}: {message}")]
    Plot {
        /// Plot file stem.
        plot: String,
        /// The backend's message.
        message: String,
    },
    /// The embedded font could not be registered with plotters.
    #[error("embedded font assets/DejaVuSans.ttf is not a valid font: {0}")]
    Font(String),
    /// `compare` / `report` was called with no runs.
    #[error("no runs to report on: pass at least one results directory")]
    NoRuns,
}

/// Why a JSON file may not parse: an empty or cut-short file was cut while being written (full
/// disk, killed process); anything else is another format.
fn parse_hint(e: &serde_json::Error) -> &'static str {
    if e.is_eof() {
        "the file is empty or cut short: it was being written when the disk filled up or the \
         process died; run `lockbench check` on the run directory to rewrite the checker's files"
    } else {
        "was it written by a different lockbench version, or edited by hand?"
    }
}
