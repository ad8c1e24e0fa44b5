//! Drawing the client timeline ([`Lanes`]) as inline SVG, with a small inline script
//! ([`LANES_SCRIPT`]) for zoom and pan.
//!
//! Every time-positioned element carries its time in seconds (`data-t0`/`data-t1` for spans,
//! `data-t` for points), so the script only recomputes x positions; without the script the
//! page shows the whole run. Tooltips are SVG `<title>`s: op times, latency, token, error.
//! The x axis matches the timeline figure above it: same width (960), same plot area
//! ([`X0`]..[`X1`]) and the same time range.

use std::fmt::Write as _;

use maud::{html, Markup};

use super::input::FaultMark;
use super::lanes::{Attempt, Hold, HoldEnd, Lane, Lanes, Outcome};
use crate::checker::Incident;

/// SVG width, the same as the plots' (px).
pub(crate) const WIDTH: f64 = 960.0;
/// Left edge of the plot area: the plots' margin (10) + y label area (170).
pub(crate) const X0: f64 = 180.0;
/// Right edge of the plot area: 960 − the plots' right margin (28).
pub(crate) const X1: f64 = 932.0;
const LANE_H: f64 = 18.0;
const GROUP_H: f64 = 16.0;
const TOP: f64 = 34.0;
const AXIS_H: f64 = 34.0;
/// Narrowest bar drawn, px (a 1 ms hold is still visible).
const MIN_BAR: f64 = 1.5;

const HOLD: &str = "#4a7fc1";
const HOLD_BAD: &str = "#d32f2f";
const HOLD_FENCED: &str = "#8e44ad";

/// What the timeline of one strategy is drawn from.
pub(crate) struct LanesView<'a> {
    /// Strategy name (ids and links).
    pub(crate) strategy: &'a str,
    /// The lanes.
    pub(crate) lanes: &'a Lanes,
    /// The strategy's fault windows.
    pub(crate) faults: &'a [&'a FaultMark],
    /// The strategy's incidents.
    pub(crate) incidents: &'a [Incident],
    /// Right end of the time axis, s (shared with the figure above).
    pub(crate) x_max: f64,
}

/// `incident-<strategy>-<id>`: the anchor of an incident in the page.
pub(crate) fn incident_anchor(strategy: &str, id: u32) -> String {
    format!(
        "incident-{}-{id}",
        crate::report::common::figure::file_safe(strategy)
    )
}

fn x_of(t: f64, x_max: f64) -> f64 {
    X0 + t.clamp(0.0, x_max) / x_max * (X1 - X0)
}

fn s(t: f64) -> String {
    format!("{t:.4} s")
}

fn dur(a: f64, b: f64) -> String {
    let ms = (b - a) * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// A tick step giving at most ~10 ticks over `span` seconds.
pub(crate) fn tick_step(span: f64) -> f64 {
    const STEPS: [f64; 16] = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0,
        120.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|st| span / st <= 10.0)
        .unwrap_or(300.0)
}

/// The clients a fault window targets, `None` for node faults.
fn fault_clients(f: &FaultMark) -> Option<Vec<u32>> {
    let c = crate::checker::incident::fault_clients(&f.window.targets);
    (!c.is_empty()).then_some(c)
}

/// Where the lanes are drawn: each lane's top, the bottom of the last one, the SVG height and
/// the time axis' right end.
struct Layout {
    x_max: f64,
    /// A header row per resource when the lanes hold several.
    several: bool,
    lane_y: Vec<f64>,
    lanes_bottom: f64,
    height: f64,
}

impl Layout {
    fn new(l: &Lanes, x_max: f64) -> Self {
        let several = l.lanes.windows(2).any(|w| w[0].resource != w[1].resource);
        let mut y = TOP;
        let mut lane_y = Vec::with_capacity(l.lanes.len());
        for (i, lane) in l.lanes.iter().enumerate() {
            if several && (i == 0 || l.lanes[i - 1].resource != lane.resource) {
                y += GROUP_H;
            }
            lane_y.push(y);
            y += LANE_H;
        }
        let lanes_bottom = y.max(TOP + LANE_H);
        Layout {
            x_max,
            several,
            lane_y,
            lanes_bottom,
            height: lanes_bottom + AXIS_H,
        }
    }

    /// The x of time `t` (s).
    fn x(&self, t: f64) -> f64 {
        x_of(t, self.x_max)
    }
}

/// `v` with `d` decimals.
fn fixed(v: f64, d: usize) -> String {
    format!("{v:.d$}")
}

/// The timeline as HTML: tools, the SVG, and a legend with notes.
pub(crate) fn render(v: &LanesView<'_>) -> Markup {
    let l = v.lanes;
    let lay = Layout::new(l, v.x_max.max(l.end_s).max(0.001));
    let id = crate::report::common::figure::file_safe(v.strategy);
    let height = fixed(lay.height, 0);
    html! {
        div.lanes-box id={ "lanes-" (id) } {
            div.lanes-tools {
                button type="button" data-zoom="in" { "zoom in" } " "
                button type="button" data-zoom="out" { "zoom out" } " "
                button type="button" data-zoom="reset" { "whole run" } " "
                span.meta { "drag to pan · double-click to zoom in there · hover for op times" }
            }
            svg.lanes xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height)
                viewBox={ "0 0 " (WIDTH) " " (height) } data-x0=(X0) data-x1=(X1) data-t0="0"
                data-t1=(fixed(lay.x_max, 6)) data-axis-y=(fixed(lay.lanes_bottom, 1))
                font-family="DejaVu Sans, Arial, sans-serif" font-size="11" role="img"
                aria-label={ "client timeline of " (v.strategy) } {
                defs {
                    clipPath id={ "clip-" (id) } {
                        rect x=(X0) y="0" width=(fixed(X1 - X0, 1)) height=(height) {}
                    }
                    clipPath id={ "clip-axis-" (id) } {
                        rect x=(fixed(X0 - 20.0, 1)) y="0" width=(fixed(X1 - X0 + 26.0, 1))
                            height=(height) {}
                    }
                }
                rect x="0" y="0" width=(WIDTH) height=(height) fill="#fff" {}
                g.labels { (lane_labels(l, &lay)) }
                g clip-path={ "url(#clip-" (id) ")" } { (drawing(v, &lay)) }
                g.ticks clip-path={ "url(#clip-axis-" (id) ")" } { (ticks(&lay)) }
                text x=(fixed((X0 + X1) / 2.0, 1)) y=(fixed(lay.height - 3.0, 1))
                    text-anchor="middle" font-size="12" { "seconds since start" }
            }
            (legend(l))
        }
    }
}

/// Everything inside the plot area, back to front: the time not drawn, fault bands,
/// incident bands, holds, acquire attempts.
fn drawing(v: &LanesView<'_>, lay: &Layout) -> Markup {
    let l = v.lanes;
    html! {
        // A bounded timeline greys out the time it does not draw.
        @if let Some(windows) = &l.windows { (not_drawn(windows, lay)) }
        // Fault bands: client faults on their clients' lanes, the others across every lane.
        @for (k, f) in v.faults.iter().enumerate() { (fault_band(l, lay, k, f)) }
        // Incident bands behind the holds, linked to their entry in the incident list.
        @for inc in v.incidents { (incident_band(v, lay, inc)) }
        @for h in &l.holds { (hold(v, lay, h)) }
        @for a in &l.attempts { (attempt(l, lay, a)) }
    }
}

/// The client (and resource) of each lane, a header per resource when there are several,
/// and the lanes' alternating backgrounds.
fn lane_labels(l: &Lanes, lay: &Layout) -> Markup {
    html! {
        @for (i, lane) in l.lanes.iter().enumerate() {
            @let y = lay.lane_y[i];
            @if lay.several && (i == 0 || l.lanes[i - 1].resource != lane.resource) {
                text.group x="8" y=(fixed(y - GROUP_H + 12.0, 1)) { (lane.resource) }
            }
            text.lane x=(fixed(X0 - 8.0, 1)) y=(fixed(y + 13.0, 1)) text-anchor="end" {
                "c" (lane.client)
                @if !lay.several { " · " (lane.resource) }
            }
            rect.lane-bg x=(X0) y=(fixed(y, 1)) width=(fixed(X1 - X0, 1)) height=(LANE_H)
                fill=(if i % 2 == 0 { "#fafafa" } else { "#f2f2f4" }) {}
        }
    }
}

/// Grey bands over the time outside `windows` (the only times drawn).
fn not_drawn(windows: &[(f64, f64)], lay: &Layout) -> Markup {
    let mut gaps = Vec::new();
    let mut from = 0.0_f64;
    for &(a, b) in windows
        .iter()
        .chain(std::iter::once(&(lay.x_max, lay.x_max)))
    {
        if a > from {
            gaps.push((from, a));
        }
        from = from.max(b);
    }
    html! {
        @for (from, a) in gaps {
            rect.not-drawn data-t0=(fixed(from, 6)) data-t1=(fixed(a, 6)) x=(fixed(lay.x(from), 2))
                y=(fixed(TOP, 1)) width=(fixed(lay.x(a) - lay.x(from), 2))
                height=(fixed(lay.lanes_bottom - TOP, 1)) fill="#dcdcdc" fill-opacity="0.6" {
                title {
                    "not drawn (" (s(from)) " → " (s(a))
                    "): only the windows around incidents and faults are"
                }
            }
        }
    }
}

/// Fault `k`'s band (on its clients' lanes, or across every lane for a node fault) and label.
fn fault_band(l: &Lanes, lay: &Layout, k: usize, f: &FaultMark) -> Markup {
    let (t0, t1) = (f.start_s(), f.end_s());
    let spans: Vec<(f64, f64)> = match fault_clients(f) {
        Some(clients) => l
            .lanes
            .iter()
            .enumerate()
            .filter(|(_, lane)| clients.contains(&lane.client))
            .map(|(i, _)| (lay.lane_y[i], LANE_H))
            .collect(),
        None => vec![(TOP - 4.0, lay.lanes_bottom - TOP + 4.0)],
    };
    html! {
        @for (y0, h) in spans {
            rect.fault data-t0=(fixed(t0, 6)) data-t1=(fixed(t1, 6)) x=(fixed(lay.x(t0), 2))
                y=(fixed(y0, 1)) width=(fixed((lay.x(t1) - lay.x(t0)).max(MIN_BAR), 2))
                height=(fixed(h, 1)) fill="#ffaa3c" fill-opacity="0.22" {
                title { (f.title()) ": " (s(t0)) " → " (s(t1)) " (" (dur(t0, t1)) ")" }
            }
        }
        text.fault-label data-t=(fixed(t0, 6)) x=(fixed(lay.x(t0) + 2.0, 2)) y=(12 + 11 * (k % 2))
            fill="#964600" { (f.label()) }
    }
}

/// An incident's band on the lanes of its clients and its `#id` label, linked to its entry.
fn incident_band(v: &LanesView<'_>, lay: &Layout, inc: &Incident) -> Markup {
    let (t0, t1) = (inc.start_us as f64 / 1e6, inc.end_us as f64 / 1e6);
    let color = if inc.safety { HOLD_BAD } else { "#1e6ec8" };
    let rows =
        v.lanes.lanes.iter().enumerate().filter(|(_, lane)| {
            lane.resource == inc.resource && inc.clients.contains(&lane.client)
        });
    html! {
        a href={ "#" (incident_anchor(v.strategy, inc.id)) } class="incident-link" {
            @for (i, _) in rows {
                rect.incident-band data-incident=(inc.id) data-t0=(fixed(t0, 6))
                    data-t1=(fixed(t1, 6)) data-minw="4" x=(fixed(lay.x(t0), 2))
                    y=(fixed(lay.lane_y[i], 1)) width=(fixed((lay.x(t1) - lay.x(t0)).max(4.0), 2))
                    height=(LANE_H) fill=(color) fill-opacity="0.14" {
                    title {
                        "incident #" (inc.id) " (" (inc.kind) ") on " (inc.resource) ": "
                        (s(t0)) " → " (s(t1)) ": " (inc.cause)
                    }
                }
            }
            text.incident-label data-t=(fixed(t0, 6)) x=(fixed(lay.x(t0), 2)) y=(TOP - 2.0)
                fill=(color) font-weight="bold" { "#" (inc.id) }
        }
    }
}

/// A hold's tooltip: who, when, validity, how it ended, its incident.
fn hold_title(lane: &Lane, h: &Hold, late_from: Option<f64>) -> String {
    let mut title = format!(
        "c{} on {}{}\nacquire invoked {}, ok {} ({})",
        lane.client,
        lane.resource,
        h.token.map_or_else(String::new, |t| format!(", token {t}")),
        s(h.invoke_s),
        s(h.start_s),
        dur(h.invoke_s, h.start_s)
    );
    match h.valid_until_s {
        Some(v) => {
            let _ = write!(title, "\nvalid until {}", s(v));
        }
        None => title.push_str("\nno expiry"),
    }
    if h.extends > 0 {
        let _ = write!(title, " after {} renewal(s)", h.extends);
    }
    let _ = write!(
        title,
        "\n{} {} (held {})",
        match h.ended {
            HoldEnd::Released => "release invoked",
            HoldEnd::Crashed => "crashed",
            HoldEnd::Open => "still held at",
        },
        s(h.end_s),
        dur(h.start_s, h.end_s)
    );
    if let (Some(o), Some(d)) = (h.release, h.release_done_s) {
        let _ = write!(title, ", release {} at {}", o.as_str(), s(d));
    }
    if let Some(v) = late_from {
        let _ = write!(title, "\nstill working {} past validity", dur(v, h.end_s));
    }
    if let Some(i) = h.incident {
        let _ = write!(title, "\nincident #{i}");
    }
    title
}

/// A hold: its bar, the part past validity hatched, the validity tick, the token label; a
/// link to its incident when it is part of one.
fn hold(v: &LanesView<'_>, lay: &Layout, h: &Hold) -> Markup {
    let ly = lay.lane_y[h.lane];
    let lane = &v.lanes.lanes[h.lane];
    // Red: part of a safety incident (an overlap); purple: fenced out (a benign one).
    let safety = h
        .incident
        .and_then(|i| v.incidents.iter().find(|x| x.id == i))
        .is_none_or(|x| x.safety);
    let (class, color) = match (h.incident.is_some(), safety) {
        (false, _) => ("", HOLD),
        (true, true) => (" overlap", HOLD_BAD),
        (true, false) => (" fenced", HOLD_FENCED),
    };
    let late_from = h.valid_until_s.filter(|v| *v < h.end_s);
    let title = hold_title(lane, h, late_from);
    let bar_end = late_from.unwrap_or(h.end_s);
    let (x0, x1) = (lay.x(h.start_s), lay.x(bar_end));
    // The validity tick where it tells something: work past it, or an incident's hold.
    let tick = h
        .valid_until_s
        .filter(|v| *v <= lay.x_max && (late_from.is_some() || h.incident.is_some()));
    let shapes = html! {
        rect class={ "hold" (class) } data-client=(lane.client)
            data-token=(h.token.map_or_else(String::new, |t| t.to_string()))
            data-incident=(h.incident.map_or_else(String::new, |i| i.to_string()))
            data-t0=(fixed(h.start_s, 6)) data-t1=(fixed(bar_end, 6)) data-minw=(MIN_BAR)
            x=(fixed(x0, 2)) y=(fixed(ly + 6.0, 1)) width=(fixed((x1 - x0).max(MIN_BAR), 2))
            height="10" fill=(color) { title { (title) } }
        @if let Some(vt) = late_from {
            rect class={ "late" (class) } data-t0=(fixed(vt, 6)) data-t1=(fixed(h.end_s, 6))
                data-minw="1" x=(fixed(lay.x(vt), 2)) y=(fixed(ly + 6.0, 1))
                width=(fixed((lay.x(h.end_s) - lay.x(vt)).max(1.0), 2)) height="10" fill=(color)
                fill-opacity="0.35" stroke=(color) stroke-dasharray="3 2" stroke-width="1" {
                title { (title) }
            }
        }
        @if let Some(vt) = tick {
            rect.expiry data-t=(fixed(vt, 6)) x=(fixed(lay.x(vt) - 1.0, 2)) y=(fixed(ly + 2.0, 1))
                width="2" height="16" fill="#222" {
                title { "lease of c" (lane.client) " valid until " (s(vt)) }
            }
        }
        @if let Some(t) = h.token {
            text.tok data-t0=(fixed(h.start_s, 6)) data-t1=(fixed(bar_end, 6))
                x=(fixed((x0 + x1) / 2.0, 2)) y=(fixed(ly + 14.5, 1)) text-anchor="middle"
                style=[(x1 - x0 < 28.0).then_some("display:none")] { (t) }
        }
    };
    html! {
        @match h.incident {
            Some(i) => a href={ "#" (incident_anchor(v.strategy, i)) } { (shapes) },
            None => (shapes),
        }
    }
}

/// An acquire attempt: a mark at its completion, coloured by outcome.
fn attempt(l: &Lanes, lay: &Layout, a: &Attempt) -> Markup {
    let lane = &l.lanes[a.lane];
    let (fill, r) = match a.outcome {
        Outcome::Ok => ("#2e8b3e", 2.6),
        Outcome::Fail => ("#8a8a8a", 2.2),
        Outcome::Info => ("#f08c00", 3.2),
    };
    let mut title = format!(
        "c{} acquire {}: {}\ninvoke {} → {} ({})",
        lane.client,
        lane.resource,
        a.outcome.as_str(),
        s(a.invoke_s),
        s(a.done_s),
        dur(a.invoke_s, a.done_s)
    );
    if let Some(t) = a.token {
        let _ = write!(title, "\ntoken {t}");
    }
    if let Some(e) = &a.error {
        let _ = write!(title, "\nerror: {e}");
    }
    html! {
        circle class={ "attempt a-" (a.outcome.as_str()) } data-t=(fixed(a.done_s, 6))
            cx=(fixed(lay.x(a.done_s), 2)) cy=(fixed(lay.lane_y[a.lane] + 3.5, 1)) r=(r)
            fill=(fill) { title { (title) } }
    }
}

/// The time axis: a tick and its label every [`tick_step`].
fn ticks(lay: &Layout) -> Markup {
    let step = tick_step(lay.x_max);
    let times = (0u32..)
        .map(|k| f64::from(k) * step)
        .take_while(|t| *t <= lay.x_max + 1e-9);
    html! {
        @for t in times {
            rect x=(fixed(lay.x(t) - 0.5, 2)) y=(fixed(lay.lanes_bottom, 1)) width="1" height="5"
                fill="#444" {}
            text x=(fixed(lay.x(t), 2)) y=(fixed(lay.lanes_bottom + 17.0, 1)) text-anchor="middle" {
                (trim_num(t))
            }
        }
    }
}

/// What the bars, dots and bands mean; that the history is empty, or how it was bounded.
fn legend(l: &Lanes) -> Markup {
    html! {
        p.meta.legend {
            "One lane per client. Bars: holds from acquire " i { "ok" } " to release (blue; "
            span style="color:#d32f2f" { "red" } " when part of an overlap incident, "
            span style="color:#8e44ad" { "purple" } " when fencing rejected its late write; \
            linked to the incident), labelled with the fencing token when wide enough; the \
            dashed part is work done after the lease's validity ended, which the black tick \
            marks (drawn for late and incident holds; every hold's tooltip gives its validity). \
            Dots: acquire attempts at completion — "
            span style="color:#2e8b3e" { "ok" } ", " span style="color:#8a8a8a" { "fail" } ", "
            span style="color:#f08c00" { "info" } " (outcome unknown). Orange bands: fault \
            windows (client faults on their client's lanes)."
            @if l.lanes.is_empty() { " The history has no operations." }
            @if !l.note.is_empty() { " " b { "Bounded:" } " " (l.note) "." }
        }
    }
}

fn trim_num(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Zoom and pan for every `svg.lanes` on the page (no network, no globals).
pub(crate) const LANES_SCRIPT: &str = r##"
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 120];
  function step(span) {
    for (var i = 0; i < STEPS.length; i++) { if (span / STEPS[i] <= 10) { return STEPS[i]; } }
    return 300;
  }
  function label(t) { return String(Math.round(t * 1000) / 1000); }
  document.querySelectorAll("div.lanes-box").forEach(function (box) {
    var svg = box.querySelector("svg.lanes");
    if (!svg) { return; }
    var x0 = +svg.dataset.x0, x1 = +svg.dataset.x1, axisY = +svg.dataset.axisY;
    var full = [+svg.dataset.t0, +svg.dataset.t1], view = full.slice();
    var items = svg.querySelectorAll("[data-t0],[data-t]");
    var ticks = svg.querySelector("g.ticks");
    function X(t) { return x0 + (t - view[0]) / (view[1] - view[0]) * (x1 - x0); }
    function draw() {
      items.forEach(function (e) {
        var d = e.dataset;
        if (d.t0 !== undefined) {
          var a = X(+d.t0), b = X(+d.t1);
          if (e.tagName === "text") {
            e.setAttribute("x", (a + b) / 2);
            e.style.display = b - a >= 28 ? "" : "none";
          } else {
            e.setAttribute("x", a);
            e.setAttribute("width", Math.max(b - a, +(d.minw || 0)));
          }
        } else {
          var x = X(+d.t);
          if (e.tagName === "circle") { e.setAttribute("cx", x); }
          else if (e.tagName === "text") { e.setAttribute("x", x + (e.classList.contains("fault-label") ? 2 : 0)); }
          else { e.setAttribute("x", x - (+e.getAttribute("width")) / 2); }
        }
      });
      while (ticks.firstChild) { ticks.removeChild(ticks.firstChild); }
      var st = step(view[1] - view[0]);
      for (var t = Math.ceil(view[0] / st) * st; t <= view[1] + 1e-9; t += st) {
        var r = document.createElementNS(NS, "rect");
        r.setAttribute("x", X(t) - 0.5); r.setAttribute("y", axisY);
        r.setAttribute("width", 1); r.setAttribute("height", 5); r.setAttribute("fill", "#444");
        var tx = document.createElementNS(NS, "text");
        tx.setAttribute("x", X(t)); tx.setAttribute("y", axisY + 17);
        tx.setAttribute("text-anchor", "middle"); tx.textContent = label(t);
        ticks.appendChild(r); ticks.appendChild(tx);
      }
    }
    function setView(a, b) {
      var span = Math.min(Math.max(b - a, 0.002), full[1] - full[0]);
      a = Math.min(Math.max(a, full[0]), full[1] - span);
      view = [a, a + span];
      draw();
    }
    function zoom(f, at) {
      var c = at === undefined ? (view[0] + view[1]) / 2 : at;
      setView(c - (c - view[0]) * f, c + (view[1] - c) * f);
    }
    function timeAt(ev) {
      var box = svg.getBoundingClientRect();
      var px = (ev.clientX - box.left) * (+svg.getAttribute("width") / box.width);
      return view[0] + (px - x0) / (x1 - x0) * (view[1] - view[0]);
    }
    box.querySelectorAll("button[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var z = b.dataset.zoom;
        if (z === "in") { zoom(0.5); } else if (z === "out") { zoom(2); } else { setView(full[0], full[1]); }
      });
    });
    svg.addEventListener("dblclick", function (ev) { zoom(ev.shiftKey ? 2 : 0.5, timeAt(ev)); });
    var drag = null;
    svg.addEventListener("pointerdown", function (ev) { drag = { x: ev.clientX, view: view.slice() }; });
    window.addEventListener("pointerup", function () { drag = null; });
    svg.addEventListener("pointermove", function (ev) {
      if (!drag) { return; }
      var box = svg.getBoundingClientRect();
      var scale = (+svg.getAttribute("width") / box.width) / (x1 - x0) * (drag.view[1] - drag.view[0]);
      var dt = (ev.clientX - drag.x) * scale;
      if (Math.abs(ev.clientX - drag.x) > 2) { setView(drag.view[0] - dt, drag.view[1] - dt); }
    });
  });
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::run::lanes::{Attempt, Hold, Lane};

    #[test]
    fn client_faults_parse_and_ticks_are_round() {
        let f = |t: &str| FaultMark {
            strategy: None,
            window: crate::history::FaultWindow {
                kind: "client-pause".into(),
                targets: vec![t.into()],
                start_us: 1_000_000,
                end_us: Some(2_000_000),
                ..Default::default()
            },
        };
        assert_eq!(fault_clients(&f("client-3")), Some(vec![3]));
        assert_eq!(fault_clients(&f("client:4")), Some(vec![4]));
        assert_eq!(fault_clients(&f("clients:0,1,2")), Some(vec![0, 1, 2]));
        assert_eq!(fault_clients(&f("n1")), None);
        assert_eq!(tick_step(6.0), 1.0);
        assert_eq!(tick_step(30.0), 5.0);
        assert_eq!(tick_step(0.05), 0.005);
        assert_eq!(trim_num(2.5), "2.5");
        assert_eq!(trim_num(3.0), "3");
    }

    #[test]
    fn holds_in_incidents_are_red_links_with_tooltips() {
        let lanes = Lanes {
            lanes: vec![
                Lane {
                    resource: "r0".into(),
                    client: 0,
                },
                Lane {
                    resource: "r0".into(),
                    client: 1,
                },
            ],
            holds: vec![
                Hold {
                    lane: 0,
                    invoke_s: 0.9,
                    start_s: 1.0,
                    end_s: 2.5,
                    ended: HoldEnd::Released,
                    valid_until_s: Some(1.3),
                    token: Some(4),
                    extends: 0,
                    release: Some(Outcome::Ok),
                    release_done_s: Some(2.51),
                    incident: Some(1),
                },
                Hold {
                    lane: 1,
                    invoke_s: 1.3,
                    start_s: 1.35,
                    end_s: 1.4,
                    ended: HoldEnd::Released,
                    valid_until_s: Some(1.65),
                    token: Some(5),
                    extends: 0,
                    release: None,
                    release_done_s: None,
                    incident: None,
                },
            ],
            attempts: vec![Attempt {
                lane: 1,
                invoke_s: 1.3,
                done_s: 1.35,
                outcome: Outcome::Ok,
                error: None,
                token: Some(5),
            }],
            end_s: 6.0,
            ops: 6,
            windows: None,
            note: String::new(),
        };
        let html = render(&LanesView {
            strategy: "naive-del",
            lanes: &lanes,
            faults: &[],
            incidents: &[],
            x_max: 6.0,
        })
        .into_string();
        assert!(html.contains(
            "class=\"hold overlap\" data-client=\"0\" data-token=\"4\" data-incident=\"1\""
        ));
        assert!(html.contains("<a href=\"#incident-naive-del-1\">"));
        assert!(
            html.contains("class=\"late overlap\""),
            "work past validity drawn"
        );
        assert!(html.contains("still working 1200.0 ms past validity"));
        assert!(html.contains("invoke 1.3000 s → 1.3500 s (50.0 ms)"));
        assert!(html.contains("class=\"expiry\" data-t=\"1.300000\""));
        assert_eq!(html.matches("class=\"hold\"").count(), 1);
        assert!(!html.contains("not-drawn"));

        // Bounded: the time outside the windows is greyed and the note is printed.
        let mut bounded = lanes.clone();
        bounded.windows = Some(vec![(0.5, 3.0)]);
        bounded.note = "9000 ops in this history".into();
        let html = render(&LanesView {
            strategy: "naive-del",
            lanes: &bounded,
            faults: &[],
            incidents: &[],
            x_max: 6.0,
        })
        .into_string();
        assert_eq!(html.matches("class=\"not-drawn\"").count(), 2);
        assert!(html.contains("data-t0=\"3.000000\" data-t1=\"6.000000\""));
        assert!(html.contains("<b>Bounded:</b> 9000 ops in this history."));
    }
}
