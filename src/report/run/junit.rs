//! `report.junit.xml`: one run as a JUnit XML report, for CI systems that show test results
//! (GitLab, Jenkins, GitHub test reporters). One `<testsuite>` per run (named after its scenario),
//! one `<testcase>` per strategy: a `valid` verdict passes, `invalid` is a `<failure>` (the
//! anomaly counts), `unknown` an `<error>` (the evidence could not decide), a strategy that did
//! not run an `<error>` with its message. `time` is the strategy's run time in seconds.

use std::fmt::Write as _;

use super::input::{ReportInput, Verdict};
use crate::report::common::html::escape;

/// The run as JUnit XML (see the module docs).
pub fn to_junit(input: &ReportInput) -> String {
    let suite = escape(input.scenario_name());
    let mut cases = String::new();
    let (mut failures, mut errors, mut time) = (0, 0, 0.0);
    for s in &input.summary.strategies {
        time += s.elapsed_s;
        let _ = write!(
            cases,
            "    <testcase classname=\"lockbench.{suite}\" name=\"{}\" time=\"{:.3}\">",
            escape(&s.strategy),
            s.elapsed_s
        );
        let counts = input
            .verdict_for(&s.strategy)
            .map(|v| {
                v.counts
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        match input.verdict_of(&s.strategy) {
            Verdict::Valid => {}
            Verdict::Invalid => {
                failures += 1;
                let _ = write!(
                    cases,
                    "\n      <failure type=\"invalid\" message=\"invalid: {} anomalies\">{}</failure>\n    ",
                    input.anomaly_total_of(&s.strategy),
                    escape(&counts)
                );
            }
            Verdict::Unknown => {
                errors += 1;
                let _ = write!(
                    cases,
                    "\n      <error type=\"unknown\" message=\"unknown: the evidence could not decide\">{}</error>\n    ",
                    escape(&counts)
                );
            }
        }
        let _ = writeln!(
            cases,
            "<system-out>{} ops/s, acquire p99 {} µs, {} acquired of {} attempts</system-out></testcase>",
            s.throughput_ops_s.round(),
            s.acquire_ok.p99_us,
            s.acquired,
            s.attempts
        );
    }
    for (strategy, message) in &input.strategy_errors {
        errors += 1;
        let _ = writeln!(
            cases,
            "    <testcase classname=\"lockbench.{suite}\" name=\"{}\" time=\"0\">\
             <error type=\"did-not-run\" message=\"{}\"/></testcase>",
            escape(strategy),
            escape(message)
        );
    }
    let tests = input.summary.strategies.len() + input.strategy_errors.len();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"lockbench\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">\n  \
         <testsuite name=\"{suite}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" \
         time=\"{time:.3}\" timestamp=\"{}\">\n{cases}  </testsuite>\n</testsuites>\n",
        escape(&input.summary.started_at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::run::export::tests::sample_input;

    #[test]
    fn valid_passes_invalid_fails_and_a_strategy_that_did_not_run_is_an_error() {
        let mut input = sample_input("run-1");
        input
            .strategy_errors
            .insert("pg-advisory".into(), "postgres not found <on PATH>".into());
        let xml = to_junit(&input);
        let tests = input.summary.strategies.len() + 1;
        let invalid = input
            .summary
            .strategies
            .iter()
            .filter(|s| input.verdict_of(&s.strategy) == Verdict::Invalid)
            .count();
        let unknown = input
            .summary
            .strategies
            .iter()
            .filter(|s| input.verdict_of(&s.strategy) == Verdict::Unknown)
            .count();
        assert!(invalid >= 1, "the sample has an invalid strategy");
        assert!(
            xml.contains(&format!(
                "<testsuites name=\"lockbench\" tests=\"{tests}\" failures=\"{invalid}\" errors=\"{}\"",
                unknown + 1
            )),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), tests, "{xml}");
        assert_eq!(xml.matches("<failure type=\"invalid\"").count(), invalid);
        assert!(
            xml.contains("message=\"postgres not found &lt;on PATH&gt;\""),
            "{xml}"
        );
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
        assert!(xml.ends_with("</testsuite>\n</testsuites>\n"));
    }
}
