//! [`HistoryRecorder`]: the cheap handle clients record through, stamping index and time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

use super::{ClientCrash, FaultWindow, HistoryEvent, Op, RunClock, RunEnd};

/// Index and time stamped on a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// History index.
    pub index: u64,
    /// µs on the run clock.
    pub time_us: u64,
}

pub(super) enum Msg {
    Event(HistoryEvent),
    Close,
}

pub(super) struct RecorderInner {
    pub(super) clock: RunClock,
    /// Next index; the lock also makes file order = index order = time order.
    pub(super) next: Mutex<u64>,
    pub(super) tx: Option<SyncSender<Msg>>,
    pub(super) dropped: AtomicU64,
    /// Events handed to the writer and not yet written (its backlog).
    pub(super) queued: Arc<AtomicU64>,
    /// Set by the writer thread when a write failed; it has stopped writing.
    pub(super) failed: Arc<AtomicBool>,
}

/// Cheap `Clone` handle that clients use to record events. Never fails: if the writer is gone
/// (finished or broken), events are counted in [`HistoryRecorder::dropped`] instead.
#[derive(Clone)]
pub struct HistoryRecorder {
    pub(super) inner: Arc<RecorderInner>,
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
    /// event from then on is lost, so the run should stop ([`HistoryWriter::finish`](super::HistoryWriter::finish) returns
    /// [`HistoryError::WriteFailed`](super::HistoryError::WriteFailed) with the counts).
    pub fn writer_failed(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }

    /// Records an operation, overwriting its `index` and `time_us` with now. Waits only if
    /// [`CHANNEL_CAPACITY`](super::CHANNEL_CAPACITY) events are already queued (the disk cannot keep up).
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
