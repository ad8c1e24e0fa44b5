//! The decision table, read off the matrix only (one workload for every cell, so throughput
//! and availability compare like with like).
//!
//! - **Efficiency lock** (duplicate work is tolerable): among the strategies that never left a
//!   resource stuck and kept availability in every fault (mean availability within
//!   [`AVAILABILITY_SLACK_PCT`] points of the best strategy in that fault), the fastest by
//!   throughput in the `none` column.
//! - **Correctness lock** (a second writer is damage): the strategies with 0 accepted stale
//!   writes, 0 lost updates and 0 mutual-exclusion violations (two writers inside at once, which an
//!   unfenced resource cannot tell from damage) in every trial of every fault, every trial
//!   checked; with the bound the trial count gives ([`super::stats`]: exact one-sided 95 %).
//!
//! Negative controls are shown but never recommended. Every row cites the cells it rests on.

use serde::{Deserialize, Serialize};

use super::record::CellRecord;
use super::stats::Interval;
use crate::strategy::StrategyKind;

/// How far (percentage points) a strategy's mean availability in a fault may fall below the
/// best strategy's in that fault and still count as "keeps availability".
pub const AVAILABILITY_SLACK_PCT: f64 = 10.0;

/// Strategies whose `none` throughput is within this share of the fastest one's are named as
/// tied with it: with short holds the lock's own speed hardly moves a closed-loop workload, and
/// a few trials do not separate a few percent.
pub const TIE_SHARE: f64 = 0.10;

/// Trials per cell below which the evidence is called thin.
pub const THIN_TRIALS: u32 = 3;

/// One strategy's line in a recommendation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    /// Strategy name.
    pub strategy: String,
    /// Meets the rule.
    pub eligible: bool,
    /// Why (or why not), citing cells as `strategy × fault`.
    pub reason: String,
    /// The cells this row rests on (`strategy × fault`).
    pub cells: Vec<String>,
    /// Throughput in the `none` cell, ops/s (efficiency ranking).
    pub throughput_ops_s: Option<f64>,
    /// Checked trials over every fault.
    pub trials_checked: u32,
}

/// One need's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// `efficiency` or `correctness`.
    pub need: String,
    /// The rule, in words.
    pub rule: String,
    /// Recommended strategies, best first (efficiency: the fastest eligible one).
    pub recommended: Vec<String>,
    /// The sentence a reader takes away.
    pub answer: String,
    /// What the trial count allows one to say (correctness only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// Set when the evidence is thin (few trials, cells without evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thin: Option<String>,
    /// Every strategy, eligible or not.
    pub rows: Vec<DecisionRow>,
}

/// Both answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionTable {
    /// For a lock whose double grant costs only duplicate work.
    pub efficiency: Recommendation,
    /// For a lock whose double grant corrupts data.
    pub correctness: Recommendation,
}

fn cite(c: &CellRecord) -> String {
    format!("{} × {}", c.strategy, c.fault)
}

fn is_control(name: &str) -> bool {
    name.parse::<StrategyKind>()
        .is_ok_and(|k| k.is_negative_control())
}

/// What makes the evidence thin, if anything.
fn thinness(cells: &[CellRecord]) -> Option<String> {
    let mut notes = Vec::new();
    let few = cells
        .iter()
        .filter(|c| c.trials_checked > 0 && c.trials_checked < THIN_TRIALS)
        .count();
    if few > 0 {
        notes.push(format!(
            "{few} cell(s) rest on fewer than {THIN_TRIALS} checked trials"
        ));
    }
    let empty: Vec<String> = cells
        .iter()
        .filter(|c| c.trials_checked == 0)
        .map(cite)
        .collect();
    if !empty.is_empty() {
        notes.push(format!("no evidence in {}", empty.join(", ")));
    }
    let unknown: Vec<String> = cells.iter().filter(|c| c.unknown > 0).map(cite).collect();
    if !unknown.is_empty() {
        notes.push(format!("unknown verdicts in {}", unknown.join(", ")));
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Builds the decision table from the matrix's cells (`strategies` in display order).
pub fn decide(
    strategies: &[String],
    cells: &[CellRecord],
    probes: &[super::ProbeRecord],
    claims: &[super::ClaimAgreement],
) -> DecisionTable {
    let _ = (probes, claims);
    DecisionTable {
        efficiency: efficiency(strategies, cells),
        correctness: correctness(strategies, cells),
    }
}

fn efficiency(strategies: &[String], cells: &[CellRecord]) -> Recommendation {
    let mut rows = Vec::new();
    for s in strategies {
        let mine: Vec<&CellRecord> = cells.iter().filter(|c| &c.strategy == s).collect();
        let throughput = mine
            .iter()
            .find(|c| c.fault == "none" && c.trials_checked > 0)
            .map(|c| c.throughput_ops_s);
        let mut problems = Vec::new();
        if is_control(s) {
            problems.push("negative control (deliberately broken), never recommended".to_string());
        }
        let stuck: Vec<String> = mine
            .iter()
            .filter(|c| c.stuck_resources > 0)
            .map(|c| format!("{} ({} stuck)", cite(c), c.stuck_resources))
            .collect();
        if !stuck.is_empty() {
            problems.push(format!("got stuck in {}", stuck.join(", ")));
        }
        for c in &mine {
            let Some(mean) = c.availability_pct else {
                continue;
            };
            let best = cells
                .iter()
                .filter(|o| o.fault == c.fault)
                .filter_map(|o| o.availability_pct)
                .fold(f64::MIN, f64::max);
            if mean < best - AVAILABILITY_SLACK_PCT {
                problems.push(format!(
                    "availability {mean:.1} % in {} vs best {best:.1} %",
                    cite(c)
                ));
            }
        }
        let no_evidence: Vec<String> = mine
            .iter()
            .filter(|c| c.trials_checked == 0)
            .map(|c| cite(c))
            .collect();
        if !no_evidence.is_empty() {
            problems.push(format!("no evidence in {}", no_evidence.join(", ")));
        }
        if throughput.is_none() {
            problems.push("no `none` cell to measure its speed".to_string());
        }
        let eligible = problems.is_empty();
        rows.push(DecisionRow {
            strategy: s.clone(),
            eligible,
            reason: if eligible {
                format!(
                    "never stuck, availability within {AVAILABILITY_SLACK_PCT:.0} points of the best in every fault; {:.1} ops/s in {s} × none",
                    throughput.unwrap_or(0.0)
                )
            } else {
                problems.join("; ")
            },
            cells: mine.iter().map(|c| cite(c)).collect(),
            throughput_ops_s: throughput,
            trials_checked: mine.iter().map(|c| c.trials_checked).sum(),
        });
    }
    let mut ranked: Vec<&DecisionRow> = rows.iter().filter(|r| r.eligible).collect();
    ranked.sort_by(|a, b| {
        b.throughput_ops_s
            .unwrap_or(0.0)
            .total_cmp(&a.throughput_ops_s.unwrap_or(0.0))
    });
    let recommended: Vec<String> = ranked
        .first()
        .map(|r| r.strategy.clone())
        .into_iter()
        .collect();
    let answer = match ranked.first() {
        Some(r) => {
            let best = r.throughput_ops_s.unwrap_or(0.0);
            let tied: Vec<String> = ranked[1..]
                .iter()
                .filter(|o| o.throughput_ops_s.unwrap_or(0.0) >= best * (1.0 - TIE_SHARE))
                .map(|o| {
                    format!(
                        "{} ({:.1} ops/s)",
                        o.strategy,
                        o.throughput_ops_s.unwrap_or(0.0)
                    )
                })
                .collect();
            let mut a = format!(
                "{}: the fastest that never got stuck and kept availability ({best:.1} ops/s in {} × none)",
                r.strategy, r.strategy
            );
            if !tied.is_empty() {
                a.push_str(&format!(
                    "; within {:.0} % of it, so as good on this evidence: {}",
                    TIE_SHARE * 100.0,
                    tied.join(", ")
                ));
            }
            a
        }
        None => "none of the strategies run qualifies (see each row)".to_string(),
    };
    Recommendation {
        need: "efficiency".into(),
        rule: format!(
            "duplicate work is tolerable: the fastest strategy (throughput in the `none` column) that never left a resource \
             stuck and whose mean availability stayed within {AVAILABILITY_SLACK_PCT:.0} points of the best strategy's in every fault"
        ),
        recommended,
        answer,
        bound: None,
        thin: thinness(cells),
        rows,
    }
}

fn correctness(strategies: &[String], cells: &[CellRecord]) -> Recommendation {
    let mut rows = Vec::new();
    for s in strategies {
        let mine: Vec<&CellRecord> = cells.iter().filter(|c| &c.strategy == s).collect();
        let mut problems = Vec::new();
        if is_control(s) {
            problems.push("negative control (deliberately broken), never recommended".to_string());
        }
        for c in &mine {
            let mut damage = Vec::new();
            if c.stale_writes_accepted > 0 {
                damage.push(format!(
                    "{} accepted stale write(s)",
                    c.stale_writes_accepted
                ));
            }
            if c.lost_updates > 0 {
                damage.push(format!("{} lost update(s)", c.lost_updates));
            }
            let mv = c.count("mutex-violation");
            if mv > 0 {
                damage.push(format!("{mv} mutex violation(s)"));
            }
            if !damage.is_empty() {
                problems.push(format!("{} in {}", damage.join(", "), cite(c)));
            }
            if c.trials_checked == 0 {
                problems.push(format!("no evidence in {}", cite(c)));
            } else if c.unknown > 0 || c.trials_checked < c.trials_planned {
                problems.push(format!(
                    "{} of {} trials checked with a decisive verdict in {}",
                    c.trials_checked - c.unknown,
                    c.trials_planned,
                    cite(c)
                ));
            }
        }
        let eligible = problems.is_empty() && !mine.is_empty();
        let trials: u32 = mine.iter().map(|c| c.trials_checked).sum();
        let sections: u64 = mine.iter().map(|c| c.sections).sum();
        rows.push(DecisionRow {
            strategy: s.clone(),
            eligible,
            reason: if eligible {
                format!(
                    "0 accepted stale writes, 0 lost updates, 0 mutex violations in {trials} trial(s) over {} fault(s), {sections} critical sections",
                    mine.len()
                )
            } else if mine.is_empty() {
                "not run".to_string()
            } else {
                problems.join("; ")
            },
            cells: mine.iter().map(|c| cite(c)).collect(),
            throughput_ops_s: mine
                .iter()
                .find(|c| c.fault == "none")
                .map(|c| c.throughput_ops_s),
            trials_checked: trials,
        });
    }
    let recommended: Vec<String> = rows
        .iter()
        .filter(|r| r.eligible)
        .map(|r| r.strategy.clone())
        .collect();
    let min_cell_trials = cells
        .iter()
        .filter(|c| recommended.contains(&c.strategy))
        .map(|c| c.trials_checked)
        .min();
    let bound = recommended.first().and_then(|_| {
        let per_cell = Interval::of(0, u64::from(min_cell_trials.unwrap_or(0)))?;
        let least_sections = recommended
            .iter()
            .map(|s| {
                cells
                    .iter()
                    .filter(|c| &c.strategy == s)
                    .map(|c| c.sections)
                    .sum::<u64>()
            })
            .min()
            .unwrap_or(0);
        let per_section = Interval::of(0, least_sections);
        Some(format!(
            "0 damaging trials of {} per cell: the chance that a trial of this kind shows damage is {} per fault (exact one-sided 95 %){}",
            min_cell_trials.unwrap_or(0),
            per_cell.text(false),
            per_section
                .map(|i| format!("; over {least_sections} critical sections, damage {}", i.text(true)))
                .unwrap_or_default()
        ))
    });
    let answer = if recommended.is_empty() {
        "none: every strategy run had damage or missing evidence in some cell (see each row); \
         a correctness lock needs a fenced resource or a consensus system"
            .to_string()
    } else {
        format!(
            "{}: no damage in any trial of any fault",
            recommended.join(", ")
        )
    };
    Recommendation {
        need: "correctness".into(),
        rule: "a second writer corrupts data: strategies with 0 accepted stale writes, 0 lost updates and 0 mutual-exclusion \
               violations in every trial of every fault, every trial checked"
            .into(),
        recommended,
        answer,
        bound,
        thin: thinness(cells),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Verdict;
    use crate::orchestration::matrix::record::tests::trial;

    fn cell(
        strategy: &str,
        fault: &str,
        trials: Vec<crate::orchestration::matrix::record::TrialRecord>,
    ) -> CellRecord {
        let n = trials.len() as u32;
        CellRecord::fold(strategy, fault, "single", "x", n, trials)
    }

    fn three(
        v: Verdict,
        anomalies: &[(&str, u64)],
        ops: f64,
    ) -> Vec<crate::orchestration::matrix::record::TrialRecord> {
        (1..=3)
            .map(|i| trial(i, v, 300, anomalies, 5000, ops))
            .collect()
    }

    fn matrix() -> (Vec<String>, Vec<CellRecord>) {
        let strategies: Vec<String> = ["single", "single-fenced", "naive-del"]
            .map(String::from)
            .to_vec();
        let cells = vec![
            cell("single", "none", three(Verdict::Valid, &[], 300.0)),
            cell(
                "single",
                "client-pause",
                three(Verdict::Invalid, &[("mutex-violation", 1)], 250.0),
            ),
            cell("single-fenced", "none", three(Verdict::Valid, &[], 200.0)),
            cell(
                "single-fenced",
                "client-pause",
                three(Verdict::Valid, &[("stale-write-rejected", 2)], 190.0),
            ),
            cell("naive-del", "none", three(Verdict::Valid, &[], 900.0)),
            cell(
                "naive-del",
                "client-pause",
                three(Verdict::Invalid, &[("mutex-violation", 4)], 800.0),
            ),
        ];
        (strategies, cells)
    }

    #[test]
    fn correctness_keeps_only_the_undamaged_and_states_the_bound() {
        let (s, cells) = matrix();
        let d = decide(&s, &cells, &[], &[]);
        assert_eq!(d.correctness.recommended, vec!["single-fenced".to_string()]);
        let single = &d.correctness.rows[0];
        assert!(!single.eligible);
        assert!(
            single.reason.contains("single × client-pause"),
            "{}",
            single.reason
        );
        let bound = d.correctness.bound.unwrap();
        assert!(bound.contains("< 63.2 %"), "{bound}");
        // 2 cells × 3 trials × 300 sections, 0 damage: < 1 − 0.05^(1/1800) ≈ 1.66‰
        assert!(
            bound.contains("over 1800 critical sections, damage < 1.7‰"),
            "{bound}"
        );
        assert!(d.correctness.thin.is_none());
    }

    #[test]
    fn efficiency_picks_the_fastest_eligible_and_never_a_control() {
        let (s, mut cells) = matrix();
        let d = decide(&s, &cells, &[], &[]);
        // naive-del is fastest but a control; single beats single-fenced.
        assert_eq!(d.efficiency.recommended, vec!["single".to_string()]);
        assert!(
            d.efficiency.answer.contains("300.0 ops/s"),
            "{}",
            d.efficiency.answer
        );
        // A stuck resource disqualifies.
        cells[1].stuck_resources = 1;
        let d = decide(&s, &cells, &[], &[]);
        assert_eq!(d.efficiency.recommended, vec!["single-fenced".to_string()]);
        assert!(d.efficiency.rows[0]
            .reason
            .contains("got stuck in single × client-pause"));
    }

    #[test]
    fn thin_evidence_is_said() {
        let (s, mut cells) = matrix();
        cells[3] = cell(
            "single-fenced",
            "client-pause",
            vec![trial(1, Verdict::Unknown, 10, &[], 1, 1.0)],
        );
        let d = decide(&s, &cells, &[], &[]);
        assert!(d.correctness.recommended.is_empty());
        let thin = d.correctness.thin.unwrap();
        assert!(
            thin.contains("fewer than 3")
                && thin.contains("unknown verdicts in single-fenced × client-pause"),
            "{thin}"
        );
    }
}
