//! What `lockbench matrix` prints when it ends, long lists in brief (the thin-evidence
//! notes, the shortfalls, the back-off history); `matrix.md` keeps them whole.

use lockbench::matrix::{MatrixReport, Shortfall};
use lockbench::report::matrix::export::{
    claims_md, decision_md, matrix_table_md, probes_md, run_line,
};

/// What `lockbench matrix` prints when it ends: the grid, the run line, probes, claims
/// agreement, shortfalls, decision table.
pub(super) fn print_summary(report: &MatrixReport) {
    let report = &in_brief(report);
    println!(
        "\nDamaging of exposed episodes (95 % interval) · recovery p50 per cell \
         (* fewer exposed than wanted, ! contradicts a claim):\n"
    );
    println!("{}", matrix_table_md(report));
    println!("{}.\n", run_line(report));
    println!("Acquire latency, uncontended probe beside contended p99:\n");
    println!("{}", probes_md(report));
    println!("Agreement with the claims:\n");
    println!("{}", claims_md(report));
    match Shortfall::brief(&report.shortfalls) {
        Some(brief) => println!("short: {brief}"),
        None => {
            for s in &report.shortfalls {
                println!(
                    "short: {} × {}: {} of {} exposed: {}",
                    s.strategy, s.fault, s.exposed, s.wanted, s.reason
                );
            }
        }
    }
    if !report.set_aside.is_empty() {
        println!(
            "{} trial(s) set aside (the harness lagged beside other trials; see matrix.md)",
            report.set_aside.len()
        );
    }
    println!("\nDecision table:\n");
    println!("{}", decision_md(report));
    for c in report.contradictions() {
        println!(
            "CONTRADICTION: claim {} ({}) says {} for {} × {}; the cell shows {}",
            c.claim, c.file, c.says, c.strategy, c.fault, c.observed
        );
    }
}

/// The report as the terminal shows it: the decision table's thin-evidence notes and the
/// back-off history in brief ([`lockbench::matrix::ThinEvidence::brief`],
/// [`lockbench::matrix::JobsRecord::backoff_brief`]).
pub(super) fn in_brief(report: &MatrixReport) -> MatrixReport {
    let mut shown = report.clone();
    let (efficiency, correctness) = report.thin_evidence();
    shown.decision.efficiency.thin = efficiency.brief();
    shown.decision.correctness.thin = correctness.brief();
    shown.jobs.backoff = report.jobs.backoff_brief();
    shown
}
