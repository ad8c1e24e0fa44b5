//! The per-run report: `report.html` (self-contained, plots inlined as SVG, each strategy's
//! client timeline and incidents) plus `percentiles.{svg,png}`, `timeline-<strategy>.{svg,png}`,
//! `report.json`, `report.csv`, `report.md` and `report.junit.xml`, all in the run directory.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::baseline::BaselineComparison;
use super::export::{exporters, RunReport};
use super::incidents::incidents_html;
use super::input::{AnomalyKind, AnomalyMark, FaultMark, ReportInput};
use super::lanes::{self, Lanes};
use super::lanes_svg::{self, incident_anchor, LanesView, LANES_SCRIPT};
use super::spectrum::SpectrumFigure;
use super::timeline::{TimelineFigure, MAX_MARKS};
use crate::report::common::export::{write_all, Exporter};
use crate::report::common::figure::{file_safe, render, RenderedPlot};
use crate::report::common::html::{
    change, escape, latency, ops, page_with_script, percent, verdict_badge,
};
use crate::report::common::write::check_output_dir;
use crate::report::error::ReportError;

/// Anomaly details listed in the HTML per strategy (the plots and counts cover the rest).
const MAX_LISTED: usize = 50;

/// The files a per-run report wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReportFiles {
    /// `report.html`.
    pub html: PathBuf,
    /// `report.json`, `report.csv`, `report.md`, `report.junit.xml`.
    pub exports: Vec<PathBuf>,
    /// Every plot, `.svg` and `.png`.
    pub plots: Vec<PathBuf>,
}

/// A strategy's client timeline: drawn from its history, or why it could not be.
type LanesOrWhy = Result<Lanes, String>;

/// `report.html`: the page, with the plots and client timelines drawn for it.
struct Page<'p> {
    plots: &'p [RenderedPlot],
    lanes: &'p [LanesOrWhy],
    x_max: &'p [f64],
}

impl Exporter<RunReport<'_>> for Page<'_> {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, r: &RunReport) -> Result<String, ReportError> {
        Ok(html_page(
            r.input, self.plots, self.lanes, self.x_max, r.baseline,
        ))
    }
}

/// Writes the per-run report into `dir` (normally `results/<run-id>/`). The client timelines
/// are read from `dir/<strategy>/history.jsonl` (a strategy without one gets a note instead).
///
/// # Errors
/// [`ReportError::NotFound`] / [`ReportError::NotADirectory`] before anything is drawn;
/// then [`ReportError::Plot`] or [`ReportError::Write`].
pub fn write_run_report(
    dir: &Path,
    input: &ReportInput,
    baseline: Option<&BaselineComparison>,
) -> Result<RunReportFiles, ReportError> {
    check_output_dir(dir)?;
    let lanes = read_lanes(dir, input);
    let (plots, x_max) = draw_plots(input, Some(dir), &lanes)?;
    let page = Page {
        plots: &plots,
        lanes: &lanes,
        x_max: &x_max,
    };
    let text = exporters();
    let list: Vec<&dyn Exporter<RunReport>> = std::iter::once(&page as &dyn Exporter<RunReport>)
        .chain(text.iter().map(|e| e as &dyn Exporter<RunReport>))
        .collect();
    let mut exports = write_all(dir, &RunReport { input, baseline }, &list)?;
    let html = exports.remove(0);
    let plots = plots
        .iter()
        .flat_map(|p| ["svg", "png"].map(|ext| dir.join(format!("{}.{ext}", p.stem))))
        .collect();
    Ok(RunReportFiles {
        html,
        exports,
        plots,
    })
}

/// The report page as a string, plots drawn in memory (nothing written, no history read: the
/// client timelines say so).
///
/// # Errors
/// [`ReportError::Plot`] or [`ReportError::Font`].
pub fn render_run_html(
    input: &ReportInput,
    baseline: Option<&BaselineComparison>,
) -> Result<String, ReportError> {
    let lanes: Vec<LanesOrWhy> = input
        .summary
        .strategies
        .iter()
        .map(|_| Err("rendered without its run directory: no history was read".to_string()))
        .collect();
    let (plots, x_max) = draw_plots(input, None, &lanes)?;
    Ok(html_page(input, &plots, &lanes, &x_max, baseline))
}

/// Each strategy's lanes from `dir/<strategy>/history.jsonl`.
fn read_lanes(dir: &Path, input: &ReportInput) -> Vec<LanesOrWhy> {
    input
        .summary
        .strategies
        .iter()
        .map(|s| {
            let path = dir.join(&s.strategy).join("history.jsonl");
            if s.strategy.is_empty() || !path.is_file() {
                return Err(format!(
                    "no {}/history.jsonl: the run recorded no history for this strategy \
                     (--no-audit, or it failed before starting)",
                    s.strategy
                ));
            }
            let incidents = input
                .verdict_for(&s.strategy)
                .map_or(&[][..], |v| v.incidents.as_slice());
            let faults: Vec<&FaultMark> = input
                .fault_windows
                .iter()
                .filter(|f| f.applies_to(&s.strategy))
                .collect();
            lanes::load(&path, incidents, &faults)
                .map_err(|e| format!("the history could not be read: {e}"))
        })
        .collect()
}

fn draw_plots(
    input: &ReportInput,
    dir: Option<&Path>,
    lanes: &[LanesOrWhy],
) -> Result<(Vec<RenderedPlot>, Vec<f64>), ReportError> {
    let names: Vec<&str> = input
        .summary
        .strategies
        .iter()
        .map(|s| s.strategy.as_str())
        .collect();
    let color_of = |name: &str| names.iter().position(|n| *n == name).unwrap_or(names.len());
    let mut plots = Vec::new();
    let mut x_max = Vec::new();
    let title = "Acquire latency by percentile".to_string();
    plots.push(render(
        &SpectrumFigure {
            title: title.clone(),
            series: &input.percentiles,
            color_of: &color_of,
        },
        "percentiles",
        &title,
        dir,
    )?);
    for (i, s) in input.summary.strategies.iter().enumerate() {
        let anomalies = input
            .verdict_for(&s.strategy)
            .map_or(&[][..], |v| v.anomalies.as_slice());
        let title = format!(
            "{}: acquire p99, throughput and anomalies over time ({})",
            s.strategy,
            input.verdict_of(&s.strategy)
        );
        let fig = TimelineFigure {
            title: title.clone(),
            timeline: &s.timeline,
            faults: input
                .fault_windows
                .iter()
                .filter(|f| f.applies_to(&s.strategy))
                .collect(),
            anomalies,
            color: color_of(&s.strategy),
            min_x_max: lanes
                .get(i)
                .and_then(|l| l.as_ref().ok())
                .map_or(0.0, |l| l.end_s),
        };
        x_max.push(fig.x_max());
        plots.push(render(
            &fig,
            &format!("timeline-{}", file_safe(&s.strategy)),
            &title,
            dir,
        )?);
    }
    Ok((plots, x_max))
}

fn figure(plot: &RenderedPlot) -> String {
    format!(
        "<figure class=\"plot\" data-plot=\"{stem}\">\n{svg}\n<figcaption>{title} — also saved as \
         <code>{stem}.svg</code> and <code>{stem}.png</code>.</figcaption>\n</figure>\n",
        stem = escape(&plot.stem),
        svg = plot.svg,
        title = escape(&plot.title),
    )
}

/// The summary table's incidents cell: safety incidents, and the anomaly count beside it.
fn incidents_cell(input: &ReportInput, strategy: &str) -> (String, String) {
    let Some(v) = input.verdict_for(strategy) else {
        return (String::new(), "—".to_string());
    };
    match v.safety_incidents() {
        Some(n) => {
            let pairs: u32 = v
                .incidents
                .iter()
                .filter(|i| i.safety)
                .map(|i| i.pairs)
                .sum();
            (
                n.to_string(),
                if n == 0 {
                    "0".to_string()
                } else {
                    format!(
                        "<a href=\"#{}\">{n}</a> <span class=\"meta\">({pairs} pair{})</span>",
                        incident_anchor(
                            strategy,
                            v.incidents.iter().find(|i| i.safety).map_or(1, |i| i.id)
                        ),
                        if pairs == 1 { "" } else { "s" }
                    )
                },
            )
        }
        None => (String::new(), "—".to_string()),
    }
}

fn html_page(
    input: &ReportInput,
    plots: &[RenderedPlot],
    lanes: &[LanesOrWhy],
    x_max: &[f64],
    baseline: Option<&BaselineComparison>,
) -> String {
    let s = &input.summary;
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header><h1>lockbench run <code id=\"run-id\">{}</code></h1>\n\
         <p class=\"meta\">scenario <b>{}</b> · status <b>{:?}</b> · started {} · finished {} · \
         seed {} · lockbench {}</p></header>",
        escape(&s.run_id),
        escape(input.scenario_name()),
        s.status,
        escape(&s.started_at),
        escape(s.finished_at.as_deref().unwrap_or("—")),
        input
            .seed()
            .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
        escape(&s.lockbench_version),
    );
    if let Some(err) = &s.error {
        let _ = writeln!(
            body,
            "<p class=\"regressed\">Run failed: {}</p>",
            escape(err)
        );
    }

    body.push_str(
        "<section id=\"summary\"><h2>Summary</h2>\n<div class=\"scroll\"><table class=\"summary\">\n<thead><tr>\
         <th class=\"name\">strategy</th><th>verdict</th><th>incidents</th><th>anomalies</th>\
         <th>stale writes rejected</th><th>throughput (ops/s)</th><th>acquire p50</th>\
         <th>acquire p99</th><th>availability</th><th>acquired</th><th>errors</th></tr></thead>\n<tbody>\n",
    );
    for st in &s.strategies {
        let verdict = input.verdict_of(&st.strategy);
        let anomalies = input.anomaly_total_of(&st.strategy);
        let rejected = input
            .verdict_for(&st.strategy)
            .map_or(0, |v| v.count(AnomalyKind::StaleWriteRejected));
        let (incidents_attr, incidents) = incidents_cell(input, &st.strategy);
        let badge = match input.strategy_errors.get(&st.strategy) {
            Some(e) => format!(
                "<span class=\"regressed\" data-error=\"{0}\">failed to run: {0}</span>",
                escape(e)
            ),
            None => verdict_badge(verdict),
        };
        let _ = writeln!(
            body,
            "<tr data-strategy=\"{name}\" data-verdict=\"{v}\" data-anomalies=\"{anomalies}\" \
             data-incidents=\"{incidents_attr}\" \
             data-throughput-ops-s=\"{thr:.3}\" data-acquire-p50-us=\"{p50}\" \
             data-acquire-p99-us=\"{p99}\" data-acquired=\"{acq}\">\
             <td class=\"name\">{name}</td><td>{badge}</td><td>{incidents}</td><td>{anomalies}</td><td>{rejected}</td>\
             <td>{thr_h}</td><td>{p50_h}</td><td>{p99_h}</td><td>{avail}</td><td>{acq}</td><td>{err}</td></tr>",
            name = escape(&st.strategy),
            v = verdict,
            thr = st.throughput_ops_s,
            thr_h = ops(st.throughput_ops_s),
            p50 = st.acquire_ok.p50_us,
            p99 = st.acquire_ok.p99_us,
            p50_h = latency(st.acquire_ok.p50_us),
            p99_h = latency(st.acquire_ok.p99_us),
            avail = percent(input.availability_of(st)),
            acq = st.acquired,
            err = st.errors,
        );
    }
    body.push_str("</tbody></table></div>\n");
    body.push_str(
        "<p class=\"meta\">Incidents: anomalies grouped as a reader sees them — one per interval \
         in which a resource had more than one holder (or per lone stale write, lost update, token \
         duplicate), with the pairs of clients that held at once beside it. Anomalies: the \
         checker's per-rule count, as before.</p>\n",
    );
    let _ = writeln!(
        body,
        "<p class=\"meta definition\">{}</p>",
        crate::report::common::html::AVAILABILITY_DEFINITION
    );
    body.push_str(&counts_table(input));
    body.push_str("</section>\n");

    if let Some(b) = baseline {
        body.push_str(&baseline_html(b));
    }

    body.push_str("<section id=\"faults\"><h2>Faults injected</h2>\n");
    if input.fault_windows.is_empty() {
        body.push_str("<p class=\"warn\">No faults were injected in this run: it measures the happy path only.</p>\n");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table><thead><tr><th class=\"name\">fault</th><th class=\"name\">targets</th>\
             <th>start (s)</th><th>end (s)</th><th class=\"name\">strategy</th><th class=\"name\">detail</th></tr></thead><tbody>\n",
        );
        for f in &input.fault_windows {
            let _ = writeln!(
                body,
                "<tr><td class=\"name\">{}</td><td class=\"name\">{}</td><td>{:.2}</td><td>{:.2}</td><td class=\"name\">{}</td><td class=\"name\">{}</td></tr>",
                escape(&f.window.kind),
                escape(&f.window.targets.join(", ")),
                f.start_s(),
                f.end_s(),
                escape(f.strategy.as_deref().unwrap_or("all")),
                escape(&f.window.detail),
            );
        }
        body.push_str("</tbody></table></div>\n");
    }
    body.push_str("</section>\n");

    body.push_str("<section id=\"latency\"><h2>Acquire latency percentile spectrum</h2>\n");
    if input.percentiles.is_empty() {
        body.push_str("<p class=\"warn\">No latency spectra were recorded for this run.</p>\n");
    }
    if let Some(p) = plots.first() {
        body.push_str(&figure(p));
    }
    body.push_str(
        "</section>\n<section id=\"timelines\"><h2>Over time: latency, throughput, faults, clients and incidents</h2>\n\
         <p class=\"meta\">Per strategy: the acquire p99 (log scale), throughput and anomalies per \
         second, then the client timeline on the same time axis, then its incidents with their \
         witnesses. Shaded bands are fault windows. Red triangles are anomalies, blue ones are \
         stale writes the fencing check rejected.</p>\n",
    );
    for (i, st) in s.strategies.iter().enumerate() {
        let _ = writeln!(
            body,
            "<div class=\"strategy-time\" id=\"time-{}\"><h3>{}</h3>",
            escape(&file_safe(&st.strategy)),
            escape(&st.strategy)
        );
        if let Some(e) = input.strategy_errors.get(&st.strategy) {
            let _ = writeln!(
                body,
                "<p class=\"regressed\">{} failed to run: {}</p>",
                escape(&st.strategy),
                escape(e)
            );
        }
        if let Some(p) = plots.get(i + 1) {
            body.push_str(&figure(p));
        }
        let empty = Vec::new();
        let incidents = input
            .verdict_for(&st.strategy)
            .map_or(&empty, |v| &v.incidents);
        match lanes.get(i) {
            Some(Ok(l)) => {
                let faults: Vec<&FaultMark> = input
                    .fault_windows
                    .iter()
                    .filter(|f| f.applies_to(&st.strategy))
                    .collect();
                body.push_str(&lanes_svg::render(&LanesView {
                    strategy: &st.strategy,
                    lanes: l,
                    faults: &faults,
                    incidents,
                    x_max: x_max.get(i).copied().unwrap_or(l.end_s),
                }));
            }
            Some(Err(why)) => {
                let _ = writeln!(
                    body,
                    "<p class=\"meta\">No client timeline: {}.</p>",
                    escape(why)
                );
            }
            None => {}
        }
        let harness = input.harness_notes.get(&st.strategy).map(String::as_str);
        match input.verdict_for(&st.strategy) {
            Some(v) if !v.incidents.is_empty() => body.push_str(&incidents_html(v, harness)),
            _ => {
                if let Some(note) = harness {
                    let _ = writeln!(body, "<p class=\"warn harness\">{}</p>", escape(note));
                }
            }
        }
        body.push_str("</div>\n");
    }
    body.push_str("</section>\n");
    body.push_str(&anomaly_list(input));
    let _ = writeln!(
        body,
        "<footer>Written by lockbench {} from <code>summary.json</code>, each strategy's \
         <code>checker.json</code> and <code>history.jsonl</code>; also exported as \
         <code>report.json</code>, <code>report.csv</code> and <code>report.md</code>. \
         Self-contained: one small inline script (zoom and pan of the client timelines), no network.</footer>",
        escape(&s.lockbench_version)
    );
    page_with_script(
        &format!("lockbench run {}", s.run_id),
        &body,
        Some(LANES_SCRIPT),
    )
}

fn counts_table(input: &ReportInput) -> String {
    let kinds: BTreeSet<AnomalyKind> = input.verdicts.iter().flat_map(|v| v.kinds_seen()).collect();
    if kinds.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<div class=\"scroll\"><table class=\"counts\"><thead><tr><th class=\"name\">strategy</th><th>incidents</th>",
    );
    for k in &kinds {
        let _ = write!(out, "<th>{}</th>", escape(&k.to_string()));
    }
    out.push_str("</tr></thead><tbody>\n");
    for v in &input.verdicts {
        let _ = write!(
            out,
            "<tr><td class=\"name\">{}</td><td data-kind=\"incidents\">{}</td>",
            escape(&v.strategy),
            if v.incidents_known {
                v.incidents.len().to_string()
            } else {
                "—".to_string()
            }
        );
        for k in &kinds {
            let _ = write!(
                out,
                "<td data-kind=\"{}\">{}</td>",
                escape(&k.to_string()),
                v.count(*k)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// Anomalies not shown as incidents: liveness findings, and every anomaly of a checker
/// report written before incidents existed.
fn anomaly_list(input: &ReportInput) -> String {
    let listed: Vec<(&str, Vec<&AnomalyMark>)> = input
        .verdicts
        .iter()
        .map(|v| {
            let marks = v
                .anomalies
                .iter()
                .filter(|a| {
                    !v.incidents_known
                        || matches!(
                            a.kind,
                            AnomalyKind::Unavailable | AnomalyKind::StuckResource
                        )
                })
                .collect::<Vec<_>>();
            (v.strategy.as_str(), marks)
        })
        .filter(|(_, m)| !m.is_empty())
        .collect();
    if listed.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"anomaly-details\"><h2>Other anomalies</h2>\n<p class=\"meta\">Liveness \
         findings (and, for checker files written before incidents existed, every anomaly).</p>\n",
    );
    for (strategy, marks) in listed {
        let _ = writeln!(out, "<h3>{}</h3><ul class=\"anomalies\">", escape(strategy));
        for a in marks.iter().take(MAX_LISTED) {
            let clients: Vec<String> = a.clients.iter().map(|c| format!("c{c}")).collect();
            let _ = writeln!(
                out,
                "<li><b>{}</b> at {:.3} s, clients {}: {}</li>",
                escape(&a.kind.to_string()),
                a.time_s,
                escape(&clients.join(", ")),
                escape(&a.detail)
            );
        }
        if marks.len() > MAX_LISTED {
            let _ = writeln!(
                out,
                "<li>… and {} more (the plot marks up to {MAX_MARKS}).</li>",
                marks.len() - MAX_LISTED
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

/// The baseline section of a report page.
pub(crate) fn baseline_html(b: &BaselineComparison) -> String {
    let mut out = format!(
        "<section class=\"baseline\" id=\"baseline-{}\"><h2><code>{}</code> compared with baseline <code>{}</code></h2>\n<p class=\"{}\">{}</p>\n\
         <table><thead><tr><th class=\"name\">strategy</th><th>p99 before</th><th>p99 now</th>\
         <th>p99 change</th><th>throughput before</th><th>throughput now</th><th>throughput change</th>\
         </tr></thead><tbody>\n",
        escape(&b.current_run),
        escape(&b.current_run),
        escape(&b.baseline_run),
        if b.has_regressions() { "regressed" } else { "improved" },
        if b.has_regressions() {
            "Regressions found: p99 more than 10% worse or throughput more than 10% lower."
        } else {
            "No regression beyond 10% in p99 or throughput."
        }
    );
    for r in &b.rows {
        let class = |bad: bool| if bad { " class=\"regressed\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr data-baseline-strategy=\"{name}\" data-p99-regressed=\"{}\" data-throughput-regressed=\"{}\">\
             <td class=\"name\">{name}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>",
            r.p99_regressed,
            r.throughput_regressed,
            latency(r.p99_before_us),
            latency(r.p99_after_us),
            class(r.p99_regressed),
            change(r.p99_change),
            ops(r.throughput_before),
            ops(r.throughput_after),
            class(r.throughput_regressed),
            change(r.throughput_change),
            name = escape(&r.strategy),
        );
    }
    out.push_str("</tbody></table>\n");
    if !b.unmatched.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"meta\">In only one of the two runs: {}.</p>",
            escape(&b.unmatched.join(", "))
        );
    }
    out.push_str("</section>\n");
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::run::export::tests::sample_input;

    #[test]
    fn sparse_input_still_renders_every_plot() {
        // No timelines, no spectra, no faults: plots must still draw (empty axes).
        let mut input = sample_input("sparse");
        input.summary.strategies[0].strategy = "a b<c>".into();
        let html = render_run_html(&input, None).unwrap();
        assert_eq!(
            html.matches("<svg").count(),
            1 + input.summary.strategies.len()
        );
        assert!(html.contains("data-strategy=\"a b&lt;c&gt;\""));
        assert!(html.contains("data-acquire-p99-us=\"2000\""));
        assert!(html.contains("No faults were injected"));
        assert!(html.contains("No client timeline: rendered without its run directory"));
        assert_eq!(html.matches("<script").count(), 1, "only the zoom script");
        assert!(!html.contains("http://") || !html.contains("src=\"http"));
    }

    #[test]
    fn missing_output_dir_fails_before_drawing() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        let err = write_run_report(&gone, &sample_input("x"), None).unwrap_err();
        assert!(matches!(err, ReportError::NotFound { .. }), "{err}");
        assert!(!gone.exists());
    }

    /// A chaos run whose second strategy failed before its clients started: its entry in
    /// summary.json has no name; the first strategy's harness was overloaded. Writes
    /// `summary.json` into `dir`.
    pub(crate) fn write_failed_strategy_run(dir: &std::path::Path) {
        let summary = serde_json::json!({
            "run_id": "r", "lockbench_version": "0", "started_at": "", "finished_at": null,
            "status": "failed", "error": "02 / single: cannot connect",
            "config": {"scenario": {"name": "02", "strategies": ["naive-del", "single"]}},
            "strategies": [
                {"strategy": "naive-del", "elapsed_s": 1.0, "attempts": 1, "acquired": 1,
                 "contended": 0, "errors": 0, "release_errors": 0, "throughput_ops_s": 1.0,
                 "acquire_ok": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "acquire_fail": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "release": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "critical_section": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "timeline": [], "error_samples": [],
                 "harness": {"overloaded": true, "note": "harness overloaded: lag 400 ms vs TTL 300 ms"}},
                {"strategy": "", "elapsed_s": 0.0, "attempts": 0, "acquired": 0,
                 "contended": 0, "errors": 0, "release_errors": 0, "throughput_ops_s": 0.0,
                 "acquire_ok": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "acquire_fail": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "release": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "critical_section": {"count": 0, "mean_us": 0.0, "p50_us": 0, "p90_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0},
                 "timeline": [], "error_samples": []}
            ]
        });
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_vec(&summary).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_strategy_that_failed_to_run_shows_by_name_with_its_error() {
        let tmp = tempfile::tempdir().unwrap();
        write_failed_strategy_run(tmp.path());
        let input = crate::report::load_run_dir(tmp.path()).unwrap();
        assert_eq!(input.summary.strategies[1].strategy, "single");
        assert_eq!(
            input.strategy_errors.get("single").map(String::as_str),
            Some("02 / single: cannot connect")
        );
        assert!(input.harness_notes["naive-del"].starts_with("harness overloaded"));
        let files = write_run_report(tmp.path(), &input, None).unwrap();
        let html = std::fs::read_to_string(&files.html).unwrap();
        assert!(html.contains("data-strategy=\"single\""), "row by name");
        assert!(html.contains("failed to run: 02 / single: cannot connect"));
        assert!(html.contains("class=\"warn harness\">harness overloaded: lag 400 ms"));
        for p in &files.plots {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.contains("-.") && !name.ends_with('-'), "{name}");
        }
        assert!(tmp.path().join("timeline-single.svg").is_file());
    }

    #[test]
    fn writes_every_file_into_the_run_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let files = write_run_report(tmp.path(), &sample_input("x"), None).unwrap();
        assert_eq!(files.plots.len(), 2 * 4);
        for p in files
            .plots
            .iter()
            .chain(&files.exports)
            .chain([&files.html])
        {
            assert!(p.is_file(), "{} missing", p.display());
        }
        let png = std::fs::read(tmp.path().join("percentiles.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}
