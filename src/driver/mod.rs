//! The workload driver: N tokio clients taking locks with one strategy, measured off the hot path.
//!
//! | file | what |
//! |---|---|
//! | [`workload`] | the workload description (clients, resources, hold, stop, pacing, seed) |
//! | [`metrics`] | samples → HdrHistograms and a per-second timeline, in one collector |
//! | [`client`] | one client's loop: acquire → critical section → release |
//!
//! [`run_strategy`] connects the clients, runs them until the stop condition, a shutdown
//! signal or an error, and returns the collector. The caller gets a callback about once a
//! second so it can rewrite the result files while the run goes.

pub mod client;
pub mod metrics;
pub mod workload;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use metrics::{Collector, Sample, SampleKind};
pub use workload::{HoldTime, Pacing, StopCondition, WorkKind, Workload, WorkloadError};

use crate::history::HistoryRecorder;
use crate::nemesis::ClientControls;
use crate::node::{ConnectOptions, NodeEndpoint};
use crate::strategy::{LockClient, StrategyError, StrategyOptions};

/// How long clients get to finish their current operation after a stop or shutdown before
/// they are aborted (their leases then simply expire): the longest hold plus 2 s, at least
/// 3 s and at most 30 s. Sections still inside after it are counted in
/// [`StrategyRun::cut_sections`].
pub fn drain_grace(workload: &Workload) -> Duration {
    (workload.hold.max().saturating_add(Duration::from_secs(2)))
        .clamp(Duration::from_secs(3), Duration::from_secs(30))
}

/// Errors that stop a strategy's run before it starts. Errors during the run (a node dying)
/// are counted as samples, never returned.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A client could not connect.
    #[error(
        "client {client} of {clients} could not connect (at most {CONNECT_WINDOW} connecting at once, \
         --connect-timeout {connect_timeout:?}): {source}"
    )]
    Connect {
        /// Client id.
        client: u32,
        /// Clients in the workload.
        clients: u32,
        /// The connect timeout in force.
        connect_timeout: Duration,
        /// Why.
        source: StrategyError,
    },
    /// The workload is invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// What a strategy's run needs besides the strategy itself.
#[derive(Clone)]
pub struct DriverContext {
    /// Nodes to lock on (through proxies when the topology has them).
    pub endpoints: Vec<NodeEndpoint>,
    /// Per-client endpoints: client `i` locks on `client_endpoints[i]` when there is such an
    /// entry (its own proxies, so a fault can cut it alone), on `endpoints` otherwise. Empty =
    /// every client uses `endpoints`.
    pub client_endpoints: Vec<Vec<NodeEndpoint>>,
    /// Connect and response timeouts for every client connection.
    pub connect: ConnectOptions,
    /// The workload.
    pub workload: Workload,
    /// Becomes `true` on Ctrl-C / SIGTERM: clients stop and the run ends as interrupted.
    pub shutdown: watch::Receiver<bool>,
    /// Called as clients connect, with `(connected, total)`, at most every 250 ms and once at
    /// the end (the CLI shows a progress line; `None` = silent).
    pub connect_progress: Option<ConnectProgress>,
}

impl std::fmt::Debug for DriverContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverContext")
            .field("endpoints", &self.endpoints)
            .field("client_endpoints", &self.client_endpoints.len())
            .field("connect", &self.connect)
            .field("workload", &self.workload)
            .field("connect_progress", &self.connect_progress.is_some())
            .finish_non_exhaustive()
    }
}

impl DriverContext {
    /// The endpoints client `client` locks on (see [`DriverContext::client_endpoints`]).
    pub fn endpoints_of(&self, client: u32) -> &[NodeEndpoint] {
        self.client_endpoints
            .get(client as usize)
            .unwrap_or(&self.endpoints)
    }
}

/// See [`DriverContext::connect_progress`].
pub type ConnectProgress = Arc<dyn Fn(u32, u32) + Send + Sync>;

/// Most client connections opened at once. Opening thousands at the same instant overflows the
/// node's accept backlog (SYNs are dropped and retried after 1 s, so connects time out); a
/// bounded window keeps the backlog short and lets 10,000 clients connect in a few seconds.
pub const CONNECT_WINDOW: usize = 128;

/// Shared stop state of one strategy's run.
#[derive(Debug)]
pub struct StopState {
    stopped: AtomicBool,
    attempts: AtomicU64,
    max_attempts: Option<u64>,
    deadline: Option<Instant>,
    /// Where the moment of the stop is marked ([`HistoryRecorder::record_run_end`]).
    history: HistoryRecorder,
}

impl StopState {
    fn new(stop: StopCondition, start: Instant, history: HistoryRecorder) -> Self {
        let (max_attempts, deadline) = match stop {
            // Inputs stop at 24 h (`duration_ms::LONGEST`); checked all the same.
            StopCondition::Duration(d) => (
                None,
                start
                    .checked_add(d)
                    .or_else(|| start.checked_add(crate::duration_ms::LONGEST)),
            ),
            StopCondition::Ops(n) => (Some(n), None),
        };
        Self {
            stopped: AtomicBool::new(false),
            attempts: AtomicU64::new(0),
            max_attempts,
            deadline,
            history,
        }
    }

    /// Claims one attempt; `false` when the run is over and the client should stop.
    pub fn claim_attempt(&self) -> bool {
        if self.stopped.load(Ordering::Acquire) {
            return false;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.stop();
            return false;
        }
        if let Some(max) = self.max_attempts {
            if self.attempts.fetch_add(1, Ordering::AcqRel) >= max {
                self.stop();
                return false;
            }
        }
        true
    }

    /// Has the run's time (if it has a duration) run out?
    pub fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Ends the run for every client. The first call marks the moment in the history (a
    /// `run-end` event, before the drain), so the checker knows how long acquires still in
    /// flight at the end had waited.
    pub fn stop(&self) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            self.history.record_run_end();
        }
    }

    /// Has the run ended?
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// The outcome of one strategy's run.
pub struct StrategyRun {
    /// Every histogram and counter.
    pub collector: Collector,
    /// Wall time the clients ran.
    pub elapsed: Duration,
    /// True when a shutdown signal ended the run early.
    pub interrupted: bool,
    /// Critical sections still inside when the drain grace ran out ([`drain_grace`]): their
    /// clients were stopped before `end`, so the ledger shows them begun, never ended.
    pub cut_sections: u64,
    /// Why the run was stopped because a client's lock service itself broke: an `adapter:*`
    /// process that broke the protocol or exited (the reason names the adapter and the line).
    pub client_failure: Option<String>,
}

/// How often the lag probe wakes up.
const LAG_PROBE_PERIOD: Duration = Duration::from_millis(10);

/// A task on the clients' runtime that sleeps [`LAG_PROBE_PERIOD`] at a time and reports how
/// late it woke: the delay the harness itself adds to every client step (tokio's 1 ms timer
/// makes ~1 ms the floor). Its first wake-up is due one period after the run's `start`, so a
/// run whose clients began late (the runtime or the file system stalled after the clock
/// started) shows that delay as lag instead of losing it. Stops with the run.
async fn lag_probe(
    samples: mpsc::UnboundedSender<Sample>,
    stop: Arc<StopState>,
    ledger: Option<crate::ledger::Ledger>,
    start: Instant,
) {
    let mut next = start + LAG_PROBE_PERIOD;
    while !stop.is_stopped() {
        tokio::time::sleep_until(next).await;
        let now = Instant::now();
        let sample = Sample {
            kind: SampleKind::HarnessLag {
                queued: ledger.as_ref().map_or(0, |l| l.queued()),
            },
            latency_us: now.saturating_duration_since(next).as_micros() as u64,
            at: now.saturating_duration_since(start),
            resource: None,
        };
        if samples.send(sample).is_err() {
            return;
        }
        next = now + LAG_PROBE_PERIOD;
    }
}

/// Opens every client's connections (one [`LockClient`] per client, or one shared when the
/// workload says so; for an `adapter:*` strategy with `adapter_processes`, that many, client
/// `i` sharing the `i mod n`-th). Connecting happens before the strategy's clock starts.
///
/// # Errors
/// [`DriverError`] when the workload is invalid or a client cannot connect.
pub async fn connect_clients(
    ctx: &DriverContext,
    opts: &StrategyOptions,
) -> Result<Vec<LockClient>, DriverError> {
    ctx.workload.validate()?;
    if let Err(e) = crate::topology::limits::raise_nofile_limit() {
        tracing::warn!("cannot raise the descriptor limit: {e}");
    }
    let n = ctx.workload.clients;
    if ctx.workload.shared_connection {
        let opts = StrategyOptions {
            adapter_shared: true,
            ..opts.clone()
        };
        let shared = LockClient::connect(&ctx.endpoints, opts, &ctx.connect)
            .await
            .map_err(|source| connect_error(0, n, &ctx.connect, source))?;
        return Ok(vec![shared; n as usize]);
    }
    // `--adapter-processes`: a few adapter processes, each serving its clients concurrently;
    // client `i` gets process `i mod processes`.
    let processes = match ctx.workload.adapter_processes {
        Some(p) if opts.kind.is_adapter() && p < n => p,
        _ => n,
    };
    let opts = &StrategyOptions {
        adapter_shared: processes < n,
        ..opts.clone()
    };
    let window = Arc::new(tokio::sync::Semaphore::new(CONNECT_WINDOW));
    let mut set = JoinSet::new();
    for id in 0..processes {
        let endpoints = ctx.endpoints_of(id).to_vec();
        let opts = opts.clone();
        let connect = ctx.connect;
        let window = window.clone();
        set.spawn(async move {
            let _slot = window.acquire_owned().await;
            (id, LockClient::connect(&endpoints, opts, &connect).await)
        });
    }
    let mut slots: Vec<Option<LockClient>> = (0..processes).map(|_| None).collect();
    let mut connected = 0u32;
    let mut last_report = Instant::now();
    while let Some(joined) = set.join_next().await {
        let (id, res) = joined.expect("connect task panicked");
        let c = res.map_err(|source| connect_error(id, n, &ctx.connect, source))?;
        slots[id as usize] = Some(c);
        connected += 1;
        if let Some(progress) = &ctx.connect_progress {
            if connected == processes || last_report.elapsed() >= Duration::from_millis(250) {
                progress(connected, processes);
                last_report = Instant::now();
            }
        }
    }
    let slots: Vec<LockClient> = slots
        .into_iter()
        .map(|c| c.expect("every slot filled"))
        .collect();
    Ok((0..n as usize)
        .map(|i| slots[i % slots.len()].clone())
        .collect())
}

fn connect_error(
    client: u32,
    clients: u32,
    connect: &ConnectOptions,
    source: StrategyError,
) -> DriverError {
    DriverError::Connect {
        client,
        clients,
        connect_timeout: connect.connect_timeout,
        source,
    }
}

/// Connects, then runs `ctx.workload` with one strategy from now on. See [`run_clients`].
///
/// # Errors
/// [`DriverError`] when the workload is invalid or a client cannot connect.
pub async fn run_strategy(
    ctx: &DriverContext,
    opts: &StrategyOptions,
    controls: &ClientControls,
    hooks: &client::SectionHooks,
    on_tick: impl FnMut(&Collector, Duration),
) -> Result<StrategyRun, DriverError> {
    let clients = connect_clients(ctx, opts).await?;
    Ok(run_clients(ctx, clients, controls, hooks, Instant::now(), on_tick).await)
}

/// Runs connected clients from `start` until the stop condition or a shutdown, and returns
/// what was measured. Node errors during the run are samples, never errors.
///
/// `on_tick(&collector, elapsed)` is called about once a second from the collector loop, and
/// once more at the end; the CLI uses it to rewrite `summary.json` and the `.hgrm` files, so an
/// interrupted run keeps what it measured.
pub async fn run_clients(
    ctx: &DriverContext,
    lock_clients: Vec<LockClient>,
    controls: &ClientControls,
    hooks: &client::SectionHooks,
    start: Instant,
    mut on_tick: impl FnMut(&Collector, Duration),
) -> StrategyRun {
    let stop = Arc::new(StopState::new(
        ctx.workload.stop,
        start,
        hooks.history.clone(),
    ));
    let ttl_ms = lock_clients
        .first()
        .filter(|c| c.kind().has_ttl())
        .map_or(0, |c| c.options().ttl.as_millis() as u64);
    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
    tokio::spawn(lag_probe(
        tx.clone(),
        stop.clone(),
        hooks.ledger.clone(),
        start,
    ));
    // Adapter clients are watched for a failed process (one clone per client shares it).
    let adapters: Vec<LockClient> = lock_clients
        .iter()
        .filter(|c| c.kind().is_adapter())
        .cloned()
        .collect();
    let mut client_failure: Option<String> = None;
    let mut clients = spawn_clients(ctx, lock_clients, controls, hooks, &tx, &stop, start);
    drop(tx);

    let mut shutdown = ctx.shutdown.clone();
    let mut interrupted = *shutdown.borrow();
    if interrupted {
        stop.stop();
    }
    let mut collector = Collector::for_ttl(ttl_ms);
    let mut warned = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut drain_deadline: Option<Instant> = None;
    let mut stop_poll = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            sample = rx.recv() => match sample {
                Some(s) => collector.record(s),
                None => break,
            },
            _ = tick.tick() => {
                warned = warned || warn_if_overloaded(&collector, ttl_ms);
                on_tick(&collector, start.elapsed());
            }
            changed = shutdown.changed(), if !interrupted => {
                if changed.is_err() || *shutdown.borrow() {
                    interrupted = true;
                    stop.stop();
                }
            }
            _ = stop_poll.tick() => {
                // Time-based stop even when every client is blocked in a long operation.
                if stop.deadline.is_some_and(|d| Instant::now() >= d) {
                    stop.stop();
                }
                // Evidence that cannot be written stops the run at once (the experiment then
                // fails, saying what was lost).
                if !stop.is_stopped() && hooks.evidence_failed() {
                    tracing::error!("the history or ledger cannot be written: stopping the run");
                    stop.stop();
                }
                // A broken adapter answers nothing useful any more: stop, keep what was recorded.
                if client_failure.is_none() {
                    if let Some(why) = adapters.iter().find_map(LockClient::failure) {
                        tracing::error!("{why}: stopping the run");
                        client_failure = Some(why);
                        stop.stop();
                    }
                }
                if stop.is_stopped() {
                    let grace = drain_grace(&ctx.workload);
                    let d = *drain_deadline.get_or_insert_with(|| Instant::now() + grace);
                    if Instant::now() >= d {
                        clients.abort_all();
                    }
                }
            }
        }
    }
    while clients.join_next().await.is_some() {}
    if client_failure.is_none() {
        client_failure = adapters.iter().find_map(LockClient::failure);
    }
    add_adapter_overhead(&mut collector, &adapters);
    drop(adapters);
    let elapsed = stop
        .deadline
        .map(|d| d.min(Instant::now()) - start)
        .unwrap_or_else(|| start.elapsed());
    on_tick(&collector, elapsed);
    StrategyRun {
        collector,
        elapsed,
        interrupted,
        cut_sections: hooks.inside.load(Ordering::Acquire),
        client_failure,
    }
}

/// Spawns one task per connected client, sharing the acquire window (`--in-flight`, when it
/// is smaller than the client count), the samples channel and the stop state.
fn spawn_clients(
    ctx: &DriverContext,
    lock_clients: Vec<LockClient>,
    controls: &ClientControls,
    hooks: &client::SectionHooks,
    tx: &mpsc::UnboundedSender<Sample>,
    stop: &Arc<StopState>,
    start: Instant,
) -> JoinSet<()> {
    let window = (ctx.workload.in_flight > 0 && ctx.workload.clients > ctx.workload.in_flight)
        .then(|| Arc::new(tokio::sync::Semaphore::new(ctx.workload.in_flight as usize)));
    let mut clients = JoinSet::new();
    for (id, lock) in lock_clients.into_iter().enumerate() {
        let c = client::Client {
            id: id as u32,
            lock,
            workload: ctx.workload.clone(),
            controls: controls.clone(),
            hooks: hooks.clone(),
            samples: tx.clone(),
            stop: stop.clone(),
            start,
            window: window.clone(),
        };
        clients.spawn(c.run());
    }
    clients
}

/// Warns that the harness is overloaded when its scheduling lagged a tenth of the TTL or
/// more in the last second (`ttl_ms` 0: never); returns whether it warned.
fn warn_if_overloaded(collector: &Collector, ttl_ms: u64) -> bool {
    let lag_us = collector.last_second_lag_us();
    if ttl_ms > 0 && lag_us >= ttl_ms * 100 {
        tracing::warn!(
            "harness overloaded: its scheduling lagged {} ms in the last second vs \
             TTL {ttl_ms} ms; anomalies in this run may come from the harness, not the lock",
            lag_us / 1000
        );
        return true;
    }
    false
}

/// Adds each adapter process's overhead once (clients may share a process).
fn add_adapter_overhead(collector: &mut Collector, adapters: &[LockClient]) {
    for (i, c) in adapters.iter().enumerate() {
        if adapters[..i].iter().any(|p| p.same_connection(c)) {
            continue;
        }
        if let Some(o) = c.adapter_overhead() {
            collector.adapter_overhead.add(&o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn clients_that_begin_late_show_the_delay_as_harness_lag() {
        let clock = crate::history::RunClock::start();
        let stop = Arc::new(StopState::new(
            StopCondition::Ops(1),
            Instant::now(),
            HistoryRecorder::disabled(clock),
        ));
        let (tx, mut rx) = mpsc::unbounded_channel();
        // The run's clock started 400 ms before the probe could run.
        let start = Instant::now() - Duration::from_millis(400);
        let probe = tokio::spawn(lag_probe(tx, stop, None, start));
        let first = rx.recv().await.expect("a sample");
        probe.abort();
        assert!(
            first.latency_us >= 390_000,
            "the late start is lag: {} µs",
            first.latency_us
        );
        assert!(first.at >= Duration::from_millis(400), "{:?}", first.at);
    }
}
