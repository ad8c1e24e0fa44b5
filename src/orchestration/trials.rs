//! Repeated trials of one test: each trial runs the whole test again (fresh nodes, its
//! own run directory, its own seed), and each expectation is reported as "as claimed in k/N".
//!
//! A claim that depends on timing must either reproduce in every trial or be reported as a
//! rate; [`ExpectationTally`] is that rate. An expectation counts as met only when it held in
//! every one of the N trials; a trial that did not run to the end (interrupted, or the
//! scenario failed to run) is *not judged* and never counts as met.

use serde::{Deserialize, Serialize};

use super::expectation::Expectation;
use super::runner::TestOutcome;
use super::test::Test;

/// The name of trial `trial`'s run directory inside its scenario's directory: `trial-01`
/// (zero-padded to the width of `trials`, so the directories sort in trial order).
pub fn trial_dir_name(trial: u32, trials: u32) -> String {
    let width = trials.to_string().len().max(2);
    format!("trial-{trial:0width$}")
}

/// What one trial of a scenario gave.
#[derive(Debug, Clone)]
pub struct TrialResult {
    /// 1-based trial number.
    pub trial: u32,
    /// The seed it ran with.
    pub seed: u64,
    /// The outcome, or `None` when the scenario failed to run (topology did not start, a fault
    /// could not be injected): then the trial is not judged.
    pub outcome: Option<TestOutcome>,
}

/// Expectations of one trial that did not hold, with why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrialMiss {
    /// 1-based trial number.
    pub trial: u32,
    /// What did not hold, one sentence each.
    pub mismatches: Vec<String>,
}

/// One expectation of a scenario over N trials: "as claimed in k/N".
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectationTally {
    /// Strategy name.
    pub strategy: String,
    /// The expectation as the scenario file writes it.
    pub expected: Expectation,
    /// Trials asked for (N).
    pub trials: u32,
    /// Trials in which every part of the expectation held (k).
    pub as_claimed: u32,
    /// Trials in which some part did not hold.
    pub not_as_claimed: u32,
    /// Trials not judged: interrupted, not started because of an interrupt, or failed to run.
    pub not_judged: u32,
    /// The trials that did not hold, with their mismatches.
    pub misses: Vec<TrialMiss>,
}

impl ExpectationTally {
    /// `true` when the expectation held in every one of the N trials (k = N).
    pub fn met(&self) -> bool {
        self.as_claimed == self.trials
    }

    /// `as claimed in k/N`, followed by what kept the rest from counting.
    pub fn label(&self) -> String {
        let mut out = format!("as claimed in {}/{}", self.as_claimed, self.trials);
        if self.not_as_claimed > 0 {
            let misses: Vec<String> = self
                .misses
                .iter()
                .map(|m| format!("trial {}: {}", m.trial, m.mismatches.join("; ")))
                .collect();
            out.push_str(&format!(
                " — NOT AS CLAIMED in {} ({})",
                self.not_as_claimed,
                misses.join(" | ")
            ));
        }
        if self.not_judged > 0 {
            out.push_str(&format!(
                " — interrupted: not judged in {}",
                self.not_judged
            ));
        }
        out
    }
}

/// Folds the trials of one test into one tally per written expectation (in the order of the
/// test's `strategies`). `trials` is N, the number of trials asked for; trials missing from
/// `results` (never started because of an interrupt) count as not judged.
pub fn tally(test: &Test, trials: u32, results: &[TrialResult]) -> Vec<ExpectationTally> {
    test.strategies
        .iter()
        .filter_map(|kind| {
            let name = kind.to_string();
            let expected = test.expect.get(&name)?.clone();
            let mut t = ExpectationTally {
                strategy: name.clone(),
                expected,
                trials,
                as_claimed: 0,
                not_as_claimed: 0,
                not_judged: 0,
                misses: Vec::new(),
            };
            for r in results {
                let check = r
                    .outcome
                    .as_ref()
                    .and_then(|o| o.expectations.iter().find(|e| e.strategy == name));
                match check.and_then(|c| c.met) {
                    Some(true) => t.as_claimed += 1,
                    Some(false) => {
                        t.not_as_claimed += 1;
                        t.misses.push(TrialMiss {
                            trial: r.trial,
                            mismatches: check.map(|c| c.mismatches.clone()).unwrap_or_default(),
                        });
                    }
                    None => {}
                }
            }
            t.not_judged = trials.saturating_sub(t.as_claimed + t.not_as_claimed);
            Some(t)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::checker::Verdict;
    use crate::orchestration::expectation::ExpectationCheck;
    use crate::orchestration::scenario::Scenario;

    const SCENARIO: &str = r#"
claim = "c"
topology = "single"
strategies = ["naive-del", "single"]
seed = 41

[workload]
clients = 2
resources = 1
hold = "10ms"
ttl = "300ms"
duration = "2s"

[expect.naive-del]
verdict = "invalid"
anomalies = ["mutex-violation"]
"#;

    fn outcome(met: Option<bool>, interrupted: bool) -> TestOutcome {
        TestOutcome {
            name: "s".into(),
            claim: "c".into(),
            strategies: vec![],
            expectations: vec![ExpectationCheck {
                strategy: "naive-del".into(),
                observed: Verdict::Valid,
                expected: None,
                met,
                mismatches: if met == Some(false) {
                    vec!["verdict valid, expected invalid".into()]
                } else {
                    vec![]
                },
                interrupted,
            }],
            interrupted,
        }
    }

    #[test]
    fn trial_one_is_the_file_and_later_trials_get_their_own_seed() {
        let s = Scenario::parse(SCENARIO, Path::new("s.toml"))
            .unwrap()
            .to_test();
        assert_eq!(s.trial(1), s);
        assert_eq!(s.trial(1).workload.seed, 41);
        assert_eq!(s.trial(2).workload.seed, 42);
        assert_eq!(s.trial(10).workload.seed, 50);
        assert_eq!(trial_dir_name(3, 10), "trial-03");
        assert_eq!(trial_dir_name(7, 100), "trial-007");
    }

    #[test]
    fn tally_counts_met_missed_and_not_judged_trials() {
        let s = Scenario::parse(SCENARIO, Path::new("s.toml"))
            .unwrap()
            .to_test();
        let results = vec![
            TrialResult {
                trial: 1,
                seed: 41,
                outcome: Some(outcome(Some(true), false)),
            },
            TrialResult {
                trial: 2,
                seed: 42,
                outcome: Some(outcome(Some(false), false)),
            },
            TrialResult {
                trial: 3,
                seed: 43,
                outcome: None, // failed to run
            },
            TrialResult {
                trial: 4,
                seed: 44,
                outcome: Some(outcome(None, true)), // interrupted
            },
        ];
        // Five asked for: the fifth never started.
        let t = tally(&s, 5, &results);
        assert_eq!(t.len(), 1, "single has no expectation");
        let t = &t[0];
        assert_eq!(
            (t.as_claimed, t.not_as_claimed, t.not_judged),
            (1, 1, 3),
            "{t:?}"
        );
        assert!(!t.met());
        assert_eq!(
            t.label(),
            "as claimed in 1/5 — NOT AS CLAIMED in 1 (trial 2: verdict valid, expected \
             invalid) — interrupted: not judged in 3"
        );
        let all = vec![results[0].clone(), results[0].clone()];
        let t = &tally(&s, 2, &all)[0];
        assert!(t.met());
        assert_eq!(t.label(), "as claimed in 2/2");
    }
}
