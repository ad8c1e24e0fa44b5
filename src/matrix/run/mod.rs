//! Running a matrix: the uncontended probe of every strategy (alone, before anything else),
//! then the cells. A cell runs trials one after another until it has the exposed episodes
//! wanted or reaches its bound on trials; trials of different cells run at once (each on its
//! own thread and runtime, on its own freshly started topology and ports), up to `jobs`, one
//! fewer each time a finished trial says the harness lagged, and one more again (up to `jobs`)
//! after [`STEP_UP_AFTER`] trials in a row finished without lag. A lagging trial's episodes
//! whose span the lag overlapped are set aside (not evidence, see
//! [`super::episode::mark_harness_lag`]); the whole trial is set aside only when it ran beside
//! others and its checker did not find it valid while no episode that counts showed damage
//! (its anomalies may then be the harness's).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the run itself: probes, then trials launched and settled, the report refreshed after each |
//! | `cell` | a cell as the scheduler sees it: whether it wants another trial, its bound, why it fell short |
//! | `jobs` | how many trials run at once: back-offs when the harness lags, step-ups after clean trials, trials set aside |

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use super::claims::{self, ClaimCell};
use super::decision::thin::{cells_in_brief, ThinCell, BRIEF_CELLS, WORST_CELLS};
use super::fault::FaultClass;
use super::plan::MatrixPlan;
use super::probe;
use super::record::{TrialRecord, TrialStatus};
use super::trial_thread::spawn_trial;
use super::{MatrixReport, MatrixStatus};
use crate::orchestration::runner::Backend;

mod cell;
mod jobs;
#[cfg(test)]
mod tests;

pub use cell::{default_trial_bound, FAILED_TRIALS_LIMIT};
use cell::{plan_cells, CellRun};
use jobs::{back_off, lag_was_costly};
pub use jobs::{JobsRecord, SetAsideTrial, BACK_OFF_SHARE, STEP_UP_AFTER};

/// How a matrix is run: where, what is asked of each cell, and how many trials at once.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRunOptions {
    /// Where every probe and trial runs (local processes, or containers).
    pub backend: Backend,
    /// Exposed episodes wanted per cell (`--episodes`).
    pub episodes_wanted: u32,
    /// Most trials per cell (`--max-trials`); `None`: [`default_trial_bound`] per cell.
    pub max_trials: Option<u32>,
    /// Most trials (of different cells) running at once (`--jobs`, ≥ 1).
    pub jobs: u32,
    /// `--metrics`: the live metrics every trial updates; `None` = off.
    pub metrics: Option<crate::results::LiveMetrics>,
    /// `--ledger`: where every trial's ledger lives (default `sqlite`; `postgres` with
    /// workers).
    pub ledger: crate::orchestration::ledger_choice::LedgerChoice,
}

/// A cell that ended with fewer exposed episodes than wanted, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shortfall {
    /// Strategy (row).
    pub strategy: String,
    /// Fault class (column).
    pub fault: String,
    /// Exposed episodes it reached.
    pub exposed: u32,
    /// Exposed episodes wanted.
    pub wanted: u32,
    /// One sentence: bound reached, trials failed, or no episode planned.
    pub reason: String,
}

impl Shortfall {
    /// Many shortfalls in one line for a terminal: how many cells, by strategy and by fault,
    /// the worst few (fewest exposed), and where each one's reason is (`matrix.md`, "Every
    /// cell"). `None` when there are at most [`BRIEF_CELLS`]: print each.
    pub fn brief(shortfalls: &[Shortfall]) -> Option<String> {
        if shortfalls.len() <= BRIEF_CELLS {
            return None;
        }
        let cells: Vec<ThinCell> = shortfalls
            .iter()
            .map(|s| ThinCell {
                strategy: s.strategy.clone(),
                fault: s.fault.clone(),
                exposed: s.exposed,
            })
            .collect();
        let wanted = shortfalls.iter().map(|s| s.wanted).max().unwrap_or(0);
        Some(format!(
            "{} cell(s) with fewer than the {wanted} exposed episodes wanted ({}); why, cell by cell: \
             matrix.md, \"Every cell\"",
            cells.len(),
            cells_in_brief(&cells, WORST_CELLS)
        ))
    }
}

/// What a running matrix reports, for a progress bar or lines.
#[derive(Debug, Clone, Copy)]
pub enum MatrixProgress<'a> {
    /// The uncontended probe of a strategy starts.
    Probe {
        /// Strategy.
        strategy: &'a str,
    },
    /// A trial starts.
    Trial {
        /// Strategy.
        strategy: &'a str,
        /// Fault class.
        fault: FaultClass,
        /// 1-based trial number.
        trial: u32,
        /// Trials running now, this one included.
        running: u32,
    },
    /// A trial ended and the files were rewritten.
    TrialDone {
        /// Its record.
        record: &'a TrialRecord,
        /// Strategy.
        strategy: &'a str,
        /// Fault class.
        fault: FaultClass,
        /// Exposed episodes of its cell so far.
        exposed: u32,
        /// Exposed episodes over every cell, each counted up to the number wanted.
        progress: u64,
    },
    /// Trials now run one at a time: why.
    BackOff {
        /// The note (trial and how late its harness was).
        note: &'a str,
    },
}

/// What a trial's thread sends back.
pub(super) struct Finished {
    pub(super) cell: usize,
    pub(super) record: TrialRecord,
    /// The harness's note when it lagged (from the trial's `summary.json`).
    pub(super) lag: Option<String>,
}

/// A trial running now: its cell, its number, and whether another trial ran beside it at
/// some point.
struct Running {
    cell: usize,
    trial: u32,
    beside: bool,
}

/// Runs every cell of `plan` into `matrix_dir` on `options.backend`, updating `report` and
/// calling `persist` after the probes and after each trial. Cells are taken fault class by
/// fault class (so a partial matrix compares every strategy on the faults it reached); a cell
/// that needs several more trials (one episode per trial, e.g. a Sentinel failover) may run
/// them at once too. Stops launching trials when `shutdown` flips (running ones end as
/// interrupted, through their runner): the report is then `interrupted`, every finished trial
/// kept.
pub async fn run_matrix(
    plan: &MatrixPlan,
    matrix_dir: &Path,
    report: &mut MatrixReport,
    options: &MatrixRunOptions,
    shutdown: watch::Receiver<bool>,
    mut persist: impl FnMut(&MatrixReport),
    mut progress: impl FnMut(MatrixProgress<'_>),
) {
    let started = Instant::now();
    // The claims of the matrix's own kind of work (and key): a claim's scenario does one.
    let mapped = claims::mapped_claims_for(
        &plan.rows(),
        &plan.faults,
        plan.workload.work,
        plan.workload.idempotency_key,
    );
    let wanted = options.episodes_wanted;
    report.episodes_wanted = wanted;
    report.jobs = JobsRecord {
        asked: options.jobs.max(1),
        last: options.jobs.max(1),
        backoff: None,
        clean: 0,
    };
    persist(report);
    for row in plan.rows() {
        if *shutdown.borrow() {
            break;
        }
        progress(MatrixProgress::Probe {
            strategy: &row.label(),
        });
        let p = probe::run_probe(row, &options.backend, matrix_dir, shutdown.clone()).await;
        report.probes.push(p);
        refresh(report, &mapped, started);
        persist(report);
    }
    let mut cells = plan_cells(plan, options);
    for c in &cells {
        report.set_bound(&c.row.label(), c.fault.name(), c.bound);
    }
    refresh(report, &mapped, started);
    let shared = Shared {
        plan: Arc::new(plan.clone()),
        backend: options.backend.clone(),
        dir: matrix_dir.to_path_buf(),
        metrics: options.metrics.clone(),
        ledger: options.ledger.clone(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Finished>();
    let mut running: Vec<Running> = Vec::new();
    loop {
        while !*shutdown.borrow() && (running.len() as u32) < report.jobs.last {
            let Some(i) =
                (0..cells.len()).find(|&i| cells[i].wants_trial(cells[i].exposed(report), wanted))
            else {
                break;
            };
            let key = cells[i].launch();
            let beside = !running.is_empty();
            for r in &mut running {
                r.beside = true;
            }
            running.push(Running {
                cell: i,
                trial: key.trial,
                beside,
            });
            progress(MatrixProgress::Trial {
                strategy: &key.row.label(),
                fault: key.fault,
                trial: key.trial,
                running: running.len() as u32,
            });
            spawn_trial(&shared, i, key, shutdown.clone(), tx.clone());
        }
        if running.is_empty() {
            break;
        }
        let Some(done) = rx.recv().await else { break };
        let pos = running
            .iter()
            .position(|r| r.cell == done.cell && r.trial == done.record.trial)
            .expect("a finished trial was running");
        let beside = running.remove(pos).beside;
        let cell = &mut cells[done.cell];
        settle(cell, report, &done, beside, wanted, &mut progress);
        refresh(report, &mapped, started);
        persist(report);
        progress(MatrixProgress::TrialDone {
            record: &done.record,
            strategy: &cell.row.label(),
            fault: cell.fault,
            exposed: cell.exposed(report),
            progress: episodes_progress(report),
        });
    }
    report.finished_at = Some(chrono::Utc::now().to_rfc3339());
    report.status = if *shutdown.borrow() {
        MatrixStatus::Interrupted
    } else {
        MatrixStatus::Completed
    };
    refresh(report, &mapped, started);
    persist(report);
}

/// A finished trial: back off when its harness lagged at a cost ([`BACK_OFF_SHARE`]; setting
/// it aside when it ran beside others and nothing counted explains its verdict), else keep it
/// in its cell; then end the cell when it needs no more trials, saying
/// why when it is short.
fn settle(
    cell: &mut CellRun,
    report: &mut MatrixReport,
    done: &Finished,
    beside: bool,
    wanted: u32,
    progress: &mut impl FnMut(MatrixProgress<'_>),
) {
    cell.in_flight -= 1;
    let set_aside = done.lag.is_some() && beside && done.record.unexplained_by_evidence();
    match &done.lag {
        Some(note) if lag_was_costly(&done.record, set_aside) => {
            back_off(report, cell, &done.record, note, set_aside, progress);
        }
        // A lag that cost a few episodes: neither fewer trials at once nor a clean trial.
        Some(_) => {}
        None => {
            if let Some(text) = report.jobs.clean_trial() {
                progress(MatrixProgress::BackOff { note: &text });
            }
        }
    }
    if !set_aside {
        keep_trial(cell, report, done.record.clone());
    }
    if cell.in_flight == 0 && !cell.wants_trial(cell.exposed(report), wanted) {
        cell.done = true;
        let exposed = cell.exposed(report);
        if let Some(reason) = cell.shortfall(exposed, wanted) {
            report.shortfalls.push(Shortfall {
                strategy: cell.row.label(),
                fault: cell.fault.to_string(),
                exposed,
                wanted,
                reason,
            });
        }
    }
}

/// Adds a finished trial to its cell (an interrupted one also ends the cell).
fn keep_trial(cell: &mut CellRun, report: &mut MatrixReport, record: TrialRecord) {
    match record.status {
        TrialStatus::Failed => cell.failed += 1,
        TrialStatus::Completed => cell.failed = 0,
        TrialStatus::Interrupted => {}
    }
    if record.status == TrialStatus::Interrupted {
        cell.done = true;
    }
    cell.trials.push(record);
    report.set_trials(&cell.row.label(), cell.fault.name(), cell.trials.clone());
}

/// What every trial thread needs.
pub(super) struct Shared {
    pub(super) plan: Arc<MatrixPlan>,
    pub(super) backend: Backend,
    pub(super) dir: PathBuf,
    pub(super) metrics: Option<crate::results::LiveMetrics>,
    pub(super) ledger: crate::orchestration::ledger_choice::LedgerChoice,
}

/// Claims agreement, decision table, wall time and rate, from the cells as they stand.
fn refresh(report: &mut MatrixReport, mapped: &[ClaimCell], started: Instant) {
    report.claims = claims::agreement(mapped, &report.cells);
    report.decision = super::decide_for(
        &report.strategies,
        &report.cells,
        &report.probes,
        &report.claims,
        &report.workload,
    );
    report.wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let exposed: u64 = report
        .cells
        .iter()
        .map(|c| u64::from(c.episodes.exposed))
        .sum();
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    report.exposed_per_minute = (minutes > 0.0).then(|| exposed as f64 / minutes);
}

/// Exposed episodes over every cell, each counted up to the number wanted (a progress bar's
/// position out of cells × wanted).
pub fn episodes_progress(report: &MatrixReport) -> u64 {
    report
        .cells
        .iter()
        .map(|c| u64::from(c.episodes.exposed.min(report.episodes_wanted)))
        .sum()
}

/// Wall time for people: `12 min 5 s`.
pub fn wall_text(ms: u64) -> String {
    let d = Duration::from_millis(ms);
    let (m, s) = (d.as_secs() / 60, d.as_secs() % 60);
    if m > 0 {
        format!("{m} min {s} s")
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
