//! `matrix.html`: the heat map strategies × faults (colour = share of invalid trials; text =
//! k/N, the main anomaly rate per 1,000 critical sections, acquire p99), acquire latency and
//! throughput per cell as inline SVG small multiples on one shared axis each, the decision
//! table, and what every fault did. Every heat-map cell carries its figures as `data-*`
//! attributes equal to `matrix.json`'s, so a test (or a script) can read the page back.

use std::fmt::Write as _;

use super::html::{escape, latency, ops, page};
use super::matrix_export::cell_text;
use crate::orchestration::matrix::decision::Recommendation;
use crate::orchestration::matrix::{CellRecord, MatrixReport};

const PALETTE: [&str; 7] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

const EXTRA_STYLE: &str = "
table.matrix td.cell { min-width: 7em; font-size: 0.82em; text-align: center; }
table.matrix td.cell small { display: block; color: #333; }
table.matrix td.notrun { background: #fafafa; color: #999; }
div.charts svg { border: 1px solid #e4e4e4; max-width: 100%; height: auto; }
p.answer { font-size: 1.05em; }
";

/// Heat colour for a share of invalid trials in [0, 1]: green (0) to red (1).
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

/// The rate shown in a cell: the first anomaly kind present among mutex violation, accepted
/// stale write, lost update, token regression, rejected stale write (per 1,000 sections).
fn main_rate(c: &CellRecord) -> Option<String> {
    for kind in [
        "mutex-violation",
        "stale-write-accepted",
        "lost-update",
        "token-regression",
        "token-duplicate",
        "stale-write-rejected",
    ] {
        if let Some(a) = c.anomalies.get(kind) {
            if let Some(i) = a.per_section {
                if a.count > 0 {
                    return Some(format!("{kind} {}", i.text(true)));
                }
            }
        }
    }
    None
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
        let _ = write!(out, "<tr><th class=\"name\">{}</th>", escape(s));
        for f in &r.faults {
            let Some(c) = r.cell(s, &f.name) else {
                out.push_str("<td class=\"cell notrun\">-</td>");
                continue;
            };
            let (class, style) = if c.trials_checked == 0 {
                ("cell notrun", String::new())
            } else if c.invalid == 0 && c.unknown > 0 {
                ("cell", " style=\"background:#e6e6e6\"".to_string())
            } else {
                let share = f64::from(c.invalid) / f64::from(c.trials_checked);
                (
                    "cell",
                    format!(" style=\"background:{}\"", heat_colour(share)),
                )
            };
            let rate = main_rate(c)
                .map(|t| format!("<small>{}</small>", escape(&t)))
                .unwrap_or_default();
            let title = escape(&c.what);
            let _ = write!(
                out,
                "<td class=\"{class}\"{style} title=\"{title}\" data-strategy=\"{}\" data-fault=\"{}\" data-topology=\"{}\" \
                 data-verdict=\"{}\" data-trials=\"{}\" data-invalid=\"{}\" data-unknown=\"{}\" data-sections=\"{}\" \
                 data-stale-writes-accepted=\"{}\" data-lost-updates=\"{}\" data-p50-us=\"{}\" data-p99-us=\"{}\" \
                 data-throughput=\"{:.3}\"><b>{}</b>{rate}<small>p99 {}</small></td>",
                escape(&c.strategy),
                escape(&c.fault),
                escape(&c.topology),
                escape(&c.verdict),
                c.trials_checked,
                c.invalid,
                c.unknown,
                c.sections,
                c.stale_writes_accepted,
                c.lost_updates,
                c.acquire_p50_us,
                c.acquire_p99_us,
                c.throughput_ops_s,
                escape(&c.share_text()),
                if c.trials_checked == 0 {
                    "-".to_string()
                } else {
                    latency(c.acquire_p99_us)
                },
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n<p class=\"legend\">Colour: share of checked trials whose verdict was invalid (green 0 → red all); grey: unknown verdicts only; \
                  pale: no evidence. Rates are per 1,000 critical sections with their 95 % interval (Wilson; exact one-sided bound \"&lt; x\" for 0 events). \
                  Hover a cell for what the fault did.</p>\n");
    out
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
) -> String {
    let values: Vec<f64> = r
        .cells
        .iter()
        .filter(|c| c.trials_checked > 0)
        .filter_map(&value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
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
    let scale = |v: f64| -> f64 {
        let x = if log { v.max(1e-9).log10() } else { v };
        ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    };
    let n = r.strategies.len().max(1) as f64;
    let panel_w = (18.0 * n + 24.0).max(90.0);
    let left = 70.0;
    let plot_h = 180.0;
    let top = 20.0;
    let width = (left + panel_w * r.faults.len() as f64 + 10.0).max(left + 130.0 * n + 10.0);
    let height = top + plot_h + 70.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\" \
         font-family=\"DejaVu Sans, sans-serif\" font-size=\"10\" role=\"img\" aria-label=\"{}\">",
        escape(label)
    );
    // Shared axis with ticks.
    let ticks: Vec<f64> = if log {
        (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=4).map(|i| hi * f64::from(i) / 4.0).collect()
    };
    for t in ticks {
        let y = top + plot_h * (1.0 - scale(t));
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{:.0}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e0e0e0\"/>\
             <text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            width - 10.0,
            left - 4.0,
            y + 3.0,
            escape(&fmt(t))
        );
    }
    let _ = write!(
        svg,
        "<text x=\"12\" y=\"{:.0}\" transform=\"rotate(-90 12 {:.0})\" text-anchor=\"middle\">{}</text>",
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        escape(label)
    );
    for (fi, f) in r.faults.iter().enumerate() {
        let x0 = left + panel_w * fi as f64;
        let _ = write!(
            svg,
            "<line x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{top}\" y2=\"{:.0}\" stroke=\"#bbb\"/>\
             <text x=\"{:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text>",
            top + plot_h,
            x0 + panel_w / 2.0,
            top + plot_h + 14.0,
            escape(&f.name)
        );
        for (si, s) in r.strategies.iter().enumerate() {
            let Some(c) = r.cell(s, &f.name).filter(|c| c.trials_checked > 0) else {
                continue;
            };
            let Some(v) = value(c) else { continue };
            let h = plot_h * scale(v);
            let x = x0 + 12.0 + 18.0 * si as f64;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"14\" height=\"{h:.1}\" fill=\"{}\" data-strategy=\"{}\" data-fault=\"{}\" data-value=\"{v}\">\
                 <title>{} × {}: {}</title></rect>",
                top + plot_h - h,
                PALETTE[si % PALETTE.len()],
                escape(s),
                escape(&f.name),
                escape(s),
                escape(&f.name),
                escape(&fmt(v))
            );
        }
    }
    // Legend.
    for (si, s) in r.strategies.iter().enumerate() {
        let x = left + 130.0 * si as f64;
        let y = top + plot_h + 36.0;
        let _ = write!(
            svg,
            "<rect x=\"{x:.0}\" y=\"{:.0}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0}\" y=\"{y:.0}\">{}</text>",
            y - 9.0,
            PALETTE[si % PALETTE.len()],
            x + 14.0,
            escape(s)
        );
    }
    svg.push_str("</svg>");
    svg
}

fn recommendation(r: &Recommendation) -> String {
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
        let _ = write!(out, "<p class=\"warn\">Evidence is thin: {}</p>", escape(t));
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
        "<details><summary>Every trial (verdict, sections, anomalies, p99, throughput, run directory)</summary>\
         <table><tr><th class=\"name\">cell</th><th>trial</th><th>seed</th><th>status</th><th>verdict</th><th>sections</th>\
         <th class=\"name\">anomalies</th><th>p99</th><th>ops/s</th><th class=\"name\">directory</th></tr>",
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
            let _ = write!(
                out,
                "<tr><td class=\"name\">{} × {}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"name\">{}</td>\
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

/// The whole `matrix.html` page.
pub fn render_matrix_html(r: &MatrixReport) -> String {
    let status = r.status;
    let mut body = format!(
        "<style>{EXTRA_STYLE}</style><h1>Strategy × fault matrix</h1>\
         <p class=\"meta\" id=\"matrix-meta\" data-status=\"{status}\" data-trials=\"{}\" data-cells=\"{}\">{} · status <b>{status}</b> · {} trial(s) per cell · \
         workload: {}</p>",
        r.trials,
        r.cells.len(),
        escape(&r.run_id),
        r.trials,
        escape(&r.workload.describe())
    );
    if let Some(link) = &r.linked_report {
        let _ = write!(
            body,
            "<p>Claim scenarios (each seed article's claim as an experiment): <a id=\"claims-link\" href=\"{0}\">{0}</a></p>",
            escape(link)
        );
    }
    body.push_str("<h2>Heat map: invalid trials per cell</h2>");
    body.push_str(&heat_map(r));
    body.push_str("<h2>Decision table (read off this matrix only)</h2>");
    body.push_str(&recommendation(&r.decision.efficiency));
    body.push_str(&recommendation(&r.decision.correctness));
    body.push_str("<h2>Acquire latency and throughput per cell</h2><div class=\"charts\"><figure>");
    body.push_str(&small_multiples(
        r,
        "latency-p99",
        "acquire p99 (log)",
        true,
        |c| Some(c.acquire_p99_us as f64),
        |v| latency(v.round() as u64),
    ));
    body.push_str("<figcaption>Successful acquire latency p99 per cell (worst trial), µs on a shared log axis.</figcaption></figure><figure>");
    body.push_str(&small_multiples(
        r,
        "throughput",
        "throughput ops/s",
        false,
        |c| Some(c.throughput_ops_s),
        |v| format!("{v:.0}"),
    ));
    body.push_str("<figcaption>Complete lock cycles per second per cell (mean of trials), shared linear axis.</figcaption></figure></div>");
    body.push_str("<h2>The table in text</h2><div class=\"scroll\"><table><tr><th class=\"name\">strategy</th>");
    for f in &r.faults {
        let _ = write!(body, "<th>{}</th>", escape(&f.name));
    }
    body.push_str("</tr>");
    for s in &r.strategies {
        let _ = write!(body, "<tr><td class=\"name\">{}</td>", escape(s));
        for f in &r.faults {
            let text = r.cell(s, &f.name).map(cell_text).unwrap_or_default();
            let _ = write!(body, "<td>{}</td>", escape(&text));
        }
        body.push_str("</tr>");
    }
    body.push_str("</table></div><h2>What each fault did</h2><table><tr><th class=\"name\">fault</th><th class=\"name\">topology</th><th class=\"name\">what</th></tr>");
    for f in &r.faults {
        for (topology, what) in &f.what {
            let _ = write!(
                body,
                "<tr><td class=\"name\">{}</td><td class=\"name\">{}</td><td class=\"name\">{}</td></tr>",
                escape(&f.name),
                escape(topology),
                escape(what)
            );
        }
    }
    body.push_str("</table><h2>Trials</h2>");
    body.push_str(&trials_table(r));
    body.push_str("<footer>matrix.json, matrix.csv and matrix.md beside this page hold the same figures.</footer>");
    page("lockbench matrix", &body)
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
}
