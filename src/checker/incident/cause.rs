//! The cause sentence of an incident: what stretched a section past its lease, or which lease
//! was granted while another was still valid, and which faults were active.

use std::fmt::Write as _;

use super::{rank, Holder, Incident};
use crate::checker::verdict::Anomaly;
use crate::history::{FaultWindow, Op, OpFn, OpKind};

/// Fills each incident's overstay figures and its cause sentence from its holders, its
/// anomalies and the run's fault windows.
pub(crate) fn explain(incidents: &mut [Incident], anomalies: &[Anomaly], faults: &[FaultWindow]) {
    for inc in incidents {
        for h in &mut inc.holders {
            h.compute_overstay();
        }
        inc.cause = cause(inc, anomalies, faults);
    }
}

fn ms(us: u64) -> String {
    format!("{:.0} ms", us as f64 / 1000.0)
}

fn secs(us: u64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

fn fault_label(w: &FaultWindow) -> String {
    let span = match w.end_us {
        Some(e) => format!("{}–{}", secs(w.start_us), secs(e)),
        None => format!("from {}, never healed", secs(w.start_us)),
    };
    if w.targets.is_empty() {
        format!("{} ({span})", w.kind)
    } else {
        format!("{} on {} ({span})", w.kind, w.targets.join(", "))
    }
}

/// The clients a fault window's targets name (`client:3`, `client-3`, `clients:0,1`, `c3`);
/// empty when it targets nodes.
pub fn fault_clients(targets: &[String]) -> Vec<u32> {
    let mut out = Vec::new();
    for t in targets {
        let t = t.trim();
        let Some(body) = ["clients:", "client:", "client-", "clients", "client", "c"]
            .iter()
            .find_map(|p| t.strip_prefix(p))
        else {
            continue;
        };
        out.extend(body.split(',').filter_map(|n| n.trim().parse::<u32>().ok()));
    }
    out
}

/// Whether fault window `w` targets `client`.
fn targets_client(w: &FaultWindow, client: u32) -> bool {
    fault_clients(&w.targets).contains(&client)
}

fn who(h: &Holder) -> String {
    match h.token {
        Some(t) => format!("c{} (token {t})", h.client),
        None => format!("c{}", h.client),
    }
}

/// Why the late holder's section outlived its lease: acquire time, ok→begin, section length.
fn stretch(h: &Holder) -> String {
    let mut parts = Vec::new();
    if let (Some(inv), Some(ok)) = (h.acquire_invoke_us, h.acquired_us) {
        parts.push(format!("its acquire took {}", ms(ok.saturating_sub(inv))));
    }
    if let (Some(ok), Some(b)) = (h.acquired_us, h.section_begin_us) {
        if b > ok + 50_000 {
            parts.push(format!(
                "its section began {} after the acquire returned",
                ms(b - ok)
            ));
        }
    }
    if let (Some(b), Some(e)) = (h.section_begin_us, h.section_end_us) {
        parts.push(format!("the section lasted {}", ms(e.saturating_sub(b))));
    }
    if let (Some(inv), Some(v)) = (h.acquire_invoke_us, h.validity_end_us) {
        parts.push(format!(
            "the lease was valid for {} from the acquire's start",
            ms(v.saturating_sub(inv))
        ));
    }
    parts.join(", ")
}

/// The incident's cause sentence: the holder that stayed past its lease (and the fault that
/// held it up, or none), else the lease granted while another was still valid, else the first
/// anomaly's own sentence; then the other faults active during it.
fn cause(inc: &Incident, anomalies: &[Anomaly], faults: &[FaultWindow]) -> String {
    let active: Vec<&FaultWindow> = faults
        .iter()
        .filter(|w| inc.fault_ids.contains(&w.id))
        .collect();
    let mut out = String::new();
    // A fault named as the cause is not repeated in the "during" list.
    let mut named: Option<u64> = None;
    // The holder that stayed longest past its validity.
    let late = inc
        .holders
        .iter()
        .filter(|h| h.overstay_ms.is_some_and(|o| o > 0) || still_inside_past_validity(h, inc))
        .max_by_key(|h| h.overstay_ms.unwrap_or(i64::MAX));
    if let Some(h) = late {
        named = late_holder(&mut out, h, &active);
    } else if let Some((first, second)) = granted_twice(inc) {
        granted_while_valid(&mut out, inc, first, second);
        if active.is_empty() {
            out.push_str("; no fault active");
        }
    } else {
        // No holder data (or a point anomaly): the first anomaly's own sentence.
        let first = inc
            .anomalies
            .iter()
            .map(|&i| &anomalies[i])
            .min_by_key(|a| rank(a.kind));
        if let Some(a) = first {
            out.push_str(&a.detail);
        }
        if active.is_empty() {
            out.push_str("; no fault active");
        }
    }
    let others: Vec<String> = active
        .iter()
        .filter(|w| Some(w.id) != named)
        .map(|w| fault_label(w))
        .collect();
    if !others.is_empty() {
        let _ = write!(out, "; during {}", others.join(" and "));
    }
    out
}

/// Writes how holder `h` stayed past its lease's validity and which active fault held it up
/// (or that none was active); returns that fault's id.
fn late_holder(out: &mut String, h: &Holder, active: &[&FaultWindow]) -> Option<u64> {
    let mut named = None;
    match (h.section_end_us, h.overstay_ms) {
        (_, Some(o)) => {
            let what = if h.section_end_us.is_some() {
                "section ended"
            } else {
                "release came"
            };
            let _ = write!(out, "{}'s {what} {o} ms after its lease's validity", who(h));
        }
        _ => {
            let _ = write!(
                out,
                "{} was still inside when the run ended, past its lease's validity",
                who(h)
            );
        }
    }
    let pausing: Vec<&&FaultWindow> = active
        .iter()
        .filter(|w| targets_client(w, h.client))
        .collect();
    if let Some(w) = pausing.first() {
        let _ = write!(out, "; {} held it up", fault_label(w));
        named = Some(w.id);
    } else if active.is_empty() {
        let detail = stretch(h);
        let _ = write!(out, "; no fault active");
        if !detail.is_empty() {
            let _ = write!(out, " ({detail})");
        }
    }
    named
}

/// Writes which lease was granted while `first`'s was still valid, and the third client's
/// release that freed it in between, when the witness shows one.
fn granted_while_valid(out: &mut String, inc: &Incident, first: &Holder, second: &Holder) {
    let left = first
        .validity_end_us
        .zip(second.acquired_us)
        .map(|(v, a)| v.saturating_sub(a));
    let _ = write!(
        out,
        "{} acquired at {} while {}'s lease was still valid",
        who(second),
        secs(second.acquired_us.unwrap_or(inc.start_us)),
        who(first)
    );
    if let Some(left) = left {
        let _ = write!(out, " for {}", ms(left));
    }
    let freed = freed_between(&inc.witness.ops, first, second);
    if let Some((invoke, done)) = freed {
        let _ = write!(
            out,
            " (c{}'s release ran from {} to {}, in between)",
            done.client,
            secs(invoke),
            secs(done.time_us)
        );
    }
}

/// A third client's release that ran while the second grant could have happened (from
/// the first acquire's invoke to the second's ok): the usual way a lock is freed under
/// its holder (a release without an owner check).
/// Returns its invoke time and its completion.
fn freed_between<'a>(ops: &'a [Op], first: &Holder, second: &Holder) -> Option<(u64, &'a Op)> {
    let from = first.acquire_invoke_us.or(first.acquired_us).unwrap_or(0);
    let until = second.acquired_us.unwrap_or(u64::MAX);
    ops.iter()
        .filter(|o| {
            o.f == OpFn::Release
                && o.kind != OpKind::Invoke
                && o.client != first.client
                && o.client != second.client
        })
        .filter_map(|done| {
            let invoke = ops
                .iter()
                .filter(|i| {
                    i.client == done.client
                        && i.f == OpFn::Release
                        && i.kind == OpKind::Invoke
                        && i.index < done.index
                })
                .max_by_key(|i| i.index)
                .map_or(done.time_us, |i| i.time_us);
            (invoke <= until && done.time_us >= from).then_some((invoke, done))
        })
        .max_by_key(|(invoke, _)| *invoke)
}

fn still_inside_past_validity(h: &Holder, inc: &Incident) -> bool {
    h.end_us().is_none() && h.validity_end_us.is_some_and(|v| v < inc.end_us)
}

/// Two definite holders of different clients whose leases were valid at once: (earlier, later).
fn granted_twice(inc: &Incident) -> Option<(&Holder, &Holder)> {
    let definite: Vec<&Holder> = inc
        .holders
        .iter()
        .filter(|h| !h.possible && h.acquired_us.is_some())
        .collect();
    for (k, a) in definite.iter().enumerate() {
        for b in &definite[k + 1..] {
            let (x, y) = if a.acquired_us <= b.acquired_us {
                (a, b)
            } else {
                (b, a)
            };
            let x_valid_until = x
                .validity_end_us
                .unwrap_or(u64::MAX)
                .min(x.released_us.unwrap_or(u64::MAX));
            if x.client != y.client && y.acquired_us.is_some_and(|t| t < x_valid_until) {
                return Some((x, y));
            }
        }
    }
    None
}
