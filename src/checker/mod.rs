//! The checker: reads a run's history and ledger and returns a verdict with the anomalies found.
//!
//! Rules (docs/design.md, "The checker's rules"):
//! 1–3 come from the ledger's commit order ([`exclusion`]): mutual-exclusion violations, stale
//! writes accepted/rejected, lost updates; [`LedgerWatch`] applies them to a ledger still being
//! written (the live metrics). 4–6 come from the history stream: token regressions
//! and duplicates ([`tokens`]), liveness ([`liveness`]), believed overlaps ([`overlap`]).
//! 7 comes from the side-effect sink's table of `external` work ([`effects`]): duplicate and
//! unexpected effects, and repeats an idempotency key deduplicated. 8 counts each job's
//! executions off the ledger's sections ([`effects`]) and judges a claimed job's completions
//! in the history pass (`completion`). The run's work (`work.json`, `work_file`) says what
//! counts as damage: nothing for `compute`, whose duplicate is waste.
//!
//! ## Verdict
//! * `invalid` if any safety anomaly: mutex violation, stale write accepted, lost update, token
//!   regression or duplicate, believed overlap, or a duplicate or unexpected effect at the sink. A believed overlap alone (no ledger damage) is
//!   `invalid`: the lock granted two valid leases at once, which breaks its promise even if the
//!   workload was lucky. Token regressions are `invalid` for the same reason (fencing relies on them).
//! * otherwise `unknown` if the evidence cannot rule a violation out: the history ends with an
//!   incomplete line, there is no ledger, the history is missing or empty ([`evidence`]), or
//!   nothing was acquired at all. A possible overlap (one that needs an `info` acquire's possible
//!   window) is listed but is not a reason for `unknown`: the ledger decides;
//! * otherwise `valid`.
//!
//! Stale writes *rejected* and liveness findings never change the verdict; liveness has its own
//! summary ([`Liveness`]).
//!
//! Every anomaly carries the ids of the fault windows it overlaps (windows are widened by
//! [`CheckOptions::fault_grace_ms`] after their end, since a fault's effect shows up after heal).
//!
//! ## Incidents
//! The listed anomalies are then grouped into [`Incident`]s ([`incident`]): one per maximal
//! interval with more than one holder on a resource (or per lone stale write, lost update, token
//! duplicate). Only when there are incidents, a second, filtered pass over the ledger and the
//! history ([`witness`]) collects each incident's holders and witness rows, and a cause sentence
//! is written. Incidents never change the verdict.
//!
//! ## Memory
//! The history is streamed; state is per resource (open windows, holders inside, in-flight
//! acquires) and per client (its in-flight ops). The ledger is streamed in commit order on a second
//! thread.

mod completion;
pub mod effects;
pub mod evidence;
mod exclusion;
pub mod incident;
mod live;
mod liveness;
mod overlap;
pub mod synthetic;
mod tokens;
pub mod verdict;
mod witness;
mod work_file;

pub use work_file::{read_work, WorkMarker, WORK_FILE};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

pub use incident::{Holder, Incident, Witness};
pub use live::LedgerWatch;
pub use verdict::{Anomaly, AnomalyKind, CheckReport, Liveness, Stats, Verdict};

use crate::history::{
    read_history, ErrorKind, FaultWindow, HistoryError, HistoryEvent, Op, OpFn, OpKind,
};
use crate::ledger::{FenceMode, LedgerError, LedgerEvent, LedgerFile};
use crate::work::WorkKind;
use exclusion::LedgerAnalysis;
use liveness::{Availability, LeaseRestart, LivenessLimits};
use overlap::BelievedWindows;
use tokens::TokenOrder;
use verdict::AnomalySink;
use witness::{HistoryWitness, LedgerWitness};

/// Errors of the checker.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The history could not be read (a truncated last line is not an error: it gives `unknown`).
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The side-effect sink's table could not be read.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    /// The run's `work.json` could not be read or parsed.
    #[error("{path}: cannot read the run's work: {message}")]
    Work {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Checker knobs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckOptions {
    /// Anomalies listed per kind; the rest are only counted (default 100).
    pub max_anomalies_per_kind: u64,
    /// A fault window is widened by this much after its end when matching anomalies (default 1000 ms).
    pub fault_grace_ms: u64,
    /// Unavailability windows shorter than this are counted in `unavailable_ms` but not listed
    /// and do not make liveness `degraded` (default 100 ms).
    pub min_unavailable_ms: u64,
    /// A resource is stuck if unacquirable with nobody holding it for at least
    /// `max(stuck_after_ms, 2 × its largest TTL)` until the end (default 1000 ms).
    pub stuck_after_ms: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            max_anomalies_per_kind: 100,
            fault_grace_ms: 1000,
            min_unavailable_ms: 100,
            stuck_after_ms: 1000,
        }
    }
}

/// A ledger already in memory (tests, or a ledger read by other means).
#[derive(Debug, Clone)]
pub struct LedgerInput {
    pub mode: FenceMode,
    /// Events in commit order.
    pub events: Vec<LedgerEvent>,
    /// Final counter per resource; `None` uses the counter replayed from accepted writes.
    pub final_counters: Option<Vec<(String, i64)>>,
}

/// Checks `results/<run>/`: `history.jsonl` and, if present, `ledger.sqlite` and (`external`
/// work) `sink.sqlite`.
pub fn check_dir(
    run_dir: impl AsRef<Path>,
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    let dir = run_dir.as_ref();
    let ledger = dir.join("ledger.sqlite");
    let sink = dir.join(crate::sink::SINK_FILE);
    check_work(
        dir.join("history.jsonl"),
        ledger.exists().then_some(ledger.as_path()),
        sink.exists().then_some(sink.as_path()),
        read_work(dir)?,
        opts,
    )
}

/// Checks a history file and optional ledger file. The ledger is read on a second thread while
/// the history streams on this one. Files written by one run must agree: a ledger with more or
/// fewer critical sections than the history has successful acquires makes a `valid` verdict
/// `unknown` ([`evidence::ledger_mismatch`]); hand-built inputs ([`check_in_memory`]) are
/// judged on what they hold.
///
/// Errors: [`CheckError::History`] for an unreadable or corrupt history (except an incomplete
/// last line, which makes the verdict `unknown`), [`CheckError::Ledger`] for an unreadable ledger.
pub fn check(
    history_path: impl AsRef<Path>,
    ledger_path: Option<&Path>,
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    check_with_sink(history_path, ledger_path, None, opts)
}

/// [`check`], and with `sink_path` (the `sink.sqlite` of `external` work) rule 7: the sink's
/// requests, read on a third thread, against the sections the ledger thread gathers in its one
/// pass ([`effects`]). A sink without a ledger cannot be judged: its requests are not read.
///
/// Errors: as [`check`]; [`CheckError::Sink`] for an unreadable sink table.
pub fn check_with_sink(
    history_path: impl AsRef<Path>,
    ledger_path: Option<&Path>,
    sink_path: Option<&Path>,
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    check_work(history_path, ledger_path, sink_path, WorkKind::Row, opts)
}

/// [`check_with_sink`] for a run of `work`: with `compute` work, rule 8 judges each job's
/// executions off the ledger's sections (without a sink), and a second execution, like the
/// lock's own anomalies, is waste that never makes the verdict `invalid`.
///
/// Errors: as [`check_with_sink`].
pub fn check_work(
    history_path: impl AsRef<Path>,
    ledger_path: Option<&Path>,
    sink_path: Option<&Path>,
    work: WorkKind,
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    let history_path = history_path.as_ref();
    std::thread::scope(|scope| {
        // Rule 7 reads the sink's requests here and the ledger's sections in the ledger's
        // one pass below.
        let judge_effects = sink_path.is_some() && ledger_path.is_some();
        // Compute work judges its jobs' executions without a sink.
        let judge_compute = !judge_effects && work == WorkKind::Compute && ledger_path.is_some();
        let sink_job = sink_path
            .filter(|_| judge_effects)
            .map(|sink| scope.spawn(move || crate::sink::read_requests(sink)));
        let ledger_job = ledger_path.map(|p| {
            scope.spawn(move || -> Result<_, LedgerError> {
                let file = LedgerFile::open(p)?;
                let mut analysis = LedgerAnalysis::new(file.mode(), opts.max_anomalies_per_kind);
                let mut sections =
                    (judge_effects || judge_compute).then(effects::SectionJobs::default);
                file.for_each_event(|e| {
                    analysis.feed(&e);
                    if let Some(s) = sections.as_mut() {
                        s.feed(&e);
                    }
                })?;
                let counters = file.counters()?;
                Ok(((file.mode(), analysis.finish(Some(&counters))), sections))
            })
        });
        let mut history = HistoryAnalysis::new(opts);
        let mut history_err = None;
        // A missing history is missing evidence (verdict `unknown`), not a read error.
        history.missing = !history_path.exists();
        let items = if history.missing {
            None
        } else {
            Some(read_history(history_path)?)
        };
        for item in items.into_iter().flatten() {
            match item {
                Ok(e) => history.feed(e),
                Err(HistoryError::Truncated { .. }) => history.truncated = true,
                Err(e) => {
                    history_err = Some(e);
                    break;
                }
            }
        }
        let (ledger, sections) = match ledger_job {
            Some(j) => {
                let (ledger, sections) = j.join().map_err(|_| LedgerError::Closed)??;
                (Some(ledger), sections)
            }
            None => (None, None),
        };
        let requests = match sink_job {
            Some(j) => Some(j.join().map_err(|_| LedgerError::Closed)??),
            None => None,
        };
        let effects = match (requests, sections) {
            (Some(requests), Some(sections)) => Some(effects::judge(
                &requests,
                &sections,
                opts.max_anomalies_per_kind,
            )),
            (None, Some(sections)) if judge_compute => Some(effects::judge_executions(
                &sections,
                opts.max_anomalies_per_kind,
            )),
            _ => None,
        };
        if let Some(e) = history_err {
            return Err(e.into());
        }
        let history_missing = history.missing;
        let with_ledger = ledger.is_some();
        let mut report = conclude(history, ledger, effects, work.counts_damage(), opts);
        // Files written by one run: the history and the ledger must tell the same story.
        let files = evidence::Evidence { history_missing };
        if let Some(reason) = evidence::ledger_mismatch(&report.stats, files, with_ledger) {
            evidence::mark_unknown(&mut report, reason);
        }
        if !report.incidents.is_empty() {
            let (h, l) = witness_pass(&report, history_path, ledger_path)?;
            finish_incidents(&mut report, Some(h), l);
        }
        Ok(report)
    })
}

/// The witness pass over the files (ledger on a second thread), for [`check`].
fn witness_pass(
    report: &CheckReport,
    history_path: &Path,
    ledger_path: Option<&Path>,
) -> Result<(HistoryWitness, Option<LedgerWitness>), CheckError> {
    let seqs = wanted_seqs(report);
    // Leases that end this long after the last incident cannot matter any more.
    let stop_after = report.incidents.iter().map(|i| i.end_us).max().unwrap_or(0) + 120_000_000;
    std::thread::scope(|scope| {
        let ledger_job = ledger_path.map(|p| {
            let seqs = &seqs;
            scope.spawn(move || -> Result<_, LedgerError> {
                let file = LedgerFile::open(p)?;
                let mut w = LedgerWitness::new(witnessed(report), seqs);
                file.for_each_event(|e| w.feed(&e))?;
                Ok(w.finish())
            })
        });
        let mut h = HistoryWitness::new(witnessed(report));
        // Incidents from the ledger alone (no history file) get their ledger rows only.
        let items = if history_path.exists() {
            Some(read_history(history_path)?)
        } else {
            None
        };
        for item in items.into_iter().flatten() {
            match item {
                Ok(e) => {
                    if e.time_us() > stop_after {
                        break;
                    }
                    h.feed(&e);
                }
                // Errors were reported by the first pass; the witness uses what it can read.
                Err(_) => break,
            }
        }
        let l = match ledger_job {
            Some(j) => Some(j.join().map_err(|_| LedgerError::Closed)??),
            None => None,
        };
        Ok((h.finish(), l))
    })
}

/// The incidents that get holders and a witness: the first [`incident::MAX_WITNESSED`].
fn witnessed(report: &CheckReport) -> &[Incident] {
    &report.incidents[..report.incidents.len().min(incident::MAX_WITNESSED)]
}

/// Per incident, the ledger seqs its anomalies name; a point anomaly's own rows must be shown.
fn wanted_seqs(report: &CheckReport) -> Vec<witness::WantedSeqs> {
    witnessed(report)
        .iter()
        .enumerate()
        .map(|(i, inc)| {
            let mut w = witness::WantedSeqs {
                incident: i,
                named: Vec::new(),
                must: Vec::new(),
            };
            for &a in &inc.anomalies {
                let a = &report.anomalies[a];
                let seqs = a.ledger_seqs.iter().copied().filter(|&s| s > 0);
                if a.kind.is_interval() {
                    w.named.extend(seqs);
                } else {
                    let seqs: Vec<i64> = seqs.collect();
                    w.named.extend(&seqs);
                    w.must.extend(seqs);
                }
            }
            w
        })
        .collect()
}

/// Attaches witnesses and holders, then writes each incident's cause.
fn finish_incidents(
    report: &mut CheckReport,
    history: Option<HistoryWitness>,
    ledger: Option<LedgerWitness>,
) {
    let n = report.incidents.len().min(incident::MAX_WITNESSED);
    witness::attach(&mut report.incidents[..n], history, ledger);
    incident::absorb_consequences(&mut report.incidents, &report.anomalies);
    incident::explain(
        &mut report.incidents,
        &report.anomalies,
        &report.fault_windows,
    );
}

/// Checks an in-memory history and ledger (hand-built tests, property tests).
pub fn check_in_memory(
    history: impl IntoIterator<Item = HistoryEvent>,
    ledger: Option<&LedgerInput>,
    opts: &CheckOptions,
) -> CheckReport {
    let events: Vec<HistoryEvent> = history.into_iter().collect();
    let mut h = HistoryAnalysis::new(opts);
    for e in &events {
        h.feed(e.clone());
    }
    let analysed = ledger.map(|l| {
        let mut a = LedgerAnalysis::new(l.mode, opts.max_anomalies_per_kind);
        for e in &l.events {
            a.feed(e);
        }
        (l.mode, a.finish(l.final_counters.as_deref()))
    });
    let mut report = conclude(h, analysed, None, true, opts);
    if !report.incidents.is_empty() {
        let mut hw = HistoryWitness::new(witnessed(&report));
        for e in &events {
            hw.feed(e);
        }
        let lw = ledger.map(|l| {
            let mut w = LedgerWitness::new(witnessed(&report), &wanted_seqs(&report));
            for e in &l.events {
                w.feed(e);
            }
            w.finish()
        });
        finish_incidents(&mut report, Some(hw.finish()), lw);
    }
    report
}

/// `counts_damage`: false for `compute` work, whose duplicates are waste: no anomaly makes
/// the verdict `invalid`.
fn conclude(
    history: HistoryAnalysis,
    ledger: Option<(FenceMode, (Stats, AnomalySink))>,
    effects: Option<effects::EffectFindings>,
    counts_damage: bool,
    opts: &CheckOptions,
) -> CheckReport {
    let truncated = history.truncated;
    let history_missing = history.missing;
    let faults: Vec<FaultWindow> = history.faults.values().cloned().collect();
    let (mut stats, mut sink, degraded) = history.finish();
    let fence_mode = ledger.as_ref().map(|(m, _)| *m);
    if let Some((_, (ls, lsink))) = ledger {
        stats.mutex_violations = ls.mutex_violations;
        stats.max_concurrent_holders = ls.max_concurrent_holders;
        stats.stale_writes_accepted = ls.stale_writes_accepted;
        stats.stale_writes_rejected = ls.stale_writes_rejected;
        stats.lost_updates = ls.lost_updates;
        stats.ledger_events = ls.ledger_events;
        stats.sections = ls.sections;
        sink.merge(lsink);
    }
    let mut effect_gaps = Vec::new();
    if let Some(f) = effects {
        stats.effects = Some(f.stats);
        sink.merge(f.anomalies);
        effect_gaps = f.unknown_reasons;
    }
    let mut anomalies = sink.list;
    let grace = opts.fault_grace_ms * 1000;
    for a in &mut anomalies {
        let end = a.end_us.unwrap_or(a.time_us);
        a.fault_ids = faults
            .iter()
            .filter(|w| w.start_us <= end && w.end_us.is_none_or(|e| e + grace >= a.time_us))
            .map(|w| w.id)
            .collect();
    }
    anomalies.sort_by_key(|a| (!a.kind.is_safety(), a.time_us));
    let incidents = incident::group(&anomalies);
    let incidents_partial = sink.omitted > 0;

    let safety = counts_damage
        && (anomalies.iter().any(|a| a.kind.is_safety())
            || stats.mutex_violations
                + stats.stale_writes_accepted
                + stats.lost_updates
                + stats.token_regressions
                + stats.token_duplicates
                + stats.believed_overlaps
                + stats
                    .effects
                    .as_ref()
                    .map_or(0, |e| e.duplicate_effects + e.unexpected_effects)
                > 0);
    let mut unknown_reasons = Vec::new();
    if truncated {
        unknown_reasons
            .push("the history ends with an incomplete line (the run was cut short)".to_string());
    }
    // Possible overlaps (an `info` acquire that may have taken effect) are listed, never a reason
    // for `unknown` on their own: the client of an `info` acquire does not act as holder, so the
    // ledger decides (docs/design.md, rule 6 and "Acquires with an unknown outcome"; Knossos treats indeterminate ops the same way).
    if fence_mode.is_none() {
        unknown_reasons.push("no ledger: mutual exclusion at the resource, stale writes and lost updates were not checked".to_string());
    }
    let gaps = evidence::gaps(&stats, evidence::Evidence { history_missing });
    if stats.acquire_ok == 0 && stats.sections == 0 && gaps.is_empty() {
        unknown_reasons.push("no acquire succeeded: there is nothing to check".to_string());
    }
    unknown_reasons.extend(gaps);
    unknown_reasons.extend(effect_gaps);
    let verdict = if safety {
        Verdict::Invalid
    } else if !unknown_reasons.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Valid
    };
    if verdict != Verdict::Unknown {
        unknown_reasons.clear();
    }
    let liveness = if stats.stuck_resources > 0 {
        Liveness::Stuck
    } else if degraded {
        Liveness::Degraded
    } else {
        Liveness::Live
    };
    CheckReport {
        verdict,
        liveness,
        unknown_reasons,
        stats,
        anomalies,
        anomalies_omitted: sink.omitted,
        fence_mode,
        fault_windows: faults,
        history_truncated: truncated,
        incidents,
        incidents_partial,
    }
}

#[derive(Default)]
struct ResourceState {
    /// In-flight acquires: (invoke µs, client).
    pending: BTreeSet<(u64, u32)>,
    tokens: TokenOrder,
    windows: BelievedWindows,
    live: Availability,
    /// A claimed job's last claim (`job:<id>`, rule 8): (client, acquire `ok` µs).
    last_claim: Option<(u32, u64)>,
}

impl ResourceState {
    fn min_pending(&self) -> Option<u64> {
        self.pending.first().map(|&(t, _)| t)
    }
}

struct Inflight {
    invoke_us: u64,
    ttl_ms: Option<u64>,
    restart: LeaseRestart,
}

/// The lease rule of the strategy named on an acquire's invoke: etcd's leases are restarted by
/// a new leader ([`LeaseRestart::OnLeaderChange`]).
fn lease_restart(strategy: Option<&str>) -> LeaseRestart {
    match strategy {
        Some(s) if s.starts_with("etcd") => LeaseRestart::OnLeaderChange,
        _ => LeaseRestart::Never,
    }
}

/// Streaming analysis of the history (rules 4–6).
struct HistoryAnalysis {
    resources: HashMap<String, ResourceState>,
    inflight: HashMap<(u32, OpFn), Inflight>,
    faults: BTreeMap<u64, FaultWindow>,
    sink: AnomalySink,
    stats: Stats,
    limits: LivenessLimits,
    last_us: u64,
    truncated: bool,
    /// `history.jsonl` did not exist.
    missing: bool,
}

impl HistoryAnalysis {
    fn new(opts: &CheckOptions) -> Self {
        Self {
            resources: HashMap::new(),
            inflight: HashMap::new(),
            faults: BTreeMap::new(),
            sink: AnomalySink::new(opts.max_anomalies_per_kind),
            stats: Stats::default(),
            limits: LivenessLimits {
                min_unavailable_us: opts.min_unavailable_ms * 1000,
                stuck_after_us: opts.stuck_after_ms * 1000,
            },
            last_us: 0,
            truncated: false,
            missing: false,
        }
    }

    fn feed(&mut self, event: HistoryEvent) {
        self.stats.history_events += 1;
        match event {
            HistoryEvent::Op(op) => self.op(op),
            HistoryEvent::Fault(f) => {
                let entry = self.faults.entry(f.id).or_insert_with(|| f.clone());
                entry.start_us = entry.start_us.min(f.start_us);
                if f.end_us.is_some() {
                    entry.end_us = f.end_us;
                }
                for r in self.resources.values_mut() {
                    r.live.on_fault(entry);
                }
            }
            HistoryEvent::RunEnd(e) => {
                let t = e.time_us;
                self.last_us = self.last_us.max(t);
                for r in self.resources.values_mut() {
                    r.live.advance(t, !r.pending.is_empty(), self.limits);
                    r.live.on_run_end(t, &r.pending);
                }
            }
            HistoryEvent::Crash(c) => {
                let t = c.time_us;
                self.last_us = self.last_us.max(t);
                self.inflight.retain(|&(client, _), _| client != c.client);
                for (name, r) in self.resources.iter_mut() {
                    r.live.advance(t, !r.pending.is_empty(), self.limits);
                    r.pending.retain(|&(_, client)| client != c.client);
                    r.windows.settle(t, name, &mut self.sink, &mut self.stats);
                    r.windows.on_end(c.client, t);
                    r.windows.settle(t, name, &mut self.sink, &mut self.stats);
                    r.live.on_crash(c.client, t, self.faults.values());
                    let min = r.min_pending();
                    r.live
                        .settle(min, name, self.limits, &mut self.sink, &mut self.stats);
                }
            }
        }
    }

    fn op(&mut self, op: Op) {
        let t = op.time_us;
        self.last_us = self.last_us.max(t);
        if !self.resources.contains_key(&op.resource) {
            self.resources
                .insert(op.resource.clone(), ResourceState::default());
        }
        let r = self.resources.get_mut(&op.resource).expect("inserted");
        let name = op.resource.as_str();
        let (sink, stats) = (&mut self.sink, &mut self.stats);
        r.live.advance(t, !r.pending.is_empty(), self.limits);
        r.live.touch(t);
        r.windows.settle(t, name, sink, stats);
        let c = op.client;
        if op.kind == OpKind::Invoke {
            self.inflight.insert(
                (c, op.f),
                Inflight {
                    invoke_us: t,
                    ttl_ms: op.ttl_ms,
                    restart: lease_restart(op.strategy.as_deref()),
                },
            );
            match op.f {
                OpFn::Acquire => {
                    r.pending.insert((t, c));
                }
                OpFn::Release => r.windows.on_end(c, t),
                OpFn::Extend => {}
            }
        } else {
            let inv = self.inflight.remove(&(c, op.f));
            let invoke_us = inv.as_ref().map_or(t, |i| i.invoke_us);
            let ttl_ms = op.ttl_ms.or(inv.as_ref().and_then(|i| i.ttl_ms));
            let restart = inv.as_ref().map_or(LeaseRestart::Never, |i| i.restart);
            match op.f {
                OpFn::Acquire => {
                    r.pending.remove(&(invoke_us, c));
                    match op.kind {
                        OpKind::Ok => {
                            stats.acquire_ok += 1;
                            if crate::sink::is_claimed_job(name) {
                                r.last_claim = Some((c, t));
                            }
                            if let Some(tok) = op.fencing_token {
                                let min = r.min_pending();
                                r.tokens.on_ok(name, c, invoke_us, t, tok, min, sink, stats);
                            }
                            r.windows.on_acquire_ok(
                                c,
                                t,
                                op.validity_deadline_us,
                                op.fencing_token,
                                stats,
                            );
                            r.live.on_acquire_ok(c, (invoke_us, t), ttl_ms, restart);
                        }
                        OpKind::Fail | OpKind::Info => {
                            if op.kind == OpKind::Fail {
                                stats.acquire_fail += 1;
                            } else {
                                stats.acquire_info += 1;
                            }
                            match op.error_kind {
                                Some(ErrorKind::Timeout) => stats.acquire_timeouts += 1,
                                Some(ErrorKind::Connection | ErrorKind::Other) => {
                                    stats.acquire_errors += 1
                                }
                                Some(ErrorKind::Busy) | None => {}
                            }
                            let info_ttl = if op.kind == OpKind::Info {
                                r.windows.on_acquire_info(c, invoke_us, t, ttl_ms, stats);
                                ttl_ms
                            } else {
                                None
                            };
                            r.live.on_acquire_failed(c, invoke_us, t, info_ttl);
                        }
                        OpKind::Invoke => unreachable!("handled above"),
                    }
                }
                OpFn::Release => {
                    // The believed window closed at the invoke; the lock is free at completion.
                    r.windows.on_end(c, invoke_us);
                    r.live.on_end(c, t);
                    if crate::sink::is_claimed_job(name) {
                        completion::judge(&op, r.last_claim, sink, stats);
                    }
                }
                OpFn::Extend => {
                    if op.kind == OpKind::Fail && op.owns == Some(false) {
                        // The library itself said it lost the lock (an adapter's `hold`):
                        // from here the client no longer believes it holds it.
                        stats.library_lost_notices += 1;
                        r.windows.on_end(c, t);
                    }
                    if op.kind == OpKind::Ok {
                        r.windows.on_extend_ok(
                            c,
                            t,
                            op.validity_deadline_us,
                            op.fencing_token,
                            stats,
                        );
                        r.live.on_extend_ok(c, t, ttl_ms);
                    }
                }
            }
        }
        r.windows.settle(t, name, sink, stats);
        let min = r.min_pending();
        r.live.settle(min, name, self.limits, sink, stats);
        if op.f == OpFn::Acquire && op.kind == OpKind::Ok && crate::sink::is_claimed_job(name) {
            self.queue_served(c, t);
        }
    }

    /// Rule 5 for a claim strategy's queue ([`crate::sink::JOB_QUEUE`], where the history
    /// records an attempt that could not even pick a job): every claim of a job is the queue
    /// serving a worker, taken and given back at once, so the queue is unavailable only while
    /// no job could be claimed at all.
    fn queue_served(&mut self, client: u32, t: u64) {
        let Some(q) = self.resources.get_mut(crate::sink::JOB_QUEUE) else {
            return;
        };
        let (sink, stats) = (&mut self.sink, &mut self.stats);
        q.live.advance(t, !q.pending.is_empty(), self.limits);
        q.live.touch(t);
        q.live
            .on_acquire_ok(client, (t, t), None, LeaseRestart::Never);
        q.live.on_end(client, t);
        let min = q.min_pending();
        q.live
            .settle(min, crate::sink::JOB_QUEUE, self.limits, sink, stats);
    }

    /// Closes everything; returns stats, anomalies and whether liveness was degraded.
    fn finish(mut self) -> (Stats, AnomalySink, bool) {
        let mut names: Vec<String> = self.resources.keys().cloned().collect();
        names.sort();
        let (mut unavailable, mut observed, mut degraded) = (0u64, 0u64, false);
        let mut blocked = 0u64;
        for name in names {
            let r = self.resources.get_mut(&name).expect("present");
            r.windows
                .finish(self.last_us, &name, &mut self.sink, &mut self.stats);
            let (u, o, d) = r
                .live
                .finish(&name, self.limits, &mut self.sink, &mut self.stats);
            unavailable += u;
            observed += o;
            degraded |= d;
            blocked += r.live.blocked_us(self.limits);
        }
        self.stats.wait_blocked_ms = blocked / 1000;
        self.stats.wait_availability_pct = Some(if observed == 0 {
            100.0
        } else {
            100.0 * (1.0 - blocked.min(observed) as f64 / observed as f64)
        });
        self.stats.incomplete_ops = self.inflight.len() as u64;
        self.stats.unavailable_ms = unavailable / 1000;
        self.stats.availability_pct = if observed == 0 {
            100.0
        } else {
            100.0 * (1.0 - unavailable.min(observed) as f64 / observed as f64)
        };
        (self.stats, self.sink, degraded)
    }
}
