//! `lockbench_ledger_anomalies_total`: the checker's streaming part over the ledger a strategy
//! run is writing.
//!
//! A [`LedgerWatcher`] is a thread of its own that reads, every [`POLL`], the events the run's
//! `ledger.sqlite` committed since its last read (a read-only connection opened for each read;
//! SQLite's WAL lets it read beside the ledger thread's writer, whole commits only), feeds them
//! to a [`LedgerWatch`] in commit order and adds what the counts grew by to the counters.
//! Nothing runs on a client's path or on the ledger thread. A ledger kept in PostgreSQL
//! (`--ledger`, `--workers`) becomes `ledger.sqlite` when it closes, so its counts come in
//! the watcher's last read, when the strategy run ends.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{AnomalyLabels, LiveMetrics};
use crate::checker::LedgerWatch;
use crate::ledger::LedgerFile;

/// How often the watcher reads what the ledger committed.
pub const POLL: Duration = Duration::from_millis(500);

/// The watcher of one strategy run's ledger; [`finish`](Self::finish) after the ledger closed.
#[derive(Debug)]
pub struct LedgerWatcher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl LedgerWatcher {
    /// Starts watching `path` (which may not exist yet) for `strategy`'s series of `live`.
    pub(super) fn start(live: LiveMetrics, strategy: String, path: PathBuf) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ledger-watch".into())
            .spawn(move || {
                let mut tail = Tail {
                    live,
                    strategy,
                    path,
                    watch: None,
                    seq: 0,
                    added: [0; 4],
                };
                let (lock, cv) = &*signal;
                loop {
                    let stopping = {
                        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                        let (guard, _) = cv
                            .wait_timeout_while(guard, POLL, |stop| !*stop)
                            .unwrap_or_else(|p| p.into_inner());
                        *guard
                    };
                    tail.read();
                    if stopping {
                        break;
                    }
                }
            })
            .ok();
        if thread.is_none() {
            tracing::warn!("live metrics: cannot start the ledger watcher thread");
        }
        Self { stop, thread }
    }

    /// Reads what the ledger holds one last time (call it once the ledger has closed, so the
    /// counts are the whole run's), then stops the thread.
    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LedgerWatcher {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// The watcher thread's state.
struct Tail {
    live: LiveMetrics,
    strategy: String,
    path: PathBuf,
    /// Made at the first read that finds the ledger (it knows the fence mode).
    watch: Option<LedgerWatch>,
    /// The last `events.seq` read.
    seq: i64,
    /// What this run added to each counter, in [`LedgerWatch::counts`] order.
    added: [u64; 4],
}

impl Tail {
    /// Reads the events committed since the last read and adds the counts' growth.
    fn read(&mut self) {
        if !self.path.exists() {
            return;
        }
        // Not there yet or not written yet: the next read tries again.
        let Ok(file) = LedgerFile::open(&self.path) else {
            return;
        };
        let watch = self
            .watch
            .get_or_insert_with(|| LedgerWatch::new(file.mode()));
        // Each event is fed once: the next read starts after the last one fed, also when this
        // read stopped at an error.
        let mut seq = self.seq;
        let read = file.for_each_event_after(self.seq, |e| {
            seq = e.seq;
            watch.feed(&e);
        });
        self.seq = seq;
        if let Err(e) = read {
            tracing::debug!("live metrics: ledger {}: {e}", self.path.display());
        }
        let f = &self.live.inner.families;
        for (i, (kind, n)) in watch.counts().into_iter().enumerate() {
            let counter = f.ledger_anomalies.get_or_create(&AnomalyLabels {
                strategy: self.strategy.clone(),
                kind: kind.to_string(),
            });
            counter.inc_by(n.saturating_sub(self.added[i]));
            self.added[i] = self.added[i].max(n);
        }
    }
}
