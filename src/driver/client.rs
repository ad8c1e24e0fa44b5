//! One client's loop: pick a resource, acquire, run the critical section, release — recording
//! every step in the history and the ledger.
//!
//! The critical section is `begin → read counter → hold → (stall while paused) → write
//! counter + 1 → end` on the ledger, so a paused holder writes with whatever token it had when
//! it stalled, exactly the stale write the fencing check must reject.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::metrics::{Sample, SampleKind, SampleSender};
use super::workload::{Pacing, Workload};
use super::StopState;
use crate::history::{ErrorKind, HistoryRecorder, Op, OpFn, OpKind, RunClock};
use crate::lease::{AcquireError, Lease, NodeFailureKind, ReleaseFinding};
use crate::ledger::{Ledger, SectionRef};
use crate::nemesis::{ClientControl, ClientControls};
use crate::strategy::{LockClient, StrategyError, StrategyKind, Watchdog};

/// Where a critical section leaves its trace: the history (every op) and the ledger (the
/// protected resource). Both may be disabled for pure speed runs.
#[derive(Clone)]
pub struct SectionHooks {
    /// Operation history.
    pub history: HistoryRecorder,
    /// The protected resource; `None` = no ledger steps (the section only holds).
    pub ledger: Option<Ledger>,
    /// Next critical-section id (unique per strategy run).
    pub sections: Arc<AtomicU64>,
    /// Strategy name, written on invokes.
    pub strategy: String,
    /// Sections inside right now (entered, not yet left or crashed). Not decremented when a
    /// client task is aborted, so after the run it counts the sections that were cut.
    pub inside: Arc<AtomicU64>,
    /// Added to each client's index (`0..clients`) for the id it records in the history and
    /// the ledger: a worker of a multi-worker run records its slot's client-id range. 0 for a
    /// run in one process.
    pub client_base: u32,
    /// `external` work: the side-effect sink every section calls once; `None` for `row` work.
    pub sink: Option<SectionSink>,
}

/// Where the sections of `external` work send their one call ([`crate::sink`]).
#[derive(Clone)]
pub struct SectionSink {
    /// The sink's client.
    pub client: crate::sink::SinkClient,
    /// Whether every call carries the job as its idempotency key.
    pub idempotency_key: bool,
}

impl SectionHooks {
    /// Hooks that record nothing, on a clock starting now.
    pub fn disabled(strategy: StrategyKind) -> Self {
        Self {
            history: HistoryRecorder::disabled(RunClock::start()),
            ledger: None,
            sections: Arc::new(AtomicU64::new(0)),
            strategy: strategy.to_string(),
            inside: Arc::new(AtomicU64::new(0)),
            client_base: 0,
            sink: None,
        }
    }

    /// Whether the evidence can no longer be written: the history writer failed, or a ledger
    /// step did not commit (disk full, I/O error). The run must stop: whatever it does from
    /// then on leaves no trace the checker could judge.
    pub fn evidence_failed(&self) -> bool {
        self.history.writer_failed() || self.ledger.as_ref().is_some_and(|l| l.failed_steps() > 0)
    }
}

/// How an acquire error is recorded: `fail` when it certainly took no effect, `info` when a
/// node may have applied it (timeouts, dropped connections).
pub fn classify(err: &AcquireError) -> (OpKind, ErrorKind) {
    match err {
        AcquireError::Held { .. } => (OpKind::Fail, ErrorKind::Busy),
        // Unknown only when the quorum arithmetic leaves it possible: the nodes that failed
        // may have set our key, and with the ones we locked they could make a quorum.
        // Fewer than that (e.g. 0 locked, 1 of 3 failed) cannot have taken effect: `fail`.
        AcquireError::QuorumNotReached {
            locked,
            needed,
            failed,
            ..
        } => {
            if *failed > 0 && locked + failed >= *needed {
                (OpKind::Info, ErrorKind::Other)
            } else if *failed > 0 {
                (OpKind::Fail, ErrorKind::Other)
            } else {
                (OpKind::Fail, ErrorKind::Busy)
            }
        }
        AcquireError::ValidityExhausted { .. } => (OpKind::Info, ErrorKind::Timeout),
        AcquireError::Timeout { last, .. } => match classify(last) {
            (OpKind::Fail, _) => (OpKind::Fail, ErrorKind::Timeout),
            (kind, _) => (kind, ErrorKind::Timeout),
        },
        AcquireError::Node(f) => (OpKind::Info, node_error_kind(f.kind)),
        AcquireError::AllNodesFailed { failures } => (
            OpKind::Info,
            failures
                .first()
                .map_or(ErrorKind::Other, |f| node_error_kind(f.kind)),
        ),
        AcquireError::Lost { .. } => (OpKind::Fail, ErrorKind::Other),
        // Our key was deleted again: the acquire did not take effect. When the delete failed,
        // the key may sit there until its TTL: unknown outcome.
        AcquireError::NoReplicaAck { released, .. } => {
            if *released {
                (OpKind::Fail, ErrorKind::Other)
            } else {
                (OpKind::Info, ErrorKind::Other)
            }
        }
        // The key was set and never released: the outcome is not a failure.
        AcquireError::Crashed { .. } => (OpKind::Info, ErrorKind::Other),
        // The adapter's own word: `fail` only when it said the operation surely did not happen.
        AcquireError::Adapter { definite, kind, .. } => (
            if *definite {
                OpKind::Fail
            } else {
                OpKind::Info
            },
            node_error_kind(*kind),
        ),
    }
}

fn node_error_kind(kind: NodeFailureKind) -> ErrorKind {
    match kind {
        NodeFailureKind::Timeout => ErrorKind::Timeout,
        NodeFailureKind::Unreachable => ErrorKind::Connection,
        NodeFailureKind::Command => ErrorKind::Other,
    }
}

/// How long a crashing adapter client waits for its adapter process to be gone after
/// `SIGKILL` (the kernel reaps a killed process in microseconds; a loaded machine may take
/// longer to schedule the wait).
const ADAPTER_CRASH_BOUND: Duration = Duration::from_secs(10);

/// One client task's state.
pub struct Client {
    /// Client id, `0..clients`.
    pub id: u32,
    /// Its connections and strategy.
    pub lock: LockClient,
    /// The workload.
    pub workload: Workload,
    /// Nemesis hooks.
    pub controls: ClientControls,
    /// History and ledger.
    pub hooks: SectionHooks,
    /// Where samples go.
    pub samples: SampleSender,
    /// Shared stop state.
    pub stop: Arc<StopState>,
    /// The strategy's start instant (timeline origin).
    pub start: Instant,
    /// The acquire window ([`Workload::in_flight`]); `None` = no limit.
    pub window: Option<Arc<tokio::sync::Semaphore>>,
}

impl Client {
    fn send(&self, kind: SampleKind, began: Instant) {
        self.send_for(kind, began, None);
    }

    /// [`send`](Self::send) for a sample that starts or ends this client's belief that it
    /// holds resource `r<resource>` ([`Sample::resource`]).
    fn send_for(&self, kind: SampleKind, began: Instant, resource: Option<u32>) {
        let now = Instant::now();
        let _ = self.samples.send(Sample {
            kind,
            latency_us: now.saturating_duration_since(began).as_micros() as u64,
            at: now.saturating_duration_since(self.start),
            resource,
        });
    }

    /// A failed ledger step: the section goes on; the ledger counts it
    /// ([`Ledger::failed_steps`]) and the experiment turns the verdict `unknown`.
    fn ledger_step<T>(&self, result: Result<T, crate::ledger::LedgerError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::debug!("ledger step failed: {e}");
                None
            }
        }
    }

    /// The id this client records in the history and the ledger
    /// ([`SectionHooks::client_base`] + its index).
    fn recorded_id(&self) -> u32 {
        self.hooks.client_base + self.id
    }

    fn op(&self, kind: OpKind, f: OpFn, resource: &str) -> Op {
        Op::new(self.recorded_id(), kind, f, resource)
    }

    fn deadline_us(&self, lease: &Lease) -> Option<u64> {
        self.lock.kind().has_ttl().then(|| {
            self.hooks
                .history
                .clock()
                .us_at(lease.validity_deadline.into_std())
        })
    }

    fn ttl_ms(&self) -> Option<u64> {
        let kind = self.lock.kind();
        kind.has_ttl()
            .then(|| self.lock.options().ttl.as_millis() as u64)
    }

    fn with_lease(&self, mut op: Op, lease: &Lease) -> Op {
        op.owner = Some(lease.owner.clone());
        op.fencing_token = lease.fencing_token;
        op
    }

    /// Runs until the stop state says so, the client crashes, or the task is aborted.
    pub async fn run(self) {
        let mut rng = StdRng::seed_from_u64(
            self.workload
                .seed
                .wrapping_add((self.recorded_id() as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        // Open loop: client i owns every clients-th slot of the global schedule.
        let interval = match self.workload.pacing {
            Pacing::Open { rate_per_s } => Some(Duration::from_secs_f64(
                self.workload.clients as f64 / rate_per_s,
            )),
            Pacing::Closed => None,
        };
        let mut next_intended = interval
            .map(|iv| self.start + iv.mul_f64(self.id as f64 / self.workload.clients as f64));
        let _stop_the_world = self.pause_adapter_process();
        while self.stop.claim_attempt() {
            if !self.wait_while_absent().await {
                break;
            }
            let began = match (next_intended, interval) {
                (Some(at), Some(iv)) => {
                    // An attempt due at or after the end of the run never starts (the client
                    // waits for the end instead, so the run still lasts its duration).
                    let end = self.stop.deadline;
                    let after_end = end.is_some_and(|e| at >= e);
                    tokio::time::sleep_until(end.map_or(at, |e| at.min(e))).await;
                    if after_end || self.stop.is_stopped() {
                        break;
                    }
                    next_intended = Some(at + iv);
                    at
                }
                _ => Instant::now(),
            };
            let index = rng.random_range(0..self.workload.resources);
            let Some((resource, lane)) = self.choose_resource(index, began).await else {
                continue;
            };
            // Wait for a slot in the acquire window (the wait counts from `began`); the run
            // may have ended meanwhile.
            let slot = match &self.window {
                Some(w) => match w.clone().acquire_owned().await {
                    Ok(p) => Some(p),
                    Err(_) => return,
                },
                None => None,
            };
            if slot.is_some() && (self.stop.is_stopped() || self.stop.past_deadline()) {
                return;
            }
            let mut invoke = self.op(OpKind::Invoke, OpFn::Acquire, &resource);
            invoke.strategy = Some(self.hooks.strategy.clone());
            invoke.ttl_ms = self.ttl_ms();
            self.hooks.history.record(invoke);
            let control = self.controls.get(self.id as usize);
            let acquired = match control {
                Some(c) if self.lock.kind().has_mid_acquire_crash_point() => {
                    self.lock
                        .acquire_or_crash(&resource, &|| c.take_crash())
                        .await
                }
                _ => self.lock.acquire(&resource).await,
            };
            drop(slot);
            if let Err(AcquireError::Crashed { .. }) = &acquired {
                // Crashed between the acquire's requests: its acquire never completes, no
                // section, no release, no more locks (the key it set stays behind).
                self.hooks.history.record_crash(self.recorded_id());
                return;
            }
            match acquired {
                Ok(lease) => {
                    self.send_for(SampleKind::AcquireOk, began, lane);
                    let mut ok =
                        self.with_lease(self.op(OpKind::Ok, OpFn::Acquire, &resource), &lease);
                    ok.validity_deadline_us = self.deadline_us(&lease);
                    ok.ttl_ms = self.ttl_ms();
                    self.hooks.history.record(ok);
                    let acquired = Instant::now();
                    // Plain add/sub, no drop guard: an aborted task must stay counted (cut).
                    self.hooks.inside.fetch_add(1, Ordering::AcqRel);
                    let completed = self.critical_section(&lease, &mut rng).await;
                    self.hooks.inside.fetch_sub(1, Ordering::AcqRel);
                    if !completed {
                        // Crashed while holding: no release, no more locks.
                        self.send_for(SampleKind::SectionAbandoned, acquired, lane);
                        return;
                    }
                    self.release(&lease).await;
                    self.send_for(SampleKind::CriticalSection, acquired, lane);
                }
                Err(e) => {
                    let (kind, error_kind) = classify(&e);
                    self.hooks.history.record(
                        self.op(kind, OpFn::Acquire, &resource)
                            .with_error(error_kind, e.to_string()),
                    );
                    if e.is_contention() {
                        self.send(SampleKind::AcquireContended, began);
                    } else {
                        self.send(SampleKind::AcquireError(e.to_string()), began);
                    }
                    if self.lock.failure().is_some() {
                        // Its adapter process broke: every later request would fail the same
                        // way at once. The driver stops the run and reports why.
                        return;
                    }
                }
            }
        }
    }

    /// What this attempt takes, and its lane on the timeline: a lock strategy locks resource
    /// `r<index>`; a claim strategy says which job to claim (a read of its jobs table, not part
    /// of the claim; no lane). `None` when the jobs table did not answer: the attempt is
    /// recorded as failed, after a wait as a retry would make.
    async fn choose_resource(&self, index: u32, began: Instant) -> Option<(String, Option<u32>)> {
        match self.lock.next_job().await {
            None => Some((Workload::resource_name(index), Some(index))),
            Some(Ok(job)) => Some((job, None)),
            Some(Err(e)) => {
                self.record_failed_pick(&e, began);
                tokio::time::sleep(self.lock.options().retry.next_wait()).await;
                None
            }
        }
    }

    /// A claim strategy could not say which job to claim (its jobs table did not answer):
    /// recorded as a failed acquire of the queue ([`crate::sink::JOB_QUEUE`]), so the history
    /// counts the attempt.
    fn record_failed_pick(&self, e: &AcquireError, began: Instant) {
        let queue = crate::sink::JOB_QUEUE;
        let mut invoke = self.op(OpKind::Invoke, OpFn::Acquire, queue);
        invoke.strategy = Some(self.hooks.strategy.clone());
        self.hooks.history.record(invoke);
        let (kind, error_kind) = classify(e);
        let kind = if kind == OpKind::Info {
            OpKind::Fail
        } else {
            kind
        };
        self.hooks.history.record(
            self.op(kind, OpFn::Acquire, queue)
                .with_error(error_kind, format!("no job to claim: {e}")),
        );
        if e.is_contention() {
            self.send(SampleKind::AcquireContended, began);
        } else {
            self.send(SampleKind::AcquireError(e.to_string()), began);
        }
    }

    /// For an `adapter:*` client: a task that stops (`SIGSTOP`) the client's adapter process
    /// while the nemesis pauses the client and continues it (`SIGCONT`) after, so the library's
    /// own threads and timers stall too, as in a stop-the-world pause. Ends with the returned
    /// handle (the process is killed at the end of the run, stopped or not).
    fn pause_adapter_process(&self) -> Option<tokio_util::task::AbortOnDropHandle<()>> {
        let pid = self.lock.adapter_pid()?;
        let mut paused = self.controls.get(self.id as usize)?.paused_receiver();
        let client = self.id;
        Some(tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
            async move {
                let mut stopped = false;
                loop {
                    // The current value first: a pause may already be on when the client starts.
                    let stop = *paused.borrow_and_update();
                    if stop == stopped {
                        if paused.changed().await.is_err() {
                            break;
                        }
                        continue;
                    }
                    stopped = stop;
                    let sig = if stop { libc::SIGSTOP } else { libc::SIGCONT };
                    // SAFETY: kill(2) to the adapter process this client started; it is
                    // killed only when the client's last handle drops, after this task.
                    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
                        tracing::warn!(
                            "client {client}: cannot signal its adapter process {pid}: {}",
                            std::io::Error::last_os_error()
                        );
                    }
                }
            },
        )))
    }

    /// Waits while the nemesis keeps this client absent (`client-absent`); returns `false`
    /// when the run ended meanwhile. Checks the stop state every 50 ms, so an absent client
    /// never holds up the end of the run.
    async fn wait_while_absent(&self) -> bool {
        let Some(control) = self.controls.get(self.id as usize) else {
            return true;
        };
        let mut absent = control.absent_receiver();
        while *absent.borrow_and_update() {
            if self.stop.is_stopped() || self.stop.past_deadline() {
                return false;
            }
            tokio::select! {
                changed = absent.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        !(self.stop.is_stopped() || self.stop.past_deadline())
    }

    /// Releases `lease` and records the truth: `ok` when the release found the lease still
    /// held, `fail` ("not owner") when the key had already expired or passed to another
    /// owner, `info` when failing nodes leave it open.
    async fn release(&self, lease: &Lease) {
        let history = &self.hooks.history;
        history.record(self.with_lease(
            self.op(OpKind::Invoke, OpFn::Release, &lease.resource),
            lease,
        ));
        let rel = Instant::now();
        let op = |kind| self.with_lease(self.op(kind, OpFn::Release, &lease.resource), lease);
        match self.lock.release(lease).await {
            Ok(outcome) => match outcome.finding() {
                ReleaseFinding::Held => {
                    history.record(op(OpKind::Ok));
                    self.send(SampleKind::Release, rel);
                }
                ReleaseFinding::Lost => {
                    let why = format!(
                        "not owner: lease lost before release (our key on {} of {} needed node(s))",
                        outcome.released_nodes, outcome.needed_nodes
                    );
                    history.record(op(OpKind::Fail).with_error(ErrorKind::Other, why));
                    // One message for every occurrence, so the summary counts them together.
                    let sample = "release: not owner (lease lost before release)".to_string();
                    self.send(SampleKind::ReleaseError(sample), rel);
                }
                ReleaseFinding::Unknown => {
                    let why = format!(
                        "release found our key on {} of {} needed node(s); {} node(s) failed",
                        outcome.released_nodes, outcome.needed_nodes, outcome.failed_nodes
                    );
                    history.record(op(OpKind::Info).with_error(ErrorKind::Other, why.clone()));
                    self.send(SampleKind::ReleaseError(why), rel);
                }
            },
            Err(e) => {
                let kind = match &e {
                    StrategyError::Node(f) => node_error_kind(f.kind),
                    StrategyError::AllNodesFailed { failures } => failures
                        .first()
                        .map_or(ErrorKind::Other, |f| node_error_kind(f.kind)),
                    _ => ErrorKind::Other,
                };
                history.record(op(OpKind::Info).with_error(kind, e.to_string()));
                self.send(SampleKind::ReleaseError(e.to_string()), rel);
            }
        }
    }

    /// Runs the ledger steps around the hold. Returns `false` when the client crashed while
    /// holding (it then records the crash and must not release).
    async fn critical_section(&self, lease: &Lease, rng: &mut StdRng) -> bool {
        let control = self.controls.get(self.id as usize);
        let section = SectionRef {
            section_id: self.hooks.sections.fetch_add(1, Ordering::Relaxed),
            client: self.recorded_id(),
            resource: lease.resource.clone(),
            fencing_token: lease.fencing_token,
            idempotency_key: None,
        };
        let (watchdog, lost_notice) = self.start_watchdog(lease, control);
        if let Some(c) = control {
            c.set_inside(true);
        }
        let ledger = self.hooks.ledger.as_ref();
        // Begin and read, queued: the section waits for nothing but its own work. A section of
        // `external` work waits for the value it read: that is the job it charges for.
        let mut job = None;
        match (ledger, &self.hooks.sink) {
            (Some(l), Some(_)) => {
                job = self
                    .ledger_step(l.enter_read(&section).await)
                    .map(|read| crate::sink::job_name(&section.resource, read));
            }
            (Some(l), None) => l.enter(&section),
            (None, _) => {}
        }
        if self
            .crashed(control, ledger, &section, watchdog.as_ref())
            .await
        {
            return false;
        }
        let mut hold = self.workload.hold.sample(rng);
        // An adapter does the work, slow work included, inside its own process (its library's
        // threads keep running meanwhile); the ledger's write below comes after its answer.
        let adapter = self.lock.kind().is_adapter();
        if let (true, Some(c)) = (adapter, control) {
            hold += c.extra_hold();
        }
        let owns = self.lock.hold(lease, hold).await;
        if adapter && self.lock.failure().is_some() {
            // Its process died or broke during the work: as a crashed application, it writes
            // nothing and releases nothing (the driver then stops the run, saying why).
            if let Some(c) = control {
                c.set_inside(false);
            }
            self.hooks.history.record_crash(self.recorded_id());
            if let Some(l) = ledger {
                self.ledger_step(l.end(&section, true).await);
            }
            return false;
        }
        if owns == Some(false) {
            // The library itself knows the lock is gone (`hold` answered owns=false): recorded
            // as a failed renewal at this moment, as a watchdog's finding would be. The write
            // below still happens, as in an application that does not ask its library.
            let mut op =
                self.with_lease(self.op(OpKind::Fail, OpFn::Extend, &lease.resource), lease);
            op.owns = Some(false);
            self.hooks.history.record(op.with_error(
                ErrorKind::Other,
                "the library no longer believes it owns the lock after the section's work",
            ));
        }
        if let Some(c) = control {
            wait_out_pause(c, adapter).await;
        }
        if self
            .crashed(control, ledger, &section, watchdog.as_ref())
            .await
        {
            return false;
        }
        // The side effect, after the work and any stall, with whatever the holder believes: a
        // sink cannot check a fencing token.
        if let (Some(sink), Some(job)) = (&self.hooks.sink, job) {
            let charge = crate::sink::Charge {
                job,
                client: self.recorded_id(),
                section_id: section.section_id,
            };
            let key = sink.idempotency_key.then_some(charge.job.as_str());
            if let Err(e) = sink.client.charge(&charge, key).await {
                // The checker finds the section without a recorded call (`unknown`).
                tracing::warn!("client {}: {e}", self.id);
            }
        }
        match ledger {
            // Other processes write this ledger: their next holder may enter as soon as this
            // client releases, so the exit commits first.
            Some(l) if l.is_shared() => l.leave_committed(&section).await,
            // Queued, not awaited: the ledger keeps the order and writes what this section
            // read + 1; the section's timing does not include the ledger thread's queue.
            Some(l) => l.leave(&section),
            None => {}
        }
        if let Some(wd) = watchdog {
            self.stop_watchdog(wd, lost_notice, lease).await;
        }
        true
    }

    /// Starts the harness's watchdog on `lease` when `--watchdog` asks for one (not for an
    /// adapter: its library renews), paused with the client; with it, a task that records
    /// the moment the watchdog finds the lease lost (then, not at the release).
    fn start_watchdog(
        &self,
        lease: &Lease,
        control: Option<&ClientControl>,
    ) -> (Option<Watchdog>, Option<JoinHandle<Option<()>>>) {
        let watchdog =
        // An adapter's `--watchdog` is its library's own renewal (see `watchable`).
        (self.lock.options().watchdog
            && self.lock.kind().watchable().is_ok()
            && !self.lock.kind().is_adapter())
        .then(|| {
            let paused = control.map_or_else(
                || tokio::sync::watch::channel(false).1,
                ClientControl::paused_receiver,
            );
            self.lock.spawn_watchdog(lease.clone(), paused)
        });
        // The moment the watchdog finds the lease lost is recorded then, not at the release.
        let lost_notice = watchdog.as_ref().map(|wd| {
            let notice = wd.when_lost();
            let history = self.hooks.history.clone();
            let op = self.with_lease(self.op(OpKind::Fail, OpFn::Extend, &lease.resource), lease);
            tokio::spawn(async move {
                let why = notice.await?;
                history.record(op.with_error(ErrorKind::Other, why));
                Some(())
            })
        });
        (watchdog, lost_notice)
    }

    /// Stops the watchdog and records its renewals' outcome as one extend (ok, or failed with
    /// why), unless the lost notice already recorded it.
    async fn stop_watchdog(
        &self,
        wd: Watchdog,
        lost_notice: Option<JoinHandle<Option<()>>>,
        lease: &Lease,
    ) {
        let report = wd.stop().await;
        let lost_recorded = match lost_notice {
            Some(task) => matches!(task.await, Ok(Some(()))),
            None => false,
        };
        let resource = &lease.resource;
        let op = match &report.lost {
            None => {
                let mut op = self.with_lease(self.op(OpKind::Ok, OpFn::Extend, resource), lease);
                op.validity_deadline_us = self.deadline_us(&report.lease);
                op.ttl_ms = self.ttl_ms();
                op
            }
            Some(why) => self
                .with_lease(self.op(OpKind::Fail, OpFn::Extend, resource), lease)
                .with_error(ErrorKind::Other, why.clone()),
        };
        if (report.renewals > 0 || report.lost.is_some()) && !lost_recorded {
            self.hooks.history.record(op);
        }
    }

    /// If a crash was requested, records it (history + ledger), stops renewal without releasing,
    /// and returns `true`.
    async fn crashed(
        &self,
        control: Option<&ClientControl>,
        ledger: Option<&Ledger>,
        section: &SectionRef,
        watchdog: Option<&Watchdog>,
    ) -> bool {
        // A strategy with a crash point inside its acquire crashes there (see `run`), never
        // here: otherwise a crash requested while the acquire is past that point would land
        // after `PEXPIRE` and show nothing.
        if self.lock.kind().has_mid_acquire_crash_point() {
            return false;
        }
        if !control.is_some_and(|c| c.take_crash()) {
            return false;
        }
        if let Some(c) = control {
            c.set_inside(false);
        }
        // A crashed process renews nothing: the caller drops the watchdog, which ends it.
        let _ = watchdog;
        // An adapter client's crash is its application's: `SIGKILL` of its own adapter process
        // (the library's threads die with it), gone before the crash is recorded.
        if let Some(gone) = self.lock.crash_adapter(ADAPTER_CRASH_BOUND).await {
            if !gone {
                tracing::warn!(
                    "client {}: its adapter process was still there {ADAPTER_CRASH_BOUND:?} \
                     after SIGKILL",
                    self.id
                );
            }
        }
        self.hooks.history.record_crash(self.recorded_id());
        if let Some(l) = ledger {
            self.ledger_step(l.end(section, true).await);
        }
        true
    }
}

/// The end of a section's hold under the nemesis: the injected extra hold (an adapter's is
/// already in its work), then waits while the client is paused; past this stall point a pause
/// stalls the next section.
async fn wait_out_pause(c: &ClientControl, adapter: bool) {
    let extra = if adapter {
        Duration::ZERO
    } else {
        c.extra_hold()
    };
    if !extra.is_zero() {
        tokio::time::sleep(extra).await;
    }
    let mut paused = c.paused_receiver();
    while *paused.borrow_and_update() {
        if paused.changed().await.is_err() {
            break;
        }
    }
    // Past the stall point: a pause from now on stalls the next section.
    c.set_inside(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_acquire_is_unknown_only_when_the_arithmetic_allows_a_quorum() {
        let q = |locked, held, failed| AcquireError::QuorumNotReached {
            locked,
            needed: 2,
            held,
            failed,
        };
        // (locked, held, failed) of 3 nodes, quorum 2 → recorded as
        let cases = [
            ((0, 0, 1), OpKind::Fail, ErrorKind::Other), // 0 + 1 < 2: cannot have taken effect
            ((0, 2, 1), OpKind::Fail, ErrorKind::Other),
            ((1, 1, 0), OpKind::Fail, ErrorKind::Busy),
            ((1, 0, 1), OpKind::Info, ErrorKind::Other), // the failed node may hold our key
            ((0, 0, 2), OpKind::Info, ErrorKind::Other),
            ((0, 0, 3), OpKind::Info, ErrorKind::Other),
        ];
        for ((locked, held, failed), kind, error) in cases {
            assert_eq!(
                classify(&q(locked, held, failed)),
                (kind, error),
                "locked {locked}, held {held}, failed {failed}"
            );
        }
        let timed_out = AcquireError::Timeout {
            attempts: 3,
            waited: std::time::Duration::from_millis(30),
            last: Box::new(q(0, 0, 1)),
        };
        assert_eq!(classify(&timed_out), (OpKind::Fail, ErrorKind::Timeout));
    }
}
