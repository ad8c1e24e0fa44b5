//! A matrix over several kinds of work (`matrix --work external,job`): one matrix per kind
//! (its own [`MatrixReport`] and files under `<kind>/`), and [`WorksReport`], what the run's
//! own `works.json`, `matrix.md` and `matrix.html` read: per kind, where it stands and its
//! decision table, so the answer is given per kind of work (the reference articles choose a
//! lock by the damage of duplicate execution, which the work decides).
//!
//! Layout of `results/<time>-matrix/` with several kinds:
//!
//! ```text
//! works.json    WorksReport: per kind its directory, status, cells and decision
//! matrix.md     the decision per kind, each linking its own matrix.md
//! matrix.html   the answer per kind, each linking its own matrix.html
//! <kind>/       that kind's matrix (matrix.json, .csv, .md, .html, probes/, trials/)
//! ```

use serde::{Deserialize, Serialize};

use crate::driver::WorkKind;
use crate::matrix::{DecisionTable, MatrixReport, MatrixStatus};

/// One kind of work's matrix, as the run's own files show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkSection {
    /// The kind of work every trial of this matrix did.
    pub work: WorkKind,
    /// Every call to the sink carried the job's idempotency key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotency_key: bool,
    /// Its directory, relative to the run's (`job`).
    pub dir: String,
    /// False until its first trial ran (it waits for the kinds before it).
    pub started: bool,
    /// Where it stands.
    pub status: MatrixStatus,
    /// Its row labels, in row order.
    pub rows: Vec<String>,
    /// Its cells (rows × the fault classes each runs).
    pub cells: usize,
    /// Exposed episodes so far, every cell.
    pub exposed: u64,
    /// Claims its cells contradict (`05a`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradictions: Vec<String>,
    /// Wall time so far, ms.
    pub wall_ms: u64,
    /// Its decision table.
    pub decision: DecisionTable,
    /// The brief thin-evidence line of each answer (efficiency, correctness), when thin.
    #[serde(default)]
    pub thin: [Option<String>; 2],
}

impl WorkSection {
    /// The section of `report`, written under `dir`; `started` once a trial of it ran.
    pub fn of(dir: &str, report: &MatrixReport, started: bool) -> Self {
        let (efficiency, correctness) = report.thin_evidence();
        Self {
            work: report.workload.work,
            idempotency_key: report.workload.idempotency_key,
            dir: dir.to_string(),
            started,
            status: report.status,
            rows: report.strategies.clone(),
            cells: report.cells.len(),
            exposed: report
                .cells
                .iter()
                .map(|c| u64::from(c.episodes.exposed))
                .sum(),
            contradictions: report
                .contradictions()
                .iter()
                .map(|c| c.claim.clone())
                .collect(),
            wall_ms: report.wall_ms,
            decision: report.decision.clone(),
            thin: [efficiency.brief(), correctness.brief()],
        }
    }

    /// The kind in words: `job work with idempotency keys`.
    pub fn title(&self) -> String {
        crate::matrix::plan::work_title(self.work, self.idempotency_key)
    }
}

/// `works.json`: a matrix per kind of work, each kind's section in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorksReport {
    /// `lockbench` version that wrote it.
    pub lockbench_version: String,
    /// Directory name under `results/`.
    pub run_id: String,
    /// RFC 3339 start (UTC).
    pub started_at: String,
    /// RFC 3339 end (UTC), once every kind finished or the run was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Where the whole run stands: running until every kind completed, interrupted when
    /// one was.
    pub status: MatrixStatus,
    /// One section per kind of work.
    pub works: Vec<WorkSection>,
    /// The shared workload in words (the work aside).
    pub workload: String,
    /// Path (relative to the run's directory) of another report this one links, e.g. the
    /// claim scenarios' `comparison.html`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_report: Option<String>,
}

impl WorksReport {
    /// A report whose every kind waits, from each kind's directory and fresh report.
    pub fn new(run_id: &str, kinds: &[(String, &MatrixReport)]) -> Self {
        let workload = kinds
            .first()
            .map(|(_, r)| {
                let mut w = r.workload.clone();
                w.work = WorkKind::Row;
                w.idempotency_key = false;
                w.describe()
            })
            .unwrap_or_default();
        Self {
            lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
            run_id: run_id.to_string(),
            started_at: chrono::Utc::now().to_rfc3339(),
            finished_at: None,
            status: MatrixStatus::Running,
            works: kinds
                .iter()
                .map(|(dir, r)| WorkSection::of(dir, r, false))
                .collect(),
            workload,
            linked_report: None,
        }
    }

    /// Takes section `i`'s report as it stands (a trial of it ran).
    pub fn update(&mut self, i: usize, report: &MatrixReport) {
        if let Some(s) = self.works.get_mut(i) {
            let dir = std::mem::take(&mut s.dir);
            *s = WorkSection::of(&dir, report, true);
        }
    }

    /// Ends the run: interrupted when a kind was, else completed.
    pub fn finish(&mut self) {
        self.status = if self
            .works
            .iter()
            .any(|s| s.status == MatrixStatus::Interrupted || !s.started)
        {
            MatrixStatus::Interrupted
        } else {
            MatrixStatus::Completed
        };
        self.finished_at = Some(chrono::Utc::now().to_rfc3339());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{FaultClass, MatrixPlan, MatrixWorkload};
    use crate::strategy::StrategyKind;

    fn report(work: WorkKind, strategies: Vec<StrategyKind>) -> MatrixReport {
        let w = MatrixWorkload {
            work,
            ..MatrixWorkload::quick()
        };
        let plan = MatrixPlan::new(strategies, vec![FaultClass::None], 2, w);
        MatrixReport::new(&plan, "t")
    }

    #[test]
    fn sections_wait_until_their_first_trial_and_a_run_with_a_waiting_kind_is_interrupted() {
        let a = report(WorkKind::External, vec![StrategyKind::Single]);
        let b = report(
            WorkKind::Job,
            vec![StrategyKind::Single, StrategyKind::ClaimUpdate],
        );
        let mut w = WorksReport::new("t", &[("external".into(), &a), ("job".into(), &b)]);
        assert_eq!(w.works.len(), 2);
        assert!(w.works.iter().all(|s| !s.started));
        assert_eq!(w.works[1].rows, ["single", "claim-update"]);
        assert_eq!(w.works[1].cells, 2);
        assert_eq!(w.works[1].title(), "job work");
        assert!(!w.workload.contains("work"), "{}", w.workload);
        let mut done = a.clone();
        done.status = MatrixStatus::Completed;
        w.update(0, &done);
        assert!(w.works[0].started);
        assert_eq!(w.works[0].dir, "external");
        w.finish();
        assert_eq!(w.status, MatrixStatus::Interrupted, "job never ran");
        let mut done_b = b.clone();
        done_b.status = MatrixStatus::Completed;
        w.update(1, &done_b);
        w.finish();
        assert_eq!(w.status, MatrixStatus::Completed);
    }
}
