//! The coordinator's side of one strategy's multi-worker run: the control API (axum, on
//! loopback), the slots (disjoint client-id ranges, shares of an op count, section ids), the
//! barrier, the workers' batches kept in `<strategy>/workers/w<i>.history.jsonl`, lost-worker
//! detection, and the merged results: one `history.jsonl` ([`super::merge`]), the shared
//! ledger copied into `ledger.sqlite`, the checker's verdict, and one collector whose latency is
//! the exact sum of the workers' ([`crate::results::merge_intervals`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use super::api::{Board, Shared, WorkerState, READY_WITHIN, START_LEAD};
use super::clock::ClockEstimate;
use super::evidence::live_collector;
use super::faults::{Schedule, WorkerFaults};
use super::launcher::{Launched, Launcher};
use super::protocol::{Slot, WireEndpoint, WireLedger, WireSecond};
use super::{client_ranges, op_shares, unix_now_us, WorkersError, SILENCE_LIMIT};
use crate::driver::{self, Collector, StopCondition};
use crate::ledger::{FenceMode, LedgerBackend, PgLedgerUrl};
use crate::nemesis::WorkerProcess;
use crate::node::NodeEndpoint;
use crate::orchestration::experiment::{Experiment, ExperimentError};
use crate::orchestration::test::Test;
use crate::strategy::StrategyKind;

/// How a run is spread over workers (`run --workers N --launcher …`).
#[derive(Debug, Clone)]
pub struct WorkersPlan {
    /// How many workers.
    pub workers: u32,
    /// What starts them.
    pub launcher: Launcher,
}

/// What `summary.json` (`config.workers`) and `<strategy>/workers.json` say about the workers.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersSummary {
    /// Workers started.
    pub workers: u32,
    /// The launcher.
    pub launcher: String,
    /// The largest clock bound of any worker, µs: every real-time window of the merged history
    /// was widened by its worker's bound, at most this.
    pub clock_bound_us: u64,
    /// Per worker.
    pub per_worker: Vec<WorkerLine>,
    /// Workers lost before they reported.
    pub lost: Vec<LostWorker>,
    /// History events merged (lost workers' closing `info`/`crash` and the coordinator's fault
    /// windows included).
    pub merged_events: u64,
    /// Fault-window records the coordinator's schedule added (each window opened and closed:
    /// two; an instant fault: one).
    pub fault_windows: u64,
    /// The merged acquire latency against one histogram holding every worker's samples.
    pub latency_check: LatencyCheck,
}

/// One worker in [`WorkersSummary`].
#[derive(Debug, Clone, Serialize)]
pub struct WorkerLine {
    /// Index.
    pub worker: u32,
    /// Process id (as it registered).
    pub pid: Option<u32>,
    /// First client id.
    pub client_base: u32,
    /// Clients.
    pub clients: u32,
    /// History events received.
    pub events: u64,
    /// Successful acquisitions it reported (or streamed, when lost).
    pub acquired: u64,
    /// The clock estimate its run clock was set with.
    pub clock: Option<ClockEstimate>,
    /// Its clock bound, µs.
    pub clock_bound_us: u64,
    /// Clock probes received (registration and batches).
    pub probes: usize,
}

/// A worker that did not report.
#[derive(Debug, Clone, Serialize)]
pub struct LostWorker {
    /// Index.
    pub worker: u32,
    /// Why it counts as lost.
    pub why: String,
    /// When, µs on the run's timeline.
    pub at_us: u64,
}

/// Acquire latency: the merge of per-second interval histograms vs one histogram that added
/// every worker's overall one.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct LatencyCheck {
    /// Samples in the merge.
    pub merged_count: u64,
    /// Samples in the single histogram.
    pub single_count: u64,
    /// p50, p90, p99, p99.9 and max of the merge, µs.
    pub merged_us: Vec<u64>,
    /// The same of the single histogram, µs.
    pub single_us: Vec<u64>,
}

/// Where the control API of a run listens and the workers it launched.
struct Serving {
    server: tokio::task::JoinHandle<()>,
    launched: Launched,
}

impl Serving {
    async fn stop(mut self) {
        self.launched.stop_all().await;
        self.server.abort();
    }
}

/// Runs strategy `kind` of `test` over `plan.workers` workers into `dir` (the strategy's
/// directory): see the module docs. `endpoints[i]`: the nodes as worker `i` reaches them
/// (its own proxies `nX-wI` when the topology has them; one list for every worker
/// otherwise). `faults`: the schedule the coordinator runs from time zero
/// ([`super::faults`]). `ledger` must be PostgreSQL when audited (the workers share it). Every
/// worker is stopped and every fault healed when this returns, on every path. `on_tick` gets
/// the merged figures so far about once a second while the workers run (acquire counts and
/// latency from their streamed seconds; releases and holders only in the final figures,
/// which come back in the returned [`Experiment`]).
///
/// # Errors
/// [`WorkersError`] when the control API cannot listen, the workers cannot be launched or do
/// not all get ready, or the merged evidence cannot be written or checked.
#[allow(clippy::too_many_arguments)]
pub async fn run_strategy(
    plan: &WorkersPlan,
    test: &Test,
    kind: StrategyKind,
    endpoints: &[Vec<NodeEndpoint>],
    faults: Option<&WorkerFaults>,
    audit: bool,
    ledger: &LedgerBackend,
    dir: &Path,
    mut shutdown: watch::Receiver<bool>,
    mut on_tick: impl FnMut(&Collector, Duration),
) -> Result<(Experiment, WorkersSummary), WorkersError> {
    let files = |path: &Path, e: &dyn std::fmt::Display| WorkersError::Files {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    if dir.join("history.jsonl").exists() {
        return Err(ExperimentError::Occupied {
            path: dir.to_path_buf(),
        }
        .into());
    }
    let workers_dir = dir.join("workers");
    std::fs::create_dir_all(&workers_dir).map_err(|e| files(&workers_dir, &e))?;
    let mode = if kind.is_fenced() {
        FenceMode::Fenced
    } else {
        FenceMode::Unfenced
    };
    let shared_ledger = shared_ledger(audit, ledger, mode).await?;
    let slots = plan_slots(plan, test, kind, endpoints, shared_ledger.as_ref());
    let (opened, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        board: Mutex::new(Board {
            workers: slots.iter().map(|_| WorkerState::default()).collect(),
            slots,
            start_unix_us: None,
            abort: None,
            stop: false,
        }),
        opened,
        history_dir: workers_dir.clone(),
    });
    let mut serving = serve(plan, &shared, &workers_dir).await?;
    let mut schedule = None;
    let mut outcome = barrier(&shared, &mut serving, &mut shutdown).await;
    if outcome.is_ok() {
        if let Some(f) = faults {
            let b = shared.board();
            let processes = b
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| WorkerProcess {
                    pid: serving.launched.pid(i).unwrap_or(0),
                    first_client: s.client_base,
                    clients: s.clients,
                })
                .collect();
            let start = b.start_unix_us.unwrap_or_else(unix_now_us);
            drop(b);
            schedule = Some(Schedule::start(f, shared.clone(), processes, start));
        }
        outcome = supervise(
            &shared,
            &mut serving,
            test,
            &mut shutdown,
            schedule.as_ref(),
            &mut on_tick,
        )
        .await;
    }
    // Healed before the workers are stopped: a paused worker is resumed first.
    let mut windows = Vec::new();
    if let Some(s) = schedule {
        let (w, healed) = s.finish().await;
        windows = w;
        if let (Ok(()), Err(e)) = (&outcome, healed) {
            outcome = Err(e.into());
        }
    }
    serving.stop().await;
    outcome?;
    super::evidence::finish(&shared, test, plan, dir, shared_ledger, windows).await
}

/// The PostgreSQL schema every worker writes when the run is audited (`None` otherwise).
///
/// # Errors
/// [`WorkersError::Protocol`] when the ledger is not PostgreSQL; the ledger's error when the
/// schema cannot be created.
async fn shared_ledger(
    audit: bool,
    ledger: &LedgerBackend,
    mode: FenceMode,
) -> Result<Option<(PgLedgerUrl, String)>, WorkersError> {
    Ok(match (audit, ledger) {
        (false, _) => None,
        (true, LedgerBackend::Postgres(url)) => {
            let schema = crate::ledger::create_shared_schema(url, mode)
                .await
                .map_err(ExperimentError::from)?;
            Some((url.clone(), schema))
        }
        (true, other) => {
            return Err(WorkersError::Protocol(format!(
                "workers need a ledger they can all write: PostgreSQL, not {}",
                other.describe()
            )))
        }
    })
}

/// One slot per worker: its client-id range, its share of an op count and of the acquire
/// window, the nodes as it reaches them, the shared ledger and its first section id.
fn plan_slots(
    plan: &WorkersPlan,
    test: &Test,
    kind: StrategyKind,
    endpoints: &[Vec<NodeEndpoint>],
    shared_ledger: Option<&(PgLedgerUrl, String)>,
) -> Vec<Slot> {
    let worker_host = plan.launcher.worker_host();
    let ranges = client_ranges(test.workload.clients, plan.workers);
    let shares = match test.workload.stop {
        StopCondition::Ops(n) => op_shares(n, plan.workers).into_iter().map(Some).collect(),
        StopCondition::Duration(_) => vec![None; plan.workers as usize],
    };
    // The run's acquire window (`--in-flight`) is shared out, so N workers keep as many
    // acquires in flight as one process would (0: unlimited, everywhere).
    let windows = in_flight_shares(test.workload.in_flight, plan.workers);
    ranges
        .iter()
        .zip(shares)
        .enumerate()
        .map(|(i, (&(client_base, clients), ops))| Slot {
            worker: i as u32,
            workers: plan.workers,
            client_base,
            clients,
            ops,
            test: with_window(test, windows[i]),
            strategy: kind,
            endpoints: endpoints
                .get(i)
                .or(endpoints.first())
                .into_iter()
                .flatten()
                .map(|e| {
                    let wire = WireEndpoint::from_endpoint(e);
                    match &worker_host {
                        Some(host) => wire.on_host(host),
                        None => wire,
                    }
                })
                .collect(),
            ledger: shared_ledger.map(|(url, schema)| WireLedger {
                url: url.secret_url().to_string(),
                schema: schema.clone(),
            }),
            first_section: (i as u64) << 40,
        })
        .collect()
}

/// Starts the control API on the launcher's address and launches the workers against it.
///
/// # Errors
/// [`WorkersError::Listen`] when the address cannot be bound; the launcher's error (the API
/// stopped) when the workers cannot be launched.
async fn serve(
    plan: &WorkersPlan,
    shared: &Arc<Shared>,
    workers_dir: &Path,
) -> Result<Serving, WorkersError> {
    let app = super::api::router(shared.clone());
    let addr: SocketAddr = plan.launcher.control_bind();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| WorkersError::Listen {
            addr: addr.to_string(),
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| WorkersError::Listen {
            addr: addr.to_string(),
            source,
        })?;
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("control API: {e}");
        }
    });
    let url = plan.launcher.coordinator_url(local);
    tracing::info!("control API on {url}; launching {} workers", plan.workers);
    let launched = match plan.launcher.launch(plan.workers, &url, workers_dir).await {
        Ok(l) => l,
        Err(e) => {
            server.abort();
            return Err(e);
        }
    };
    Ok(Serving { server, launched })
}

/// Waits until every worker is ready and time zero is set (or the start fails); writes
/// `workers/pids.json` then (for tests and operators).
async fn barrier(
    shared: &Shared,
    serving: &mut Serving,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), WorkersError> {
    let tick = Duration::from_millis(100);
    let ready_by = tokio::time::Instant::now() + READY_WITHIN;
    let n = shared.board().workers.len();
    // Until time zero is set.
    loop {
        if shared.board().start_unix_us.is_some() {
            break;
        }
        let exited: Vec<(usize, String)> = (0..n)
            .filter_map(|i| serving.launched.exited(i).map(|s| (i, s)))
            .collect();
        let why = if let Some((i, status)) = exited.first() {
            Some(format!(
                "worker {i} exited before the start ({status}); see its log w{i}.log"
            ))
        } else if *shutdown.borrow() {
            Some("interrupted before the start".to_string())
        } else if tokio::time::Instant::now() >= ready_by {
            Some(format!(
                "not every worker registered and connected its clients within {READY_WITHIN:?}"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            shared.board().abort = Some(why.clone());
            let _ = shared.opened.send(true);
            return Err(WorkersError::Timeout(why));
        }
        tokio::time::sleep(tick).await;
    }
    let pids: Vec<Option<u32>> = (0..n).map(|i| serving.launched.pid(i)).collect();
    // The host's pid (a worker in a container registered the one it sees, 1).
    for (w, pid) in shared.board().workers.iter_mut().zip(&pids) {
        w.pid = pid.or(w.pid);
    }
    let pids_path = shared.history_dir.join("pids.json");
    let _ = crate::atomic_file::write_json(&pids_path, &pids);
    Ok(())
}

/// Waits for every worker to report or be lost, passing the merged figures to `on_tick`
/// every [`LIVE_TICK`]. A worker whose process the schedule paused is not counted silent
/// while the pause lasts ([`super::faults`]); Ctrl-C stops the schedule too.
async fn supervise(
    shared: &Shared,
    serving: &mut Serving,
    test: &Test,
    shutdown: &mut watch::Receiver<bool>,
    schedule: Option<&Schedule>,
    on_tick: &mut dyn FnMut(&Collector, Duration),
) -> Result<(), WorkersError> {
    let tick = Duration::from_millis(100);
    let n = shared.board().workers.len();
    let run_for = match test.workload.stop {
        StopCondition::Duration(d) => d,
        // An op count: as long as it takes, bounded generously.
        StopCondition::Ops(_) => Duration::from_secs(3600),
    };
    let end_by = tokio::time::Instant::now()
        + START_LEAD
        + run_for
        + driver::drain_grace(&test.workload)
        + Duration::from_secs(30);
    let ttl_ms = test.client.ttl.as_millis() as u64;
    let mut next_tick = tokio::time::Instant::now() + LIVE_TICK;
    loop {
        if *shutdown.borrow() {
            shared.board().stop = true;
            if let Some(s) = schedule {
                s.stop();
            }
        }
        if tokio::time::Instant::now() >= next_tick {
            next_tick += LIVE_TICK;
            let (seconds, start) = {
                let b = shared.board();
                let seconds: Vec<Vec<WireSecond>> = b
                    .workers
                    .iter()
                    .map(|w| w.seconds.values().cloned().collect())
                    .collect();
                (seconds, b.start_unix_us.unwrap_or(0))
            };
            match live_collector(&seconds, ttl_ms) {
                Ok(c) => {
                    let elapsed = Duration::from_micros(unix_now_us().saturating_sub(start));
                    on_tick(&c, elapsed);
                }
                Err(e) => tracing::warn!("merged live figures: {e}"),
            }
        }
        let start_unix_us = shared.board().start_unix_us.unwrap_or(0);
        let lost_at = || unix_now_us().saturating_sub(start_unix_us);
        let mut pending = 0;
        for i in 0..n {
            let (reported, lost, silent, killed) = {
                let b = shared.board();
                let w = &b.workers[i];
                (
                    w.report.is_some(),
                    w.lost.is_some(),
                    !w.paused_by_nemesis
                        && w.last_heard.is_none_or(|t| t.elapsed() >= SILENCE_LIMIT),
                    w.killed_by_nemesis.clone(),
                )
            };
            if reported || lost {
                continue;
            }
            let why = if let Some(status) = serving.launched.exited(i) {
                Some(match killed {
                    Some(by) => format!("its process exited ({status}): {by}"),
                    None => format!("its process exited ({status}) before it reported"),
                })
            } else if silent {
                serving.launched.kill(i).await;
                Some(format!("not heard from for {SILENCE_LIMIT:?}; killed"))
            } else if tokio::time::Instant::now() >= end_by {
                serving.launched.kill(i).await;
                Some("still running long after the run's end; killed".to_string())
            } else {
                None
            };
            match why {
                Some(why) => {
                    tracing::warn!("worker {i} lost: {why}");
                    shared.board().workers[i].lost = Some(LostWorker {
                        worker: i as u32,
                        why,
                        at_us: lost_at(),
                    });
                }
                None => pending += 1,
            }
        }
        if pending == 0 {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Worker `i`'s share of the acquire window `in_flight` (0 = unlimited stays 0; each share is
/// at least 1).
fn in_flight_shares(in_flight: u32, workers: u32) -> Vec<u32> {
    if in_flight == 0 {
        return vec![0; workers as usize];
    }
    op_shares(u64::from(in_flight), workers)
        .into_iter()
        .map(|n| (n as u32).max(1))
        .collect()
}

/// `test` with its acquire window set to `in_flight`.
fn with_window(test: &Test, in_flight: u32) -> Test {
    let mut t = test.clone();
    t.workload.in_flight = in_flight;
    t
}

/// How often the merged figures go to the run's tick while workers run.
const LIVE_TICK: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acquire_window_is_shared_out_over_the_workers() {
        assert_eq!(in_flight_shares(256, 6), vec![43, 43, 43, 43, 42, 42]);
        assert_eq!(in_flight_shares(256, 6).iter().sum::<u32>(), 256);
        assert_eq!(in_flight_shares(2, 3), vec![1, 1, 1]);
        assert_eq!(in_flight_shares(0, 3), vec![0, 0, 0]);
    }
}
