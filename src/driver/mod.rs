//! The workload driver: N tokio clients taking locks with one strategy, measured off the hot path.
//!
//! | file | what |
//! |---|---|
//! | [`workload`] | the workload description (clients, resources, hold, stop, pacing, seed) |
//! | [`control`] | per-client nemesis hooks: pause and crash while holding |
//! | [`metrics`] | samples → HdrHistograms and a per-second timeline, in one collector |
//! | [`client`] | one client's loop: acquire → critical section → release |
//!
//! [`run_strategy`] connects the clients, runs them until the stop condition, a shutdown
//! signal or an error, and returns the collector. The caller gets a callback about once a
//! second so it can rewrite the result files while the run goes.

pub mod client;
pub mod control;
pub mod metrics;
pub mod workload;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use control::{ClientControl, ClientControls};
pub use metrics::{Collector, Sample, SampleKind};
pub use workload::{HoldTime, Pacing, StopCondition, Workload, WorkloadError};

use crate::node::{ConnectOptions, NodeEndpoint};
use crate::strategy::{LockClient, StrategyError, StrategyOptions};

/// How long clients get to finish their current operation after a stop or shutdown before
/// they are aborted (their leases then simply expire): the longest hold plus 2 s, at least
/// 3 s and at most 30 s. Sections still inside after it are counted in
/// [`StrategyRun::cut_sections`].
pub fn drain_grace(workload: &Workload) -> Duration {
    (workload.hold.max() + Duration::from_secs(2))
        .clamp(Duration::from_secs(3), Duration::from_secs(30))
}

/// Errors that stop a strategy's run before it starts. Errors during the run (a node dying)
/// are counted as samples, never returned.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A client could not connect.
    #[error("client {client} could not connect: {source}")]
    Connect {
        /// Client id.
        client: u32,
        /// Why.
        source: StrategyError,
    },
    /// The workload is invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// What a strategy's run needs besides the strategy itself.
#[derive(Debug, Clone)]
pub struct DriverContext {
    /// Nodes to lock on (through proxies when the topology has them).
    pub endpoints: Vec<NodeEndpoint>,
    /// Connect and response timeouts for every client connection.
    pub connect: ConnectOptions,
    /// The workload.
    pub workload: Workload,
    /// Becomes `true` on Ctrl-C / SIGTERM: clients stop and the run ends as interrupted.
    pub shutdown: watch::Receiver<bool>,
}

/// Shared stop state of one strategy's run.
#[derive(Debug)]
pub struct StopState {
    stopped: AtomicBool,
    attempts: AtomicU64,
    max_attempts: Option<u64>,
    deadline: Option<Instant>,
}

impl StopState {
    fn new(stop: StopCondition, start: Instant) -> Self {
        let (max_attempts, deadline) = match stop {
            StopCondition::Duration(d) => (None, Some(start + d)),
            StopCondition::Ops(n) => (Some(n), None),
        };
        Self {
            stopped: AtomicBool::new(false),
            attempts: AtomicU64::new(0),
            max_attempts,
            deadline,
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

    /// Ends the run for every client.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
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
}

/// Opens every client's connections (one [`LockClient`] per client, or one shared when the
/// workload says so). Connecting happens before the strategy's clock starts.
///
/// # Errors
/// [`DriverError`] when the workload is invalid or a client cannot connect.
pub async fn connect_clients(
    ctx: &DriverContext,
    opts: &StrategyOptions,
) -> Result<Vec<LockClient>, DriverError> {
    ctx.workload.validate()?;
    let n = ctx.workload.clients;
    if ctx.workload.shared_connection {
        let shared = LockClient::connect(&ctx.endpoints, opts.clone(), &ctx.connect)
            .await
            .map_err(|source| DriverError::Connect { client: 0, source })?;
        return Ok(vec![shared; n as usize]);
    }
    let mut set = JoinSet::new();
    for id in 0..n {
        let endpoints = ctx.endpoints.clone();
        let opts = opts.clone();
        let connect = ctx.connect;
        set.spawn(async move { (id, LockClient::connect(&endpoints, opts, &connect).await) });
    }
    let mut slots: Vec<Option<LockClient>> = (0..n).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let (id, res) = joined.expect("connect task panicked");
        let c = res.map_err(|source| DriverError::Connect { client: id, source })?;
        slots[id as usize] = Some(c);
    }
    Ok(slots
        .into_iter()
        .map(|c| c.expect("every slot filled"))
        .collect())
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
    let stop = Arc::new(StopState::new(ctx.workload.stop, start));
    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
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
        };
        clients.spawn(c.run());
    }
    drop(tx);

    let mut shutdown = ctx.shutdown.clone();
    let mut interrupted = *shutdown.borrow();
    if interrupted {
        stop.stop();
    }
    let mut collector = Collector::default();
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
            _ = tick.tick() => on_tick(&collector, start.elapsed()),
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
    }
}
