//! `comparison.html` (heat map, bars, decision table; self-contained) and the comparison's
//! JSON / CSV / Markdown and bar plots, written into one directory.

use std::fs;
use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped};

use super::bars::{Bar, BarsFigure};
use super::compare::{ComparisonReport, ComparisonRow, HeatCell, Recommendation};
use super::export::EXPORTERS;
use crate::report::common::export::{write_all, Exporter};
use crate::report::common::figure::{render, RenderedPlot};
use crate::report::common::html::{
    latency, ops, page, percent, verdict_badge, AVAILABILITY_DEFINITION,
};
use crate::report::error::ReportError;
use crate::report::run::html::{baseline_html, figure};

/// The files [`write_comparison`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonFiles {
    /// `comparison.html`.
    pub html: PathBuf,
    /// `comparison.json`, `comparison.csv`, `comparison.md`.
    pub exports: Vec<PathBuf>,
    /// The bar plots, `.svg` and `.png`.
    pub plots: Vec<PathBuf>,
}

/// `comparison.html`: the page, with the bars drawn for it.
struct Page<'p> {
    plots: &'p [RenderedPlot],
}

impl Exporter<ComparisonReport> for Page<'_> {
    fn file_name(&self) -> &'static str {
        "comparison.html"
    }

    fn render(&self, report: &ComparisonReport) -> Result<String, ReportError> {
        Ok(html_page(report, self.plots))
    }
}

/// Writes the comparison into `dir` (created if missing).
///
/// # Errors
/// [`ReportError::Write`] when `dir` cannot be created or a file written;
/// [`ReportError::Plot`] when a plot fails.
pub fn write_comparison(
    dir: &Path,
    report: &ComparisonReport,
) -> Result<ComparisonFiles, ReportError> {
    fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let plots = draw_bars(report, Some(dir))?;
    let page = Page { plots: &plots };
    let list: Vec<&dyn Exporter<ComparisonReport>> =
        std::iter::once(&page as &dyn Exporter<ComparisonReport>)
            .chain(
                EXPORTERS
                    .iter()
                    .map(|e| e as &dyn Exporter<ComparisonReport>),
            )
            .collect();
    let mut exports = write_all(dir, report, &list)?;
    let html = exports.remove(0);
    Ok(ComparisonFiles {
        html,
        exports,
        plots: plots
            .iter()
            .flat_map(|p| ["svg", "png"].map(|e| dir.join(format!("{}.{e}", p.stem))))
            .collect(),
    })
}

/// The comparison page as a string, plots drawn in memory (nothing written).
///
/// # Errors
/// [`ReportError::Plot`] or [`ReportError::Font`].
pub fn render_comparison_html(report: &ComparisonReport) -> Result<String, ReportError> {
    let plots = draw_bars(report, None)?;
    Ok(html_page(report, &plots))
}

/// A name for a table header that may wrap after `-`, `_` and `.` (long scenario names).
fn breakable(name: &str) -> Markup {
    html! {
        @for part in name.split_inclusive(['-', '_', '.']) {
            (part)
            @if part.ends_with(['-', '_', '.']) { wbr; }
        }
    }
}

/// NaN / infinite values (a run with no elapsed time) draw as 0.
fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v.max(0.0)
    } else {
        0.0
    }
}

/// Rows grouped by strategy, then scenario order.
fn ordered_rows(report: &ComparisonReport) -> Vec<&ComparisonRow> {
    let mut rows: Vec<&ComparisonRow> = report.rows.iter().collect();
    let pos = |v: &[String], s: &str| v.iter().position(|x| x == s).unwrap_or(usize::MAX);
    rows.sort_by_key(|r| {
        (
            pos(&report.strategies, &r.strategy),
            pos(&report.scenarios, &r.scenario),
        )
    });
    rows
}

fn draw_bars(
    report: &ComparisonReport,
    dir: Option<&Path>,
) -> Result<Vec<RenderedPlot>, ReportError> {
    let rows = ordered_rows(report);
    let many_runs_per_scenario = report.runs.len() > report.scenarios.len();
    let bars = |value: &dyn Fn(&ComparisonRow) -> f64,
                inner: Option<&dyn Fn(&ComparisonRow) -> f64>| {
        rows.iter()
            .map(|r| Bar {
                label: if many_runs_per_scenario {
                    format!("{} · {} · {}", r.strategy, r.scenario, r.run_id)
                } else {
                    format!("{} · {}", r.strategy, r.scenario)
                },
                color: report
                    .strategies
                    .iter()
                    .position(|s| s == &r.strategy)
                    .unwrap_or(0),
                value: finite(value(r)),
                inner: inner.map(|f| finite(f(r))),
            })
            .collect::<Vec<_>>()
    };
    let figures = [
        (
            "comparison-latency",
            BarsFigure {
                title: "Acquire latency: p50 (dark) within p99 (light), log scale".into(),
                x_desc: "ms (log scale)".into(),
                bars: bars(
                    &|r| r.acquire_p99_us as f64 / 1000.0,
                    Some(&|r| r.acquire_p50_us as f64 / 1000.0),
                ),
                x_max: None,
                legend: Some(("p99".into(), "p50".into())),
                log_x: true,
            },
        ),
        (
            "comparison-throughput",
            BarsFigure {
                title: "Throughput (lock cycles per second)".into(),
                x_desc: "ops/s".into(),
                bars: bars(&|r| r.throughput_ops_s, None),
                x_max: None,
                legend: None,
                log_x: false,
            },
        ),
        (
            "comparison-availability",
            BarsFigure {
                title: "Availability: share of time a client that wanted the lock could get it"
                    .into(),
                x_desc: "% of the run (see the definition under the plot)".into(),
                bars: bars(&|r| r.availability.unwrap_or(0.0) * 100.0, None),
                x_max: Some(100.0),
                legend: None,
                log_x: false,
            },
        ),
    ];
    figures
        .iter()
        .map(|(stem, fig)| render(fig, stem, &fig.title, dir))
        .collect()
}

fn html_page(report: &ComparisonReport, plots: &[RenderedPlot]) -> String {
    let body = html! {
        header {
            h1 { "lockbench comparison" }
            p.meta {
                (report.runs.len()) " run(s): "
                @for (i, r) in report.runs.iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (r) }
                }
            }
        }
        (decision_section(report))
        (heat_map_section(report))
        (bars_section(plots))
        @for b in &report.baselines { (baseline_html(b)) }
        (numbers_section(report))
        footer {
            "Written by lockbench; also exported as " code { "comparison.json" } ", "
            code { "comparison.csv" } " and " code { "comparison.md" }
            ". Self-contained: no scripts, no network."
        }
    };
    page("lockbench comparison", &body.into_string())
}

/// The decision table: per need, the strategy to use, why, and the runs it rests on.
fn decision_section(report: &ComparisonReport) -> Markup {
    html! {
        section #decision {
            h2 { "Decision" }
            table.decision {
                thead {
                    tr {
                        th.name { "need" } th.name { "use" } th.name { "why" }
                        th.name { "rests on runs" } th.name { "evidence" }
                    }
                }
                tbody { @for rec in &report.recommendations { (decision_row(rec)) } }
            }
        }
    }
}

/// One need's row of the decision table.
fn decision_row(rec: &Recommendation) -> Markup {
    let thin = !rec.thin_evidence.is_empty();
    html! {
        tr data-need=(rec.need) data-strategy=(rec.strategy.as_deref().unwrap_or(""))
            data-thin=(thin) {
            td.name { (rec.need.title()) }
            td.name { b { (rec.strategy.as_deref().unwrap_or("none qualifies")) } }
            td.name { (rec.rationale) }
            td.name {
                @for (i, r) in rec.runs.iter().enumerate() {
                    @if i > 0 { br; }
                    code { (r) }
                }
            }
            td.name.warn[thin] {
                @if thin { "thin: " (rec.thin_evidence.join("; ")) } @else { "sufficient" }
            }
        }
    }
}

/// The heat map: the worst verdict per strategy and scenario, with its counts.
fn heat_map_section(report: &ComparisonReport) -> Markup {
    html! {
        section #heat-map {
            h2 { "Verdicts by strategy and scenario" }
            p.meta {
                "Cell: worst verdict over the scenario's runs, the number of incidents (anomalies \
                grouped per overlap interval, see each run's report) and of anomalies (stale \
                writes the fencing check rejected are not counted)."
            }
            div.scroll {
                table.heat {
                    thead {
                        tr {
                            th.name { "strategy" }
                            @for sc in &report.scenarios { th { (breakable(sc)) } }
                        }
                    }
                    tbody {
                        @for st in &report.strategies {
                            tr {
                                td.name { (st) }
                                @for sc in &report.scenarios { (heat_cell(report.cell(st, sc))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One cell of the heat map: its verdict and counts, why the strategy failed to run, or
/// `not run`.
fn heat_cell(cell: Option<&HeatCell>) -> Markup {
    let Some(c) = cell else {
        return html! { td.cell-none { "not run" } };
    };
    if !c.errors.is_empty() {
        let e = c.errors.join("; ");
        return html! {
            td.cell-unknown data-strategy=(c.strategy) data-scenario=(c.scenario)
                data-verdict=(c.verdict) data-error=(e) title=(e) { "failed to run" }
        };
    }
    html! {
        td class={ "cell-" (c.verdict) } data-strategy=(c.strategy) data-scenario=(c.scenario)
            data-verdict=(c.verdict) data-anomalies=(c.anomalies)
            data-incidents=(c.incidents.map_or_else(String::new, |i| i.to_string())) {
            (PreEscaped(verdict_badge(c.verdict)))
            br;
            @if let Some(i) = c.incidents {
                (i) " incident" @if i != 1 { "s" }
                br;
            }
            span.meta {
                (c.anomalies) " " @if c.anomalies == 1 { "anomaly" } @else { "anomalies" }
            }
        }
    }
}

/// The bar plots, each with its definition note.
fn bars_section(plots: &[RenderedPlot]) -> Markup {
    html! {
        section #bars {
            h2 { "Latency, throughput and availability" }
            @for p in plots {
                (figure(p))
                @if p.stem == "comparison-availability" {
                    p.meta.definition { (AVAILABILITY_DEFINITION) }
                } @else if p.stem == "comparison-latency" {
                    p.meta.definition {
                        "Latency of successful acquires. The axis is logarithmic (each grid step \
                        is ten times the last), so a p50 of a fraction of a millisecond stays \
                        visible next to a p99 of seconds."
                    }
                }
            }
        }
    }
}

/// Every run's numbers, one row per strategy and run.
fn numbers_section(report: &ComparisonReport) -> Markup {
    html! {
        section #numbers {
            h2 { "Numbers" }
            div.scroll {
                table {
                    thead {
                        tr {
                            th.name { "run" } th.name { "scenario" } th.name { "strategy" }
                            th { "verdict" } th { "incidents" } th { "anomalies" }
                            th { "throughput (ops/s)" } th { "acquire p50" } th { "acquire p99" }
                            th { "availability" } th { "faults" } th { "seed" }
                        }
                    }
                    tbody { @for r in ordered_rows(report) { (numbers_row(r)) } }
                }
            }
        }
    }
}

/// One run's strategy in the numbers table, its figures also as `data-*` attributes.
fn numbers_row(r: &ComparisonRow) -> Markup {
    let dash = |v: Option<u64>| v.map_or_else(|| "—".to_string(), |v| v.to_string());
    html! {
        tr data-run=(r.run_id) data-strategy=(r.strategy)
            data-throughput-ops-s=(format!("{:.3}", r.throughput_ops_s))
            data-acquire-p50-us=(r.acquire_p50_us) data-acquire-p99-us=(r.acquire_p99_us) {
            td.name { code { (r.run_id) } }
            td.name { (r.scenario) }
            td.name { (r.strategy) }
            td {
                @match &r.error {
                    Some(e) => span.regressed title=(e) { "failed: " (e) },
                    None => (PreEscaped(verdict_badge(r.verdict))),
                }
            }
            td { (dash(r.incidents)) }
            td { (r.anomalies) }
            td { (ops(r.throughput_ops_s)) }
            td { (latency(r.acquire_p50_us)) }
            td { (latency(r.acquire_p99_us)) }
            td { (percent(r.availability)) }
            td { (r.faults_injected) }
            td { (dash(r.seed)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::comparison::compare::compare;
    use crate::report::run::export::tests::sample_input;
    use crate::report::run::html::tests::write_failed_strategy_run;

    #[test]
    fn sparse_input_still_renders_every_plot() {
        let mut input = sample_input("sparse");
        input.summary.strategies[0].strategy = "a b<c>".into();
        let cmp = render_comparison_html(&compare(&[input]).unwrap()).unwrap();
        assert_eq!(cmp.matches("<svg").count(), 3);
    }

    #[test]
    fn a_strategy_that_failed_to_run_keeps_its_error_in_the_comparison() {
        let tmp = tempfile::tempdir().unwrap();
        write_failed_strategy_run(tmp.path());
        let input = crate::report::load_run_dir(tmp.path()).unwrap();
        let cmp = compare(&[input]).unwrap();
        let row = cmp.rows.iter().find(|r| r.strategy == "single").unwrap();
        assert_eq!(row.error.as_deref(), Some("02 / single: cannot connect"));
    }
}
