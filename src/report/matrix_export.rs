//! The matrix's files: `matrix.json` (the [`MatrixReport`] itself), `matrix.csv` (one row per
//! cell), `matrix.md` (the table strategies × faults, the decision table, the fault
//! definitions) and `matrix.html` ([`super::matrix_html`]). Each is written atomically.

use std::fmt::Write as _;
use std::path::Path;

use super::error::ReportError;
use super::html::latency;
use super::write::write_atomic;
use crate::orchestration::matrix::decision::Recommendation;
use crate::orchestration::matrix::{CellRecord, MatrixReport};

/// The anomaly kinds the CSV gives a column each (count and rate per 1,000 sections).
pub const CSV_KINDS: [&str; 6] = [
    "mutex-violation",
    "believed-overlap",
    "stale-write-accepted",
    "stale-write-rejected",
    "lost-update",
    "token-regression",
];

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

/// `matrix.csv`: one row per cell. Shares are fractions, rates per 1,000 critical sections,
/// latencies µs, throughput ops/s, availability %.
pub fn matrix_csv(r: &MatrixReport) -> String {
    let mut out = String::from(
        "strategy,fault,topology,trials_planned,trials_checked,invalid,valid,unknown,failed,interrupted,verdict,\
         invalid_share,invalid_share_low,invalid_share_high,interval_method,sections",
    );
    for k in CSV_KINDS {
        let _ = write!(out, ",{k},{k}_per_1000,{k}_per_1000_low,{k}_per_1000_high");
    }
    out.push_str(",stuck_resources,acquire_p50_us,acquire_p99_us,throughput_ops_s,availability_pct,availability_min_pct\n");
    for c in &r.cells {
        let share = c.invalid_share;
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            c.strategy,
            c.fault,
            c.topology,
            c.trials_planned,
            c.trials_checked,
            c.invalid,
            c.valid,
            c.unknown,
            c.failed,
            c.interrupted,
            c.verdict,
            opt(share.map(|s| s.point)),
            opt(share.map(|s| s.low)),
            opt(share.map(|s| s.high)),
            share.map_or(String::new(), |s| s.method.to_string()),
            c.sections
        );
        for k in CSV_KINDS {
            let rate = c.anomalies.get(k).and_then(|a| a.per_section);
            let _ = write!(
                out,
                ",{},{},{},{}",
                c.count(k),
                opt(rate.map(|i| i.point * 1000.0)),
                opt(rate.map(|i| i.low * 1000.0)),
                opt(rate.map(|i| i.high * 1000.0))
            );
        }
        let _ = writeln!(
            out,
            ",{},{},{},{:.1},{},{}",
            c.stuck_resources,
            c.acquire_p50_us,
            c.acquire_p99_us,
            c.throughput_ops_s,
            opt(c.availability_pct),
            opt(c.availability_min_pct)
        );
    }
    out
}

/// The short text of a cell in the tables: `1/3 invalid · p99 12.35 ms`.
pub fn cell_text(c: &CellRecord) -> String {
    if c.trials_checked == 0 {
        return c.share_text();
    }
    format!("{} · p99 {}", c.share_text(), latency(c.acquire_p99_us))
}

fn recommendation_md(out: &mut String, r: &Recommendation) {
    let _ = writeln!(out, "**{} lock** — {}\n", r.need, r.rule);
    let _ = writeln!(out, "Answer: **{}**\n", r.answer);
    if let Some(b) = &r.bound {
        let _ = writeln!(out, "Bound: {b}\n");
    }
    if let Some(t) = &r.thin {
        let _ = writeln!(out, "Evidence is thin: {t}\n");
    }
    let _ = writeln!(out, "| strategy | eligible | why |\n|---|---|---|");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            row.strategy,
            if row.eligible { "yes" } else { "no" },
            row.reason.replace('|', "/")
        );
    }
    out.push('\n');
}

/// The strategies × faults table in Markdown (`k/N invalid · p99`).
pub fn matrix_table_md(r: &MatrixReport) -> String {
    let mut out = String::from("| strategy |");
    for f in &r.faults {
        let _ = write!(out, " {} |", f.name);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(r.faults.len()));
    out.push('\n');
    for s in &r.strategies {
        let _ = write!(out, "| {s} |");
        for f in &r.faults {
            let text = r.cell(s, &f.name).map(cell_text).unwrap_or_default();
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    out
}

/// `matrix.md`: status, the table, the decision table, fault definitions.
pub fn matrix_md(r: &MatrixReport) -> String {
    let mut out = format!(
        "# lockbench matrix {}\n\nStatus: {:?}. {} trial(s) per cell. Workload: {}.\n\n",
        r.run_id,
        r.status,
        r.trials,
        r.workload.describe()
    );
    out.push_str("## Invalid trials and acquire p99 per cell\n\n");
    out.push_str(&matrix_table_md(r));
    out.push_str("\n## Decision table\n\n");
    recommendation_md(&mut out, &r.decision.efficiency);
    recommendation_md(&mut out, &r.decision.correctness);
    out.push_str("## Fault classes (what was done, per topology)\n\n| fault | topology | what |\n|---|---|---|\n");
    for f in &r.faults {
        for (topology, what) in &f.what {
            let _ = writeln!(
                out,
                "| {} | {topology} | {} |",
                f.name,
                what.replace('|', "/")
            );
        }
    }
    out
}

/// Writes `matrix.json`, `matrix.csv`, `matrix.md` and `matrix.html` into `dir`.
///
/// # Errors
/// [`ReportError::Write`] naming the file.
pub fn write_matrix_files(dir: &Path, r: &MatrixReport) -> Result<(), ReportError> {
    let mut json = serde_json::to_vec_pretty(r).map_err(|e| ReportError::Write {
        path: dir.join("matrix.json"),
        source: std::io::Error::other(e),
    })?;
    json.push(b'\n');
    write_atomic(&dir.join("matrix.json"), &json)?;
    write_atomic(&dir.join("matrix.csv"), matrix_csv(r).as_bytes())?;
    write_atomic(&dir.join("matrix.md"), matrix_md(r).as_bytes())?;
    write_atomic(
        &dir.join("matrix.html"),
        super::matrix_html::render_matrix_html(r).as_bytes(),
    )
}
