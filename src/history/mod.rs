//! The history: the ordered record of every client operation and every fault window of a run.
//!
//! Each client operation is recorded twice: an [`OpKind::Invoke`] when it starts, then one
//! completion, [`OpKind::Ok`], [`OpKind::Fail`] (it certainly did not take effect) or
//! [`OpKind::Info`] (the outcome is unknown, e.g. a timeout). Faults injected by the nemesis are
//! recorded as [`FaultWindow`]s (once when they start, `end_us: None`, and again when healed, same
//! `id`), a client that dies while it may hold leases is recorded as a [`ClientCrash`], and the
//! moment the workload stopped as a [`RunEnd`].
//!
//! All times are µs on one monotonic [`RunClock`] (µs since the run started), shared by the
//! driver, the nemesis and the [ledger](crate::ledger), so the checker can compare them.
//!
//! ## File format: `results/<run>/history.jsonl`
//! One JSON object per line, tagged by `type`, in recording order (`index` grows by one per
//! record and `time_us` never decreases):
//! ```text
//! {"type":"op","index":0,"time_us":15,"client":3,"kind":"invoke","f":"acquire","resource":"r0","ttl_ms":1000,"strategy":"single"}
//! {"type":"op","index":1,"time_us":410,"client":3,"kind":"ok","f":"acquire","resource":"r0","owner":"c3-0","fencing_token":7,"validity_deadline_us":990015,"ttl_ms":1000}
//! {"type":"fault","id":1,"kind":"client-pause","targets":["client:3"],"start_us":500,"end_us":null,"detail":"duration = 800ms; paused, renewal frozen"}
//! {"type":"crash","index":2,"time_us":600,"client":3}
//! {"type":"run-end","index":3,"time_us":30000000}
//! ```
//! The `run-end` mark ([`RunEnd`]) says when the workload stopped; the drain's last
//! completions follow it.
//!
//! ## Recording
//! [`HistoryWriter::create`] starts one writer thread that owns a `BufWriter` on the file and is
//! fed through a bounded channel ([`CHANNEL_CAPACITY`] events), so memory stays bounded however long
//! the run is. The writer polls the channel (so recording never wakes a thread), flushes when the
//! channel runs empty (at most every 10 ms) and at least every 100 ms, so a crash of the process
//! loses at most the last moments. [`HistoryRecorder`] is the cheap `Clone`
//! handle the clients hold; [`HistoryRecorder::disabled`] records nothing (for pure benchmarks) but
//! still hands out indexes and times.

use std::path::PathBuf;
use std::time::Instant;

mod event;
mod reader;
mod recorder;
#[cfg(test)]
mod tests;
mod writer;

pub use event::{ClientCrash, ErrorKind, FaultWindow, HistoryEvent, Op, OpFn, OpKind, RunEnd};
pub use reader::{read_history, HistoryReader};
pub use recorder::{HistoryRecorder, Stamp};
pub use writer::{write_events, HistoryWriter};

/// How many events may wait in the channel to the writer thread before `record` waits.
pub const CHANNEL_CAPACITY: usize = 65_536;

/// Errors of the history layer.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Writing the history failed while the run was going (disk full, I/O error): the events
    /// from then on are not in the file, so it cannot support a verdict.
    #[error(
        "history file {path} could not be written: {source}; {written} event(s) reached it (the \
         last one may be cut), {lost} later event(s) are missing"
    )]
    WriteFailed {
        /// The file.
        path: PathBuf,
        /// Events handed to the file before the failure.
        written: u64,
        /// Events recorded after it, never written.
        lost: u64,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The history file could not be created, written or read.
    #[error("history file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid history event.
    #[error("history file {path}, line {line}: not a history event ({source}); the file is corrupt or from another lockbench version")]
    Parse {
        path: PathBuf,
        line: u64,
        #[source]
        source: serde_json::Error,
    },
    /// The last line is incomplete (the run was killed while writing it). Events before it are intact.
    #[error("history file {path}, line {line}: last line is incomplete (the run stopped while writing it)")]
    Truncated { path: PathBuf, line: u64 },
    /// The writer thread stopped before `finish`.
    #[error("history writer thread for {path} panicked")]
    WriterPanicked { path: PathBuf },
}

/// One monotonic clock for a whole run: µs since the run started.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    start: Instant,
}

impl RunClock {
    /// Starts a clock now (time 0).
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// A clock whose time 0 is `start`.
    pub fn from_instant(start: Instant) -> Self {
        Self { start }
    }

    /// The instant of time 0.
    pub fn origin(&self) -> Instant {
        self.start
    }

    /// µs since time 0.
    pub fn now_us(&self) -> u64 {
        self.us_at(Instant::now())
    }

    /// µs from time 0 to `at` (0 if `at` is earlier).
    pub fn us_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_micros() as u64
    }
}
