//! The run's progress files (`summary.json`, `<strategy>.hgrm`) rewritten every second on a
//! thread of their own, so the clients' runtime never waits on the file system.
//!
//! Each rewrite creates a temporary file and renames it into place ([`crate::atomic_file`]);
//! on ext4 both wait for the journal, and the journal waits for whatever the servers under test
//! are syncing (an etcd member's WAL, PostgreSQL's commits) and for discards of deleted data.
//! Done on a matrix trial's single client thread, such a wait stopped every client of the
//! trial at once (seen: 60 ms – 1.3 s, which the harness's lag probe then reported as its own
//! overload). Here the newest snapshot waits in a slot and the writer thread takes it when it
//! is free: a snapshot that arrives while an older one still waits replaces it (latest wins),
//! so a slow disk costs freshness, never the clients' time.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use hdrhistogram::Histogram;

use super::{RunDir, RunSummary};

/// One second's progress: the summary and one strategy's successful-acquire histogram (µs).
struct Snapshot {
    summary: RunSummary,
    strategy: String,
    acquire_ok: Histogram<u64>,
}

/// The slot between the runtime and the writer thread.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    wake: Condvar,
}

#[derive(Default)]
struct SlotState {
    next: Option<Snapshot>,
    closed: bool,
}

/// Rewrites a run directory's progress files off the caller's thread (see the module docs).
/// [`finish`](Self::finish) (or dropping it) writes the snapshot still waiting and joins the
/// thread, so a later synchronous write of `summary.json` is never overwritten by an older one.
pub struct ProgressWriter {
    slot: Arc<Slot>,
    thread: Option<JoinHandle<()>>,
    /// Where to write inline when the thread could not be started.
    dir: RunDir,
}

impl ProgressWriter {
    /// Starts the writer thread for `dir`. When no thread can be started the writes happen
    /// inline in [`submit`](Self::submit), as before.
    pub fn start(dir: &RunDir) -> Self {
        let slot = Arc::new(Slot::default());
        let thread = std::thread::Builder::new()
            .name("progress-writer".into())
            .spawn({
                let slot = Arc::clone(&slot);
                let dir = dir.clone();
                move || write_until_closed(&slot, &dir)
            })
            .map_err(|e| tracing::warn!("progress files are written inline: {e}"))
            .ok();
        Self {
            slot,
            thread,
            dir: dir.clone(),
        }
    }

    /// Hands the newest progress to the writer thread (replacing a snapshot that still waits).
    /// Costs a copy of the summary and the histogram; never touches the file system unless the
    /// thread could not be started.
    pub fn submit(&self, summary: &RunSummary, strategy: &str, acquire_ok: &Histogram<u64>) {
        let snapshot = Snapshot {
            summary: summary.clone(),
            strategy: strategy.to_string(),
            acquire_ok: acquire_ok.clone(),
        };
        if self.thread.is_none() {
            write(&self.dir, &snapshot);
            return;
        }
        let mut state = self.slot.state.lock().unwrap_or_else(|p| p.into_inner());
        state.next = Some(snapshot);
        self.slot.wake.notify_one();
    }

    /// Writes the snapshot that still waits, stops the thread and waits for it.
    pub fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        {
            let mut state = self.slot.state.lock().unwrap_or_else(|p| p.into_inner());
            state.closed = true;
            self.slot.wake.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the progress writer thread panicked");
            }
        }
    }
}

impl Drop for ProgressWriter {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_until_closed(slot: &Slot, dir: &RunDir) {
    loop {
        let snapshot = {
            let mut state = slot.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(s) = state.next.take() {
                    break Some(s);
                }
                if state.closed {
                    break None;
                }
                state = slot.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        match snapshot {
            Some(s) => write(dir, &s),
            None => return,
        }
    }
}

fn write(dir: &RunDir, s: &Snapshot) {
    if let Err(e) = dir.write_progress(&s.summary, &s.strategy, &s.acquire_ok) {
        tracing::warn!("cannot rewrite results: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn the_last_submitted_progress_is_on_disk_after_finish() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create_named(tmp.path(), "run").unwrap();
        let writer = ProgressWriter::start(&dir);
        let mut summary = RunSummary::start("run", serde_json::Value::Null);
        for n in 1..=50u64 {
            summary.error = Some(format!("tick {n}"));
            writer.submit(&summary, "single", &histogram(&[n * 10]));
        }
        writer.finish();
        let on_disk: RunSummary =
            serde_json::from_str(&std::fs::read_to_string(dir.file("summary.json")).unwrap())
                .unwrap();
        assert_eq!(on_disk.error.as_deref(), Some("tick 50"));
        let hgrm = std::fs::read_to_string(dir.file("single.hgrm")).unwrap();
        assert!(
            hgrm.contains("#[Max     =        0.500"),
            "the last histogram (500 µs): {hgrm}"
        );
    }

    #[test]
    fn a_writer_dropped_without_finish_still_writes_what_waits() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create_named(tmp.path(), "run").unwrap();
        {
            let writer = ProgressWriter::start(&dir);
            let mut summary = RunSummary::start("run", serde_json::Value::Null);
            summary.error = Some("only".into());
            writer.submit(&summary, "redlock", &histogram(&[7]));
        }
        let on_disk: RunSummary =
            serde_json::from_str(&std::fs::read_to_string(dir.file("summary.json")).unwrap())
                .unwrap();
        assert_eq!(on_disk.error.as_deref(), Some("only"));
    }
}
