//! [`ReportInput`]: everything one run's report is drawn from, in one serde struct.
//!
//! The run's [`RunSummary`] plus what the checker and the nemesis add: per-strategy verdicts
//! with their anomalies, and the fault windows. All times are seconds since the strategy's
//! clients started, the same origin as [`TimelinePoint::second`](crate::results::TimelinePoint).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use crate::checker::{AnomalyKind, Verdict};
use crate::checker::{CheckReport, Incident};
use crate::history::FaultWindow;
use crate::results::{CheckSummary, RunSummary, StrategySummary};

/// How the report classes the checker's anomaly kinds ([`AnomalyKind`], the one list of kinds;
/// their JSON names are the checker's kebab-case names such as `mutex-violation`).
pub mod anomaly_kind {
    use crate::checker::AnomalyKind;

    /// Kinds that record protection doing its job; they are counted but are not anomalies.
    pub const BENIGN: &[AnomalyKind] = &[
        AnomalyKind::StaleWriteRejected,
        AnomalyKind::EffectDeduplicated,
        AnomalyKind::StaleCompletionRefused,
    ];

    /// Kinds whose only cost is work done twice: acceptable for an efficiency lock.
    pub const DUPLICATED_WORK: &[AnomalyKind] = &[
        AnomalyKind::MutexViolation,
        AnomalyKind::BelievedOverlap,
        AnomalyKind::PossibleOverlap,
        AnomalyKind::StaleWriteAccepted,
        AnomalyKind::StaleWriteRejected,
        // Two holders doing the ledger's read-modify-write lose an increment: the same
        // duplicated work, seen in the counter.
        AnomalyKind::LostUpdate,
        // A repeat the sink's idempotency key answered: no second effect.
        AnomalyKind::EffectDeduplicated,
        // A job run twice, and a stale worker's completion refused: the work, twice.
        AnomalyKind::DuplicateExecution,
        AnomalyKind::StaleCompletionRefused,
    ];

    /// Kinds an efficiency lock can live with: duplicated work, and short unavailability
    /// windows (a stuck resource is not tolerable).
    pub fn tolerable_for_efficiency(kind: AnomalyKind) -> bool {
        DUPLICATED_WORK.contains(&kind) || kind == AnomalyKind::Unavailable
    }
}

/// One anomaly placed on the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnomalyMark {
    /// Kind (`mutex-violation`, `believed-overlap`, … in JSON).
    pub kind: AnomalyKind,
    /// When it happened, seconds since the strategy's start.
    pub time_s: f64,
    /// Client ids involved (e.g. the overlapping holders).
    #[serde(default)]
    pub clients: Vec<u32>,
    /// One line for a human: resource, tokens, holders.
    #[serde(default)]
    pub detail: String,
}

/// The checker's result for one strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyVerdict {
    /// Strategy name, matching [`StrategySummary::strategy`].
    pub strategy: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Anomalies to mark on the timeline (may be a sample; `counts` has the totals).
    #[serde(default)]
    pub anomalies: Vec<AnomalyMark>,
    /// Totals per kind (anomaly kinds and protection events such as stale writes rejected).
    #[serde(default)]
    pub counts: BTreeMap<AnomalyKind, u64>,
    /// Fraction of time (0..=1) a client that wanted the lock could get it, when the checker
    /// measured it (its waiting view, else its failed-attempts view for older files).
    #[serde(default)]
    pub availability: Option<f64>,
    /// The checker's incidents (from `checker.json`; empty when only `summary.json` had a
    /// verdict, see `incidents_known`).
    #[serde(default)]
    pub incidents: Vec<Incident>,
    /// Whether the incidents cover only the anomalies the checker listed (per-kind cap).
    #[serde(default)]
    pub incidents_partial: bool,
    /// Whether `incidents` came from a checker report that has them (false for `summary.json`
    /// verdicts and checker files written before incidents existed).
    #[serde(default)]
    pub incidents_known: bool,
}

impl StrategyVerdict {
    /// Count of one kind: from `counts`, else the number of marks of that kind.
    pub fn count(&self, kind: AnomalyKind) -> u64 {
        match self.counts.get(&kind) {
            Some(n) => *n,
            None => self.anomalies.iter().filter(|a| a.kind == kind).count() as u64,
        }
    }

    /// Every kind with a non-zero count, from `counts` and the marks.
    pub fn kinds_seen(&self) -> BTreeSet<AnomalyKind> {
        let mut kinds: BTreeSet<AnomalyKind> = self
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| *k)
            .collect();
        kinds.extend(self.anomalies.iter().map(|a| a.kind));
        kinds
    }

    /// Incidents with a safety anomaly; `None` when the incidents are not known.
    pub fn safety_incidents(&self) -> Option<u64> {
        self.incidents_known
            .then(|| self.incidents.iter().filter(|i| i.safety).count() as u64)
    }

    /// Total anomalies, not counting benign kinds ([`anomaly_kind::BENIGN`]).
    pub fn anomaly_total(&self) -> u64 {
        self.kinds_seen()
            .iter()
            .filter(|k| !anomaly_kind::BENIGN.contains(k))
            .map(|k| self.count(*k))
            .sum()
    }
}

impl StrategyVerdict {
    /// The report's view of one strategy's `checker.json`: its verdict, every listed anomaly as
    /// a mark (`time_s = time_us / 10⁶`, on the strategy's clock), the checker's totals per kind
    /// (listed or not, see [`CheckSummary`]) and availability (`availability_pct / 100`).
    pub fn from_check_report(strategy: &str, report: &CheckReport) -> Self {
        let mut v = Self::from_check_summary(strategy, &CheckSummary::from_report(report));
        v.incidents = report.incidents.clone();
        v.incidents_partial = report.incidents_partial;
        // A file with anomalies but no incidents predates them; with no anomalies it has none.
        v.incidents_known = !report.incidents.is_empty()
            || !report
                .anomalies
                .iter()
                .any(|a| a.kind.is_safety() || a.kind == AnomalyKind::StaleWriteRejected);
        v.anomalies = report
            .anomalies
            .iter()
            .map(|a| AnomalyMark {
                kind: a.kind,
                time_s: a.time_us as f64 / 1e6,
                clients: a.clients.clone(),
                detail: a.detail.clone(),
            })
            .collect();
        v
    }

    /// The verdict and totals kept in `summary.json` (no marks: those are in `checker.json`).
    /// Count keys that are not a checker kind are skipped.
    pub fn from_check_summary(strategy: &str, check: &CheckSummary) -> Self {
        Self {
            strategy: strategy.to_string(),
            verdict: check.verdict,
            anomalies: Vec::new(),
            counts: check
                .anomaly_counts
                .iter()
                .filter_map(|(k, n)| k.parse().ok().map(|k| (k, *n)))
                .collect(),
            availability: Some(
                check
                    .stats
                    .wait_availability_pct
                    .unwrap_or(check.stats.availability_pct)
                    / 100.0,
            ),
            incidents: Vec::new(),
            incidents_partial: false,
            incidents_known: false,
        }
    }
}

/// One fault window on a strategy's timeline: the history's [`FaultWindow`] as the nemesis
/// recorded it (µs on that strategy's run clock, with its detail), closed, and the strategy it
/// belongs to. In `report.json` the window's fields sit next to `strategy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultMark {
    /// The strategy whose timeline this window belongs to; `None` = every strategy.
    #[serde(default)]
    pub strategy: Option<String>,
    /// The window; `end_us` is always set (a window never healed ends with the run).
    #[serde(flatten)]
    pub window: FaultWindow,
}

impl FaultMark {
    /// `kind targets…`, the label drawn on the plots.
    pub fn label(&self) -> String {
        let w = &self.window;
        if w.targets.is_empty() {
            w.kind.clone()
        } else {
            format!("{} {}", w.kind, w.targets.join(","))
        }
    }

    /// The label and, when the window has one, its detail on a second line (the plots'
    /// tooltip): `partition n1` / `duration = 1s, mode = refuse; refuse: proxy disabled`.
    pub fn title(&self) -> String {
        match self.window.detail.as_str() {
            "" => self.label(),
            detail => format!("{}\n{detail}", self.label()),
        }
    }

    /// Start, seconds since the strategy's start.
    pub fn start_s(&self) -> f64 {
        self.window.start_us as f64 / 1e6
    }

    /// End (healed), seconds since the strategy's start.
    pub fn end_s(&self) -> f64 {
        self.window
            .end_us
            .map_or_else(|| self.start_s(), |e| e as f64 / 1e6)
    }

    /// Whether this window is drawn on `strategy`'s timeline.
    pub fn applies_to(&self, strategy: &str) -> bool {
        self.strategy.as_deref().is_none_or(|s| s == strategy)
    }

    /// One of `strategy`'s fault windows from its `checker.json`. A window the history never
    /// saw healed ends at `end_s_if_open` seconds (normally the strategy's elapsed time).
    pub fn from_window(strategy: &str, w: &FaultWindow, end_s_if_open: f64) -> Self {
        let mut window = w.clone();
        let open_end = ((end_s_if_open * 1e6).round() as u64).max(window.start_us);
        window.end_us = Some(window.end_us.unwrap_or(open_end));
        Self {
            strategy: Some(strategy.to_string()),
            window,
        }
    }
}

/// Latency percentile spectrum of one strategy's successful acquires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyPercentiles {
    /// Strategy name.
    pub strategy: String,
    /// `(percentile in 0..=1, latency µs)`, ascending in both.
    pub points: Vec<(f64, u64)>,
}

/// Everything one run's report reads. Serialized as `report.json` in the run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportInput {
    /// The run summary (`summary.json`).
    pub summary: RunSummary,
    /// Scenario name for comparisons; `None` = the run id. [`load_run_dir`](super::load_run_dir)
    /// takes it from `summary.config.scenario` (a string, or an object's `name`).
    #[serde(default)]
    pub scenario: Option<String>,
    /// Workload seed; `None` = looked up as a `seed` key in `summary.config`.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Acquire latency spectra, one per strategy.
    #[serde(default)]
    pub percentiles: Vec<StrategyPercentiles>,
    /// Checker verdicts, one per strategy (a strategy without one shows `unknown`).
    #[serde(default)]
    pub verdicts: Vec<StrategyVerdict>,
    /// Fault windows injected during the run.
    #[serde(default)]
    pub fault_windows: Vec<FaultMark>,
    /// Strategies that failed to run, with the error (strategy → message).
    #[serde(default)]
    pub strategy_errors: BTreeMap<String, String>,
    /// The run's own diagnosis when the harness could not keep up, per strategy (from
    /// `summary.json`'s `harness.note`): its delays may have stretched sections past their
    /// leases, so incidents outside fault windows may be the harness's, not the lock's.
    #[serde(default)]
    pub harness_notes: BTreeMap<String, String>,
}

impl ReportInput {
    /// A report input with only the summary: no spectra, verdicts or faults yet.
    pub fn from_summary(summary: RunSummary) -> Self {
        Self {
            summary,
            scenario: None,
            seed: None,
            percentiles: Vec::new(),
            verdicts: Vec::new(),
            fault_windows: Vec::new(),
            strategy_errors: BTreeMap::new(),
            harness_notes: BTreeMap::new(),
        }
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.summary.run_id
    }

    /// The scenario name, or the run id when none was set.
    pub fn scenario_name(&self) -> &str {
        self.scenario.as_deref().unwrap_or(&self.summary.run_id)
    }

    /// The seed: `self.seed`, else the first `seed` number found in `summary.config`.
    pub fn seed(&self) -> Option<u64> {
        self.seed.or_else(|| find_seed(&self.summary.config))
    }

    /// The verdict entry for `strategy`, if the checker produced one.
    pub fn verdict_for(&self, strategy: &str) -> Option<&StrategyVerdict> {
        self.verdicts.iter().find(|v| v.strategy == strategy)
    }

    /// The verdict for `strategy`; `unknown` when the checker produced none.
    pub fn verdict_of(&self, strategy: &str) -> Verdict {
        self.verdict_for(strategy)
            .map_or(Verdict::Unknown, |v| v.verdict)
    }

    /// The spectrum for `strategy`, if any.
    pub fn percentiles_for(&self, strategy: &str) -> Option<&StrategyPercentiles> {
        self.percentiles.iter().find(|p| p.strategy == strategy)
    }

    /// Availability of `strategy` (0..=1): the checker's figure, else the share of acquire
    /// attempts that got an answer (acquired or contended) rather than an error. `None` with
    /// no attempts.
    pub fn availability_of(&self, s: &StrategySummary) -> Option<f64> {
        if let Some(a) = self.verdict_for(&s.strategy).and_then(|v| v.availability) {
            return Some(a);
        }
        (s.attempts > 0).then(|| (s.attempts - s.errors.min(s.attempts)) as f64 / s.attempts as f64)
    }

    /// Anomaly total of `strategy` (0 without a verdict).
    pub fn anomaly_total_of(&self, strategy: &str) -> u64 {
        self.verdict_for(strategy)
            .map_or(0, StrategyVerdict::anomaly_total)
    }
}

fn find_seed(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Object(map) => map
            .get("seed")
            .and_then(serde_json::Value::as_u64)
            .or_else(|| map.values().find_map(find_seed)),
        serde_json::Value::Array(items) => items.iter().find_map(find_seed),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(counts: &[(AnomalyKind, u64)]) -> StrategyVerdict {
        StrategyVerdict {
            strategy: "single".into(),
            verdict: Verdict::Invalid,
            anomalies: vec![],
            counts: counts.iter().copied().collect(),
            availability: None,
            incidents: vec![],
            incidents_partial: false,
            incidents_known: false,
        }
    }

    #[test]
    fn anomaly_total_skips_rejected_stale_writes() {
        let v = verdict(&[
            (AnomalyKind::MutexViolation, 3),
            (AnomalyKind::StaleWriteRejected, 7),
            (AnomalyKind::LostUpdate, 2),
        ]);
        assert_eq!(v.anomaly_total(), 5);
        assert_eq!(v.count(AnomalyKind::StaleWriteRejected), 7);
    }

    #[test]
    fn kinds_use_the_checker_names() {
        assert_eq!(AnomalyKind::MutexViolation.to_string(), "mutex-violation");
        assert_eq!(
            "stale-write-rejected".parse().ok(),
            Some(AnomalyKind::StaleWriteRejected)
        );
        assert_eq!("mutual-exclusion".parse::<AnomalyKind>().ok(), None);
        let v: StrategyVerdict = serde_json::from_str(
            r#"{"strategy":"single","verdict":"invalid","counts":{"mutex-violation":2,"stuck-resource":1},
               "anomalies":[{"kind":"believed-overlap","time_s":1.5}]}"#,
        )
        .unwrap();
        assert_eq!(v.count(AnomalyKind::MutexViolation), 2);
        assert_eq!(
            v.anomaly_total(),
            4,
            "2 + 1 counted, 1 believed overlap from the mark"
        );
        assert!(!anomaly_kind::tolerable_for_efficiency(
            AnomalyKind::StuckResource
        ));
        assert!(anomaly_kind::tolerable_for_efficiency(
            AnomalyKind::BelievedOverlap
        ));
    }

    #[test]
    fn marks_count_when_totals_are_missing() {
        let mut v = verdict(&[]);
        v.anomalies = vec![
            AnomalyMark {
                kind: AnomalyKind::BelievedOverlap,
                time_s: 1.0,
                clients: vec![1, 2],
                detail: String::new(),
            };
            2
        ];
        assert_eq!(v.anomaly_total(), 2);
    }

    #[test]
    fn verdict_order_and_json_names() {
        assert_eq!(Verdict::Valid.worst(Verdict::Invalid), Verdict::Invalid);
        assert_eq!(Verdict::Unknown.worst(Verdict::Valid), Verdict::Unknown);
        assert_eq!(
            serde_json::to_string(&Verdict::Invalid).unwrap(),
            "\"invalid\""
        );
    }

    #[test]
    fn seed_is_found_in_nested_config() {
        let summary = RunSummary {
            run_id: "r".into(),
            lockbench_version: "0".into(),
            started_at: String::new(),
            finished_at: None,
            status: crate::results::RunStatus::Completed,
            error: None,
            config: serde_json::json!({"workload": {"clients": 4, "seed": 42}}),
            strategies: vec![],
            pid: None,
        };
        let input = ReportInput::from_summary(summary);
        assert_eq!(input.seed(), Some(42));
        assert_eq!(input.scenario_name(), "r");
    }
}
