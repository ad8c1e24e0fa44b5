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

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::recording::RecordingPriority;

/// How many events may wait in the channel to the writer thread before `record` waits.
pub const CHANNEL_CAPACITY: usize = 65_536;

/// Longest time the writer keeps written events in its buffer before flushing.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// When the channel runs empty, buffered events are flushed if the last flush is this old.
const IDLE_FLUSH_EVERY: Duration = Duration::from_millis(10);

/// How long the idle writer sleeps before looking at the channel again.
const IDLE_POLL: Duration = Duration::from_millis(1);

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

/// The phase of an operation.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum OpKind {
    /// The client started the operation.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Unknown outcome (timeout, connection lost mid-request).
    Info,
}

/// What the operation does to the lock.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum OpFn {
    /// Take the lock on `resource`.
    Acquire,
    /// Give it back.
    Release,
    /// Extend the lease (watchdog renewal); an `ok` carries the new validity deadline.
    Extend,
}

/// Why an operation failed or has an unknown outcome (set on `fail` / `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// Someone else holds the lock (normal contention), after any retries.
    Busy,
    /// The acquire timeout or a response timeout ran out.
    Timeout,
    /// The connection to a node failed or was refused.
    Connection,
    /// Anything else (script error, quorum not reached for another reason, …).
    Other,
}

/// One operation record. `index` and `time_us` are set by [`HistoryRecorder::record`].
///
/// A client has at most one op per function (`f`) in flight: its completion is matched to the
/// last invoke of the same `(client, f)`. Use distinct client ids for concurrent workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history (0, 1, 2, …), assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the [`RunClock`], assigned at recording.
    #[serde(default)]
    pub time_us: u64,
    /// Client (worker task) id.
    pub client: u32,
    /// Phase.
    pub kind: OpKind,
    /// Function.
    pub f: OpFn,
    /// Locked resource name.
    pub resource: String,
    /// Owner token the client put in the lock (random value), on acquire ok and release/extend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Fencing token, on acquire ok of fenced strategies and on the later ops of that lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// Until when the client may believe it holds the lock, in µs on the run clock. It must be
    /// computed from the acquire *invoke* time: `invoke_us + ttl − drift − elapsed…`, never from the
    /// ok time, or the checker's believed-overlap rule can report false positives. `None` = no
    /// expiry (`no-ttl`). Set on acquire ok and extend ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_deadline_us: Option<u64>,
    /// Lease TTL requested, ms (on acquire and extend). `None` = no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Error message on fail/info.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Error class on fail/info (see [`ErrorKind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// Strategy name (`single`, `redlock-fenced`, …), optional, usually on invokes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// `adapter:*` strategies: the library's own belief that it still owns the lock, as its
    /// adapter answered `hold` after the section's work. Only `Some(false)` is recorded, on an
    /// `extend` `fail` at that moment (the library knows it lost the lock; lockbench's write
    /// still follows, as in an application that does not ask its library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owns: Option<bool>,
}

impl Op {
    /// A bare op with all optional fields empty; set the others with struct update or the `with_` methods.
    pub fn new(client: u32, kind: OpKind, f: OpFn, resource: impl Into<String>) -> Self {
        Self {
            index: 0,
            time_us: 0,
            client,
            kind,
            f,
            resource: resource.into(),
            owner: None,
            fencing_token: None,
            validity_deadline_us: None,
            ttl_ms: None,
            error: None,
            error_kind: None,
            strategy: None,
            owns: None,
        }
    }

    /// Sets the owner token.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Sets the fencing token.
    pub fn with_token(mut self, token: u64) -> Self {
        self.fencing_token = Some(token);
        self
    }

    /// Sets the validity deadline (µs on the run clock).
    pub fn with_deadline_us(mut self, deadline_us: u64) -> Self {
        self.validity_deadline_us = Some(deadline_us);
        self
    }

    /// Sets the TTL (ms).
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Sets the error message and class.
    pub fn with_error(mut self, kind: ErrorKind, message: impl Into<String>) -> Self {
        self.error_kind = Some(kind);
        self.error = Some(message.into());
        self
    }

    /// Sets the strategy name.
    pub fn with_strategy(mut self, strategy: impl Into<String>) -> Self {
        self.strategy = Some(strategy.into());
        self
    }

    /// Sets index and time (for hand-built histories; the recorder sets them itself).
    pub fn at(mut self, index: u64, time_us: u64) -> Self {
        self.index = index;
        self.time_us = time_us;
        self
    }
}

/// One fault window: a fault the nemesis injected, from the moment it took effect to its heal.
/// The one type a window has from the nemesis (which stamps it on the [`RunClock`]) through the
/// history and the checker to the report.
///
/// Recorded at start (`end_us: None`) and at heal (same `id`); an instant fault (clock jump,
/// client crash, `SENTINEL FAILOVER`) once, already closed (`end_us` = `start_us`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// Unique per run, increasing in injection order.
    pub id: u64,
    /// Fault kind in kebab case (`latency`, `partition`, `kill`, `pause-node`, `failover`,
    /// `clock-jump`, `client-pause`, `slow-work`, `client-crash`, `client-absent`).
    pub kind: String,
    /// What it hit: node names (`n1`), proxy names (`n2-repl`) or clients (`client:3`).
    pub targets: Vec<String>,
    /// µs on the run clock.
    pub start_us: u64,
    /// µs on the run clock; `None` while still active.
    pub end_us: Option<u64>,
    /// The step's parameters and what the fault did, e.g. `latency = 50ms, jitter = 10ms;
    /// latency 50ms ± 10ms downstream` or `method = sentinel; n1 -> n2 after 1200 ms`. Empty in
    /// histories written before windows carried it.
    #[serde(default)]
    pub detail: String,
}

/// A client died (task aborted) and will never release what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCrash {
    /// Position in the history, assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the run clock, assigned at recording.
    #[serde(default)]
    pub time_us: u64,
    /// The client that died.
    pub client: u32,
}

/// The workload stopped: from here on clients only finish what they had started (the drain),
/// then the ones still inside an operation are aborted, which records nothing. Acquires still
/// waiting at this mark waited at least until it. Recorded once per strategy run, before the
/// drain; histories written before the mark existed have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// Position in the history, assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the run clock, assigned at recording.
    #[serde(default)]
    pub time_us: u64,
}

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HistoryEvent {
    /// A client operation.
    Op(Op),
    /// A fault window (start or heal).
    Fault(FaultWindow),
    /// A client crash.
    Crash(ClientCrash),
    /// The workload stopped (`{"type":"run-end","index":…,"time_us":…}`).
    #[serde(rename = "run-end")]
    RunEnd(RunEnd),
}

impl HistoryEvent {
    /// The event's time on the run clock, µs (a fault window's start).
    pub fn time_us(&self) -> u64 {
        match self {
            Self::Op(op) => op.time_us,
            Self::Crash(c) => c.time_us,
            Self::Fault(f) => f.start_us,
            Self::RunEnd(e) => e.time_us,
        }
    }
}

/// Index and time stamped on a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// History index.
    pub index: u64,
    /// µs on the run clock.
    pub time_us: u64,
}

enum Msg {
    Event(HistoryEvent),
    Close,
}

struct RecorderInner {
    clock: RunClock,
    /// Next index; the lock also makes file order = index order = time order.
    next: Mutex<u64>,
    tx: Option<SyncSender<Msg>>,
    dropped: AtomicU64,
    /// Events handed to the writer and not yet written (its backlog).
    queued: Arc<AtomicU64>,
    /// Set by the writer thread when a write failed; it has stopped writing.
    failed: Arc<AtomicBool>,
}

/// Cheap `Clone` handle that clients use to record events. Never fails: if the writer is gone
/// (finished or broken), events are counted in [`HistoryRecorder::dropped`] instead.
#[derive(Clone)]
pub struct HistoryRecorder {
    inner: Arc<RecorderInner>,
}

impl std::fmt::Debug for HistoryRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryRecorder")
            .field("enabled", &self.is_enabled())
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl HistoryRecorder {
    /// A recorder that writes nothing (pure benchmarks); it still stamps indexes and times.
    pub fn disabled(clock: RunClock) -> Self {
        Self {
            inner: Arc::new(RecorderInner {
                clock,
                next: Mutex::new(0),
                tx: None,
                dropped: AtomicU64::new(0),
                queued: Arc::default(),
                failed: Arc::default(),
            }),
        }
    }

    /// The run clock the recorder stamps with.
    pub fn clock(&self) -> RunClock {
        self.inner.clock
    }

    /// Whether events go to a file.
    pub fn is_enabled(&self) -> bool {
        self.inner.tx.is_some()
    }

    /// Events that could not be handed to the writer (it had stopped).
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Whether the writer failed to write the file (disk full, I/O error) and stopped: every
    /// event from then on is lost, so the run should stop ([`HistoryWriter::finish`] returns
    /// [`HistoryError::WriteFailed`] with the counts).
    pub fn writer_failed(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }

    /// Records an operation, overwriting its `index` and `time_us` with now. Waits only if
    /// [`CHANNEL_CAPACITY`] events are already queued (the disk cannot keep up).
    pub fn record(&self, mut op: Op) -> Stamp {
        self.stamp_and_send(|stamp| {
            op.index = stamp.index;
            op.time_us = stamp.time_us;
            HistoryEvent::Op(op)
        })
    }

    /// Records a client crash at now.
    pub fn record_crash(&self, client: u32) -> Stamp {
        self.stamp_and_send(|stamp| {
            HistoryEvent::Crash(ClientCrash {
                index: stamp.index,
                time_us: stamp.time_us,
                client,
            })
        })
    }

    /// Records that the workload stopped, at now ([`RunEnd`]).
    pub fn record_run_end(&self) -> Stamp {
        self.stamp_and_send(|stamp| {
            HistoryEvent::RunEnd(RunEnd {
                index: stamp.index,
                time_us: stamp.time_us,
            })
        })
    }

    /// Records a fault window as given (its times come from the nemesis, on the same clock).
    pub fn record_fault(&self, fault: FaultWindow) {
        // Fault records have no index; hold the lock so they are ordered with ops in the file.
        let _order = self.inner.next.lock().unwrap_or_else(|p| p.into_inner());
        self.send(HistoryEvent::Fault(fault));
    }

    fn stamp_and_send(&self, build: impl FnOnce(Stamp) -> HistoryEvent) -> Stamp {
        let mut next = self.inner.next.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = Stamp {
            index: *next,
            time_us: self.inner.clock.now_us(),
        };
        *next += 1;
        if self.inner.tx.is_some() {
            self.send(build(stamp));
        }
        stamp
    }

    fn send(&self, event: HistoryEvent) {
        if let Some(tx) = &self.inner.tx {
            self.inner.queued.fetch_add(1, Ordering::Relaxed);
            if tx.send(Msg::Event(event)).is_err() {
                self.inner.queued.fetch_sub(1, Ordering::Relaxed);
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

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

/// Streaming reader of `history.jsonl`; yields events in file order with 1-based line numbers in errors.
pub struct HistoryReader<R = BufReader<File>> {
    path: PathBuf,
    input: R,
    line_no: u64,
    buf: String,
    done: bool,
}

/// Opens a history file for streaming.
///
/// Errors: [`HistoryError::Io`] if it cannot be opened. Each item is an event or an error:
/// [`HistoryError::Truncated`] for an incomplete last line (the events before it are intact),
/// [`HistoryError::Parse`] for a bad line elsewhere. Blank lines are skipped.
pub fn read_history(path: impl AsRef<Path>) -> Result<HistoryReader, HistoryError> {
    let path = path.as_ref().to_path_buf();
    let file = File::open(&path).map_err(|source| HistoryError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(HistoryReader::new(
        path,
        BufReader::with_capacity(1 << 16, file),
    ))
}

impl<R: BufRead> HistoryReader<R> {
    /// Reads from any buffered input; `path` is only used in error messages.
    pub fn new(path: impl Into<PathBuf>, input: R) -> Self {
        Self {
            path: path.into(),
            input,
            line_no: 0,
            buf: String::with_capacity(512),
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<HistoryEvent, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            let n = match self.input.read_line(&mut self.buf) {
                Ok(n) => n,
                Err(source) => {
                    self.done = true;
                    return Some(Err(HistoryError::Io {
                        path: self.path.clone(),
                        source,
                    }));
                }
            };
            if n == 0 {
                self.done = true;
                return None;
            }
            self.line_no += 1;
            let complete = self.buf.ends_with('\n');
            let text = self.buf.trim();
            if text.is_empty() {
                continue;
            }
            return Some(match serde_json::from_str::<HistoryEvent>(text) {
                Ok(e) => Ok(e),
                Err(_) if !complete => {
                    self.done = true;
                    Err(HistoryError::Truncated {
                        path: self.path.clone(),
                        line: self.line_no,
                    })
                }
                Err(source) => Err(HistoryError::Parse {
                    path: self.path.clone(),
                    line: self.line_no,
                    source,
                }),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant_names::assert_names_match_serde;

    #[test]
    fn op_names_match_serde() {
        assert_names_match_serde::<OpKind>();
        assert_names_match_serde::<OpFn>();
    }

    #[test]
    fn writer_streams_and_reader_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
        let rec = writer.recorder();
        let threads: Vec<_> = (0..4u32)
            .map(|c| {
                let rec = rec.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        rec.record(Op::new(c, OpKind::Invoke, OpFn::Acquire, "r"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        rec.record_fault(FaultWindow {
            id: 1,
            kind: "pause".into(),
            targets: vec!["n1".into()],
            start_us: 5,
            end_us: None,
            detail: "duration = 1s; SIGSTOP".into(),
        });
        rec.record_crash(2);
        assert_eq!(writer.finish().unwrap(), 4002);
        let events: Vec<_> = read_history(&path).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(events.len(), 4002);
        let mut last = (None::<u64>, 0u64);
        for e in &events {
            if let HistoryEvent::Op(op) = e {
                assert_eq!(op.index, last.0.map_or(0, |i| i + 1));
                assert!(op.time_us >= last.1);
                last = (Some(op.index), op.time_us);
            }
        }
        assert!(matches!(events[4000], HistoryEvent::Fault(ref f) if f.id == 1));
        assert!(
            matches!(events[4000], HistoryEvent::Fault(ref f) if f.detail == "duration = 1s; SIGSTOP")
        );
        assert!(matches!(events[4001], HistoryEvent::Crash(c) if c.client == 2 && c.index == 4000));
        // After finish, leftover handles drop events and count them.
        rec.record(Op::new(0, OpKind::Invoke, OpFn::Acquire, "r"));
        assert_eq!(rec.dropped(), 1);
    }

    #[test]
    fn a_fault_line_without_detail_still_reads() {
        let line =
            r#"{"type":"fault","id":3,"kind":"kill","targets":["n1"],"start_us":10,"end_us":20}"#;
        let e: HistoryEvent = serde_json::from_str(line).unwrap();
        let HistoryEvent::Fault(w) = e else {
            panic!("{e:?}")
        };
        assert_eq!((w.id, w.end_us, w.detail.as_str()), (3, Some(20), ""));
    }

    #[test]
    fn the_run_end_mark_is_stamped_written_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
        let rec = writer.recorder();
        rec.record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
        let mark = rec.record_run_end();
        writer.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text.lines().nth(1).unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"type":"run-end","index":1,"time_us":{}}}"#,
                mark.time_us
            )
        );
        let events: Vec<_> = read_history(&path).unwrap().map(Result::unwrap).collect();
        assert_eq!(
            events[1],
            HistoryEvent::RunEnd(RunEnd {
                index: 1,
                time_us: mark.time_us
            })
        );
        assert_eq!(events[1].time_us(), mark.time_us);
    }

    #[test]
    fn writer_flushes_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
        writer
            .recorder()
            .record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let n = read_history(&path).unwrap().count();
            if n == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "history never flushed");
            std::thread::sleep(Duration::from_millis(10));
        }
        writer.finish().unwrap();
    }

    #[test]
    fn reader_reports_truncated_last_line_and_bad_lines_with_numbers() {
        let good = serde_json::to_string(&HistoryEvent::Op(
            Op::new(1, OpKind::Ok, OpFn::Acquire, "r").with_token(3),
        ))
        .unwrap();
        let text = format!("{good}\n\n{{\"type\":\"op\"}}\n{good}\n{}", &good[..10]);
        let items: Vec<_> = HistoryReader::new("h", text.as_bytes()).collect();
        assert_eq!(items.len(), 4);
        assert!(items[0].is_ok());
        assert!(matches!(items[1], Err(HistoryError::Parse { line: 3, .. })));
        assert!(items[2].is_ok());
        assert!(matches!(
            items[3],
            Err(HistoryError::Truncated { line: 5, .. })
        ));
    }

    #[test]
    fn disabled_recorder_stamps_without_writing() {
        let rec = HistoryRecorder::disabled(RunClock::start());
        let a = rec.record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
        let b = rec.record_crash(1);
        assert_eq!((a.index, b.index), (0, 1));
        assert!(!rec.is_enabled());
        assert_eq!(rec.dropped(), 0);
    }
}
