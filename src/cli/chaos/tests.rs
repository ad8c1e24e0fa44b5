//! Unit tests of `lockbench chaos`'s output.

use std::time::Duration;

use lockbench::checker::Verdict;
use lockbench::orchestration::expectation::ExpectationCheck;
use lockbench::orchestration::runner::{Progress as RunProgress, TestOutcome};
use lockbench::results::StrategySummary;

use super::render::{progress_line, render};

#[test]
fn an_interrupted_strategy_is_shown_not_judged() {
    let o = TestOutcome {
        name: "04".into(),
        claim: "expiry shorter than the work".into(),
        strategies: vec![StrategySummary {
            strategy: "single".into(),
            ..Default::default()
        }],
        expectations: vec![ExpectationCheck {
            strategy: "single".into(),
            observed: Verdict::Valid,
            expected: None,
            met: None,
            mismatches: vec![],
            interrupted: true,
        }],
        interrupted: true,
    };
    let text = render(&o);
    assert!(text.contains("interrupted: not judged"), "{text}");
    assert!(!text.contains("NOT AS CLAIMED"), "{text}");
}

#[test]
fn progress_line_names_elapsed_duration_and_faults() {
    let faults = vec!["client-pause client:0".to_string()];
    let summary = StrategySummary {
        acquired: 40,
        errors: 1,
        ..Default::default()
    };
    let line = progress_line(
        "02-naive-del-pause",
        RunProgress::Tick {
            strategy: "naive-del",
            elapsed: Duration::from_millis(2400),
            duration: Some(Duration::from_secs(6)),
            summary: &summary,
            active_faults: &faults,
        },
    );
    assert_eq!(
        line,
        "02-naive-del-pause / naive-del  2s / 6s  acquired 40, errors 1  faults: client-pause client:0"
    );
}
