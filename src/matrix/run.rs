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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use super::claims::{self, ClaimCell};
use super::fault::FaultClass;
use super::plan::MatrixPlan;
use super::probe;
use super::record::{TrialRecord, TrialStatus};
use super::setup::MatrixRow;
use super::trial::TrialKey;
use super::trial_thread::spawn_trial;
use super::{MatrixReport, MatrixStatus};
use crate::orchestration::runner::Backend;

/// Failed trials in a row after which a cell stops (its topology does not start, or its fault
/// cannot be injected: more trials would fail the same way). A failure between completed
/// trials is replaced by another trial.
pub const FAILED_TRIALS_LIMIT: u32 = 2;

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

/// The default bound on a cell's trials: twice the trials that would reach `wanted` exposed
/// episodes if every one of the `planned` episodes per trial were exposed (at least 2); one
/// trial when the cell plans no episode (nothing to expose: one trial shows it ran).
pub fn default_trial_bound(planned: usize, wanted: u32) -> u32 {
    if planned == 0 {
        return 1;
    }
    let planned = u32::try_from(planned).unwrap_or(u32::MAX);
    (2 * wanted.div_ceil(planned)).max(2)
}

/// Trials in a row that must finish without harness lag before one more runs at once again
/// (after a back-off). A lag that came from one passing event (seen: every running trial
/// lagging 0.3–0.8 s in the same second, once in a run) then costs a few trials at a lower
/// concurrency instead of the rest of the matrix; a machine that lags at every step stays
/// down.
pub const STEP_UP_AFTER: u32 = 4;

/// A lagging trial makes the matrix run one trial fewer at once only when the lag cost at
/// least this share of its episodes (set aside, [`super::episode::mark_harness_lag`]), or the
/// whole trial, or it had no episode to judge. Below it the lag cost a few episodes, less than
/// running fewer trials would cost (measured on a quiet 2-core machine, quick matrix: 14
/// back-offs at one episode in ~30 lost, 7 min 30 s against 5.0 planned).
pub const BACK_OFF_SHARE: f64 = 0.25;

/// Whether a lagging trial's lag cost enough to run fewer trials at once ([`BACK_OFF_SHARE`]).
fn lag_was_costly(record: &TrialRecord, set_aside: bool) -> bool {
    let n = record.episodes.len();
    let lagged = record
        .episodes
        .iter()
        .filter(|e| e.harness_lag_us.is_some())
        .count();
    set_aside || n == 0 || lagged as f64 >= BACK_OFF_SHARE * n as f64
}

/// How many trials ran at once, and why that changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobsRecord {
    /// Trials at once asked for (`--jobs`).
    pub asked: u32,
    /// Trials at once when the matrix ended (one fewer after each back-off, at least 1; one
    /// more after [`STEP_UP_AFTER`] clean trials in a row, at most `asked`).
    pub last: u32,
    /// Its back-offs and step-ups so far, in one sentence: from how many to how many, naming
    /// the trials whose harness lagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// Trials finished without lag since the last change (not saved).
    #[serde(skip)]
    pub clean: u32,
}

impl JobsRecord {
    /// Adds one sentence to [`JobsRecord::backoff`].
    fn say(&mut self, text: String) {
        self.backoff = Some(match self.backoff.take() {
            Some(earlier) => format!("{earlier}; then {text}"),
            None => text,
        });
    }

    /// A trial finished without lag: after [`STEP_UP_AFTER`] in a row below `asked`, one more
    /// trial at once. Returns what changed, if anything.
    fn clean_trial(&mut self) -> Option<String> {
        self.clean += 1;
        if self.last >= self.asked || self.clean < STEP_UP_AFTER {
            return None;
        }
        self.clean = 0;
        self.last += 1;
        let text = format!(
            "back up to {} trial(s) at a time after {STEP_UP_AFTER} trials in a row without lag",
            self.last
        );
        self.say(text.clone());
        Some(text)
    }
}

/// A trial left out of its cell: its harness lagged while other trials ran beside it and its
/// checker did not find it valid while no episode that counts showed damage, so its anomalies
/// may say more about the machine than about the lock. Its directory is kept; the cell ran another trial in its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetAsideTrial {
    /// Strategy (row).
    pub strategy: String,
    /// Fault class (column).
    pub fault: String,
    /// Its run directory, relative to the matrix directory.
    pub dir: String,
    /// The harness's own note (how late it was).
    pub note: String,
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

/// A cell as the scheduler sees it.
struct CellRun {
    row: MatrixRow,
    fault: FaultClass,
    /// Episodes planned per trial.
    planned: usize,
    /// Most trials it keeps.
    bound: u32,
    /// Whether trials the harness's lag left without evidence are run again beyond the bound
    /// (up to as many again): yes for the default bound, no for an explicit `--max-trials`.
    lag_allowance: bool,
    /// Its finished trials, in the order they finished (set-aside ones left out).
    trials: Vec<TrialRecord>,
    /// Trials started so far (the next trial's number is one more).
    launched: u32,
    /// Trials running now.
    in_flight: u32,
    /// Failed trials since the last completed one.
    failed: u32,
    done: bool,
}

impl CellRun {
    fn exposed(&self, report: &MatrixReport) -> u32 {
        report
            .cell(&self.row.label(), self.fault.name())
            .map_or(0, |c| c.episodes.exposed)
    }

    /// Whether another trial should start now: the cell is short of `wanted` exposed episodes
    /// even if every episode of the trials running now were exposed, under its bound, and not
    /// failing. A cell with no episode planned runs one trial.
    fn wants_trial(&self, exposed: u32, wanted: u32) -> bool {
        let all = self.trials.len() as u32 + self.in_flight;
        let lost = if self.lag_allowance {
            self.lost_to_lag()
        } else {
            0
        };
        // Trials the harness's lag left without evidence do not count toward the bound, up
        // to as many again (a machine that always lags still ends the cell).
        let started = all - lost;
        if self.done
            || started >= self.bound
            || all >= self.bound.saturating_mul(2)
            || self.failed >= FAILED_TRIALS_LIMIT
        {
            return false;
        }
        if self.planned == 0 {
            return started == 0;
        }
        let coming = u64::from(self.in_flight) * self.planned as u64;
        u64::from(exposed) + coming < u64::from(wanted)
    }

    /// Its finished trials whose every exposed episode the harness's lag set aside
    /// ([`TrialRecord::lost_to_lag`]).
    fn lost_to_lag(&self) -> u32 {
        self.trials.iter().filter(|t| t.lost_to_lag()).count() as u32
    }

    /// Counts a trial as started and names it.
    fn launch(&mut self) -> TrialKey {
        self.in_flight += 1;
        self.launched += 1;
        TrialKey {
            row: self.row,
            fault: self.fault,
            trial: self.launched,
        }
    }

    /// Why the cell stopped with fewer than `wanted` exposed episodes, once nothing runs.
    fn shortfall(&self, exposed: u32, wanted: u32) -> Option<String> {
        let kept = self.trials.len();
        if exposed >= wanted {
            None
        } else if self
            .trials
            .iter()
            .any(|t| t.status == TrialStatus::Interrupted)
        {
            Some(format!(
                "interrupted with {exposed} of {wanted} exposed episodes"
            ))
        } else if self.planned == 0 {
            Some(format!(
                "no episode is planned for {} × {} on its topology: nothing to expose",
                self.row, self.fault
            ))
        } else if self.failed >= FAILED_TRIALS_LIMIT {
            Some(format!(
                "{} trials in a row failed to run (see their errors); stopped",
                self.failed
            ))
        } else if let lost @ 1.. = self.lost_to_lag() {
            Some(format!(
                "{exposed} of {wanted} exposed episodes after {kept} trial(s), {lost} of them with every \
                 exposed episode set aside because the harness lagged: the machine is too busy for \
                 this cell (fewer trials at once with --jobs, or a quieter machine)"
            ))
        } else {
            Some(format!(
                "{exposed} of {wanted} exposed episodes after {kept} trial(s) (the bound; {} episodes planned \
                 per trial): its trials do not expose enough",
                self.planned
            ))
        }
    }
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
    let mapped = claims::mapped_claims(&plan.rows(), &plan.faults);
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

/// The cells of `plan` in fault-class-major order, each with its planned episodes and bound;
/// inside a fault class the cells with the longest trials first, so the last class does not
/// end with one long trial running alone (an etcd trial is twice a Redis one).
fn plan_cells(plan: &MatrixPlan, options: &MatrixRunOptions) -> Vec<CellRun> {
    let mut cells = Vec::new();
    for &fault in &plan.faults {
        let mut rows: Vec<_> = plan
            .rows()
            .into_iter()
            .filter(|&r| fault.applies(r))
            .collect();
        rows.sort_by_key(|&r| std::cmp::Reverse(plan.trial_duration(r, fault)));
        for row in rows {
            let planned = plan.episode_specs(row, fault).len();
            let bound = options
                .max_trials
                .unwrap_or_else(|| default_trial_bound(planned, options.episodes_wanted))
                .max(1);
            cells.push(CellRun {
                row,
                fault,
                planned,
                bound,
                lag_allowance: options.max_trials.is_none(),
                trials: Vec::new(),
                launched: 0,
                in_flight: 0,
                failed: 0,
                done: false,
            });
        }
    }
    cells
}

/// A trial whose harness lagged: one trial fewer runs at once (at least one; each step said in
/// the report); `set_aside` lists it as set aside.
fn back_off(
    report: &mut MatrixReport,
    cell: &CellRun,
    record: &TrialRecord,
    note: &str,
    set_aside: bool,
    progress: &mut impl FnMut(MatrixProgress<'_>),
) {
    if set_aside {
        report.set_aside.push(SetAsideTrial {
            strategy: cell.row.label(),
            fault: cell.fault.to_string(),
            dir: record.dir.clone(),
            note: note.to_string(),
        });
    }
    report.jobs.clean = 0;
    if report.jobs.last > 1 {
        let from = report.jobs.last;
        report.jobs.last -= 1;
        let text = format!(
            "backed off from {from} to {} trial(s) at a time after {} ({}): {note}",
            report.jobs.last,
            record.dir,
            if set_aside {
                "it ran beside other trials and was not valid with no damage in an episode that counts: set aside, its cell ran another"
            } else {
                "kept without the episodes the lag overlapped"
            }
        );
        progress(MatrixProgress::BackOff { note: &text });
        report.jobs.say(text);
    }
}

/// Claims agreement, decision table, wall time and rate, from the cells as they stand.
fn refresh(report: &mut MatrixReport, mapped: &[ClaimCell], started: Instant) {
    report.claims = claims::agreement(mapped, &report.cells);
    report.decision = super::decide(
        &report.strategies,
        &report.cells,
        &report.probes,
        &report.claims,
        report.workload.ttl,
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

#[cfg(test)]
mod tests {
    #[test]
    fn concurrency_steps_up_again_after_enough_clean_trials_never_above_what_was_asked() {
        let mut jobs = JobsRecord {
            asked: 4,
            last: 2,
            backoff: Some("backed off from 3 to 2".into()),
            clean: 0,
        };
        for _ in 1..STEP_UP_AFTER {
            assert_eq!(jobs.clean_trial(), None);
        }
        assert_eq!(
            jobs.clean_trial().as_deref(),
            Some("back up to 3 trial(s) at a time after 4 trials in a row without lag")
        );
        assert_eq!((jobs.last, jobs.clean), (3, 0));
        for _ in 0..STEP_UP_AFTER {
            jobs.clean_trial();
        }
        assert_eq!(jobs.last, 4);
        // Never above what was asked.
        for _ in 0..3 * STEP_UP_AFTER {
            assert_eq!(jobs.clean_trial(), None);
        }
        assert_eq!(jobs.last, 4);
        assert!(jobs
            .backoff
            .as_deref()
            .unwrap()
            .starts_with("backed off from 3 to 2; then back up to 3 trial(s)"));
    }

    use super::*;
    use crate::strategy::StrategyKind;

    #[test]
    fn the_default_bound_allows_half_the_planned_episodes_to_miss() {
        assert_eq!(default_trial_bound(0, 30), 1);
        assert_eq!(default_trial_bound(10, 30), 6);
        assert_eq!(default_trial_bound(7, 30), 10);
        assert_eq!(default_trial_bound(40, 30), 2);
        assert_eq!(default_trial_bound(3, 10), 8);
    }

    fn cell(planned: usize, bound: u32, kept: u32, in_flight: u32) -> CellRun {
        CellRun {
            row: MatrixRow::direct(StrategyKind::Single),
            fault: FaultClass::Failover,
            planned,
            bound,
            lag_allowance: true,
            trials: (1..=kept)
                .map(|t| TrialRecord::not_run(t, 1, format!("t{t}"), TrialStatus::Completed, None))
                .collect(),
            launched: kept + in_flight,
            in_flight,
            failed: 0,
            done: false,
        }
    }

    #[test]
    fn a_cell_starts_trials_only_while_its_running_ones_cannot_reach_the_episodes_wanted() {
        // One episode per trial (a Sentinel failover), 3 wanted: up to 3 at once.
        assert!(cell(1, 6, 0, 0).wants_trial(0, 3));
        assert!(cell(1, 6, 0, 2).wants_trial(0, 3));
        assert!(!cell(1, 6, 0, 3).wants_trial(0, 3));
        assert!(cell(1, 6, 2, 0).wants_trial(2, 3));
        assert!(!cell(1, 6, 3, 0).wants_trial(3, 3));
        // 33 episodes per trial, 30 wanted: one trial, a second only if the first fell short.
        assert!(!cell(33, 2, 0, 1).wants_trial(0, 30));
        assert!(cell(33, 2, 1, 0).wants_trial(25, 30));
        // The bound counts running trials; a failing cell stops; nothing planned: one trial.
        assert!(!cell(1, 6, 4, 2).wants_trial(4, 30));
        let mut failing = cell(1, 6, 2, 0);
        failing.failed = FAILED_TRIALS_LIMIT;
        assert!(!failing.wants_trial(0, 3));
        assert!(cell(0, 1, 0, 0).wants_trial(0, 30));
        assert!(!cell(0, 1, 1, 0).wants_trial(0, 30));
        assert!(cell(0, 1, 1, 0)
            .shortfall(0, 30)
            .unwrap()
            .contains("no episode"));
        assert!(cell(1, 6, 6, 0)
            .shortfall(4, 30)
            .unwrap()
            .contains("4 of 30"));
        assert_eq!(cell(1, 6, 6, 0).shortfall(30, 30), None);
    }

    #[test]
    fn trials_the_harness_lag_left_without_evidence_do_not_count_toward_the_bound() {
        let lagged = |t: u32, lag: Option<u64>| {
            let mut r = TrialRecord::not_run(t, 1, format!("t{t}"), TrialStatus::Completed, None);
            r.episodes = vec![crate::matrix::EpisodeOutcome {
                trial: t,
                index: 1,
                start_us: 1_000_000,
                heal_us: Some(1_500_000),
                end_us: 2_000_000,
                targets: vec!["client:1".into()],
                exposed: true,
                exposure: String::new(),
                damage: vec![],
                first_damage_us: None,
                unsafe_belief: false,
                stuck: true,
                recovery_us: None,
                harness_lag_us: lag,
            }];
            r
        };
        // 4 of 6 trials kept, 3 of them lost to lag: one counts, so more may run.
        let mut c = cell(1, 6, 0, 0);
        c.trials = vec![
            lagged(1, Some(150_000)),
            lagged(2, Some(150_000)),
            lagged(3, Some(150_000)),
            lagged(4, None),
        ];
        assert!(c.wants_trial(1, 10));
        // A trial with evidence counts; at twice the bound the cell ends however it lagged.
        c.trials = (1..=6).map(|t| lagged(t, None)).collect();
        assert!(!c.wants_trial(6, 10));
        c.trials = (1..=12).map(|t| lagged(t, Some(150_000))).collect();
        assert!(!c.wants_trial(0, 10));
        assert!(c
            .shortfall(0, 10)
            .unwrap()
            .contains("12 of them with every exposed episode set aside"));
    }

    #[test]
    fn a_lagging_trial_beside_others_is_set_aside_only_when_no_counted_episode_explains_its_verdict(
    ) {
        let plan = MatrixPlan::new(
            vec![StrategyKind::Single],
            vec![FaultClass::Failover],
            1,
            super::super::MatrixWorkload::quick(),
        );
        use crate::checker::Verdict;
        let finished = |trial: u32, verdict: Verdict, lag: bool| Finished {
            cell: 0,
            record: TrialRecord {
                verdict: Some(verdict),
                ..TrialRecord::not_run(trial, 1, format!("t{trial}"), TrialStatus::Completed, None)
            },
            lag: lag.then(|| "harness overloaded: lagged 300 ms".to_string()),
        };
        let mut report = MatrixReport::new(&plan, "m");
        report.jobs = JobsRecord {
            asked: 4,
            last: 4,
            ..JobsRecord::default()
        };
        let mut c = cell(100, 10, 0, 5);
        let mut said = Vec::new();
        let mut progress = |p: MatrixProgress<'_>| {
            if let MatrixProgress::BackOff { note } = p {
                said.push(note.to_string());
            }
        };
        // Lagged beside others but valid: kept (its lagged episodes are set aside instead).
        settle(
            &mut c,
            &mut report,
            &finished(1, Verdict::Valid, true),
            true,
            30,
            &mut progress,
        );
        // Lagged beside others and invalid: set aside, the cell runs another.
        settle(
            &mut c,
            &mut report,
            &finished(2, Verdict::Invalid, true),
            true,
            30,
            &mut progress,
        );
        // Lagged beside others and invalid, with damage in an episode the lag did not touch:
        // kept (that damage is the lock's).
        let mut damaged = finished(4, Verdict::Invalid, true);
        damaged.record.episodes = vec![crate::matrix::EpisodeOutcome {
            trial: 4,
            index: 1,
            start_us: 1_000_000,
            heal_us: Some(1_500_000),
            end_us: 2_000_000,
            targets: vec!["n1".into()],
            exposed: true,
            exposure: String::new(),
            damage: vec![crate::checker::AnomalyKind::MutexViolation],
            first_damage_us: Some(1_700_000),
            unsafe_belief: false,
            stuck: false,
            recovery_us: None,
            harness_lag_us: None,
        }];
        settle(&mut c, &mut report, &damaged, true, 30, &mut progress);
        // Lagged beside others, valid, 1 of 11 episodes set aside: kept, and no back-off.
        let last = report.jobs.last;
        let mut cheap = finished(5, Verdict::Valid, true);
        cheap.record.episodes = (1..=11)
            .map(|i| crate::matrix::EpisodeOutcome {
                index: i,
                damage: vec![],
                first_damage_us: None,
                harness_lag_us: (i == 3).then_some(120_000),
                ..damaged.record.episodes[0].clone()
            })
            .collect();
        settle(&mut c, &mut report, &cheap, true, 30, &mut progress);
        assert_eq!(report.jobs.last, last, "a lag that cost 1 of 11 episodes");
        // Lagged alone and invalid: kept (nothing else ran to blame).
        settle(
            &mut c,
            &mut report,
            &finished(3, Verdict::Invalid, true),
            false,
            30,
            &mut progress,
        );
        let kept: Vec<u32> = c.trials.iter().map(|t| t.trial).collect();
        assert_eq!(kept, vec![1, 4, 5, 3]);
        assert_eq!(report.set_aside.len(), 1);
        assert_eq!(report.set_aside[0].dir, "t2");
        assert_eq!(report.jobs.last, 1, "each lagging trial backs off one step");
        assert!(
            said[0].ends_with(
                "(kept without the episodes the lag overlapped): harness overloaded: lagged 300 ms"
            ),
            "{said:?}"
        );
        assert!(
            said[1].contains("was not valid with no damage in an episode that counts: set aside"),
            "{said:?}"
        );
    }

    #[test]
    fn wall_time_reads_in_minutes() {
        assert_eq!(wall_text(725_000), "12 min 5 s");
        assert_eq!(wall_text(4_250), "4.2 s");
    }
}
