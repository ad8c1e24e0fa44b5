//! `--baseline`: a run compared with a saved one, per strategy, flagging regressions.

use serde::{Deserialize, Serialize};

use super::input::ReportInput;

/// A p99 more than this fraction above the baseline is a regression (10%).
pub const P99_REGRESSION: f64 = 0.10;
/// A throughput more than this fraction below the baseline is a regression (10%).
pub const THROUGHPUT_REGRESSION: f64 = 0.10;

/// One strategy present in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRow {
    /// Strategy name.
    pub strategy: String,
    /// Baseline acquire p99, µs.
    pub p99_before_us: u64,
    /// Current acquire p99, µs.
    pub p99_after_us: u64,
    /// Relative change of p99 (`0.25` = 25% slower); `None` when the baseline is 0.
    pub p99_change: Option<f64>,
    /// Baseline throughput, ops/s.
    pub throughput_before: f64,
    /// Current throughput, ops/s.
    pub throughput_after: f64,
    /// Relative change of throughput (`-0.2` = 20% lower); `None` when the baseline is 0.
    pub throughput_change: Option<f64>,
    /// p99 more than [`P99_REGRESSION`] worse.
    pub p99_regressed: bool,
    /// Throughput more than [`THROUGHPUT_REGRESSION`] lower.
    pub throughput_regressed: bool,
}

/// A run compared with a baseline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineComparison {
    /// The run being judged.
    pub current_run: String,
    /// The saved run it is compared with.
    pub baseline_run: String,
    /// Strategies in both runs, in the current run's order.
    pub rows: Vec<BaselineRow>,
    /// Strategies in only one of the two runs.
    pub unmatched: Vec<String>,
}

impl BaselineComparison {
    /// Whether any strategy regressed in p99 or throughput.
    pub fn has_regressions(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.p99_regressed || r.throughput_regressed)
    }
}

fn change(before: f64, after: f64) -> Option<f64> {
    (before > 0.0).then(|| (after - before) / before)
}

/// Compares `current` with `saved`, strategy by strategy (matched by name).
pub fn baseline(current: &ReportInput, saved: &ReportInput) -> BaselineComparison {
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for now in &current.summary.strategies {
        let Some(before) = saved
            .summary
            .strategies
            .iter()
            .find(|s| s.strategy == now.strategy)
        else {
            unmatched.push(now.strategy.clone());
            continue;
        };
        let p99_change = change(
            before.acquire_ok.p99_us as f64,
            now.acquire_ok.p99_us as f64,
        );
        let throughput_change = change(before.throughput_ops_s, now.throughput_ops_s);
        rows.push(BaselineRow {
            strategy: now.strategy.clone(),
            p99_before_us: before.acquire_ok.p99_us,
            p99_after_us: now.acquire_ok.p99_us,
            p99_change,
            throughput_before: before.throughput_ops_s,
            throughput_after: now.throughput_ops_s,
            throughput_change,
            p99_regressed: p99_change.is_some_and(|c| c > P99_REGRESSION),
            throughput_regressed: throughput_change.is_some_and(|c| c < -THROUGHPUT_REGRESSION),
        });
    }
    unmatched.extend(
        saved
            .summary
            .strategies
            .iter()
            .filter(|s| {
                !current
                    .summary
                    .strategies
                    .iter()
                    .any(|c| c.strategy == s.strategy)
            })
            .map(|s| s.strategy.clone()),
    );
    BaselineComparison {
        current_run: current.run_id().to_string(),
        baseline_run: saved.run_id().to_string(),
        rows,
        unmatched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::run::export::tests::sample_input;

    #[test]
    fn flags_p99_and_throughput_regressions_past_ten_percent() {
        let saved = sample_input("base");
        let mut now = sample_input("now");
        // single: p99 +10% exactly (not a regression), throughput -11% (regression).
        now.summary.strategies[0].acquire_ok.p99_us =
            saved.summary.strategies[0].acquire_ok.p99_us * 110 / 100;
        now.summary.strategies[0].throughput_ops_s =
            saved.summary.strategies[0].throughput_ops_s * 0.89;
        // redlock: p99 +20% (regression), throughput +50%.
        now.summary.strategies[1].acquire_ok.p99_us =
            saved.summary.strategies[1].acquire_ok.p99_us * 120 / 100;
        now.summary.strategies[1].throughput_ops_s =
            saved.summary.strategies[1].throughput_ops_s * 1.5;
        now.summary.strategies[2].strategy = "naive-del".into();
        let cmp = baseline(&now, &saved);
        assert_eq!(cmp.rows.len(), 2);
        assert!(!cmp.rows[0].p99_regressed);
        assert!(cmp.rows[0].throughput_regressed);
        assert!(cmp.rows[1].p99_regressed);
        assert!(!cmp.rows[1].throughput_regressed);
        assert!(cmp.has_regressions());
        assert_eq!(cmp.unmatched, vec!["naive-del", "single-fenced"]);
        assert!(!baseline(&saved, &saved).has_regressions());
    }
}
