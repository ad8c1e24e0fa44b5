//! The comparison as JSON, CSV (one row per run × strategy) and Markdown (heat map and
//! decision table, pasteable in a pull request).

use std::fmt::Write as _;

use super::compare::ComparisonReport;
use crate::report::common::export::Text;
use crate::report::common::html::{latency, ops, percent};
use crate::report::error::ReportError;
use crate::report::run::export::{baseline_markdown, csv_field};

/// The comparison's text files, in the order written (`comparison.html`, which also needs the
/// drawn bars, is written before them by [`write_comparison`](super::html::write_comparison)).
pub const EXPORTERS: [Text<ComparisonReport>; 3] = [
    Text {
        file_name: "comparison.json",
        render: ComparisonReport::to_json,
    },
    Text {
        file_name: "comparison.csv",
        render: |r| Ok(r.to_csv()),
    },
    Text {
        file_name: "comparison.md",
        render: |r| Ok(r.to_markdown()),
    },
];

impl ComparisonReport {
    /// Pretty JSON of the whole comparison.
    ///
    /// # Errors
    /// [`ReportError::Serialize`] (not expected: every field is plain data).
    pub fn to_json(&self) -> Result<String, ReportError> {
        serde_json::to_string_pretty(self)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| ReportError::Serialize {
                what: "comparison.json".into(),
                message: e.to_string(),
            })
    }

    /// One CSV row per (run, strategy); latencies in µs, availability 0..1.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "run_id,scenario,strategy,verdict,anomalies,acquired,throughput_ops_s,\
             acquire_p50_us,acquire_p99_us,availability,faults_injected,seed\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{:.3},{},{},{},{},{}",
                csv_field(&r.run_id),
                csv_field(&r.scenario),
                csv_field(&r.strategy),
                r.verdict,
                r.anomalies,
                r.acquired,
                r.throughput_ops_s,
                r.acquire_p50_us,
                r.acquire_p99_us,
                r.availability
                    .map_or_else(String::new, |a| format!("{a:.6}")),
                r.faults_injected,
                r.seed.map_or_else(String::new, |s| s.to_string()),
            );
        }
        out
    }

    /// Markdown: decision table, heat map (verdict and anomaly count per cell), then numbers.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "### lockbench comparison of {} run(s)\n\n#### Decision\n\n\
             | need | strategy | why | runs | evidence |\n|---|---|---|---|---|\n",
            self.runs.len()
        );
        for rec in &self.recommendations {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                rec.need.title(),
                rec.strategy
                    .as_deref()
                    .map_or_else(|| "none".to_string(), |s| format!("**{s}**")),
                rec.rationale.replace('|', "\\|"),
                rec.runs
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if rec.thin_evidence.is_empty() {
                    "ok".to_string()
                } else {
                    format!("thin: {}", rec.thin_evidence.join("; "))
                },
            );
        }
        out.push_str("\n#### Verdicts (anomalies) by strategy and scenario\n\n| strategy |");
        for sc in &self.scenarios {
            let _ = write!(out, " {sc} |");
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.scenarios.len()));
        out.push('\n');
        for st in &self.strategies {
            let _ = write!(out, "| {st} |");
            for sc in &self.scenarios {
                match self.cell(st, sc) {
                    Some(c) => {
                        let _ = write!(out, " {} ({}) |", c.verdict, c.anomalies);
                    }
                    None => out.push_str(" — |"),
                }
            }
            out.push('\n');
        }
        out.push_str(
            "\n#### Numbers\n\n| scenario | strategy | verdict | throughput (ops/s) | acquire p50 | acquire p99 | availability | faults |\n\
             |---|---|---|--:|--:|--:|--:|--:|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                r.scenario,
                r.strategy,
                r.verdict,
                ops(r.throughput_ops_s),
                latency(r.acquire_p50_us),
                latency(r.acquire_p99_us),
                percent(r.availability),
                r.faults_injected
            );
        }
        for b in &self.baselines {
            out.push('\n');
            out.push_str(&baseline_markdown(b));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::report::comparison::compare::compare;
    use crate::report::run::export::tests::sample_input;

    #[test]
    fn markdown_and_csv_carry_the_numbers() {
        let mut a = sample_input("a");
        a.scenario = Some("calm".into());
        let report = compare(&[a]).unwrap();
        let md = report.to_markdown();
        assert!(md.contains("| single | valid (0) |"), "{md}");
        assert!(md.contains("| redlock | invalid (3) |"), "{md}");
        assert!(
            md.contains("| efficiency lock (duplicated work is tolerable) | **single** |"),
            "{md}"
        );
        let csv = report.to_csv();
        assert_eq!(csv.lines().count(), 4);
        assert!(
            csv.contains("a,calm,redlock,invalid,3,12000,1200.500,900,2000,0.950000,0,7"),
            "{csv}"
        );
        let back: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(back["recommendations"][0]["strategy"], "single");
    }
}
