//! The incident list of one strategy: per incident its cause, holders and witness (ledger rows
//! and history ops), each with an anchor the client timeline links to.

use maud::{html, Markup};

use super::input::StrategyVerdict;
use super::lanes_svg::incident_anchor;
use crate::checker::{Holder, Incident, Witness};
use crate::history::Op;
use crate::ledger::{LedgerEvent, RejectReason};

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
pub(crate) fn incidents_html(v: &StrategyVerdict, harness: Option<&str>) -> Markup {
    if v.incidents.is_empty() {
        return html! {};
    }
    let outside = v
        .incidents
        .iter()
        .filter(|i| i.fault_ids.is_empty())
        .count();
    html! {
        div.incidents data-strategy=(v.strategy) data-incidents=(v.incidents.len()) {
            h3 { (v.strategy) ": incidents" }
            p.meta { (incident_line(v)) "." }
            @if let Some(note) = harness {
                p.warn.harness {
                    (note)
                    @if outside > 0 {
                        " — " (outside) " incident" @if outside != 1 { "s" }
                        " fell outside every fault window"
                    }
                }
            }
            @for (k, inc) in v.incidents.iter().take(MAX_INCIDENTS_LISTED).enumerate() {
                (incident(v, inc, k < OPEN_FIRST, k == 0))
            }
            @if v.incidents.len() > MAX_INCIDENTS_LISTED {
                p.meta {
                    "… and " (v.incidents.len() - MAX_INCIDENTS_LISTED) " more in "
                    code { (v.strategy) "/checker.json" } "."
                }
            }
        }
    }
}

/// `s` when `n` is not one.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One incident: its summary line (kind, resource, time, clients, cause), the anomalies it
/// merges, its holders and its witness.
fn incident(v: &StrategyVerdict, inc: &Incident, open: bool, witness_open: bool) -> Markup {
    let kinds: Vec<String> = inc.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    html! {
        details.incident.safety[inc.safety] id=(incident_anchor(&v.strategy, inc.id))
            data-incident=(inc.id) data-kind=(inc.kind) data-safety=(inc.safety) open[open] {
            (incident_summary(inc))
            p.meta { "Anomalies merged: " (kinds.join(", ")) "." }
            @if !inc.holders.is_empty() { (holders_table(&inc.holders)) }
            (witness(&inc.witness, witness_open))
            @if inc.witness.omitted > 0 {
                p.meta {
                    (inc.witness.omitted) " more witness rows/ops in "
                    code { (v.strategy) "/checker.json" }
                    "'s sources (the history and the ledger)."
                }
            }
        }
    }
}

/// An incident's `<summary>`: `#id kind on resource at span: clients …, — cause`.
fn incident_summary(inc: &Incident) -> Markup {
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
    html! {
        summary {
            b { "#" (inc.id) " " (inc.kind) }
            " on " (inc.resource) " at " (span) ": clients " (clients.join(", "))
            @if inc.max_holders > 1 { ", " (inc.max_holders) " holders at once" }
            @if inc.pairs > 0 { ", " (inc.pairs) " pair" (plural(inc.pairs as usize)) }
            " — "
            span.cause { (inc.cause) }
        }
    }
}

/// The holders of an incident, one row each.
fn holders_table(holders: &[Holder]) -> Markup {
    html! {
        div.scroll {
            table.holders {
                thead {
                    tr {
                        th { "client" } th { "token" } th { "acquire invoked (s)" }
                        th { "acquired (s)" } th { "valid until (s)" } th { "section begin (s)" }
                        th { "section end (s)" } th { "released (s)" } th { "past validity (ms)" }
                    }
                }
                tbody { @for h in holders { (holder_row(h)) } }
            }
        }
    }
}

/// The witness of an incident, folded: its ledger rows and its history ops.
fn witness(w: &Witness, open: bool) -> Markup {
    html! {
        details.witness open[open] {
            summary {
                "Witness: " (w.ledger.len()) " ledger row" (plural(w.ledger.len())) " and "
                (w.ops.len()) " history op" (plural(w.ops.len()))
            }
            @if !w.ledger.is_empty() {
                p.meta {
                    "Ledger rows of the sections above (commit order; "
                    code { "sqlite3 ledger.sqlite 'select * from events where seq in (…)'" }
                    "):"
                }
                div.scroll {
                    table.witness-ledger {
                        thead {
                            tr {
                                th { "seq" } th { "time (s)" } th { "client" } th { "section" }
                                th { "token" } th.name { "step" } th { "value" }
                                th.name { "accepted" }
                            }
                        }
                        tbody { @for r in &w.ledger { (ledger_row(r)) } }
                    }
                }
            }
            @if !w.ops.is_empty() {
                p.meta {
                    "History ops of their leases (and other clients' releases in between):"
                }
                div.scroll {
                    table.witness-ops {
                        thead {
                            tr {
                                th { "index" } th { "time (s)" } th { "client" } th.name { "op" }
                                th { "token" } th { "valid until (s)" } th.name { "error" }
                            }
                        }
                        tbody { @for op in &w.ops { (op_row(op)) } }
                    }
                }
            }
        }
    }
}

/// One ledger row of a witness.
fn ledger_row(r: &LedgerEvent) -> Markup {
    let accepted = if r.accepted {
        "yes".to_string()
    } else {
        format!(
            "no ({})",
            r.reason.map_or("rejected", |x| match x {
                RejectReason::Stale => "stale token",
                RejectReason::Duplicate => "duplicate",
            })
        )
    };
    html! {
        tr data-seq=(r.seq) data-client=(r.client) data-step=(r.step.as_str())
            data-token=(r.fencing_token.map_or_else(String::new, |t| t.to_string()))
            data-accepted=(r.accepted) {
            td { (r.seq) }
            td { (t(r.time_us)) }
            td { "c" (r.client) }
            td { (r.section_id) }
            td { (opt(r.fencing_token)) }
            td.name { (r.step.as_str()) }
            td { (opt(r.value)) }
            td.name { (accepted) }
        }
    }
}

fn holder_row(h: &Holder) -> Markup {
    let late = h.overstay_ms.filter(|o| *o > 0);
    html! {
        tr data-client=(h.client) {
            td { "c" (h.client) @if h.possible { " (possible)" } }
            td { (opt(h.token)) }
            td { (opt_t(h.acquire_invoke_us)) }
            td { (opt_t(h.acquired_us)) }
            td { (opt_t(h.validity_end_us)) }
            td { (opt_t(h.section_begin_us)) }
            td {
                @if h.section_begin_us.is_some() && h.section_end_us.is_none() {
                    "still inside"
                } @else {
                    (opt_t(h.section_end_us))
                }
            }
            td { (opt_t(h.released_us)) }
            td class=[late.map(|_| "regressed")] { (opt(late)) }
        }
    }
}

fn op_row(op: &Op) -> Markup {
    html! {
        tr data-index=(op.index) data-client=(op.client) {
            td { (op.index) }
            td { (t(op.time_us)) }
            td { "c" (op.client) }
            td.name { (op.f) " " (op.kind) }
            td { (opt(op.fencing_token)) }
            td { (opt_t(op.validity_deadline_us)) }
            td.name { (op.error.as_deref().unwrap_or("")) }
        }
    }
}
