//! The comparison across runs: one row per (run, strategy), a strategies × scenarios heat map,
//! and a decision table that recommends a strategy per need and says how thin its evidence is.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::report::common::html::{latency, ops};
use crate::report::error::ReportError;
use crate::report::run::baseline::BaselineComparison;
use crate::report::run::input::{anomaly_kind, AnomalyKind, ReportInput, Verdict};

/// Fewer lock cycles than this across a recommendation's runs is thin evidence.
pub const MIN_OPS: u64 = 1000;
/// Fewer distinct seeds than this across a recommendation's runs is thin evidence.
pub const MIN_SEEDS: usize = 2;

/// One strategy in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// Run id (directory name).
    pub run_id: String,
    /// Scenario name (the run id when none was set).
    pub scenario: String,
    /// Strategy name.
    pub strategy: String,
    /// Checker verdict (`unknown` when none was given).
    pub verdict: Verdict,
    /// Anomaly total, rejected stale writes not included.
    pub anomalies: u64,
    /// Count per kind seen (anomalies and protection events).
    pub counts: BTreeMap<AnomalyKind, u64>,
    /// Successful acquisitions (lock cycles).
    pub acquired: u64,
    /// Throughput, ops/s.
    pub throughput_ops_s: f64,
    /// Acquire p50, µs.
    pub acquire_p50_us: u64,
    /// Acquire p99, µs.
    pub acquire_p99_us: u64,
    /// Availability 0..=1, see [`ReportInput::availability_of`].
    pub availability: Option<f64>,
    /// Number of fault windows that applied to this strategy.
    pub faults_injected: usize,
    /// Workload seed, when recorded.
    pub seed: Option<u64>,
    /// Safety incidents (anomalies grouped as a reader sees them); `None` when unknown.
    #[serde(default)]
    pub incidents: Option<u64>,
    /// Why the strategy failed to run, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

impl ComparisonRow {
    fn count(&self, kind: AnomalyKind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// Decided, and every kind seen is one an efficiency lock tolerates (duplicated work,
    /// short unavailability): a stuck resource rules a strategy out even when it is valid.
    fn fine_for_efficiency(&self) -> bool {
        self.verdict != Verdict::Unknown
            && self
                .counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .all(|(k, _)| anomaly_kind::tolerable_for_efficiency(*k))
    }

    /// Decided, and no damage reached the resource.
    fn fine_for_correctness(&self) -> bool {
        self.verdict != Verdict::Unknown
            && self.count(AnomalyKind::StaleWriteAccepted) == 0
            && self.count(AnomalyKind::LostUpdate) == 0
    }
}

/// One cell of the heat map: a strategy in a scenario, over every run of that scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatCell {
    /// Strategy name.
    pub strategy: String,
    /// Scenario name.
    pub scenario: String,
    /// Worst verdict over the runs.
    pub verdict: Verdict,
    /// Anomalies summed over the runs.
    pub anomalies: u64,
    /// Safety incidents summed over the runs; `None` when some run's are unknown.
    #[serde(default)]
    pub incidents: Option<u64>,
    /// Errors of runs in which the strategy failed to run.
    #[serde(default)]
    pub errors: Vec<String>,
    /// The runs behind the cell.
    pub runs: Vec<String>,
}

/// What the lock protects.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Need {
    /// Saves duplicated work; an occasional overlap is tolerable, a stuck lock is not.
    EfficiencyLock,
    /// Guards correctness; no stale write may reach the resource.
    CorrectnessLock,
}

impl Need {
    /// Heading text.
    pub fn title(self) -> &'static str {
        match self {
            Need::EfficiencyLock => "efficiency lock (duplicated work is tolerable)",
            Need::CorrectnessLock => "correctness lock (no stale write may land)",
        }
    }
}

/// One line of the decision table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The need it answers.
    pub need: Need,
    /// The recommended strategy, `None` when no measured strategy qualifies.
    pub strategy: Option<String>,
    /// Why, in one or two sentences, with the numbers.
    pub rationale: String,
    /// The run ids the recommendation rests on.
    pub runs: Vec<String>,
    /// Why the evidence is thin (empty when it is not): too few ops, no faults, one seed.
    pub thin_evidence: Vec<String>,
}

/// The comparison of several runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonReport {
    /// Run ids, in input order.
    pub runs: Vec<String>,
    /// Scenarios, in order of first appearance.
    pub scenarios: Vec<String>,
    /// Strategies, in order of first appearance.
    pub strategies: Vec<String>,
    /// One row per (run, strategy).
    pub rows: Vec<ComparisonRow>,
    /// One cell per (strategy, scenario) that was run.
    pub heat: Vec<HeatCell>,
    /// The decision table.
    pub recommendations: Vec<Recommendation>,
    /// Each run compared with a saved baseline run (`--baseline`); empty without one.
    #[serde(default)]
    pub baselines: Vec<BaselineComparison>,
}

impl ComparisonReport {
    /// Whether any run regressed against its baseline (p99 or throughput, see
    /// [`baseline`](crate::report::run::baseline::baseline)).
    pub fn has_regressions(&self) -> bool {
        self.baselines
            .iter()
            .any(BaselineComparison::has_regressions)
    }

    /// The heat-map cell of `strategy` in `scenario`, if it was run.
    pub fn cell(&self, strategy: &str, scenario: &str) -> Option<&HeatCell> {
        self.heat
            .iter()
            .find(|c| c.strategy == strategy && c.scenario == scenario)
    }

    /// The recommendation for `need`.
    pub fn recommendation(&self, need: Need) -> Option<&Recommendation> {
        self.recommendations.iter().find(|r| r.need == need)
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

/// Whether a strategy name is a fenced variant (`single-fenced`, `redlock-fenced`).
pub fn is_fenced(strategy: &str) -> bool {
    strategy.ends_with("-fenced")
}

/// Builds the comparison of `inputs` (one per run).
///
/// # Errors
/// [`ReportError::NoRuns`] for an empty slice.
pub fn compare(inputs: &[ReportInput]) -> Result<ComparisonReport, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut report = ComparisonReport {
        runs: Vec::new(),
        scenarios: Vec::new(),
        strategies: Vec::new(),
        rows: Vec::new(),
        heat: Vec::new(),
        recommendations: Vec::new(),
        baselines: Vec::new(),
    };
    for input in inputs {
        push_unique(&mut report.runs, input.run_id());
        push_unique(&mut report.scenarios, input.scenario_name());
        for s in &input.summary.strategies {
            push_unique(&mut report.strategies, &s.strategy);
            let counts = input
                .verdict_for(&s.strategy)
                .map(|v| {
                    v.kinds_seen()
                        .into_iter()
                        .map(|k| (k, v.count(k)))
                        .collect()
                })
                .unwrap_or_default();
            report.rows.push(ComparisonRow {
                run_id: input.run_id().to_string(),
                scenario: input.scenario_name().to_string(),
                strategy: s.strategy.clone(),
                verdict: input.verdict_of(&s.strategy),
                anomalies: input.anomaly_total_of(&s.strategy),
                counts,
                acquired: s.acquired,
                throughput_ops_s: s.throughput_ops_s,
                acquire_p50_us: s.acquire_ok.p50_us,
                acquire_p99_us: s.acquire_ok.p99_us,
                availability: input.availability_of(s),
                faults_injected: input
                    .fault_windows
                    .iter()
                    .filter(|f| f.applies_to(&s.strategy))
                    .count(),
                seed: input.seed(),
                incidents: input
                    .verdict_for(&s.strategy)
                    .and_then(|v| v.safety_incidents()),
                error: input.strategy_errors.get(&s.strategy).cloned(),
            });
        }
    }
    for strategy in &report.strategies {
        for scenario in &report.scenarios {
            let rows: Vec<&ComparisonRow> = report
                .rows
                .iter()
                .filter(|r| &r.strategy == strategy && &r.scenario == scenario)
                .collect();
            if rows.is_empty() {
                continue;
            }
            report.heat.push(HeatCell {
                strategy: strategy.clone(),
                scenario: scenario.clone(),
                verdict: rows
                    .iter()
                    .map(|r| r.verdict)
                    .fold(Verdict::Valid, Verdict::worst),
                anomalies: rows.iter().map(|r| r.anomalies).sum(),
                incidents: rows.iter().map(|r| r.incidents).sum(),
                errors: rows.iter().filter_map(|r| r.error.clone()).collect(),
                runs: rows.iter().map(|r| r.run_id.clone()).collect(),
            });
        }
    }
    report.recommendations = vec![
        recommend(&report, Need::EfficiencyLock),
        recommend(&report, Need::CorrectnessLock),
    ];
    Ok(report)
}

/// A strategy's rows and their aggregate numbers.
struct Candidate<'a> {
    strategy: &'a str,
    rows: Vec<&'a ComparisonRow>,
    mean_throughput: f64,
    worst_p99_us: u64,
}

fn candidates(report: &ComparisonReport) -> Vec<Candidate<'_>> {
    report
        .strategies
        .iter()
        .map(|s| {
            let rows: Vec<&ComparisonRow> =
                report.rows.iter().filter(|r| &r.strategy == s).collect();
            Candidate {
                strategy: s,
                mean_throughput: rows.iter().map(|r| r.throughput_ops_s).sum::<f64>()
                    / rows.len().max(1) as f64,
                worst_p99_us: rows.iter().map(|r| r.acquire_p99_us).max().unwrap_or(0),
                rows,
            }
        })
        .collect()
}

/// Negative controls (`naive-del`, `get-then-del`, `no-ttl`) exist to prove the checker
/// catches their bugs; they are never recommended, whatever a run happened to show.
fn is_negative_control(strategy: &str) -> bool {
    strategy
        .parse::<crate::strategy::StrategyKind>()
        .is_ok_and(|k| k.is_negative_control())
}

fn recommend(report: &ComparisonReport, need: Need) -> Recommendation {
    let all = candidates(report);
    let (pool, refused): (Vec<&Candidate<'_>>, Vec<String>) = match need {
        Need::EfficiencyLock => split(&all, |c| {
            if is_negative_control(c.strategy) {
                return Some(format!("{} is a negative control", c.strategy));
            }
            c.rows.iter().find(|r| !r.fine_for_efficiency()).map(|r| {
                let intolerable: Vec<String> = r
                    .counts
                    .iter()
                    .filter(|(k, n)| **n > 0 && !anomaly_kind::tolerable_for_efficiency(**k))
                    .map(|(k, n)| format!("{n} {k}"))
                    .collect();
                if intolerable.is_empty() {
                    format!("{} was {} in {}", c.strategy, r.verdict, r.run_id)
                } else {
                    format!(
                        "{} was {} in {} ({})",
                        c.strategy,
                        r.verdict,
                        r.run_id,
                        intolerable.join(", ")
                    )
                }
            })
        }),
        Need::CorrectnessLock => split(&all, |c| {
            if !is_fenced(c.strategy) {
                return Some(String::new());
            }
            c.rows.iter().find(|r| !r.fine_for_correctness()).map(|r| {
                if r.verdict == Verdict::Unknown {
                    format!("{} has no verdict for {}", c.strategy, r.run_id)
                } else {
                    format!(
                        "{} let {} stale writes and {} lost updates through in {}",
                        c.strategy,
                        r.count(AnomalyKind::StaleWriteAccepted),
                        r.count(AnomalyKind::LostUpdate),
                        r.run_id
                    )
                }
            })
        }),
    };
    let best = pool.into_iter().max_by(|a, b| {
        a.mean_throughput
            .total_cmp(&b.mean_throughput)
            .then(b.worst_p99_us.cmp(&a.worst_p99_us))
    });
    let refused: Vec<String> = refused.into_iter().filter(|r| !r.is_empty()).collect();
    let Some(best) = best else {
        let why = match (need, refused.is_empty()) {
            (Need::CorrectnessLock, true) => "no fenced strategy was measured".to_string(),
            _ => format!("every measured candidate failed: {}", refused.join("; ")),
        };
        return Recommendation {
            need,
            strategy: None,
            rationale: format!("No recommendation: {why}."),
            runs: Vec::new(),
            thin_evidence: Vec::new(),
        };
    };
    let runs: Vec<String> = best.rows.iter().map(|r| r.run_id.clone()).collect();
    let overlaps: u64 = best.rows.iter().map(|r| r.anomalies).sum();
    let rejected: u64 = best
        .rows
        .iter()
        .map(|r| r.count(AnomalyKind::StaleWriteRejected))
        .sum();
    let mut rationale = format!(
        "{} had the highest mean throughput ({} ops/s, worst acquire p99 {}) over {} run(s) \
         among strategies that {}.",
        best.strategy,
        ops(best.mean_throughput),
        latency(best.worst_p99_us),
        best.rows.len(),
        match need {
            Need::EfficiencyLock => "were valid or only duplicated work in every run",
            Need::CorrectnessLock => "are fenced and let no stale write or lost update through",
        }
    );
    if need == Need::EfficiencyLock && overlaps > 0 {
        rationale.push_str(&format!(
            " It overlapped {overlaps} time(s): expect some work to be done twice."
        ));
    }
    if need == Need::CorrectnessLock && rejected > 0 {
        rationale.push_str(&format!(
            " Its fencing check rejected {rejected} stale write(s)."
        ));
    }
    if !refused.is_empty() {
        rationale.push_str(&format!(" Ruled out: {}.", refused.join("; ")));
    }
    Recommendation {
        need,
        strategy: Some(best.strategy.to_string()),
        rationale,
        runs,
        thin_evidence: thin_evidence(&best.rows),
    }
}

/// Splits candidates into those `refuse` accepts (returns `None`) and refusal reasons.
fn split<'a, 'b>(
    all: &'b [Candidate<'a>],
    refuse: impl Fn(&Candidate<'a>) -> Option<String>,
) -> (Vec<&'b Candidate<'a>>, Vec<String>) {
    let mut pool = Vec::new();
    let mut refused = Vec::new();
    for c in all {
        match refuse(c) {
            None => pool.push(c),
            Some(reason) => refused.push(reason),
        }
    }
    (pool, refused)
}

fn thin_evidence(rows: &[&ComparisonRow]) -> Vec<String> {
    let mut out = Vec::new();
    let ops: u64 = rows.iter().map(|r| r.acquired).sum();
    if ops < MIN_OPS {
        out.push(format!(
            "only {ops} lock cycles measured (fewer than {MIN_OPS})"
        ));
    }
    if rows.iter().all(|r| r.faults_injected == 0) {
        out.push("no faults were injected in any of these runs".to_string());
    }
    let seeds: BTreeSet<u64> = rows.iter().filter_map(|r| r.seed).collect();
    if seeds.is_empty() {
        out.push("no seed recorded, so repeatability is unknown".to_string());
    } else if seeds.len() < MIN_SEEDS {
        out.push(format!(
            "a single seed ({})",
            seeds.iter().next().copied().unwrap_or_default()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::FaultWindow;
    use crate::report::run::export::tests::sample_input;
    use crate::report::run::input::{FaultMark, StrategyVerdict};

    #[test]
    fn need_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<Need>();
    }

    fn fault() -> FaultMark {
        FaultMark {
            strategy: None,
            window: FaultWindow {
                kind: "pause".into(),
                targets: vec!["c1".into()],
                start_us: 1_000_000,
                end_us: Some(3_000_000),
                ..FaultWindow::default()
            },
        }
    }

    fn fenced_verdict(accepted: u64, rejected: u64) -> StrategyVerdict {
        StrategyVerdict {
            strategy: "single-fenced".into(),
            verdict: if accepted > 0 {
                Verdict::Invalid
            } else {
                Verdict::Valid
            },
            anomalies: vec![],
            counts: [
                (AnomalyKind::StaleWriteAccepted, accepted),
                (AnomalyKind::StaleWriteRejected, rejected),
            ]
            .into(),
            availability: None,
            incidents: vec![],
            incidents_partial: false,
            incidents_known: false,
        }
    }

    /// Two scenarios, two seeds: single is valid in the calm run but loses writes under pause.
    fn two_runs() -> Vec<ReportInput> {
        let mut calm = sample_input("run-calm");
        calm.scenario = Some("calm".into());
        calm.verdicts.push(fenced_verdict(0, 0));
        let mut pause = sample_input("run-pause");
        pause.scenario = Some("pause".into());
        pause.seed = Some(8);
        pause.fault_windows.push(fault());
        pause.verdicts[0].verdict = Verdict::Invalid;
        pause.verdicts[0].counts = [(AnomalyKind::LostUpdate, 2)].into();
        pause.verdicts.push(fenced_verdict(0, 5));
        vec![calm, pause]
    }

    #[test]
    fn heat_map_takes_worst_verdict_and_sums_anomalies() {
        let report = compare(&two_runs()).unwrap();
        assert_eq!(report.scenarios, ["calm", "pause"]);
        assert_eq!(report.rows.len(), 6);
        let cell = report.cell("single", "pause").unwrap();
        assert_eq!((cell.verdict, cell.anomalies), (Verdict::Invalid, 2));
        assert_eq!(
            report.cell("single", "calm").unwrap().verdict,
            Verdict::Valid
        );
        assert_eq!(report.cell("redlock", "pause").unwrap().anomalies, 3);
        assert!(report.cell("nope", "calm").is_none());
    }

    #[test]
    fn negative_controls_are_never_recommended() {
        let mut runs = two_runs();
        for run in &mut runs {
            // The fastest strategy of every run, and valid everywhere: still not a pick.
            let mut fast = run.summary.strategies[0].clone();
            fast.strategy = "no-ttl".into();
            fast.throughput_ops_s = 99_000.0;
            run.summary.strategies.push(fast);
            let mut v = run.verdicts[0].clone();
            v.strategy = "no-ttl".into();
            v.verdict = Verdict::Valid;
            v.counts = Default::default();
            run.verdicts.push(v);
        }
        let report = compare(&runs).unwrap();
        let eff = report.recommendation(Need::EfficiencyLock).unwrap();
        assert_eq!(eff.strategy.as_deref(), Some("single"));
        assert!(
            eff.rationale.contains("no-ttl is a negative control"),
            "{}",
            eff.rationale
        );
    }

    #[test]
    fn decision_table_picks_by_need_and_cites_runs() {
        let report = compare(&two_runs()).unwrap();
        // single (5000 ops/s) lost updates under pause — duplicated work, tolerable for an
        // efficiency lock; single-fenced (4000) only had rejections: the efficiency pick is
        // single, and the correctness pick is single-fenced.
        let eff = report.recommendation(Need::EfficiencyLock).unwrap();
        assert_eq!(eff.strategy.as_deref(), Some("single"));
        assert_eq!(eff.runs, ["run-calm", "run-pause"]);
        assert!(
            !eff.rationale.contains("single was invalid"),
            "{}",
            eff.rationale
        );
        assert!(eff.thin_evidence.is_empty(), "{:?}", eff.thin_evidence);
        let cor = report.recommendation(Need::CorrectnessLock).unwrap();
        assert_eq!(cor.strategy.as_deref(), Some("single-fenced"));
        assert!(
            cor.rationale.contains("rejected 5 stale write(s)"),
            "{}",
            cor.rationale
        );
    }

    #[test]
    fn accepted_stale_write_rules_out_the_fenced_strategy() {
        let mut runs = two_runs();
        runs[1].verdicts[2] = fenced_verdict(1, 5);
        let report = compare(&runs).unwrap();
        let cor = report.recommendation(Need::CorrectnessLock).unwrap();
        assert_eq!(cor.strategy, None);
        assert!(
            cor.rationale.contains("let 1 stale writes"),
            "{}",
            cor.rationale
        );
    }

    #[test]
    fn a_stuck_resource_rules_out_a_valid_strategy_for_efficiency() {
        let mut runs = two_runs();
        // single is valid in the calm run but a resource stayed stuck: not fine for any lock.
        runs[0].verdicts[0].counts = [(AnomalyKind::StuckResource, 1)].into();
        runs[1].verdicts[0].counts = [(AnomalyKind::MutexViolation, 2)].into();
        let report = compare(&runs).unwrap();
        let eff = report.recommendation(Need::EfficiencyLock).unwrap();
        assert_eq!(eff.strategy.as_deref(), Some("single-fenced"), "{eff:?}");
        assert!(
            eff.rationale
                .contains("single was valid in run-calm (1 stuck-resource)"),
            "{}",
            eff.rationale
        );
    }

    #[test]
    fn thin_evidence_is_flagged() {
        let mut run = sample_input("only");
        for s in &mut run.summary.strategies {
            s.acquired = 10;
        }
        let report = compare(&[run]).unwrap();
        let eff = report.recommendation(Need::EfficiencyLock).unwrap();
        assert_eq!(eff.strategy.as_deref(), Some("single"), "{eff:?}");
        let thin = eff.thin_evidence.join(" | ");
        assert!(thin.contains("only 10 lock cycles"), "{thin}");
        assert!(thin.contains("no faults were injected"), "{thin}");
        assert!(thin.contains("a single seed (7)"), "{thin}");
        // single-fenced has no verdict in this run: unknown, so no correctness pick.
        let cor = report.recommendation(Need::CorrectnessLock).unwrap();
        assert_eq!(cor.strategy, None);
        assert!(compare(&[]).is_err());
    }
}
