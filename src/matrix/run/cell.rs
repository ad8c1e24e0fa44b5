//! A cell as the scheduler sees it: its planned episodes and bound on trials, whether it
//! wants another trial now, and why it fell short of the exposed episodes wanted.

use super::MatrixRunOptions;
use crate::matrix::fault::FaultClass;
use crate::matrix::plan::MatrixPlan;
use crate::matrix::record::{TrialRecord, TrialStatus};
use crate::matrix::setup::MatrixRow;
use crate::matrix::trial::TrialKey;
use crate::matrix::MatrixReport;

/// Failed trials in a row after which a cell stops (its topology does not start, or its fault
/// cannot be injected: more trials would fail the same way). A failure between completed
/// trials is replaced by another trial.
pub const FAILED_TRIALS_LIMIT: u32 = 2;

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

/// A cell as the scheduler sees it.
pub(super) struct CellRun {
    pub(super) row: MatrixRow,
    pub(super) fault: FaultClass,
    /// Episodes planned per trial.
    pub(super) planned: usize,
    /// Most trials it keeps.
    pub(super) bound: u32,
    /// Whether trials the harness's lag left without evidence are run again beyond the bound
    /// (up to as many again): yes for the default bound, no for an explicit `--max-trials`.
    pub(super) lag_allowance: bool,
    /// Its finished trials, in the order they finished (set-aside ones left out).
    pub(super) trials: Vec<TrialRecord>,
    /// Trials started so far (the next trial's number is one more).
    pub(super) launched: u32,
    /// Trials running now.
    pub(super) in_flight: u32,
    /// Failed trials since the last completed one.
    pub(super) failed: u32,
    pub(super) done: bool,
}

impl CellRun {
    pub(super) fn exposed(&self, report: &MatrixReport) -> u32 {
        report
            .cell(&self.row.label(), self.fault.name())
            .map_or(0, |c| c.episodes.exposed)
    }

    /// Whether another trial should start now: the cell is short of `wanted` exposed episodes
    /// even if every episode of the trials running now were exposed, under its bound, and not
    /// failing. A cell with no episode planned runs one trial.
    pub(super) fn wants_trial(&self, exposed: u32, wanted: u32) -> bool {
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
    pub(super) fn lost_to_lag(&self) -> u32 {
        self.trials.iter().filter(|t| t.lost_to_lag()).count() as u32
    }

    /// Counts a trial as started and names it.
    pub(super) fn launch(&mut self) -> TrialKey {
        self.in_flight += 1;
        self.launched += 1;
        TrialKey {
            row: self.row,
            fault: self.fault,
            trial: self.launched,
        }
    }

    /// Why the cell stopped with fewer than `wanted` exposed episodes, once nothing runs.
    pub(super) fn shortfall(&self, exposed: u32, wanted: u32) -> Option<String> {
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

/// The cells of `plan` in fault-class-major order, each with its planned episodes and bound;
/// inside a fault class the cells with the longest trials first, so the last class does not
/// end with one long trial running alone (an etcd trial is twice a Redis one).
pub(super) fn plan_cells(plan: &MatrixPlan, options: &MatrixRunOptions) -> Vec<CellRun> {
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
