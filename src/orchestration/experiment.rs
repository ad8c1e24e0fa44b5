//! One audited strategy run — Jepsen's "test": a topology's endpoints + a strategy + a workload
//! + an optional nemesis + the checker, written to one directory.
//!
//! ```text
//! <dir>/history.jsonl   every op (invoke/ok/fail/info), crash and fault window, streamed
//! <dir>/ledger.sqlite   the protected resource's commit-ordered steps
//! <dir>/sink.sqlite     `external` work: every call the side-effect sink answered
//! <dir>/checker.json    the verdict and anomalies
//! ```
//!
//! The strategy's clock starts after the clients have connected; history, ledger, metrics
//! timeline and nemesis schedule all share that origin.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::checker::{self, CheckOptions, CheckReport};
use crate::driver::client::{SectionHooks, SectionSink};
use crate::driver::{self, Collector, DriverContext, DriverError, StrategyRun};
use crate::history::{HistoryError, HistoryRecorder, HistoryWriter, RunClock};
use crate::ledger::{FenceMode, LedgerBackend, LedgerError};
use crate::nemesis::ClientControls;
use crate::sink::SinkServer;
use crate::strategy::StrategyOptions;

/// How long the sink may take to answer the calls in flight when the clients have stopped
/// (each call is a few SQLite statements on loopback).
const SINK_STOP_BOUND: Duration = Duration::from_secs(10);

/// Errors of one audited run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The strategy's clients could not start.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The history file could not be created or written.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The ledger could not be created.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The checker could not read what was written.
    #[error(transparent)]
    Check(#[from] checker::CheckError),
    /// The side-effect sink of `external` work could not start.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    /// The output directory already holds a history or a ledger (of another run, or of the
    /// same strategy listed twice): nothing is overwritten.
    #[error(
        "{} already holds a history or ledger: refusing to overwrite it (each strategy run needs \
         a directory of its own)",
        path.display()
    )]
    Occupied {
        /// The directory.
        path: PathBuf,
    },
    /// The history or the ledger could not be written while the run went on (disk full, I/O
    /// error): the run was stopped at once, and what it recorded cannot support a verdict.
    #[error(
        "{}: the evidence could not be written, so the run was stopped at once and is not \
         judged: {what} (free space on that disk, or pass --results on another, and run again)",
        path.display()
    )]
    EvidenceLost {
        /// The strategy's directory.
        path: PathBuf,
        /// What was lost: the history's and the ledger's failures, one clause each.
        what: String,
    },
    /// A client's lock service broke during the run (an `adapter:*` process broke the
    /// protocol or exited): the run was stopped; its history, ledger and `checker.json` are
    /// kept in the directory.
    #[error(
        "{}: the run was stopped because {why}; what it recorded is kept in that directory",
        path.display()
    )]
    ClientFailed {
        /// The strategy's directory.
        path: PathBuf,
        /// The reason, naming the adapter and the line.
        why: String,
    },
    /// A file of the checker could not be written (the verdict was reached, not saved).
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file (or its temporary name).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The output directory could not be created.
    #[error("cannot create {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the nemesis gets when the strategy's clock starts: the origin instant, the clients'
/// fault hooks, and the history recorder to log fault windows into.
pub struct NemesisStart {
    /// Time zero of the strategy (schedule offsets count from here).
    pub start: Instant,
    /// Per-client pause / slow-work / crash hooks.
    pub controls: ClientControls,
    /// Where fault windows go.
    pub history: HistoryRecorder,
}

/// A nemesis: runs alongside the clients from [`NemesisStart`], and must heal everything it
/// injected before its future completes (it is awaited after the clients stop).
pub type Nemesis = Box<dyn FnOnce(NemesisStart) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The outcome of one audited strategy run.
pub struct Experiment {
    /// Metrics and whether it was interrupted.
    pub run: StrategyRun,
    /// The checker's report (`None` when auditing was off).
    pub check: Option<CheckReport>,
    /// Events written to `history.jsonl`.
    pub history_events: u64,
}

/// Runs one strategy with the workload in `ctx`, recording history and ledger into `dir`
/// (created), then checks them and writes `checker.json`.
///
/// `audit = false` skips history, ledger and checker (pure speed runs). `on_tick` is called
/// about once a second with the live collector (see [`driver::run_clients`]).
///
/// # Errors
/// [`ExperimentError::Occupied`] when `dir` already holds `history.jsonl` or `ledger.sqlite`
/// (checked before anything is created); otherwise [`ExperimentError`] when clients cannot
/// connect or the files cannot be written/read.
pub async fn run(
    ctx: &DriverContext,
    opts: &StrategyOptions,
    dir: &Path,
    audit: bool,
    nemesis: Option<Nemesis>,
    on_tick: impl FnMut(&Collector, Duration),
) -> Result<Experiment, ExperimentError> {
    run_with_ledger(
        ctx,
        opts,
        dir,
        audit,
        &LedgerBackend::Sqlite,
        nemesis,
        on_tick,
    )
    .await
}

/// [`run`] with the ledger on `ledger` (a PostgreSQL ledger is copied into `<dir>/ledger.sqlite`
/// when the clients stop, and the checker reads that copy: the same rows in the same order).
///
/// # Errors
/// As [`run`]; a PostgreSQL ledger that cannot be reached or created is
/// [`ExperimentError::Ledger`] before any client starts.
pub async fn run_with_ledger(
    ctx: &DriverContext,
    opts: &StrategyOptions,
    dir: &Path,
    audit: bool,
    ledger: &LedgerBackend,
    nemesis: Option<Nemesis>,
    on_tick: impl FnMut(&Collector, Duration),
) -> Result<Experiment, ExperimentError> {
    prepare_dir(dir, audit)?;
    let mut opts = opts.clone();
    if opts.kind.is_adapter() && opts.adapter_log.is_none() {
        opts.adapter_log = Some(dir.join("adapter.log"));
    }
    let opts = &opts;
    let mode = if opts.kind.is_fenced() {
        FenceMode::Fenced
    } else {
        FenceMode::Unfenced
    };
    // A PostgreSQL ledger's connection and schema are made before any client connects (its
    // errors come first); the ledger starts with the run clock, after the clients connect.
    let pending = if audit {
        Some(ledger.prepare(dir.join("ledger.sqlite"), mode).await?)
    } else {
        None
    };
    let clients = driver::connect_clients(ctx, opts).await?;
    let start = Instant::now();
    let clock = RunClock::from_instant(start.into_std());
    let ledger = pending.map(|p| p.start(clock)).transpose()?;
    let writer = if audit {
        Some(HistoryWriter::create(dir.join("history.jsonl"), clock)?)
    } else {
        None
    };
    let history = writer
        .as_ref()
        .map_or_else(|| HistoryRecorder::disabled(clock), HistoryWriter::recorder);
    name_the_work(dir, audit, ctx.workload.work)?;
    // `external` work: the sink its sections call, on the run clock, stopped after the clients.
    let sink = if audit && ctx.workload.work.calls_sink() {
        let path = dir.join(crate::sink::SINK_FILE);
        Some(SinkServer::start(&path, clock, Duration::ZERO).await?)
    } else {
        None
    };
    let section_sink = match &sink {
        Some(server) => Some(SectionSink {
            client: crate::sink::SinkClient::new(&server.url())?,
            idempotency_key: ctx.workload.idempotency_key,
        }),
        None => None,
    };
    let hooks = SectionHooks {
        history: history.clone(),
        ledger: ledger.clone(),
        sections: Arc::new(AtomicU64::new(0)),
        strategy: opts.kind.to_string(),
        inside: Arc::new(AtomicU64::new(0)),
        client_base: 0,
        sink: section_sink,
    };
    let controls = ClientControls::new(ctx.workload.clients as usize);
    let nemesis_task = nemesis.map(|n| {
        tokio::spawn(n(NemesisStart {
            start,
            controls: controls.clone(),
            history: history.clone(),
        }))
    });
    let run = driver::run_clients(ctx, clients, &controls, &hooks, start, on_tick).await;
    if let Some(task) = nemesis_task {
        // The nemesis heals everything before it returns; a panic there is a bug worth seeing.
        if let Err(e) = task.await {
            tracing::error!("nemesis task failed: {e}");
        }
    }
    drop(hooks);
    if let Some(server) = sink {
        server.stop(SINK_STOP_BOUND).await;
    }
    let Some(writer) = writer else {
        if let Some(why) = run.client_failure {
            return Err(ExperimentError::ClientFailed {
                path: dir.to_path_buf(),
                why,
            });
        }
        return Ok(Experiment {
            run,
            check: None,
            history_events: 0,
        });
    };
    let mut failed_steps = 0;
    if let Some(ledger) = ledger {
        failed_steps =
            tokio::task::spawn_blocking(move || ledger.close().map(|()| ledger.failed_steps()))
                .await
                .expect("ledger close does not panic")?;
    }
    drop(history);
    let finished = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .expect("history finish does not panic");
    let history_events = evidence_written(dir, finished, failed_steps)?;
    let report = check_and_write(dir, failed_steps, run.cut_sections).await?;
    if let Some(why) = &run.client_failure {
        return Err(ExperimentError::ClientFailed {
            path: dir.to_path_buf(),
            why: why.clone(),
        });
    }
    Ok(Experiment {
        run,
        check: Some(report),
        history_events,
    })
}

/// Makes the strategy's directory; an audited run needs one without evidence in it.
///
/// # Errors
/// [`ExperimentError::Occupied`] when it holds a history or a ledger already,
/// [`ExperimentError::Dir`] when it cannot be created.
fn prepare_dir(dir: &Path, audit: bool) -> Result<(), ExperimentError> {
    if audit
        && ["history.jsonl", "ledger.sqlite", crate::sink::SINK_FILE]
            .iter()
            .any(|f| dir.join(f).exists())
    {
        return Err(ExperimentError::Occupied {
            path: dir.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| ExperimentError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// Names the run's work in `dir` for the checker (and for `lockbench check` later): an
/// audited run of any work but `row` writes [`checker::WORK_FILE`]; none is `row`.
///
/// # Errors
/// [`ExperimentError`] when the file cannot be written.
fn name_the_work(
    dir: &Path,
    audit: bool,
    work: crate::driver::WorkKind,
) -> Result<(), ExperimentError> {
    if audit && work != crate::driver::WorkKind::Row {
        write_json(&dir.join(checker::WORK_FILE), &checker::WorkMarker { work })?;
    }
    Ok(())
}

/// Checks the run in `dir`, marks a ledger with failed steps incomplete and the sections cut
/// by the stop, and writes `checker.json`.
///
/// # Errors
/// The checker's error, or [`ExperimentError`] when `checker.json` cannot be written.
async fn check_and_write(
    dir: &Path,
    failed_steps: u64,
    cut_sections: u64,
) -> Result<CheckReport, ExperimentError> {
    let check_dir = dir.to_path_buf();
    let mut report = tokio::task::spawn_blocking(move || {
        checker::check_dir(&check_dir, &CheckOptions::default())
    })
    .await
    .expect("checker does not panic")?;
    checker::evidence::mark_incomplete_ledger(&mut report, failed_steps);
    checker::evidence::mark_all_cut(&mut report, cut_sections);
    write_json(&dir.join("checker.json"), &report)?;
    Ok(report)
}

/// The events written to the history, or [`ExperimentError::EvidenceLost`] saying what is
/// missing when the history or the ledger could not be written.
fn evidence_written(
    dir: &Path,
    history: Result<u64, HistoryError>,
    failed_steps: u64,
) -> Result<u64, ExperimentError> {
    let mut lost = Vec::new();
    let events = match history {
        Ok(n) => n,
        Err(e @ HistoryError::WriteFailed { .. }) => {
            lost.push(e.to_string());
            0
        }
        Err(e) => return Err(e.into()),
    };
    if failed_steps > 0 {
        lost.push(format!(
            "{failed_steps} ledger step(s) did not commit to {} (disk full or I/O error): \
             the ledger lacks them",
            dir.join("ledger.sqlite").display()
        ));
    }
    if lost.is_empty() {
        return Ok(events);
    }
    Err(ExperimentError::EvidenceLost {
        path: dir.to_path_buf(),
        what: lost.join("; "),
    })
}

/// Re-checks a strategy directory (`history.jsonl` + `ledger.sqlite`) and rewrites its
/// `checker.json`.
///
/// # Errors
/// [`ExperimentError::Check`] when the files cannot be read.
pub fn recheck(dir: &Path) -> Result<CheckReport, ExperimentError> {
    recheck_against(dir, None)
}

/// [`recheck`], and when the run's `summary.json` said how many acquisitions succeeded
/// (`measured_acquired`), a history that disagrees makes the verdict `unknown`
/// ([`checker::evidence::measured_mismatch`]).
///
/// # Errors
/// [`ExperimentError::Check`] when the files cannot be read.
pub fn recheck_against(
    dir: &Path,
    measured_acquired: Option<u64>,
) -> Result<CheckReport, ExperimentError> {
    let report = judge_again(dir, measured_acquired)?;
    write_report(dir, &report)?;
    Ok(report)
}

/// The verdict of [`recheck_against`] without writing anything.
///
/// # Errors
/// [`ExperimentError::Check`] when the files cannot be read.
pub fn judge_again(
    dir: &Path,
    measured_acquired: Option<u64>,
) -> Result<CheckReport, ExperimentError> {
    let mut report = checker::check_dir(dir, &CheckOptions::default())?;
    if let Some(reason) =
        measured_acquired.and_then(|n| checker::evidence::measured_mismatch(&report, n))
    {
        checker::evidence::mark_unknown(&mut report, reason);
    }
    Ok(report)
}

/// Writes `report` as `dir/checker.json`, atomically: on a full disk the previous file stays
/// whole (never a partial or empty one).
///
/// # Errors
/// [`ExperimentError::Write`] naming the file.
pub fn write_report(dir: &Path, report: &CheckReport) -> Result<(), ExperimentError> {
    write_json(&dir.join("checker.json"), report)
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), ExperimentError> {
    crate::atomic_file::write_json(path, value).map_err(|e| match e {
        crate::atomic_file::AtomicWriteError::Io { path, source } => {
            ExperimentError::Write { path, source }
        }
        crate::atomic_file::AtomicWriteError::Json { .. } => panic!("reports serialize: {e}"),
    })
}
