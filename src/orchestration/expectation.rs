//! What a claim predicts for one strategy, and how a checker report is held against it.

use serde::{Deserialize, Serialize};

use crate::checker::{CheckReport, Verdict};
use crate::results::CheckSummary;

/// What the seeds' claim predicts for one strategy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// `valid`, `invalid` or `unknown`.
    pub verdict: String,
    /// Anomaly kinds that must appear (e.g. `mutex-violation`, `stale-write-rejected`).
    #[serde(default)]
    pub anomalies: Vec<String>,
    /// Anomaly kinds that must NOT appear (e.g. `stale-write-accepted` for a fenced strategy).
    #[serde(default)]
    pub absent: Vec<String>,
}

/// Expected vs observed for one strategy of a test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectationCheck {
    /// Strategy name.
    pub strategy: String,
    /// The verdict the checker gave.
    pub observed: Verdict,
    /// What the test expected (`None` = no expectation written).
    pub expected: Option<Expectation>,
    /// `true` when every part of the expectation held; `None` without an expectation.
    pub met: Option<bool>,
    /// What did not hold, one sentence each.
    pub mismatches: Vec<String>,
    /// The strategy's run was stopped by Ctrl-C / SIGTERM: its partial results are kept but
    /// not judged (`met` is `None`).
    #[serde(default)]
    pub interrupted: bool,
}

/// Compares a checker report with an expectation.
pub fn compare(
    strategy: &str,
    report: &CheckReport,
    expected: Option<&Expectation>,
) -> ExpectationCheck {
    let counts = CheckSummary::from_report(report).anomaly_counts;
    let observed_name = report.verdict.to_string();
    let mut mismatches = Vec::new();
    if let Some(e) = expected {
        if e.verdict != observed_name {
            mismatches.push(format!("verdict {observed_name}, expected {}", e.verdict));
        }
        for kind in &e.anomalies {
            if counts.get(kind).copied().unwrap_or(0) == 0 {
                mismatches.push(format!("no {kind}, expected some"));
            }
        }
        for kind in &e.absent {
            if let Some(n) = counts.get(kind).filter(|&&n| n > 0) {
                mismatches.push(format!("{n} × {kind}, expected none"));
            }
        }
    }
    ExpectationCheck {
        strategy: strategy.to_string(),
        observed: report.verdict,
        expected: expected.cloned(),
        met: expected.map(|_| mismatches.is_empty()),
        mismatches,
        interrupted: false,
    }
}
