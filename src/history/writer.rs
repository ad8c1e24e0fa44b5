//! [`HistoryWriter`]: the thread that streams recorded events to `history.jsonl`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::recorder::{Msg, RecorderInner};
use super::{HistoryError, HistoryEvent, HistoryRecorder, RunClock, CHANNEL_CAPACITY};
use crate::recording::RecordingPriority;

/// Longest time the writer keeps written events in its buffer before flushing.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// When the channel runs empty, buffered events are flushed if the last flush is this old.
const IDLE_FLUSH_EVERY: Duration = Duration::from_millis(10);

/// How long the idle writer sleeps before looking at the channel again.
const IDLE_POLL: Duration = Duration::from_millis(1);

/// Owner of the writer thread that streams events to `history.jsonl`.
pub struct HistoryWriter {
    path: PathBuf,
    recorder: HistoryRecorder,
    thread: Option<JoinHandle<WriterEnd>>,
    /// Set when the writer should finish: it drains at the normal priority.
    closing: Arc<AtomicBool>,
}

impl HistoryWriter {
    /// Creates (truncates) `path` and starts the writer thread.
    ///
    /// Errors: [`HistoryError::Io`] if the file cannot be created.
    pub fn create(path: impl AsRef<Path>, clock: RunClock) -> Result<Self, HistoryError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| HistoryError::Io {
            path: path.clone(),
            source,
        })?;
        let (tx, rx) = mpsc::sync_channel::<Msg>(CHANNEL_CAPACITY);
        let queued = Arc::new(AtomicU64::new(0));
        let backlog = queued.clone();
        let closing = Arc::new(AtomicBool::new(false));
        let hurry = closing.clone();
        let failed = Arc::new(AtomicBool::new(false));
        let failing = failed.clone();
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || {
                let mut written = 0;
                let result = write_loop(
                    BufWriter::with_capacity(1 << 16, file),
                    &rx,
                    (&backlog, &hurry),
                    &mut written,
                );
                match result {
                    Ok(()) => WriterEnd {
                        written,
                        failure: None,
                    },
                    Err(e) => {
                        failing.store(true, Ordering::Release);
                        // What was queued behind the failure is lost; count it.
                        let queued = rx.try_iter().filter(|m| matches!(m, Msg::Event(_))).count();
                        WriterEnd {
                            written,
                            failure: Some((e, queued as u64)),
                        }
                    }
                }
            })
            .map_err(|source| HistoryError::Io {
                path: path.clone(),
                source,
            })?;
        let recorder = HistoryRecorder {
            inner: Arc::new(RecorderInner {
                clock,
                next: Mutex::new(0),
                tx: Some(tx),
                dropped: AtomicU64::new(0),
                queued,
                failed,
            }),
        };
        Ok(Self {
            path,
            recorder,
            thread: Some(thread),
            closing,
        })
    }

    /// A handle for the clients.
    pub fn recorder(&self) -> HistoryRecorder {
        self.recorder.clone()
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes everything recorded so far, flushes, stops the thread and returns how many events
    /// were written. Events recorded afterwards (by leftover handles) are dropped and counted.
    ///
    /// Errors: [`HistoryError::WriteFailed`] if any write failed during the run (with how many
    /// events reached the file and how many are missing).
    pub fn finish(mut self) -> Result<u64, HistoryError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<u64, HistoryError> {
        let Some(thread) = self.thread.take() else {
            return Ok(0);
        };
        self.closing.store(true, Ordering::Relaxed);
        if let Some(tx) = &self.recorder.inner.tx {
            let _ = tx.send(Msg::Close);
        }
        match thread.join() {
            Ok(WriterEnd {
                written,
                failure: None,
            }) => Ok(written),
            Ok(WriterEnd {
                written,
                failure: Some((source, queued)),
            }) => Err(HistoryError::WriteFailed {
                path: self.path.clone(),
                written,
                lost: queued + self.recorder.dropped(),
                source,
            }),
            Err(_) => Err(HistoryError::WriterPanicked {
                path: self.path.clone(),
            }),
        }
    }
}

impl Drop for HistoryWriter {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The writer thread's loop. It runs at idle priority while its backlog is under a quarter of
/// the channel and at the normal one above that (see [`crate::recording`]), so the channel
/// fills, and `record` waits, only when the disk or the CPU cannot keep up at all.
fn write_loop(
    mut out: BufWriter<File>,
    rx: &mpsc::Receiver<Msg>,
    (backlog, closing): (&AtomicU64, &AtomicBool),
    written: &mut u64,
) -> Result<(), std::io::Error> {
    let mut priority =
        RecordingPriority::new(CHANNEL_CAPACITY as u64 / 4, CHANNEL_CAPACITY as u64 / 32);
    let mut last_flush = Instant::now();
    let mut dirty = false;
    loop {
        match rx.try_recv() {
            Ok(Msg::Event(event)) => {
                serde_json::to_writer(&mut out, &event).map_err(std::io::Error::other)?;
                out.write_all(b"\n")?;
                *written += 1;
                let left = backlog.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
                if written.is_multiple_of(256) {
                    priority.adjust(left, closing.load(Ordering::Relaxed));
                }
                dirty = true;
                if last_flush.elapsed() >= FLUSH_EVERY {
                    out.flush()?;
                    last_flush = Instant::now();
                    dirty = false;
                }
            }
            Ok(Msg::Close) | Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {
                // Idle: make what is buffered durable against a process crash (at most every
                // IDLE_FLUSH_EVERY, so a trickle of events is not one write(2) each), then poll
                // again shortly. Polling instead of blocking on the channel means a client that
                // records an event never has to wake this thread: no futex on the hot path.
                if dirty && last_flush.elapsed() >= IDLE_FLUSH_EVERY {
                    out.flush()?;
                    last_flush = Instant::now();
                    dirty = false;
                }
                priority.adjust(
                    backlog.load(Ordering::Relaxed),
                    closing.load(Ordering::Relaxed),
                );
                std::thread::sleep(IDLE_POLL);
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// How the writer thread ended: events written, and the write error with the events still
/// queued behind it, when it failed.
struct WriterEnd {
    written: u64,
    failure: Option<(std::io::Error, u64)>,
}

/// Writes events synchronously to any writer, one JSON line each (hand-built and synthetic histories).
pub fn write_events<'a, W: Write>(
    out: &mut W,
    events: impl IntoIterator<Item = &'a HistoryEvent>,
) -> std::io::Result<()> {
    for e in events {
        serde_json::to_writer(&mut *out, e).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
