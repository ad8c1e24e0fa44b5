//! `comparison.html` (heat map, bars, decision table; self-contained) and the comparison's
//! JSON / CSV / Markdown and bar plots, written into one directory.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use super::bars::{Bar, BarsFigure};
use super::compare::{ComparisonReport, ComparisonRow};
use super::export::EXPORTERS;
use crate::report::common::export::{write_all, Exporter};
use crate::report::common::figure::{render, RenderedPlot};
use crate::report::common::html::{
    escape, latency, ops, page, percent, verdict_badge, AVAILABILITY_DEFINITION,
};
use crate::report::error::ReportError;
use crate::report::run::html::baseline_html;

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
fn breakable(name: &str) -> String {
    escape(name)
        .replace('-', "-<wbr>")
        .replace('_', "_<wbr>")
        .replace('.', ".<wbr>")
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
    let mut body = format!(
        "<header><h1>lockbench comparison</h1>\n<p class=\"meta\">{} run(s): {}</p></header>\n",
        report.runs.len(),
        report
            .runs
            .iter()
            .map(|r| format!("<code>{}</code>", escape(r)))
            .collect::<Vec<_>>()
            .join(", ")
    );

    body.push_str(
        "<section id=\"decision\"><h2>Decision</h2>\n<table class=\"decision\"><thead><tr>\
         <th class=\"name\">need</th><th class=\"name\">use</th><th class=\"name\">why</th>\
         <th class=\"name\">rests on runs</th><th class=\"name\">evidence</th></tr></thead><tbody>\n",
    );
    for rec in &report.recommendations {
        let need = rec.need;
        let _ = writeln!(
            body,
            "<tr data-need=\"{need}\" data-strategy=\"{s}\" data-thin=\"{thin}\"><td class=\"name\">{}</td>\
             <td class=\"name\"><b>{s_h}</b></td><td class=\"name\">{}</td><td class=\"name\">{}</td>\
             <td class=\"name{warn}\">{}</td></tr>",
            escape(rec.need.title()),
            escape(&rec.rationale),
            rec.runs
                .iter()
                .map(|r| format!("<code>{}</code>", escape(r)))
                .collect::<Vec<_>>()
                .join("<br>"),
            if rec.thin_evidence.is_empty() {
                "sufficient".to_string()
            } else {
                format!("thin: {}", escape(&rec.thin_evidence.join("; ")))
            },
            s = escape(rec.strategy.as_deref().unwrap_or("")),
            s_h = escape(rec.strategy.as_deref().unwrap_or("none qualifies")),
            thin = !rec.thin_evidence.is_empty(),
            warn = if rec.thin_evidence.is_empty() { "" } else { " warn" },
        );
    }
    body.push_str("</tbody></table></section>\n");

    body.push_str(
        "<section id=\"heat-map\"><h2>Verdicts by strategy and scenario</h2>\n\
         <p class=\"meta\">Cell: worst verdict over the scenario's runs, the number of incidents \
         (anomalies grouped per overlap interval, see each run's report) and of anomalies \
         (stale writes the fencing check rejected are not counted).</p>\n\
         <div class=\"scroll\"><table class=\"heat\"><thead><tr><th class=\"name\">strategy</th>",
    );
    for sc in &report.scenarios {
        let _ = write!(body, "<th>{}</th>", breakable(sc));
    }
    body.push_str("</tr></thead><tbody>\n");
    for st in &report.strategies {
        let _ = write!(body, "<tr><td class=\"name\">{}</td>", escape(st));
        for sc in &report.scenarios {
            match report.cell(st, sc) {
                Some(c) if !c.errors.is_empty() => {
                    let _ = write!(
                        body,
                        "<td class=\"cell-unknown\" data-strategy=\"{st}\" data-scenario=\"{sc}\" \
                         data-verdict=\"{v}\" data-error=\"{e}\" title=\"{e}\">failed to run</td>",
                        v = c.verdict,
                        st = escape(st),
                        sc = escape(sc),
                        e = escape(&c.errors.join("; ")),
                    );
                }
                Some(c) => {
                    let incidents = c.incidents.map_or_else(String::new, |i| {
                        format!("{i} incident{}<br>", if i == 1 { "" } else { "s" })
                    });
                    let _ = write!(
                        body,
                        "<td class=\"cell-{v}\" data-strategy=\"{st}\" data-scenario=\"{sc}\" \
                         data-verdict=\"{v}\" data-anomalies=\"{n}\" data-incidents=\"{ni}\">{badge}<br>\
                         {incidents}<span class=\"meta\">{n} {word}</span></td>",
                        v = c.verdict,
                        st = escape(st),
                        sc = escape(sc),
                        n = c.anomalies,
                        ni = c.incidents.map_or_else(String::new, |i| i.to_string()),
                        badge = verdict_badge(c.verdict),
                        word = if c.anomalies == 1 {
                            "anomaly"
                        } else {
                            "anomalies"
                        },
                    );
                }
                None => body.push_str("<td class=\"cell-none\">not run</td>"),
            }
        }
        body.push_str("</tr>\n");
    }
    body.push_str("</tbody></table></div></section>\n");

    body.push_str("<section id=\"bars\"><h2>Latency, throughput and availability</h2>\n");
    for p in plots {
        let note = if p.stem == "comparison-availability" {
            format!("<p class=\"meta definition\">{AVAILABILITY_DEFINITION}</p>\n")
        } else if p.stem == "comparison-latency" {
            "<p class=\"meta definition\">Latency of successful acquires. The axis is \
             logarithmic (each grid step is ten times the last), so a p50 of a fraction of a \
             millisecond stays visible next to a p99 of seconds.</p>\n"
                .to_string()
        } else {
            String::new()
        };
        let _ = writeln!(
            body,
            "<figure class=\"plot\" data-plot=\"{stem}\">\n{}\n<figcaption>{} — also saved as \
             <code>{stem}.svg</code> and <code>{stem}.png</code>.</figcaption>\n</figure>\n{note}",
            p.svg,
            escape(&p.title),
            stem = escape(&p.stem),
        );
    }
    body.push_str("</section>\n");

    for b in &report.baselines {
        body.push_str(&baseline_html(b).into_string());
    }

    body.push_str(
        "<section id=\"numbers\"><h2>Numbers</h2>\n<div class=\"scroll\"><table><thead><tr><th class=\"name\">run</th>\
         <th class=\"name\">scenario</th><th class=\"name\">strategy</th><th>verdict</th><th>incidents</th><th>anomalies</th>\
         <th>throughput (ops/s)</th><th>acquire p50</th><th>acquire p99</th><th>availability</th>\
         <th>faults</th><th>seed</th></tr></thead><tbody>\n",
    );
    for r in ordered_rows(report) {
        let _ = writeln!(
            body,
            "<tr data-run=\"{run}\" data-strategy=\"{st}\" data-throughput-ops-s=\"{thr:.3}\" \
             data-acquire-p50-us=\"{p50}\" data-acquire-p99-us=\"{p99}\">\
             <td class=\"name\"><code>{run}</code></td><td class=\"name\">{sc}</td><td class=\"name\">{st}</td>\
             <td>{badge}</td><td>{inc}</td><td>{an}</td><td>{thr_h}</td><td>{p50_h}</td><td>{p99_h}</td><td>{av}</td>\
             <td>{f}</td><td>{seed}</td></tr>",
            run = escape(&r.run_id),
            sc = escape(&r.scenario),
            st = escape(&r.strategy),
            inc = r.incidents.map_or_else(|| "—".to_string(), |i| i.to_string()),
            badge = match &r.error {
                Some(e) => format!("<span class=\"regressed\" title=\"{0}\">failed: {0}</span>", escape(e)),
                None => verdict_badge(r.verdict),
            },
            an = r.anomalies,
            thr = r.throughput_ops_s,
            thr_h = ops(r.throughput_ops_s),
            p50 = r.acquire_p50_us,
            p99 = r.acquire_p99_us,
            p50_h = latency(r.acquire_p50_us),
            p99_h = latency(r.acquire_p99_us),
            av = percent(r.availability),
            f = r.faults_injected,
            seed = r.seed.map_or_else(|| "—".to_string(), |s| s.to_string()),
        );
    }
    body.push_str("</tbody></table></div></section>\n<footer>Written by lockbench; also exported as \
                   <code>comparison.json</code>, <code>comparison.csv</code> and <code>comparison.md</code>. \
                   Self-contained: no scripts, no network.</footer>\n");
    page("lockbench comparison", &body)
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
