//! The incident list of one strategy: per incident its cause, holders and witness (ledger rows
//! and history ops), each with an anchor the client timeline links to.

use std::fmt::Write as _;

use super::input::StrategyVerdict;
use super::lanes_svg::incident_anchor;
use crate::checker::{Holder, Incident};
use crate::history::Op;
use crate::report::common::html::escape;

/// Incidents shown expanded; the rest are collapsed (`<details>`).
const OPEN_FIRST: usize = 3;
/// Incidents listed per strategy (the counts cover the rest).
pub(crate) const MAX_INCIDENTS_LISTED: usize = 100;

fn t(us: u64) -> String {
    format!("{:.4}", us as f64 / 1e6)
}

fn opt_t(us: Option<u64>) -> String {
    us.map_or_else(|| "—".to_string(), t)
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "—".to_string(), |v| v.to_string())
}

/// `"3 incidents (2 safety) from 44 listed anomalies, 5 overlapping client pairs"`.
pub(crate) fn incident_line(v: &StrategyVerdict) -> String {
    let n = v.incidents.len();
    let safety = v.incidents.iter().filter(|i| i.safety).count();
    let merged: usize = v.incidents.iter().map(|i| i.anomalies.len()).sum();
    let pairs: u32 = v.incidents.iter().map(|i| i.pairs).sum();
    let mut s = format!(
        "{n} incident{} ({safety} safety) from {merged} anomal{}, {pairs} overlapping client pair{}",
        if n == 1 { "" } else { "s" },
        if merged == 1 { "y" } else { "ies" },
        if pairs == 1 { "" } else { "s" },
    );
    if v.incidents_partial {
        s.push_str(
            " (the checker listed only the first anomalies of each kind, so there may be more)",
        );
    }
    s
}

/// The `<section>` listing `v`'s incidents; empty when there are none. `harness` is the run's
/// diagnosis when its harness was overloaded, shown above them.
pub(crate) fn incidents_html(v: &StrategyVerdict, harness: Option<&str>) -> String {
    if v.incidents.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<div class=\"incidents\" data-strategy=\"{}\" data-incidents=\"{}\">\n<h3>{}: incidents</h3>\n<p class=\"meta\">{}.</p>\n",
        escape(&v.strategy),
        v.incidents.len(),
        escape(&v.strategy),
        escape(&incident_line(v)),
    );
    if let Some(note) = harness {
        let outside = v
            .incidents
            .iter()
            .filter(|i| i.fault_ids.is_empty())
            .count();
        let _ = writeln!(
            out,
            "<p class=\"warn harness\">{}{}</p>",
            escape(note),
            if outside > 0 {
                format!(
                    " — {outside} incident{} fell outside every fault window",
                    if outside == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            }
        );
    }
    for (k, inc) in v.incidents.iter().take(MAX_INCIDENTS_LISTED).enumerate() {
        out.push_str(&incident(v, inc, k < OPEN_FIRST, k == 0));
    }
    if v.incidents.len() > MAX_INCIDENTS_LISTED {
        let _ = writeln!(
            out,
            "<p class=\"meta\">… and {} more in <code>{}/checker.json</code>.</p>",
            v.incidents.len() - MAX_INCIDENTS_LISTED,
            escape(&v.strategy)
        );
    }
    out.push_str("</div>\n");
    out
}

fn incident(v: &StrategyVerdict, inc: &Incident, open: bool, witness_open: bool) -> String {
    let mut out = String::new();
    let kinds: Vec<String> = inc.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let clients: Vec<String> = inc.clients.iter().map(|c| format!("c{c}")).collect();
    let span = if inc.end_us > inc.start_us {
        format!(
            "{}–{} s ({:.0} ms)",
            t(inc.start_us),
            t(inc.end_us),
            (inc.end_us - inc.start_us) as f64 / 1000.0
        )
    } else {
        format!("{} s", t(inc.start_us))
    };
    let _ = writeln!(
        out,
        "<details class=\"incident{}\" id=\"{}\" data-incident=\"{}\" data-kind=\"{}\" data-safety=\"{}\"{}>\
         <summary><b>#{} {}</b> on {} at {span}: clients {}{}{} — <span class=\"cause\">{}</span></summary>",
        if inc.safety { " safety" } else { "" },
        incident_anchor(&v.strategy, inc.id),
        inc.id,
        inc.kind,
        inc.safety,
        if open { " open" } else { "" },
        inc.id,
        escape(&inc.kind.to_string()),
        escape(&inc.resource),
        escape(&clients.join(", ")),
        if inc.max_holders > 1 {
            format!(", {} holders at once", inc.max_holders)
        } else {
            String::new()
        },
        if inc.pairs > 0 {
            format!(", {} pair{}", inc.pairs, if inc.pairs == 1 { "" } else { "s" })
        } else {
            String::new()
        },
        escape(&inc.cause),
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\">Anomalies merged: {}.</p>",
        escape(&kinds.join(", "))
    );
    if !inc.holders.is_empty() {
        out.push_str(
            "<div class=\"scroll\"><table class=\"holders\"><thead><tr><th>client</th><th>token</th>\
             <th>acquire invoked (s)</th><th>acquired (s)</th><th>valid until (s)</th>\
             <th>section begin (s)</th><th>section end (s)</th><th>released (s)</th>\
             <th>past validity (ms)</th></tr></thead><tbody>\n",
        );
        for h in &inc.holders {
            out.push_str(&holder_row(h));
        }
        out.push_str("</tbody></table></div>\n");
    }
    let w = &inc.witness;
    let _ = writeln!(
        out,
        "<details class=\"witness\"{}><summary>Witness: {} ledger row{} and {} history op{}</summary>",
        if witness_open { " open" } else { "" },
        w.ledger.len(),
        if w.ledger.len() == 1 { "" } else { "s" },
        w.ops.len(),
        if w.ops.len() == 1 { "" } else { "s" },
    );
    if !w.ledger.is_empty() {
        out.push_str(
            "<p class=\"meta\">Ledger rows of the sections above (commit order; <code>sqlite3 ledger.sqlite \
             'select * from events where seq in (…)'</code>):</p>\n<div class=\"scroll\">\
             <table class=\"witness-ledger\"><thead><tr><th>seq</th><th>time (s)</th><th>client</th>\
             <th>section</th><th>token</th><th class=\"name\">step</th><th>value</th>\
             <th class=\"name\">accepted</th></tr></thead><tbody>\n",
        );
        for r in &w.ledger {
            let _ = writeln!(
                out,
                "<tr data-seq=\"{}\" data-client=\"{}\" data-step=\"{}\" data-token=\"{}\" data-accepted=\"{}\">\
                 <td>{}</td><td>{}</td><td>c{}</td><td>{}</td><td>{}</td><td class=\"name\">{}</td><td>{}</td>\
                 <td class=\"name\">{}</td></tr>",
                r.seq,
                r.client,
                r.step.as_str(),
                r.fencing_token.map_or_else(String::new, |t| t.to_string()),
                r.accepted,
                r.seq,
                t(r.time_us),
                r.client,
                r.section_id,
                opt(r.fencing_token),
                r.step.as_str(),
                opt(r.value),
                if r.accepted {
                    "yes".to_string()
                } else {
                    format!(
                        "no ({})",
                        r.reason.map_or("rejected", |x| match x {
                            crate::ledger::RejectReason::Stale => "stale token",
                            crate::ledger::RejectReason::Duplicate => "duplicate",
                        })
                    )
                },
            );
        }
        out.push_str("</tbody></table></div>\n");
    }
    if !w.ops.is_empty() {
        out.push_str(
            "<p class=\"meta\">History ops of their leases (and other clients' releases in between):</p>\n\
             <div class=\"scroll\"><table class=\"witness-ops\">\
             <thead><tr><th>index</th><th>time (s)</th><th>client</th><th class=\"name\">op</th>\
             <th>token</th><th>valid until (s)</th><th class=\"name\">error</th></tr></thead><tbody>\n",
        );
        for op in &w.ops {
            out.push_str(&op_row(op));
        }
        out.push_str("</tbody></table></div>\n");
    }
    out.push_str("</details>\n");
    if w.omitted > 0 {
        let _ = writeln!(
            out,
            "<p class=\"meta\">{} more witness rows/ops in <code>{}/checker.json</code>'s sources \
             (the history and the ledger).</p>",
            w.omitted,
            escape(&v.strategy)
        );
    }
    out.push_str("</details>\n");
    out
}

fn holder_row(h: &Holder) -> String {
    let late = h.overstay_ms.filter(|o| *o > 0);
    format!(
        "<tr data-client=\"{}\"><td>c{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td{}>{}</td></tr>\n",
        h.client,
        h.client,
        if h.possible { " (possible)" } else { "" },
        opt(h.token),
        opt_t(h.acquire_invoke_us),
        opt_t(h.acquired_us),
        opt_t(h.validity_end_us),
        opt_t(h.section_begin_us),
        if h.section_begin_us.is_some() && h.section_end_us.is_none() {
            "still inside".to_string()
        } else {
            opt_t(h.section_end_us)
        },
        opt_t(h.released_us),
        if late.is_some() {
            " class=\"regressed\""
        } else {
            ""
        },
        late.map_or_else(|| "—".to_string(), |o| o.to_string()),
    )
}

fn op_row(op: &Op) -> String {
    let kind = op.kind;
    let f = op.f;
    format!(
        "<tr data-index=\"{}\" data-client=\"{}\"><td>{}</td><td>{}</td><td>c{}</td><td class=\"name\">{f} {kind}</td>\
         <td>{}</td><td>{}</td><td class=\"name\">{}</td></tr>\n",
        op.index,
        op.client,
        op.index,
        t(op.time_us),
        op.client,
        opt(op.fencing_token),
        opt_t(op.validity_deadline_us),
        escape(op.error.as_deref().unwrap_or("")),
    )
}
