//! How many trials run at once: one fewer each time a trial's harness lags at a cost, one
//! more again after enough clean trials in a row, and the trials set aside.

use serde::{Deserialize, Serialize};

use super::cell::CellRun;
use super::MatrixProgress;
use crate::matrix::record::TrialRecord;
use crate::matrix::MatrixReport;

/// Trials in a row that must finish without harness lag before one more runs at once again
/// (after a back-off). A lag that came from one passing event (seen: every running trial
/// lagging 0.3–0.8 s in the same second, once in a run) then costs a few trials at a lower
/// concurrency instead of the rest of the matrix; a machine that lags at every step stays
/// down.
pub const STEP_UP_AFTER: u32 = 4;

/// Back-off and step-up steps a terminal shows in full; more are counted
/// ([`JobsRecord::backoff_brief`]).
pub const BRIEF_STEPS: usize = 2;

/// A lagging trial makes the matrix run one trial fewer at once only when the lag cost at
/// least this share of its episodes (set aside, [`crate::matrix::episode::mark_harness_lag`]), or the
/// whole trial, or it had no episode to judge. Below it the lag cost a few episodes, less than
/// running fewer trials would cost (measured on a quiet 2-core machine, quick matrix: 14
/// back-offs at one episode in ~30 lost, 7 min 30 s against 5.0 planned).
pub const BACK_OFF_SHARE: f64 = 0.25;

/// Whether a lagging trial's lag cost enough to run fewer trials at once ([`BACK_OFF_SHARE`]).
pub(super) fn lag_was_costly(record: &TrialRecord, set_aside: bool) -> bool {
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
    pub(super) fn say(&mut self, text: String) {
        self.backoff = Some(match self.backoff.take() {
            Some(earlier) => format!("{earlier}; then {text}"),
            None => text,
        });
    }

    /// [`JobsRecord::backoff`] for a terminal: the history itself when it has at most
    /// [`BRIEF_STEPS`] steps, else how many back-offs and step-ups, where it ended, and where
    /// the whole history is (`matrix.md`'s run line).
    pub fn backoff_brief(&self) -> Option<String> {
        let history = self.backoff.as_deref()?;
        let steps: Vec<&str> = history.split("; then ").collect();
        if steps.len() <= BRIEF_STEPS {
            return Some(history.to_string());
        }
        let down = steps
            .iter()
            .filter(|s| s.starts_with("backed off from"))
            .count();
        Some(format!(
            "backed off {down} time(s) and stepped back up {} time(s), ending at {} of {} trial(s) \
             at a time (every step in matrix.md)",
            steps.len() - down,
            self.last,
            self.asked
        ))
    }

    /// A trial finished without lag: after [`STEP_UP_AFTER`] in a row below `asked`, one more
    /// trial at once. Returns what changed, if anything.
    pub(super) fn clean_trial(&mut self) -> Option<String> {
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

/// A trial whose harness lagged: one trial fewer runs at once (at least one; each step said in
/// the report); `set_aside` lists it as set aside.
pub(super) fn back_off(
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
