//! One run as JSON (`report.json`, the whole [`ReportInput`]), CSV (one row per strategy) and
//! Markdown (a table to paste in a pull request). All read the one [`RunReport`]; [`exporters`]
//! lists them (`report.html`, which also needs the drawn plots, is written before them by
//! [`write_run_report`](super::html::write_run_report)).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::baseline::BaselineComparison;
use super::input::{AnomalyKind, ReportInput};
use crate::report::common::export::Text;
use crate::report::common::html::{change, latency, ops, percent};
use crate::report::error::ReportError;

/// What every run exporter reads: the run and the baseline it is compared with, if any.
#[derive(Debug, Clone, Copy)]
pub struct RunReport<'a> {
    /// The run.
    pub input: &'a ReportInput,
    /// The baseline comparison (`lockbench report --baseline`).
    pub baseline: Option<&'a BaselineComparison>,
}

/// The run report's text files, in the order written.
pub fn exporters<'a>() -> [Text<RunReport<'a>>; 4] {
    [
        Text {
            file_name: "report.json",
            render: |r| to_json(r.input),
        },
        Text {
            file_name: "report.csv",
            render: |r| Ok(to_csv(r.input)),
        },
        Text {
            file_name: "report.md",
            render: |r| Ok(to_markdown(r.input, r.baseline)),
        },
        Text {
            file_name: "report.junit.xml",
            render: |r| Ok(super::junit::to_junit(r.input)),
        },
    ]
}

/// The whole input as pretty JSON (an export for other tools; reports are always rebuilt from
/// the run's own files, see [`load_run_dir`](super::load_run_dir)).
///
/// # Errors
/// [`ReportError::Serialize`] (only for non-finite floats in `summary.config`).
pub fn to_json(input: &ReportInput) -> Result<String, ReportError> {
    serde_json::to_string_pretty(input)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| ReportError::Serialize {
            what: "report.json".into(),
            message: e.to_string(),
        })
}

/// Quotes a CSV field when it holds a comma, quote or line break.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV row per strategy. Latencies in µs, throughput in ops/s, availability 0..1; then one
/// `count:<kind>` column per kind any strategy reported.
pub fn to_csv(input: &ReportInput) -> String {
    let kinds: BTreeSet<AnomalyKind> = input.verdicts.iter().flat_map(|v| v.kinds_seen()).collect();
    let mut out = String::from(
        "run_id,scenario,strategy,verdict,anomalies,attempts,acquired,contended,errors,\
         release_errors,throughput_ops_s,acquire_p50_us,acquire_p90_us,acquire_p99_us,\
         acquire_p999_us,acquire_max_us,availability",
    );
    for k in &kinds {
        let _ = write!(out, ",{}", csv_field(&format!("count:{k}")));
    }
    out.push('\n');
    for s in &input.summary.strategies {
        let l = &s.acquire_ok;
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{}",
            csv_field(input.run_id()),
            csv_field(input.scenario_name()),
            csv_field(&s.strategy),
            input.verdict_of(&s.strategy),
            input.anomaly_total_of(&s.strategy),
            s.attempts,
            s.acquired,
            s.contended,
            s.errors,
            s.release_errors,
            s.throughput_ops_s,
            l.p50_us,
            l.p90_us,
            l.p99_us,
            l.p999_us,
            l.max_us,
            input
                .availability_of(s)
                .map_or_else(String::new, |a| format!("{a:.6}")),
        );
        for k in &kinds {
            let n = input.verdict_for(&s.strategy).map_or(0, |v| v.count(*k));
            let _ = write!(out, ",{n}");
        }
        out.push('\n');
    }
    out
}

/// Incidents listed per strategy in the Markdown summary.
const MD_INCIDENTS: usize = 5;

/// A Markdown summary of the run (with each strategy's first incidents and their causes), with
/// the baseline table when one is given.
pub fn to_markdown(input: &ReportInput, baseline: Option<&BaselineComparison>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### lockbench run `{}` — {} ({:?})\n",
        input.run_id(),
        input.scenario_name(),
        input.summary.status
    );
    out.push_str(
        "| strategy | verdict | anomalies | throughput (ops/s) | acquire p50 | acquire p99 | availability |\n\
         |---|---|--:|--:|--:|--:|--:|\n",
    );
    for s in &input.summary.strategies {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.strategy,
            input.verdict_of(&s.strategy),
            input.anomaly_total_of(&s.strategy),
            ops(s.throughput_ops_s),
            latency(s.acquire_ok.p50_us),
            latency(s.acquire_ok.p99_us),
            percent(input.availability_of(s)),
        );
    }
    let faults: BTreeSet<&str> = input
        .fault_windows
        .iter()
        .map(|f| f.window.kind.as_str())
        .collect();
    let _ = writeln!(
        out,
        "\nFaults injected: {}{}. Seed: {}.",
        input.fault_windows.len(),
        if faults.is_empty() {
            String::new()
        } else {
            format!(" ({})", faults.into_iter().collect::<Vec<_>>().join(", "))
        },
        input
            .seed()
            .map_or_else(|| "unknown".to_string(), |s| s.to_string())
    );
    for v in &input.verdicts {
        let kinds: Vec<String> = v
            .kinds_seen()
            .into_iter()
            .map(|k| format!("{k} {}", v.count(k)))
            .collect();
        if !kinds.is_empty() {
            let _ = writeln!(out, "- `{}`: {}", v.strategy, kinds.join(", "));
        }
        for inc in v.incidents.iter().take(MD_INCIDENTS) {
            let _ = writeln!(
                out,
                "  - incident #{} ({}) on {} at {:.3} s, clients {}: {}",
                inc.id,
                inc.kind,
                inc.resource,
                inc.start_us as f64 / 1e6,
                inc.clients
                    .iter()
                    .map(|c| format!("c{c}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                inc.cause
            );
        }
        if v.incidents.len() > MD_INCIDENTS {
            let _ = writeln!(
                out,
                "  - … and {} more incidents (see report.html)",
                v.incidents.len() - MD_INCIDENTS
            );
        }
    }
    if let Some(b) = baseline {
        out.push('\n');
        out.push_str(&baseline_markdown(b));
    }
    out
}

/// The baseline comparison as a Markdown table; regressions are bold and marked.
pub fn baseline_markdown(b: &BaselineComparison) -> String {
    let mut out = format!(
        "#### `{}` vs baseline `{}`: {}\n\n\
         | strategy | p99 before | p99 now | p99 change | throughput before | throughput now | throughput change |\n\
         |---|--:|--:|--:|--:|--:|--:|\n",
        b.current_run,
        b.baseline_run,
        if b.has_regressions() {
            "**regressions found**"
        } else {
            "no regression"
        }
    );
    for r in &b.rows {
        let mark = |regressed: bool, text: String| {
            if regressed {
                format!("**{text} REGRESSION**")
            } else {
                text
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.strategy,
            latency(r.p99_before_us),
            latency(r.p99_after_us),
            mark(r.p99_regressed, change(r.p99_change)),
            ops(r.throughput_before),
            ops(r.throughput_after),
            mark(r.throughput_regressed, change(r.throughput_change)),
        );
    }
    if !b.unmatched.is_empty() {
        let _ = writeln!(
            out,
            "\nIn only one of the two runs: {}.",
            b.unmatched.join(", ")
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::run::input::{AnomalyKind, StrategyVerdict, Verdict};
    use crate::results::{LatencySummary, RunStatus, RunSummary, StrategySummary};

    /// Three strategies with round numbers: single (valid), redlock (invalid), single-fenced.
    pub(crate) fn sample_input(run_id: &str) -> ReportInput {
        let strategy = |name: &str, thr: f64, p50: u64, p99: u64, acquired: u64| StrategySummary {
            strategy: name.into(),
            elapsed_s: 10.0,
            attempts: acquired + 100,
            acquired,
            contended: 90,
            errors: 10,
            throughput_ops_s: thr,
            acquire_ok: LatencySummary {
                count: acquired,
                mean_us: p50 as f64,
                p50_us: p50,
                p90_us: p99 / 2,
                p99_us: p99,
                p999_us: p99 * 2,
                max_us: p99 * 3,
            },
            ..Default::default()
        };
        let summary = RunSummary {
            run_id: run_id.into(),
            lockbench_version: "0.1.0".into(),
            started_at: "2026-11-29T08:00:00Z".into(),
            finished_at: Some("2026-11-29T08:00:30Z".into()),
            status: RunStatus::Completed,
            error: None,
            config: serde_json::json!({"workload": {"seed": 7}}),
            strategies: vec![
                strategy("single", 5000.0, 400, 1000, 50_000),
                strategy("redlock", 1200.5, 900, 2000, 12_000),
                strategy("single-fenced", 4000.0, 500, 1500, 40_000),
            ],
            pid: None,
        };
        let mut input = ReportInput::from_summary(summary);
        input.verdicts = vec![
            StrategyVerdict {
                strategy: "single".into(),
                verdict: Verdict::Valid,
                anomalies: vec![],
                counts: Default::default(),
                availability: None,
                incidents: vec![],
                incidents_partial: false,
                incidents_known: false,
            },
            StrategyVerdict {
                strategy: "redlock".into(),
                verdict: Verdict::Invalid,
                anomalies: vec![],
                counts: [
                    (AnomalyKind::MutexViolation, 3),
                    (AnomalyKind::StaleWriteRejected, 4),
                ]
                .into(),
                availability: Some(0.95),
                incidents: vec![],
                incidents_partial: false,
                incidents_known: false,
            },
        ];
        input
    }

    #[test]
    fn csv_has_one_row_per_strategy_with_count_columns() {
        let csv = to_csv(&sample_input("r,1"));
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].ends_with("availability,count:mutex-violation,count:stale-write-rejected"));
        assert_eq!(
            lines[2],
            "\"r,1\",\"r,1\",redlock,invalid,3,12100,12000,90,10,0,1200.500,900,1000,2000,4000,6000,0.950000,3,4"
        );
        // single-fenced has no verdict: unknown, availability from attempts (10 errors of 40100).
        assert!(
            lines[3].contains(",single-fenced,unknown,0,"),
            "{}",
            lines[3]
        );
        assert!(lines[3].contains(",0.999751,0,0"), "{}", lines[3]);
    }

    #[test]
    fn markdown_table_and_json_round_trip() {
        let input = sample_input("r1");
        let md = to_markdown(&input, None);
        assert!(
            md.contains("| redlock | invalid | 3 | 1,200.5 | 900 µs | 2.00 ms | 95.00% |"),
            "{md}"
        );
        assert!(md.contains("Seed: 7."));
        assert!(md.contains("- `redlock`: mutex-violation 3, stale-write-rejected 4"));
        let back: ReportInput = serde_json::from_str(&to_json(&input).unwrap()).unwrap();
        assert_eq!(back, input);
    }

    #[test]
    fn baseline_markdown_marks_regressions() {
        let saved = sample_input("base");
        let mut now = sample_input("now");
        now.summary.strategies[0].acquire_ok.p99_us = 1500;
        let md = baseline_markdown(&crate::report::baseline(&now, &saved));
        assert!(md.contains("**regressions found**"));
        assert!(
            md.contains("| single | 1.00 ms | 1.50 ms | **+50.0% REGRESSION** |"),
            "{md}"
        );
    }
}
