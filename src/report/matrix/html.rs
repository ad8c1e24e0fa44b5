//! `matrix.html`, the answer first: the decision table (the decision per need, its rule and
//! each strategy's why), then the heat map strategies × faults (colour = damage rate of the cell's exposed
//! episodes, by the upper bound of its 95 % interval when none was damaging; text = damaging
//! of exposed with the interval, exposed of total, recovery p50, contended acquire p99, a link
//! to the first damaging incident's trial report), the uncontended probe beside the contended
//! p99, the claims agreement (contradictions flagged), acquire latency and throughput per cell
//! as inline SVG small multiples, what every fault did, and the trials with the harness
//! back-off history folded into a `<details>` element. Every heat-map
//! cell carries its figures as `data-*` attributes equal to `matrix.json`'s, so a test (or a
//! script) can read the page back.

use std::fmt::Write as _;

use maud::{html, Markup, PreEscaped};

use super::export::{
    agreement_word, cell_text, damage_text, heat_value, ms_text, probe_text, run_facts,
    setups_measured,
};
use crate::matrix::decision::Recommendation;
use crate::matrix::{CellRecord, MatrixReport};
use crate::report::common::html::{escape, latency, ops, page};

const PALETTE: [&str; 7] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

const EXTRA_STYLE: &str = "
body { max-width: 1560px; }
table.matrix td.cell { min-width: 6.5em; font-size: 0.76em; text-align: center; }
table.matrix td.cell b { white-space: nowrap; }
table.matrix td.cell small { display: block; color: #333; }
table.matrix td.notrun { background: #fafafa; color: #999; }
div.charts svg { border: 1px solid #e4e4e4; max-width: 100%; height: auto; }
table.matrix td.cell.contradicts { outline: 3px solid #b00020; outline-offset: -3px; }
table.matrix th small { display: block; font-weight: normal; color: #555; }
tr.contradicts td { background: #fbe3e3; font-weight: bold; }
p.answer { font-size: 1.05em; }
table.matrix th.name { min-width: 11em; overflow-wrap: normal; word-break: keep-all; }
details.thin summary { color: #7a5b00; cursor: pointer; }
";

/// Heat colour for a damage rate in [0, 1]: green (0) to red (1).
pub fn heat_colour(share: f64) -> String {
    let s = share.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * s).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(216.0, 239.0),
        mix(240.0, 154.0),
        mix(220.0, 154.0)
    )
}

/// The claims contradicted in a cell (`05a, 05b`), if any.
fn contradicted(r: &MatrixReport, c: &CellRecord) -> Vec<String> {
    r.claims
        .iter()
        .filter(|a| a.strategy == c.strategy && a.fault == c.fault && a.agrees == Some(false))
        .map(|a| a.claim.clone())
        .collect()
}

/// One heat-map cell, its figures as `data-*` attributes.
fn heat_cell(r: &MatrixReport, c: &CellRecord) -> String {
    let e = &c.episodes;
    let against = contradicted(r, c);
    let (mut class, style) = match heat_value(c) {
        _ if c.trials.is_empty() => ("cell notrun".to_string(), String::new()),
        None => (
            "cell".to_string(),
            " style=\"background:#e6e6e6\"".to_string(),
        ),
        Some(v) => (
            "cell".to_string(),
            format!(" style=\"background:{}\"", heat_colour(v)),
        ),
    };
    if !against.is_empty() {
        class.push_str(" contradicts");
    }
    let mut inner = format!("<b>{}</b>", escape(&damage_text(c)));
    if !c.trials.is_empty() {
        let _ = write!(
            inner,
            "<small>exposed {}/{} · rec p50 {}</small><small>contended p99 {}</small>",
            e.exposed,
            e.total,
            escape(&ms_text(e.recovery_p50_ms)),
            if c.trials_checked == 0 {
                "-".to_string()
            } else {
                latency(c.acquire_p99_us)
            }
        );
    }
    if e.unsafe_belief > 0 || e.stuck > 0 {
        let _ = write!(
            inner,
            "<small>unsafe belief {} · stuck {}</small>",
            e.unsafe_belief, e.stuck
        );
    }
    if let Some(i) = &e.first_incident {
        let _ = write!(
            inner,
            "<small><a class=\"incident\" href=\"{}/report.html\">first damage: {} (t{}, episode {}, {:.3} s)</a></small>",
            escape(&i.dir),
            escape(&i.kind.to_string()),
            i.trial,
            i.episode,
            i.time_us as f64 / 1e6
        );
    }
    if let Some(s) = r.shortfall(&c.strategy, &c.fault) {
        let _ = write!(
            inner,
            "<small class=\"warn\">short: {}</small>",
            escape(&s.reason)
        );
    }
    if !against.is_empty() {
        let _ = write!(
            inner,
            "<small class=\"regressed\">contradicts claim {}</small>",
            escape(&against.join(", "))
        );
    }
    let rate = e.damage_rate;
    let probe = r.probe(&c.strategy);
    format!(
        "<td class=\"{class}\"{style} title=\"{}\" data-strategy=\"{}\" data-fault=\"{}\" data-topology=\"{}\" \
         data-verdict=\"{}\" data-trials=\"{}\" data-trials-run=\"{}\" data-invalid=\"{}\" data-unknown=\"{}\" data-sections=\"{}\" \
         data-stale-writes-accepted=\"{}\" data-lost-updates=\"{}\" data-p50-us=\"{}\" data-p99-us=\"{}\" \
         data-throughput=\"{:.3}\" data-episodes=\"{}\" data-exposed=\"{}\" data-damaging=\"{}\" data-damage-high=\"{}\" \
         data-unsafe-belief=\"{}\" data-stuck=\"{}\" data-recovery-p50-ms=\"{}\" data-uncontended-p50-us=\"{}\" \
         data-uncontended-p99-us=\"{}\" data-contradicts=\"{}\">{inner}</td>",
        escape(&c.what),
        escape(&c.strategy),
        escape(&c.fault),
        escape(&c.topology),
        escape(&c.verdict),
        c.trials_checked,
        c.trials.len(),
        c.invalid,
        c.unknown,
        c.sections,
        c.stale_writes_accepted,
        c.lost_updates,
        c.acquire_p50_us,
        c.acquire_p99_us,
        c.throughput_ops_s,
        e.total,
        e.exposed,
        e.damaging,
        rate.map_or(String::new(), |i| format!("{:.6}", i.high)),
        e.unsafe_belief,
        e.stuck,
        e.recovery_p50_ms.map_or(String::new(), |v| format!("{v:.3}")),
        probe.map_or(String::new(), |p| p.p50_us.to_string()),
        probe.map_or(String::new(), |p| p.p99_us.to_string()),
        escape(&against.join(",")),
    )
}

fn heat_map(r: &MatrixReport) -> String {
    let mut out = String::from(
        "<div class=\"scroll\"><table class=\"matrix heat\" id=\"heatmap\"><tr><th class=\"name\">strategy \\ fault</th>",
    );
    for f in &r.faults {
        let _ = write!(out, "<th>{}</th>", escape(&f.name));
    }
    out.push_str("</tr>\n");
    for s in &r.strategies {
        let _ = write!(
            out,
            "<tr><th class=\"name\">{}<small>uncontended acquire p50/p99: {}</small></th>",
            escape(s),
            escape(&probe_text(r, s))
        );
        for f in &r.faults {
            match r.cell(s, &f.name) {
                Some(c) => out.push_str(&heat_cell(r, c)),
                None => out.push_str("<td class=\"cell notrun\">-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    let _ = write!(
        out,
        "</table></div>\n<p class=\"legend\">Each cell: damaging of exposed episodes with the 95 % interval (Wilson; exact one-sided bound \
         \"&lt; x\" when none was damaging), exposed of all episodes, recovery p50 (from the heal, or the release of a holder that kept the lock past it → first successful acquire), the \
         contended acquire p99 (the matrix workload: {} clients queueing for {} resources) — the row header has the \
         uncontended p50/p99 (one client, no hold). Colour: the damage rate (green 0 → red 100 %), by the upper bound of \
         its interval when no episode was damaging, so few exposed episodes read warm; grey: no exposed episode; pale: \
         not run. A red outline marks a cell contradicting a claim; \"first damage\" opens that trial's report (its \
         timeline shows the incident). Hover a cell for what the fault did.</p>\n",
        r.workload.clients, r.workload.resources
    );
    out
}

fn probes_table(r: &MatrixReport) -> String {
    let mut out = String::from(
        "<table id=\"probes\"><tr><th class=\"name\">strategy</th><th class=\"name\">topology</th><th>servers</th>\
         <th>uncontended acquire p50</th><th>uncontended acquire p99</th><th>contended acquire p99 (worst cell)</th></tr>",
    );
    for s in &r.strategies {
        let contended = r
            .cells
            .iter()
            .filter(|c| &c.strategy == s && c.trials_checked > 0)
            .map(|c| c.acquire_p99_us)
            .max()
            .map_or("-".into(), latency);
        let p = r.probes.iter().find(|p| &p.strategy == s);
        let (topology, servers, p50, p99) = match p {
            Some(p) if p.error.is_none() => (
                p.topology.clone(),
                p.servers.to_string(),
                latency(p.p50_us),
                latency(p.p99_us),
            ),
            Some(p) => (
                p.topology.clone(),
                p.servers.to_string(),
                format!("not measured: {}", p.error.as_deref().unwrap_or_default()),
                "-".into(),
            ),
            None => ("-".into(), "-".into(), "not run".into(), "-".into()),
        };
        let _ = write!(
            out,
            "<tr data-strategy=\"{}\"><td class=\"name\">{}</td><td class=\"name\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(s),
            escape(s),
            escape(&topology),
            escape(&servers),
            escape(&p50),
            escape(&p99),
            escape(&contended)
        );
    }
    out.push_str("</table>");
    out
}

fn claims_table(r: &MatrixReport) -> String {
    if r.claims.is_empty() {
        return "<p>No claim scenario maps to a cell of this matrix.</p>".into();
    }
    let count = super::export::claims_count(r).unwrap_or_default();
    let mut out = format!("<p id=\"claims-count\"><b>{}.</b></p>", escape(&count));
    out.push_str(
        "<table id=\"claims\"><tr><th class=\"name\">claim</th><th class=\"name\">cell</th><th class=\"name\">the claim says</th>\
         <th class=\"name\">the cell shows</th><th class=\"name\">agreement</th></tr>",
    );
    for c in &r.claims {
        let row_class = if c.agrees == Some(false) {
            " class=\"contradicts\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr{row_class} data-claim=\"{}\" data-agrees=\"{}\"><td class=\"name\">{} <small>{}</small></td><td class=\"name\">{} × {}</td>\
             <td class=\"name\">{}</td><td class=\"name\">{}</td><td class=\"name\">{}</td></tr>",
            escape(&c.claim),
            c.agrees.map_or("", |a| if a { "true" } else { "false" }),
            escape(&c.claim),
            escape(&c.file),
            escape(&c.strategy),
            escape(&c.fault),
            escape(&c.says.to_string()),
            escape(&c.observed),
            agreement_word(c)
        );
    }
    out.push_str("</table>");
    out
}

/// Left edge of a small-multiples chart's plot area (the y labels are left of it), px.
const SM_LEFT: f64 = 70.0;
/// Top of the plot area, px.
const SM_TOP: f64 = 20.0;
/// Height of the plot area, px (fault names and the legend are below it).
const SM_PLOT_H: f64 = 180.0;

/// One small-multiples chart's shared y axis (`lo`..`hi`, log10 exponents when `log`) and
/// its size: one panel per fault, one bar per strategy.
struct Multiples<'r> {
    r: &'r MatrixReport,
    log: bool,
    lo: f64,
    hi: f64,
    panel_w: f64,
    width: f64,
    height: f64,
}

impl<'r> Multiples<'r> {
    /// The axis fitted to `values` (the finite, positive bar values).
    fn new(r: &'r MatrixReport, log: bool, values: &[f64]) -> Self {
        let max = values.iter().copied().fold(0.0, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        let (lo, hi) = if log {
            let lo = if values.is_empty() {
                0.0
            } else {
                min.log10().floor()
            };
            let hi = if values.is_empty() {
                1.0
            } else {
                max.log10().ceil().max(lo + 1.0)
            };
            (lo, hi)
        } else {
            (0.0, if max > 0.0 { max * 1.1 } else { 1.0 })
        };
        let n = r.strategies.len().max(1) as f64;
        let panel_w = (18.0 * n + 24.0).max(90.0);
        let width =
            (SM_LEFT + panel_w * r.faults.len() as f64 + 10.0).max(SM_LEFT + 130.0 * n + 10.0);
        Multiples {
            r,
            log,
            lo,
            hi,
            panel_w,
            width,
            height: SM_TOP + SM_PLOT_H + 70.0,
        }
    }

    /// `v`'s height as a share of the plot area, in [0, 1].
    fn scale(&self, v: f64) -> f64 {
        let x = if self.log { v.max(1e-9).log10() } else { v };
        ((x - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    /// The axis ticks: each power of ten on a log axis, else five even steps.
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            (self.lo as i32..=self.hi as i32)
                .map(|e| 10f64.powi(e))
                .collect()
        } else {
            (0..=4).map(|i| self.hi * f64::from(i) / 4.0).collect()
        }
    }
}

/// `v` with `d` decimals.
fn fixed(v: f64, d: usize) -> String {
    format!("{v:.d$}")
}

/// Small multiples: one panel per fault, one bar per strategy, one shared y axis.
/// `value` gives the bar height's value (`None` = no bar); `log` uses a log10 axis.
fn small_multiples(
    r: &MatrixReport,
    id: &str,
    label: &str,
    log: bool,
    value: impl Fn(&CellRecord) -> Option<f64>,
    fmt: impl Fn(f64) -> String,
) -> Markup {
    let values: Vec<f64> = r
        .cells
        .iter()
        .filter(|c| c.trials_checked > 0)
        .filter_map(&value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let m = Multiples::new(r, log, &values);
    let mid = fixed(SM_TOP + SM_PLOT_H / 2.0, 0);
    html! {
        svg xmlns="http://www.w3.org/2000/svg" id=(id)
            viewBox={ "0 0 " (fixed(m.width, 0)) " " (fixed(m.height, 0)) }
            width=(fixed(m.width, 0)) height=(fixed(m.height, 0))
            font-family="DejaVu Sans, sans-serif" font-size="10" role="img" aria-label=(label) {
            // Shared axis with ticks.
            @for t in m.ticks() {
                @let y = SM_TOP + SM_PLOT_H * (1.0 - m.scale(t));
                line x1=(SM_LEFT) x2=(fixed(m.width - 10.0, 0)) y1=(fixed(y, 1)) y2=(fixed(y, 1))
                    stroke="#e0e0e0" {}
                text x=(fixed(SM_LEFT - 4.0, 0)) y=(fixed(y + 3.0, 1)) text-anchor="end" { (fmt(t)) }
            }
            text x="12" y=(mid) transform={ "rotate(-90 12 " (mid) ")" } text-anchor="middle" {
                (label)
            }
            @for (fi, f) in r.faults.iter().enumerate() {
                (fault_panel(&m, fi, &f.name, &value, &fmt))
            }
            (multiples_legend(r))
        }
    }
}

/// The panel of fault `fi`: its left rule, its name, and one bar per strategy that ran.
fn fault_panel(
    m: &Multiples,
    fi: usize,
    fault: &str,
    value: &impl Fn(&CellRecord) -> Option<f64>,
    fmt: &impl Fn(f64) -> String,
) -> Markup {
    let x0 = SM_LEFT + m.panel_w * fi as f64;
    let bars = m.r.strategies.iter().enumerate().filter_map(|(si, s)| {
        let c = m.r.cell(s, fault).filter(|c| c.trials_checked > 0)?;
        let v = value(c)?;
        Some((si, s, v, SM_PLOT_H * m.scale(v)))
    });
    html! {
        line x1=(fixed(x0, 1)) x2=(fixed(x0, 1)) y1=(SM_TOP) y2=(fixed(SM_TOP + SM_PLOT_H, 0))
            stroke="#bbb" {}
        text x=(fixed(x0 + m.panel_w / 2.0, 1)) y=(fixed(SM_TOP + SM_PLOT_H + 14.0, 0))
            text-anchor="middle" { (fault) }
        @for (si, s, v, h) in bars {
            rect x=(fixed(x0 + 12.0 + 18.0 * si as f64, 1)) y=(fixed(SM_TOP + SM_PLOT_H - h, 1))
                width="14" height=(fixed(h, 1)) fill=(PALETTE[si % PALETTE.len()])
                data-strategy=(s) data-fault=(fault) data-value=(v) {
                title { (s) " × " (fault) ": " (fmt(v)) }
            }
        }
    }
}

/// The legend under the panels: each strategy's colour.
fn multiples_legend(r: &MatrixReport) -> Markup {
    let y = SM_TOP + SM_PLOT_H + 36.0;
    html! {
        @for (si, s) in r.strategies.iter().enumerate() {
            @let x = SM_LEFT + 130.0 * si as f64;
            rect x=(fixed(x, 0)) y=(fixed(y - 9.0, 0)) width="10" height="10"
                fill=(PALETTE[si % PALETTE.len()]) {}
            text x=(fixed(x + 14.0, 0)) y=(fixed(y, 0)) { (s) }
        }
    }
}

/// One need's answer; its thin-evidence note in brief (`brief`, grouped by strategy and
/// fault as the terminal prints it), every cell of it one click away.
pub(crate) fn recommendation(r: &Recommendation, brief: Option<String>) -> String {
    let mut out = format!(
        "<h3>{} lock</h3><p class=\"definition\">{}</p><p class=\"answer\" data-need=\"{}\" data-recommended=\"{}\"><b>{}</b></p>",
        escape(&r.need),
        escape(&r.rule),
        escape(&r.need),
        escape(&r.recommended.join(",")),
        escape(&r.answer)
    );
    if let Some(b) = &r.bound {
        let _ = write!(out, "<p>Bound: {}</p>", escape(b));
    }
    if let Some(t) = &r.thin {
        match brief.filter(|b| b != t) {
            Some(b) => {
                let _ = write!(
                    out,
                    "<p class=\"warn\">Evidence is thin: {}</p><details class=\"thin\"><summary>every \
                     cell of it</summary><p class=\"warn\">{}</p></details>",
                    escape(&b),
                    escape(t)
                );
            }
            None => {
                let _ = write!(out, "<p class=\"warn\">Evidence is thin: {}</p>", escape(t));
            }
        }
    }
    out.push_str("<table><tr><th class=\"name\">strategy</th><th>eligible</th><th class=\"name\">why (cells cited)</th></tr>");
    for row in &r.rows {
        let _ = write!(
            out,
            "<tr><td class=\"name\">{}</td><td>{}</td><td class=\"name\">{}</td></tr>",
            escape(&row.strategy),
            if row.eligible { "yes" } else { "no" },
            escape(&row.reason)
        );
    }
    out.push_str("</table>");
    out
}

fn trials_table(r: &MatrixReport) -> String {
    let mut out = String::from(
        "<details><summary>Every trial (episodes, verdict, sections, anomalies, p99, throughput, run directory)</summary>\
         <table><tr><th class=\"name\">cell</th><th>trial</th><th>seed</th><th>status</th><th>exposed / episodes</th><th>damaging</th>\
         <th>verdict</th><th>sections</th><th class=\"name\">anomalies</th><th>contended p99</th><th>ops/s</th><th class=\"name\">directory</th></tr>",
    );
    for c in &r.cells {
        for t in &c.trials {
            let verdict = t.verdict.map_or_else(|| "-".into(), |v| v.to_string());
            let anomalies: Vec<String> = t
                .anomaly_counts
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let status = t.status.to_string();
            let exposed = t.episodes.iter().filter(|e| e.exposed).count();
            let damaging = t
                .episodes
                .iter()
                .filter(|e| e.exposed && !e.damage.is_empty())
                .count();
            let _ = write!(
                out,
                "<tr><td class=\"name\">{} × {}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{exposed}/{}</td><td>{damaging}</td><td>{}</td><td>{}</td><td class=\"name\">{}</td>\
                 <td>{}</td><td>{}</td><td class=\"name\"><a href=\"{}/summary.json\">{}</a></td></tr>",
                escape(&c.strategy),
                escape(&c.fault),
                t.trial,
                t.seed,
                escape(&status),
                t.error
                    .as_deref()
                    .map(|e| format!(": {}", escape(e)))
                    .unwrap_or_default(),
                t.episodes.len(),
                escape(&verdict),
                t.sections,
                escape(&anomalies.join(", ")),
                latency(t.acquire_p99_us),
                ops(t.throughput_ops_s),
                escape(&t.dir),
                escape(&t.dir)
            );
        }
    }
    out.push_str("</table></details>");
    out
}

/// The answer that opens the page: the decision per need (its rule and each strategy's why)
/// and the setups it was measured on.
fn answer(r: &MatrixReport) -> String {
    let mut s = String::from(
        "<h2 id=\"answer\">The answer: decision table (read off this matrix only)</h2>",
    );
    let (efficiency, correctness) = r.thin_evidence();
    s.push_str(&recommendation(&r.decision.efficiency, efficiency.brief()));
    s.push_str(&recommendation(
        &r.decision.correctness,
        correctness.brief(),
    ));
    for setup in setups_measured(r) {
        let _ = write!(s, "<p class=\"setup\">{}</p>", escape(&setup));
    }
    s
}

/// The whole `matrix.html` page.
pub fn render_matrix_html(r: &MatrixReport) -> String {
    let body = html! {
        (matrix_header(r))
        (PreEscaped(answer(r)))
        h2 { "Heat map: damaging of exposed episodes per cell" }
        (PreEscaped(heat_map(r)))
        h2 { "Agreement with the claims" }
        (PreEscaped(claims_table(r)))
        (latency_section(r))
        (text_table(r))
        (set_aside(r))
        (faults_table(r))
        h2 { "Trials" }
        @if let Some(b) = &r.jobs.backoff {
            details #backoff {
                summary { "Harness back-off: how many trials ran at once, and why it changed" }
                p { (b) }
            }
        }
        (PreEscaped(trials_table(r)))
        footer { "matrix.json, matrix.csv and matrix.md beside this page hold the same figures." }
    };
    page("lockbench matrix", &body.into_string())
}

/// The page's extra style, title and run line (its figures as `data-*` attributes), the link
/// to the claim scenarios' report and the claims the matrix contradicts.
fn matrix_header(r: &MatrixReport) -> Markup {
    let contradictions = r.contradictions();
    let list: Vec<String> = contradictions
        .iter()
        .map(|c| format!("{} ({} × {})", c.claim, c.strategy, c.fault))
        .collect();
    html! {
        style { (PreEscaped(EXTRA_STYLE)) }
        h1 { "Strategy × fault matrix" }
        p.meta #matrix-meta data-status=(r.status) data-trials=(r.trials)
            data-cells=(r.cells.len()) data-episodes-wanted=(r.episodes_wanted)
            data-wall-ms=(r.wall_ms) {
            (r.run_id) " · status " b { (r.status) } " · " (run_facts(r)) " · workload: "
            (r.workload.describe())
        }
        @if let Some(link) = &r.linked_report {
            p {
                "Claim scenarios (each seed article's claim as an experiment): "
                a #claims-link href=(link) { (link) }
            }
        }
        @if !contradictions.is_empty() {
            p.regressed #contradictions {
                "The matrix contradicts " (contradictions.len()) " claim(s): " (list.join(", "))
            }
        }
    }
}

/// Acquire latency: the uncontended probe beside the contended p99, then the small multiples
/// of latency, recovery and throughput per cell.
fn latency_section(r: &MatrixReport) -> Markup {
    html! {
        h2 { "Acquire latency: uncontended probe beside contended p99" }
        p.definition {
            "Uncontended: one client, no hold, no fault, the strategy's home topology — what the \
            lock itself costs (the efficiency rule ranks by it). Contended: the matrix workload, \
            where clients queue for few resources — mostly queueing."
        }
        (PreEscaped(probes_table(r)))
        div.charts {
            figure {
                (small_multiples(r, "latency-p99", "contended acquire p99 (log)", true,
                    |c| Some(c.acquire_p99_us as f64), |v| latency(v.round() as u64)))
                figcaption {
                    "Contended successful acquire latency p99 per cell (worst trial), µs on a \
                    shared log axis; the uncontended probe is in the table above."
                }
            }
            figure {
                (small_multiples(r, "recovery-p50", "recovery p50 ms", false,
                    |c| c.episodes.recovery_p50_ms, |v| format!("{v:.0}")))
                figcaption {
                    "Recovery p50 per cell (from the heal, or the release of a holder that kept \
                    the lock past it → first successful acquire; exposed episodes), ms on a \
                    shared linear axis."
                }
            }
            figure {
                (small_multiples(r, "throughput", "throughput ops/s", false,
                    |c| Some(c.throughput_ops_s), |v| format!("{v:.0}")))
                figcaption {
                    "Complete lock cycles per second per cell (mean of trials), shared linear \
                    axis: set by the hold time, not by the lock."
                }
            }
        }
    }
}

/// The heat map's cells as text, strategies × faults.
fn text_table(r: &MatrixReport) -> Markup {
    html! {
        h2 { "The table in text" }
        div.scroll {
            table {
                tr {
                    th.name { "strategy" }
                    @for f in &r.faults { th { (f.name) } }
                }
                @for s in &r.strategies {
                    tr {
                        td.name { (s) }
                        @for f in &r.faults {
                            td { (r.cell(s, &f.name).map(cell_text).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// The trials set aside because the harness lagged; nothing when there are none.
fn set_aside(r: &MatrixReport) -> Markup {
    if r.set_aside.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Trials set aside" }
        p {
            "The harness lagged while these ran beside other trials; their cells ran another \
            trial each."
        }
        ul {
            @for t in &r.set_aside {
                li {
                    (t.strategy) " × " (t.fault) ": "
                    a href={ (t.dir) "/summary.json" } { (t.dir) }
                    " — " (t.note)
                }
            }
        }
    }
}

/// What every fault did, per topology.
fn faults_table(r: &MatrixReport) -> Markup {
    html! {
        h2 { "What each fault did" }
        table {
            tr { th.name { "fault" } th.name { "topology" } th.name { "what" } }
            @for f in &r.faults {
                @for (topology, what) in &f.what {
                    tr { td.name { (f.name) } td.name { (topology) } td.name { (what) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_runs_from_green_to_red() {
        assert_eq!(heat_colour(0.0), "#d8f0dc");
        assert_eq!(heat_colour(1.0), "#ef9a9a");
        assert_eq!(heat_colour(7.0), "#ef9a9a");
    }

    #[test]
    fn the_answer_comes_first_and_the_back_off_is_folded() {
        use crate::report::matrix::export::run_line;
        let plan = crate::matrix::MatrixPlan::new(
            vec![crate::strategy::StrategyKind::Single],
            vec![crate::matrix::FaultClass::None],
            1,
            crate::matrix::MatrixWorkload::quick(),
        );
        let mut r = MatrixReport::new(&plan, "m");
        r.jobs.backoff = Some("backed off from 4 to 2 trials at once (harness lag)".into());
        let html = render_matrix_html(&r);
        let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(at("id=\"answer\"") < at("<h2>Heat map"));
        assert!(at("<h2>Heat map") < at("<h2>Agreement with the claims"));
        let meta = &html[at("id=\"matrix-meta\"")..];
        let meta = &meta[..meta.find("</p>").unwrap()];
        assert!(!meta.contains("backed off"), "{meta}");
        assert!(html[at("<details id=\"backoff\">")..]
            .starts_with("<details id=\"backoff\"><summary>Harness back-off"));
        assert!(at("backed off from 4 to 2") > at("<details id=\"backoff\">"));
        assert!(run_line(&r).ends_with("; backed off from 4 to 2 trials at once (harness lag)"));
    }
}
