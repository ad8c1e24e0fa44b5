//! `lockbench worker --coordinator URL`: registers, gets its slot, connects its clients and
//! the shared ledger, probes the clock, waits at the barrier, starts its run clock at the
//! coordinator's time zero, runs its clients with the driver, streams its history lines and
//! seconds every [`HEARTBEAT`] (the heartbeat), and posts its final report. It stops its
//! clients when the coordinator says so or has not answered for [`SILENCE_LIMIT`], and then
//! exits: no worker outlives its coordinator by more than that plus the drain.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::clock::ClockProbe;
use super::protocol::{
    encode_histogram, Batch, BatchReply, ClockReading, Ready, Registration, Slot, Start,
    WireSecond, WorkerReport,
};
use super::{unix_now_us, WorkersError, HEARTBEAT, REGISTRATION_PROBES, SILENCE_LIMIT};
use crate::driver::client::SectionHooks;
use crate::driver::{self, Collector, DriverContext, StopCondition, StrategyRun};
use crate::history::{HistoryRecorder, HistoryWriter, RunClock};
use crate::ledger::{FenceMode, Ledger, LedgerBackend, PendingLedger, PgLedgerUrl};
use crate::nemesis::ClientControls;
use crate::orchestration::experiment::ExperimentError;

/// How a worker finds its coordinator.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The control API, `http://host:port`.
    pub coordinator: String,
    /// The slot to ask for (`None`: the next free one).
    pub slot: Option<u32>,
    /// Where it writes its own history while it runs (a directory it creates).
    pub scratch: PathBuf,
}

/// How a worker's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerExit {
    /// It ran and reported.
    Reported {
        /// Its index.
        worker: u32,
        /// History events it sent.
        events: u64,
    },
    /// The coordinator called the run off before it started.
    Aborted(String),
}

/// How long a worker tries to register (the coordinator may still be starting).
const REGISTER_WITHIN: Duration = Duration::from_secs(15);

/// The longest a worker waits at the barrier for the others.
const BARRIER_WITHIN: Duration = Duration::from_secs(180);

/// The control API's client.
struct Control {
    http: reqwest::Client,
    base: String,
}

impl Control {
    fn err(&self, detail: impl std::fmt::Display) -> WorkersError {
        WorkersError::Coordinator {
            url: self.base.clone(),
            detail: detail.to_string(),
        }
    }

    async fn post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R, WorkersError> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .timeout(timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| self.err(format!("POST {path}: {e}")))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(self.err(format!("POST {path}: {status}: {text}")));
        }
        resp.json()
            .await
            .map_err(|e| self.err(format!("POST {path}: {e}")))
    }

    async fn probe(&self) -> Result<ClockProbe, WorkersError> {
        let sent_us = unix_now_us();
        let reading: ClockReading = self
            .http
            .get(format!("{}/clock", self.base))
            .timeout(SILENCE_LIMIT)
            .send()
            .await
            .map_err(|e| self.err(format!("GET /clock: {e}")))?
            .json()
            .await
            .map_err(|e| self.err(format!("GET /clock: {e}")))?;
        Ok(ClockProbe {
            sent_us,
            coordinator_us: reading.unix_us,
            received_us: unix_now_us(),
        })
    }
}

/// Runs one worker to its end (see the module docs).
///
/// # Errors
/// [`WorkersError::Coordinator`] when the coordinator cannot be reached or stops answering;
/// [`WorkersError::Experiment`] when the clients cannot connect or the ledger or history
/// cannot be opened.
pub async fn run_worker(opts: &WorkerOptions) -> Result<WorkerExit, WorkersError> {
    let control = Control {
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| WorkersError::Protocol(e.to_string()))?,
        base: opts.coordinator.trim_end_matches('/').to_string(),
    };
    let slot = register(&control, opts.slot).await?;
    tracing::info!(
        "worker {}/{}: clients {}..{}",
        slot.worker,
        slot.workers,
        slot.client_base,
        slot.client_base + slot.clients
    );
    std::fs::create_dir_all(&opts.scratch).map_err(|e| WorkersError::Files {
        path: opts.scratch.clone(),
        detail: e.to_string(),
    })?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = driver_context(&slot, stop_rx);
    let strategy = slot.test.strategy_options(slot.strategy);
    let pending = prepare_ledger(&slot, &opts.scratch).await?;
    let clients = driver::connect_clients(&ctx, &strategy)
        .await
        .map_err(ExperimentError::from)?;
    let mut probes = Vec::new();
    for _ in 0..REGISTRATION_PROBES {
        probes.push(control.probe().await?);
    }
    let start: Start = control
        .post(
            "/ready",
            &Ready {
                worker: slot.worker,
                probes,
            },
            BARRIER_WITHIN,
        )
        .await?;
    if let Some(why) = start.abort {
        return Ok(WorkerExit::Aborted(why));
    }
    let origin = wait_for_start(start).await;
    let clock = RunClock::from_instant(origin.into_std());
    let ledger = pending
        .map(|p| p.start(clock))
        .transpose()
        .map_err(ExperimentError::from)?;
    let history_path = opts.scratch.join("history.jsonl");
    let writer = HistoryWriter::create(&history_path, clock).map_err(ExperimentError::from)?;
    let history: HistoryRecorder = writer.recorder();
    let hooks = SectionHooks {
        history: history.clone(),
        ledger: ledger.clone(),
        sections: Arc::new(AtomicU64::new(slot.first_section)),
        strategy: slot.strategy.to_string(),
        inside: Arc::new(AtomicU64::new(0)),
        client_base: slot.client_base,
        // `external` work runs in one process (`Test::check_settings` refuses it with workers).
        sink: None,
    };
    let controls = ClientControls::new(slot.clients as usize);
    let seconds: Arc<Mutex<Vec<WireSecond>>> = Arc::default();
    let (done_tx, done_rx) = watch::channel(false);
    let streamer = tokio::spawn(stream(
        Control {
            http: control.http.clone(),
            base: control.base.clone(),
        },
        slot.worker,
        history_path.clone(),
        seconds.clone(),
        stop_tx,
        done_rx,
    ));
    let on_tick = |c: &Collector, _elapsed: Duration| {
        // The last two seconds: the one before may have completed since the last tick.
        let n = c.seconds.len();
        let fresh = wire_seconds(c, n.saturating_sub(2));
        if let Ok(mut s) = seconds.lock() {
            s.extend(fresh);
        }
    };
    let run = driver::run_clients(&ctx, clients, &controls, &hooks, origin, on_tick).await;
    drop(hooks);
    let failed_steps = close_ledger(ledger).await?;
    drop(history);
    let events = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .expect("history finish does not panic")
        .map_err(ExperimentError::from)?;
    // The last lines go in a final batch, then the report.
    let _ = done_tx.send(true);
    let sent = streamer
        .await
        .map_err(|e| WorkersError::Protocol(format!("streaming task: {e}")))??;
    if sent != events {
        tracing::warn!("worker {}: wrote {events} events, sent {sent}", slot.worker);
    }
    let report = worker_report(slot.worker, sent, &run, failed_steps);
    let _: BatchReply = control.post("/done", &report, SILENCE_LIMIT).await?;
    let _ = std::fs::remove_dir_all(&opts.scratch);
    Ok(WorkerExit::Reported {
        worker: slot.worker,
        events: sent,
    })
}

/// The driver's context for this worker's slot: its clients, its share of the ops, the nodes
/// as it reaches them; `shutdown` stops it.
fn driver_context(slot: &Slot, shutdown: watch::Receiver<bool>) -> DriverContext {
    let mut workload = slot.test.workload.clone();
    workload.clients = slot.clients;
    if let Some(ops) = slot.ops {
        workload.stop = StopCondition::Ops(ops);
    }
    DriverContext {
        endpoints: slot.endpoints.iter().map(|e| e.to_endpoint()).collect(),
        client_endpoints: Vec::new(),
        connect: slot.test.client.connect,
        workload,
        shutdown,
        connect_progress: None,
    }
}

/// The shared ledger this worker writes (attached, not started), when the run is audited.
///
/// # Errors
/// [`WorkersError::Experiment`] for a bad URL or a schema it cannot attach to.
async fn prepare_ledger(
    slot: &Slot,
    scratch: &Path,
) -> Result<Option<PendingLedger>, WorkersError> {
    let mode = if slot.strategy.is_fenced() {
        FenceMode::Fenced
    } else {
        FenceMode::Unfenced
    };
    Ok(match &slot.ledger {
        Some(l) => {
            let url = PgLedgerUrl::parse(&l.url).map_err(ExperimentError::from)?;
            let backend = LedgerBackend::PostgresShared {
                url,
                schema: l.schema.clone(),
            };
            Some(
                backend
                    .prepare(scratch.join("ledger.sqlite"), mode)
                    .await
                    .map_err(ExperimentError::from)?,
            )
        }
        None => None,
    })
}

/// Closes the ledger (waiting for its last batch) and returns its failed steps (0 without one).
///
/// # Errors
/// [`WorkersError::Experiment`] when the ledger cannot be closed.
async fn close_ledger(ledger: Option<Ledger>) -> Result<u64, WorkersError> {
    let mut failed_steps = 0;
    if let Some(ledger) = ledger {
        failed_steps =
            tokio::task::spawn_blocking(move || ledger.close().map(|()| ledger.failed_steps()))
                .await
                .expect("ledger close does not panic")
                .map_err(ExperimentError::from)?;
    }
    Ok(failed_steps)
}

/// The final report of this worker: its run's figures and histograms, every second.
fn worker_report(worker: u32, sent: u64, run: &StrategyRun, failed_steps: u64) -> WorkerReport {
    let c = &run.collector;
    WorkerReport {
        worker,
        events: sent,
        contended: c.contended,
        errors: c.errors,
        release_errors: c.release_errors,
        cycles: c.cycles,
        elapsed_ms: run.elapsed.as_millis() as u64,
        interrupted: run.interrupted,
        cut_sections: run.cut_sections,
        failed_steps,
        client_failure: run.client_failure.clone(),
        acquire_ok: encode_histogram(&c.acquire_ok),
        acquire_fail: encode_histogram(&c.acquire_fail),
        release: encode_histogram(&c.release),
        critical_section: encode_histogram(&c.critical_section),
        harness_lag: encode_histogram(&c.harness_lag),
        seconds: wire_seconds(c, 0),
        error_counts: c
            .error_counts
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
    }
}

/// Registers, retrying for [`REGISTER_WITHIN`] while the coordinator does not answer.
async fn register(control: &Control, slot: Option<u32>) -> Result<Slot, WorkersError> {
    let deadline = Instant::now() + REGISTER_WITHIN;
    let reg = Registration {
        slot,
        pid: std::process::id(),
    };
    loop {
        match control.post("/register", &reg, SILENCE_LIMIT).await {
            Ok(slot) => return Ok(slot),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(e) => {
                tracing::debug!("register: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Sleeps until the coordinator's time zero on this worker's clock and returns the instant
/// that corresponds to it (back-dated by however late the sleep woke up, so the run clock
/// reads the common timeline).
async fn wait_for_start(start: Start) -> Instant {
    let local_start = (start.start_unix_us as i64 - start.offset_us).max(0) as u64;
    let now = unix_now_us();
    if local_start > now {
        tokio::time::sleep(Duration::from_micros(local_start - now)).await;
    }
    let late = unix_now_us().saturating_sub(local_start);
    let now = Instant::now();
    now.checked_sub(Duration::from_micros(late)).unwrap_or(now)
}

/// Encodes the collector's seconds from `from` on.
fn wire_seconds(c: &Collector, from: usize) -> Vec<WireSecond> {
    c.seconds
        .iter()
        .enumerate()
        .skip(from)
        .map(|(i, s)| WireSecond {
            second: i as u32,
            acquired: s.acquired,
            contended: s.contended,
            errors: s.errors,
            lag_max_us: s.lag_max_us,
            acquire_ok: s.acquire_ok.as_ref().map(encode_histogram),
        })
        .collect()
}

/// Sends a batch every [`HEARTBEAT`] until `done` (then one last one with every remaining
/// line) and returns how many history lines it sent. Flips `stop` when the coordinator says
/// stop or has not answered for [`SILENCE_LIMIT`] (then it returns an error once `done`).
async fn stream(
    control: Control,
    worker: u32,
    history: PathBuf,
    seconds: Arc<Mutex<Vec<WireSecond>>>,
    stop: watch::Sender<bool>,
    mut done: watch::Receiver<bool>,
) -> Result<u64, WorkersError> {
    let mut tail = HistoryTail::new(history);
    let mut last_answer = Instant::now();
    let mut sent = 0u64;
    let mut gone: Option<WorkersError> = None;
    loop {
        let last = *done.borrow();
        if gone.is_none() {
            let events = tail.read_lines(last)?;
            let n = events.len() as u64;
            let batch = Batch {
                worker,
                events,
                seconds: seconds
                    .lock()
                    .map(|mut s| std::mem::take(&mut *s))
                    .unwrap_or_default(),
                probe: control.probe().await.ok(),
            };
            match control
                .post::<_, BatchReply>("/events", &batch, SILENCE_LIMIT)
                .await
            {
                Ok(reply) => {
                    sent += n;
                    last_answer = Instant::now();
                    if reply.stop {
                        let _ = stop.send(true);
                    }
                }
                Err(e) => {
                    // The batch is lost with the coordinator; a retry of it would need the
                    // lines again, which the tail keeps only until it is read.
                    tail.rewind(&batch.events);
                    // A worker that was stopped itself (a nemesis SIGSTOP) finds its request
                    // timed out when it resumes: the coordinator is gone only when a fresh
                    // probe fails too.
                    if last_answer.elapsed() >= SILENCE_LIMIT {
                        if control.probe().await.is_ok() {
                            last_answer = Instant::now();
                        } else {
                            tracing::error!("worker {worker}: coordinator gone ({e}); stopping");
                            let _ = stop.send(true);
                            gone = Some(e);
                        }
                    }
                }
            }
        }
        if last {
            return match gone {
                Some(e) => Err(e),
                None => Ok(sent),
            };
        }
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT) => {}
            _ = done.changed() => {}
        }
    }
}

/// Reads the complete lines appended to a file since the last read.
struct HistoryTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl HistoryTail {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// The complete lines appended since the last call (with `all`, also a last line without
    /// its newline).
    fn read_lines(&mut self, all: bool) -> Result<Vec<String>, WorkersError> {
        let io = |e: std::io::Error, path: &Path| WorkersError::Files {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e, &self.path)),
        };
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| io(e, &self.path))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(|e| io(e, &self.path))?;
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let cut = if all {
            self.partial.len()
        } else {
            self.partial
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
        };
        let complete: Vec<u8> = self.partial.drain(..cut).collect();
        Ok(String::from_utf8_lossy(&complete)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Puts lines that could not be sent back in front of what comes next.
    fn rewind(&mut self, lines: &[String]) {
        let mut back: Vec<u8> = lines
            .iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect();
        back.append(&mut self.partial);
        self.partial = back;
    }
}
