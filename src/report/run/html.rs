//! The per-run report: `report.html` (self-contained, plots inlined as SVG, each strategy's
//! client timeline and incidents) plus `percentiles.{svg,png}`, `timeline-<strategy>.{svg,png}`,
//! `report.json`, `report.csv`, `report.md` and `report.junit.xml`, all in the run directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped};

use super::baseline::{BaselineComparison, BaselineRow};
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
    change, latency, ops, page_with_script, percent, verdict_badge, AVAILABILITY_DEFINITION,
};
use crate::report::common::write::check_output_dir;
use crate::report::error::ReportError;
use crate::results::StrategySummary;

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

/// One rendered plot with its caption (the file names it was also saved as).
pub(crate) fn figure(plot: &RenderedPlot) -> Markup {
    html! {
        figure.plot data-plot=(plot.stem) {
            (PreEscaped(plot.svg.as_str()))
            figcaption {
                (plot.title) " — also saved as " code { (plot.stem) ".svg" } " and "
                code { (plot.stem) ".png" } "."
            }
        }
    }
}

/// The summary table's incidents cell: safety incidents (the `data-incidents` value), and the
/// cell's content, a link to the first one with the count of overlapping pairs.
fn incidents_cell(input: &ReportInput, strategy: &str) -> (String, Markup) {
    let none = || (String::new(), html! { "—" });
    let Some(v) = input.verdict_for(strategy) else {
        return none();
    };
    let Some(n) = v.safety_incidents() else {
        return none();
    };
    if n == 0 {
        return (n.to_string(), html! { "0" });
    }
    let pairs: u32 = v
        .incidents
        .iter()
        .filter(|i| i.safety)
        .map(|i| i.pairs)
        .sum();
    let first = v.incidents.iter().find(|i| i.safety).map_or(1, |i| i.id);
    let cell = html! {
        a href={ "#" (incident_anchor(strategy, first)) } { (n) }
        " "
        span.meta { "(" (pairs) " pair" @if pairs != 1 { "s" } ")" }
    };
    (n.to_string(), cell)
}

fn html_page(
    input: &ReportInput,
    plots: &[RenderedPlot],
    lanes: &[LanesOrWhy],
    x_max: &[f64],
    baseline: Option<&BaselineComparison>,
) -> String {
    let s = &input.summary;
    let body = html! {
        (run_header(input))
        (summary_section(input))
        @if let Some(b) = baseline { (baseline_html(b)) }
        (faults_section(input))
        (latency_section(input, plots))
        (timelines_section(input, plots, lanes, x_max))
        (anomaly_list(input))
        footer {
            "Written by lockbench " (s.lockbench_version) " from " code { "summary.json" }
            ", each strategy's " code { "checker.json" } " and " code { "history.jsonl" }
            "; also exported as " code { "report.json" } ", " code { "report.csv" } ", "
            code { "report.md" } " and " code { "report.junit.xml" } ". Self-contained: one small inline script (zoom and pan of \
            the client timelines), no network."
        }
    };
    page_with_script(
        &format!("lockbench run {}", s.run_id),
        &body.into_string(),
        Some(LANES_SCRIPT),
    )
}

/// The page header: run id, scenario, status, times, seed, version; the run's error if any.
fn run_header(input: &ReportInput) -> Markup {
    let s = &input.summary;
    html! {
        header {
            h1 { "lockbench run " code #run-id { (s.run_id) } }
            p.meta {
                "scenario " b { (input.scenario_name()) }
                " · status " b { (format!("{:?}", s.status)) }
                " · started " (s.started_at)
                " · finished " (s.finished_at.as_deref().unwrap_or("—"))
                " · seed " (input.seed().map_or_else(|| "unknown".to_string(), |v| v.to_string()))
                " · lockbench " (s.lockbench_version)
            }
        }
        @if let Some(err) = &s.error {
            p.regressed { "Run failed: " (err) }
        }
    }
}

/// The summary section: one row per strategy, what incidents and availability mean, and the
/// anomaly counts per kind.
fn summary_section(input: &ReportInput) -> Markup {
    html! {
        section #summary {
            h2 { "Summary" }
            div.scroll {
                table.summary {
                    thead {
                        tr {
                            th.name { "strategy" } th { "verdict" } th { "incidents" }
                            th { "anomalies" } th { "stale writes rejected" }
                            th { "throughput (ops/s)" } th { "acquire p50" } th { "acquire p99" }
                            th { "availability" } th { "acquired" } th { "errors" }
                        }
                    }
                    tbody {
                        @for st in &input.summary.strategies { (summary_row(input, st)) }
                    }
                }
            }
            p.meta {
                "Incidents: anomalies grouped as a reader sees them — one per interval in which \
                a resource had more than one holder (or per lone stale write, lost update, token \
                duplicate), with the pairs of clients that held at once beside it. Anomalies: the \
                checker's per-rule count, as before."
            }
            p.meta.definition { (AVAILABILITY_DEFINITION) }
            (counts_table(input))
        }
    }
}

/// One strategy's row of the summary table, its figures also as `data-*` attributes.
fn summary_row(input: &ReportInput, st: &StrategySummary) -> Markup {
    let anomalies = input.anomaly_total_of(&st.strategy);
    let rejected = input
        .verdict_for(&st.strategy)
        .map_or(0, |v| v.count(AnomalyKind::StaleWriteRejected));
    let (incidents_attr, incidents) = incidents_cell(input, &st.strategy);
    let verdict = input.verdict_of(&st.strategy);
    html! {
        tr data-strategy=(st.strategy) data-verdict=(verdict) data-anomalies=(anomalies)
            data-incidents=(incidents_attr)
            data-throughput-ops-s=(format!("{:.3}", st.throughput_ops_s))
            data-acquire-p50-us=(st.acquire_ok.p50_us) data-acquire-p99-us=(st.acquire_ok.p99_us)
            data-acquired=(st.acquired) {
            td.name { (st.strategy) }
            td {
                @match input.strategy_errors.get(&st.strategy) {
                    Some(e) => span.regressed data-error=(e) { "failed to run: " (e) },
                    None => (PreEscaped(verdict_badge(verdict))),
                }
            }
            td { (incidents) }
            td { (anomalies) }
            td { (rejected) }
            td { (ops(st.throughput_ops_s)) }
            td { (latency(st.acquire_ok.p50_us)) }
            td { (latency(st.acquire_ok.p99_us)) }
            td { (percent(input.availability_of(st))) }
            td { (st.acquired) }
            td { (st.errors) }
        }
    }
}

/// The faults section: every fault window, or that there were none.
fn faults_section(input: &ReportInput) -> Markup {
    html! {
        section #faults {
            h2 { "Faults injected" }
            @if input.fault_windows.is_empty() {
                p.warn { "No faults were injected in this run: it measures the happy path only." }
            } @else {
                div.scroll {
                    table {
                        thead {
                            tr {
                                th.name { "fault" } th.name { "targets" } th { "start (s)" }
                                th { "end (s)" } th.name { "strategy" } th.name { "detail" }
                            }
                        }
                        tbody {
                            @for f in &input.fault_windows {
                                tr {
                                    td.name { (f.window.kind) }
                                    td.name { (f.window.targets.join(", ")) }
                                    td { (format!("{:.2}", f.start_s())) }
                                    td { (format!("{:.2}", f.end_s())) }
                                    td.name { (f.strategy.as_deref().unwrap_or("all")) }
                                    td.name { (f.window.detail) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The latency section: the percentile spectrum of every strategy.
fn latency_section(input: &ReportInput, plots: &[RenderedPlot]) -> Markup {
    html! {
        section #latency {
            h2 { "Acquire latency percentile spectrum" }
            @if input.percentiles.is_empty() {
                p.warn { "No latency spectra were recorded for this run." }
            }
            @if let Some(p) = plots.first() { (figure(p)) }
        }
    }
}

/// The over-time section: per strategy its timeline figure, client timeline and incidents.
fn timelines_section(
    input: &ReportInput,
    plots: &[RenderedPlot],
    lanes: &[LanesOrWhy],
    x_max: &[f64],
) -> Markup {
    html! {
        section #timelines {
            h2 { "Over time: latency, throughput, faults, clients and incidents" }
            p.meta {
                "Per strategy: the acquire p99 (log scale), throughput and anomalies per second, \
                then the client timeline on the same time axis, then its incidents with their \
                witnesses. Shaded bands are fault windows. Red triangles are anomalies, blue ones \
                are stale writes the fencing check rejected."
            }
            @for (i, st) in input.summary.strategies.iter().enumerate() {
                (strategy_time(input, st, plots.get(i + 1), lanes.get(i), x_max.get(i).copied()))
            }
        }
    }
}

/// One strategy over time: its error, timeline figure, client timeline (or why there is
/// none), then its incidents (or the harness note).
fn strategy_time(
    input: &ReportInput,
    st: &StrategySummary,
    plot: Option<&RenderedPlot>,
    lanes: Option<&LanesOrWhy>,
    x_max: Option<f64>,
) -> Markup {
    let name = st.strategy.as_str();
    let verdict = input.verdict_for(name);
    let harness = input.harness_notes.get(name).map(String::as_str);
    let timeline = lanes.map(|l| match l {
        Ok(l) => {
            let faults: Vec<&FaultMark> = input
                .fault_windows
                .iter()
                .filter(|f| f.applies_to(name))
                .collect();
            lanes_svg::render(&LanesView {
                strategy: name,
                lanes: l,
                faults: &faults,
                incidents: verdict.map_or(&[][..], |v| v.incidents.as_slice()),
                x_max: x_max.unwrap_or(l.end_s),
            })
        }
        Err(why) => html! { p.meta { "No client timeline: " (why) "." } },
    });
    html! {
        div.strategy-time id={ "time-" (file_safe(name)) } {
            h3 { (name) }
            @if let Some(e) = input.strategy_errors.get(name) {
                p.regressed { (name) " failed to run: " (e) }
            }
            @if let Some(p) = plot { (figure(p)) }
            @if let Some(t) = timeline { (t) }
            @match verdict {
                Some(v) if !v.incidents.is_empty() => (incidents_html(v, harness)),
                _ => {
                    @if let Some(note) = harness { p.warn.harness { (note) } }
                }
            }
        }
    }
}

/// The anomaly counts per kind and strategy; empty when no kind was seen.
fn counts_table(input: &ReportInput) -> Markup {
    let kinds: BTreeSet<AnomalyKind> = input.verdicts.iter().flat_map(|v| v.kinds_seen()).collect();
    if kinds.is_empty() {
        return html! {};
    }
    html! {
        div.scroll {
            table.counts {
                thead {
                    tr {
                        th.name { "strategy" } th { "incidents" }
                        @for k in &kinds { th { (k) } }
                    }
                }
                tbody {
                    @for v in &input.verdicts {
                        tr {
                            td.name { (v.strategy) }
                            td data-kind="incidents" {
                                @if v.incidents_known { (v.incidents.len()) } @else { "—" }
                            }
                            @for k in &kinds { td data-kind=(k) { (v.count(*k)) } }
                        }
                    }
                }
            }
        }
    }
}

/// Anomalies not shown as incidents: liveness findings, and every anomaly of a checker
/// report written before incidents existed.
fn anomaly_list(input: &ReportInput) -> Markup {
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
        return html! {};
    }
    html! {
        section #anomaly-details {
            h2 { "Other anomalies" }
            p.meta {
                "Liveness findings (and, for checker files written before incidents existed, \
                every anomaly)."
            }
            @for (strategy, marks) in &listed {
                h3 { (strategy) }
                ul.anomalies {
                    @for a in marks.iter().take(MAX_LISTED) {
                        li {
                            b { (a.kind) } " at " (format!("{:.3}", a.time_s)) " s, clients "
                            (a.clients.iter().map(|c| format!("c{c}")).collect::<Vec<_>>().join(", "))
                            ": " (a.detail)
                        }
                    }
                    @if marks.len() > MAX_LISTED {
                        li {
                            "… and " (marks.len() - MAX_LISTED) " more (the plot marks up to "
                            (MAX_MARKS) ")."
                        }
                    }
                }
            }
        }
    }
}

/// The baseline section of a report page.
pub(crate) fn baseline_html(b: &BaselineComparison) -> Markup {
    let regressed = b.has_regressions();
    html! {
        section.baseline id={ "baseline-" (b.current_run) } {
            h2 {
                code { (b.current_run) } " compared with baseline " code { (b.baseline_run) }
            }
            p class=(if regressed { "regressed" } else { "improved" }) {
                @if regressed {
                    "Regressions found: p99 more than 10% worse or throughput more than 10% lower."
                } @else {
                    "No regression beyond 10% in p99 or throughput."
                }
            }
            table {
                thead {
                    tr {
                        th.name { "strategy" } th { "p99 before" } th { "p99 now" }
                        th { "p99 change" } th { "throughput before" } th { "throughput now" }
                        th { "throughput change" }
                    }
                }
                tbody { @for r in &b.rows { (baseline_row(r)) } }
            }
            @if !b.unmatched.is_empty() {
                p.meta { "In only one of the two runs: " (b.unmatched.join(", ")) "." }
            }
        }
    }
}

/// One strategy's row of the baseline table; a regressed change is marked.
fn baseline_row(r: &BaselineRow) -> Markup {
    let regressed = |bad: bool| bad.then_some("regressed");
    html! {
        tr data-baseline-strategy=(r.strategy) data-p99-regressed=(r.p99_regressed)
            data-throughput-regressed=(r.throughput_regressed) {
            td.name { (r.strategy) }
            td { (latency(r.p99_before_us)) }
            td { (latency(r.p99_after_us)) }
            td class=[regressed(r.p99_regressed)] { (change(r.p99_change)) }
            td { (ops(r.throughput_before)) }
            td { (ops(r.throughput_after)) }
            td class=[regressed(r.throughput_regressed)] { (change(r.throughput_change)) }
        }
    }
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
