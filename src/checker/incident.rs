//! Incidents: the anomalies as a reader sees them (docs/design.md, "incident").
//!
//! The rules find episodes one by one: the ledger's mutual-exclusion episodes, the history's
//! believed overlaps, stale writes, lost updates, token duplicates. One fault usually shows as
//! several of them on the same resource (the ledger sees the paused holder and its successor
//! inside; the history sees two valid leases; the paused holder's write loses an increment).
//! An **incident** groups them:
//!
//! * one maximal interval on one resource during which it had more than one holder: the union
//!   of overlapping `mutex-violation`, `believed-overlap` and `possible-overlap` intervals, with
//!   every point anomaly (stale write, lost update, token regression/duplicate) that falls inside;
//! * or one point anomaly outside any such interval (one stale write, one lost update, one
//!   token duplicate) on its own — unless a section of an overlap incident wrote it (a paused
//!   holder's late write that loses an increment): then it is that incident's consequence and
//!   is folded into it, extending its end ([`absorb_consequences`], after the witness pass).
//!
//! Liveness findings (`unavailable`, `stuck-resource`) are not incidents.
//!
//! Each incident then gets its **holders** (the leases and critical sections involved, from the
//! history and the ledger), its **witness** (the ledger rows and history ops that prove it, see
//! [`super::witness`]) and a **cause**: one sentence saying what stretched a section past its
//! lease, or which lease was granted while another was still valid, and which fault (kind,
//! targets) was active, or that none was.
//!
//! The verdict never depends on incidents: they are a view of the anomalies already found.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::verdict::{Anomaly, AnomalyKind};
use crate::history::{FaultWindow, Op, OpFn, OpKind};
use crate::ledger::LedgerEvent;

/// Most ledger rows kept in one incident's witness (the rest are counted in `omitted`).
pub const MAX_WITNESS_ROWS: usize = 64;
/// Most history ops kept in one incident's witness (the rest are counted in `omitted`).
pub const MAX_WITNESS_OPS: usize = 64;
/// Incidents that get holders and a witness (the first, in time order); later ones keep their
/// anomalies and a cause from the anomalies' own sentences, which bounds `checker.json`.
pub const MAX_WITNESSED: usize = 100;
/// Most holders listed per incident: those holding the anomaly's own rows, those that outlived
/// their lease, then the first to overlap.
pub const MAX_HOLDERS: usize = 12;

/// One lease and/or critical section involved in an incident. Times are µs on the run clock;
/// a field is `None` when the history or the ledger did not show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Client id.
    pub client: u32,
    /// Fencing token of the lease (fenced strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Acquire invoke, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_invoke_us: Option<u64>,
    /// Acquire `ok` (or `info` for a possible holder), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquired_us: Option<u64>,
    /// Whether the acquire's outcome was unknown (`info`): a possible holder only.
    #[serde(default)]
    pub possible: bool,
    /// End of the lease's validity (last acquire/extend `ok` deadline), µs; `None` = no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_end_us: Option<u64>,
    /// Ledger section id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_id: Option<u64>,
    /// Ledger `begin` of the section, µs (commit time at the resource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_begin_us: Option<u64>,
    /// Ledger `end` or `crash` of the section, µs; `None` = still inside when the ledger ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_end_us: Option<u64>,
    /// Release invoke (or crash), µs: when the client stopped believing it held the lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_us: Option<u64>,
    /// How long after its validity ended the section ended (or the client released), ms;
    /// negative = ended in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overstay_ms: Option<i64>,
}

impl Holder {
    /// When this holder stopped acting: section end, else release, µs.
    pub fn end_us(&self) -> Option<u64> {
        self.section_end_us.or(self.released_us)
    }

    pub(crate) fn compute_overstay(&mut self) {
        self.overstay_ms = match (self.end_us(), self.validity_end_us) {
            (Some(end), Some(valid)) => Some((end as i64 - valid as i64) / 1000),
            _ => None,
        };
    }
}

/// The evidence of an incident: ledger rows (commit order) and history ops (recording order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    /// Ledger rows of the sections involved (`seq`, client, token, step, accepted, …).
    #[serde(default)]
    pub ledger: Vec<LedgerEvent>,
    /// History ops of the leases involved (acquire, extend, release with their outcomes).
    #[serde(default)]
    pub ops: Vec<Op>,
    /// Rows and ops left out over [`MAX_WITNESS_ROWS`] / [`MAX_WITNESS_OPS`].
    #[serde(default)]
    pub omitted: u64,
}

/// One anomaly as a reader sees it (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// 1, 2, … in time order within its report.
    pub id: u32,
    /// The most telling kind among its anomalies (overlaps first, then damage, then the rest).
    pub kind: AnomalyKind,
    /// Whether any of its anomalies is a safety anomaly ([`AnomalyKind::is_safety`]).
    pub safety: bool,
    /// Resource name.
    pub resource: String,
    /// Start, µs on the run clock.
    pub start_us: u64,
    /// End, µs on the run clock (= start for a point anomaly).
    pub end_us: u64,
    /// Clients involved, ascending.
    pub clients: Vec<u32>,
    /// Fencing tokens involved, ascending.
    pub tokens: Vec<u64>,
    /// Most holders inside (ledger) or believing (history) at once.
    pub max_holders: u32,
    /// Distinct pairs of clients that held at once (what the anomaly list used to repeat).
    pub pairs: u32,
    /// Anomalies merged into it, per kind.
    pub counts: BTreeMap<AnomalyKind, u64>,
    /// Indexes into [`CheckReport::anomalies`](super::CheckReport::anomalies).
    pub anomalies: Vec<usize>,
    /// Fault windows it fell in (or that ended less than `fault_grace_ms` before it).
    pub fault_ids: Vec<u64>,
    /// The leases and sections involved, in acquire order.
    #[serde(default)]
    pub holders: Vec<Holder>,
    /// What stretched a section past its lease (or which lease was granted twice) and which
    /// fault was active, or that none was.
    pub cause: String,
    /// The ledger rows and history ops that prove it.
    #[serde(default)]
    pub witness: Witness,
}

impl Incident {
    /// Whether `t_us` falls inside `[start_us, end_us]`.
    pub fn contains(&self, t_us: u64) -> bool {
        self.start_us <= t_us && t_us <= self.end_us
    }
}

fn is_interval(kind: AnomalyKind) -> bool {
    kind.is_interval()
}

fn is_point(kind: AnomalyKind) -> bool {
    matches!(
        kind,
        AnomalyKind::StaleWriteAccepted
            | AnomalyKind::StaleWriteRejected
            | AnomalyKind::LostUpdate
            | AnomalyKind::TokenRegression
            | AnomalyKind::TokenDuplicate
    )
}

/// Rank for [`Incident::kind`]: lower is more telling.
fn rank(kind: AnomalyKind) -> u8 {
    match kind {
        AnomalyKind::MutexViolation => 0,
        AnomalyKind::BelievedOverlap => 1,
        AnomalyKind::StaleWriteAccepted => 2,
        AnomalyKind::LostUpdate => 3,
        AnomalyKind::TokenRegression => 4,
        AnomalyKind::TokenDuplicate => 5,
        AnomalyKind::PossibleOverlap => 6,
        AnomalyKind::StaleWriteRejected => 7,
        AnomalyKind::StuckResource | AnomalyKind::Unavailable => 8,
    }
}

/// Groups the listed anomalies into incidents (holders, witness and cause still empty).
/// `anomalies` must already carry their `fault_ids`.
pub(crate) fn group(anomalies: &[Anomaly]) -> Vec<Incident> {
    let mut by_resource: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, a) in anomalies.iter().enumerate() {
        if is_interval(a.kind) || is_point(a.kind) {
            by_resource.entry(a.resource.as_str()).or_default().push(i);
        }
    }
    let mut out: Vec<Incident> = Vec::new();
    for (resource, idx) in by_resource {
        let mut intervals: Vec<(u64, u64, usize)> = idx
            .iter()
            .map(|&i| &anomalies[i])
            .zip(idx.iter())
            .filter(|(a, _)| is_interval(a.kind))
            .map(|(a, &i)| (a.time_us, a.end_us.unwrap_or(a.time_us).max(a.time_us), i))
            .collect();
        intervals.sort_unstable();
        let mut groups: Vec<(u64, u64, Vec<usize>)> = Vec::new();
        for (s, e, i) in intervals {
            match groups.last_mut() {
                Some(g) if s <= g.1 => {
                    g.1 = g.1.max(e);
                    g.2.push(i);
                }
                _ => groups.push((s, e, vec![i])),
            }
        }
        let mut points: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| is_point(anomalies[i].kind))
            .collect();
        points.sort_by_key(|&i| anomalies[i].time_us);
        for i in points {
            let t = anomalies[i].time_us;
            // Groups are disjoint and sorted: at most one contains t.
            let g = groups.partition_point(|g| g.1 < t);
            match groups.get_mut(g) {
                Some(g) if g.0 <= t => g.2.push(i),
                _ => out.push(build(resource, t, t, &[i], anomalies)),
            }
        }
        for (s, e, members) in groups {
            out.push(build(resource, s, e, &members, anomalies));
        }
    }
    out.sort_by(|a, b| (a.start_us, &a.resource).cmp(&(b.start_us, &b.resource)));
    for (n, inc) in out.iter_mut().enumerate() {
        inc.id = n as u32 + 1;
    }
    out
}

fn build(resource: &str, start: u64, end: u64, members: &[usize], all: &[Anomaly]) -> Incident {
    let mut clients = BTreeSet::new();
    let mut tokens = BTreeSet::new();
    let mut faults = BTreeSet::new();
    let mut counts: BTreeMap<AnomalyKind, u64> = BTreeMap::new();
    let mut pairs: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut max_holders = 0;
    for &i in members {
        let a = &all[i];
        clients.extend(a.clients.iter().copied());
        tokens.extend(a.tokens.iter().copied());
        faults.extend(a.fault_ids.iter().copied());
        *counts.entry(a.kind).or_insert(0) += 1;
        max_holders = max_holders.max(a.holders.unwrap_or(0));
        if is_interval(a.kind) {
            for (k, &x) in a.clients.iter().enumerate() {
                for &y in &a.clients[k + 1..] {
                    pairs.insert((x.min(y), x.max(y)));
                }
            }
        }
    }
    let kind = counts
        .keys()
        .copied()
        .min_by_key(|k| rank(*k))
        .unwrap_or(AnomalyKind::MutexViolation);
    let mut anomalies = members.to_vec();
    anomalies.sort_unstable();
    Incident {
        id: 0,
        kind,
        safety: counts.keys().any(|k| k.is_safety()),
        resource: resource.to_string(),
        start_us: start,
        end_us: end,
        clients: clients.into_iter().collect(),
        tokens: tokens.into_iter().collect(),
        max_holders,
        pairs: pairs.len() as u32,
        counts,
        anomalies,
        fault_ids: faults.into_iter().collect(),
        holders: Vec::new(),
        cause: String::new(),
        witness: Witness::default(),
    }
}

/// Folds a point incident (a late write's stale write or lost update) into the overlap
/// incident whose witness already holds its ledger rows: the same section wrote it, so it is a
/// consequence of that overlap, not a separate event. The overlap incident's end moves to the
/// consequence. Ids are renumbered.
pub(crate) fn absorb_consequences(incidents: &mut Vec<Incident>, anomalies: &[Anomaly]) {
    let overlap = |i: &Incident| i.anomalies.iter().any(|&a| is_interval(anomalies[a].kind));
    let mut k = 0;
    while k < incidents.len() {
        let p = &incidents[k];
        let seqs: Vec<i64> = p
            .anomalies
            .iter()
            .flat_map(|&a| anomalies[a].ledger_seqs.iter().copied())
            .filter(|s| *s > 0)
            .collect();
        let target = (!overlap(p) && !seqs.is_empty())
            .then(|| {
                incidents.iter().position(|i| {
                    i.resource == p.resource
                        && overlap(i)
                        && i.start_us <= p.start_us
                        && seqs
                            .iter()
                            .all(|s| i.witness.ledger.iter().any(|r| r.seq == *s))
                })
            })
            .flatten();
        match target {
            Some(t) => {
                let p = incidents.remove(k);
                let t = if t > k { t - 1 } else { t };
                merge(&mut incidents[t], p);
                if t < k {
                    k -= 1;
                }
                k += 1;
            }
            None => k += 1,
        }
    }
    for (n, inc) in incidents.iter_mut().enumerate() {
        inc.id = n as u32 + 1;
    }
}

fn merge(into: &mut Incident, p: Incident) {
    let union = |a: &mut Vec<u32>, b: Vec<u32>| {
        a.extend(b);
        a.sort_unstable();
        a.dedup();
    };
    union(&mut into.clients, p.clients);
    into.tokens.extend(p.tokens);
    into.tokens.sort_unstable();
    into.tokens.dedup();
    into.fault_ids.extend(p.fault_ids);
    into.fault_ids.sort_unstable();
    into.fault_ids.dedup();
    for (k, n) in p.counts {
        *into.counts.entry(k).or_insert(0) += n;
    }
    into.anomalies.extend(p.anomalies);
    into.anomalies.sort_unstable();
    into.safety |= p.safety;
    into.kind = into
        .counts
        .keys()
        .copied()
        .min_by_key(|k| rank(*k))
        .unwrap_or(into.kind);
    into.end_us = into.end_us.max(p.end_us);
    for h in p.holders {
        let same = |x: &Holder| {
            x.client == h.client
                && match (x.section_id, h.section_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => x.acquired_us == h.acquired_us,
                }
        };
        if !into.holders.iter().any(same) {
            into.holders.push(h);
        }
    }
    into.holders.sort_by_key(|h| {
        (
            h.acquired_us.or(h.section_begin_us).unwrap_or(u64::MAX),
            h.client,
        )
    });
    let w = &mut into.witness;
    for r in p.witness.ledger {
        if !w.ledger.iter().any(|x| x.seq == r.seq) {
            w.ledger.push(r);
        }
    }
    w.ledger.sort_by_key(|r| r.seq);
    for o in p.witness.ops {
        if !w
            .ops
            .iter()
            .any(|x| x.index == o.index && x.client == o.client)
        {
            w.ops.push(o);
        }
    }
    w.ops.sort_by_key(|o| o.index);
    w.omitted += p.witness.omitted;
}

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
    } else if let Some((first, second)) = granted_twice(inc) {
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
        // A third client's release that ran while the second grant could have happened (from
        // the first acquire's invoke to the second's ok): the usual way a lock is freed under
        // its holder (a release without an owner check).
        let ops = &inc.witness.ops;
        let from = first.acquire_invoke_us.or(first.acquired_us).unwrap_or(0);
        let until = second.acquired_us.unwrap_or(u64::MAX);
        let freed = ops
            .iter()
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
            .max_by_key(|(invoke, _)| *invoke);
        if let Some((invoke, done)) = freed {
            let _ = write!(
                out,
                " (c{}'s release ran from {} to {}, in between)",
                done.client,
                secs(invoke),
                secs(done.time_us)
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn anomaly(kind: AnomalyKind, t: u64, end: Option<u64>, clients: &[u32]) -> Anomaly {
        Anomaly {
            kind,
            resource: "r".into(),
            time_us: t,
            end_us: end,
            clients: clients.to_vec(),
            tokens: vec![],
            holders: Some(clients.len() as u32),
            ledger_seqs: vec![],
            fault_ids: vec![],
            detail: format!("{kind:?}"),
        }
    }

    #[test]
    fn overlapping_intervals_and_points_inside_merge() {
        let a = vec![
            anomaly(AnomalyKind::MutexViolation, 100, Some(300), &[1, 2]),
            anomaly(AnomalyKind::BelievedOverlap, 250, Some(400), &[2, 3]),
            anomaly(AnomalyKind::LostUpdate, 350, None, &[1]),
            anomaly(AnomalyKind::MutexViolation, 500, Some(600), &[1, 2]),
            anomaly(AnomalyKind::StaleWriteRejected, 450, None, &[4]),
            anomaly(AnomalyKind::Unavailable, 100, Some(900), &[5]),
        ];
        let inc = group(&a);
        assert_eq!(inc.len(), 3, "{inc:#?}");
        assert_eq!((inc[0].start_us, inc[0].end_us), (100, 400));
        assert_eq!(inc[0].anomalies, vec![0, 1, 2]);
        assert_eq!(inc[0].clients, vec![1, 2, 3]);
        assert_eq!(inc[0].pairs, 2);
        assert_eq!(inc[0].kind, AnomalyKind::MutexViolation);
        assert!(inc[0].safety);
        assert_eq!(inc[1].kind, AnomalyKind::StaleWriteRejected);
        assert!(!inc[1].safety);
        assert_eq!((inc[1].start_us, inc[1].end_us), (450, 450));
        assert_eq!(inc[2].anomalies, vec![3]);
        assert_eq!(inc.iter().map(|i| i.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn cause_names_the_late_holder_and_the_fault_or_its_absence() {
        let a = vec![anomaly(
            AnomalyKind::MutexViolation,
            1_000_000,
            Some(2_000_000),
            &[0, 1],
        )];
        let mut inc = group(&a);
        inc[0].holders = vec![
            Holder {
                client: 0,
                acquire_invoke_us: Some(900_000),
                acquired_us: Some(900_500),
                validity_end_us: Some(1_200_000),
                section_begin_us: Some(1_000_000),
                section_end_us: Some(2_030_000),
                ..Holder::default()
            },
            Holder {
                client: 1,
                acquired_us: Some(1_300_000),
                validity_end_us: Some(1_600_000),
                section_begin_us: Some(1_300_100),
                section_end_us: Some(1_320_000),
                ..Holder::default()
            },
        ];
        let mut no_fault = inc.clone();
        explain(&mut no_fault, &a, &[]);
        let c = &no_fault[0].cause;
        assert!(
            c.starts_with("c0's section ended 830 ms after its lease's validity; no fault active"),
            "{c}"
        );
        assert!(c.contains("the section lasted 1030 ms"), "{c}");
        assert_eq!(no_fault[0].holders[0].overstay_ms, Some(830));
        assert_eq!(no_fault[0].holders[1].overstay_ms, Some(-280));

        inc[0].fault_ids = vec![7];
        let pause = FaultWindow {
            id: 7,
            kind: "client-pause".into(),
            targets: vec!["client-0".into(), "client-2".into()],
            start_us: 950_000,
            end_us: Some(2_000_000),
            detail: String::new(),
        };
        explain(&mut inc, &a, &[pause]);
        let c = &inc[0].cause;
        assert!(
            c.ends_with("; client-pause on client-0, client-2 (0.950 s–2.000 s) held it up"),
            "{c}"
        );
        assert!(!c.contains("no fault") && !c.contains("during"), "{c}");
    }

    #[test]
    fn cause_for_a_lease_granted_twice() {
        let a = vec![anomaly(
            AnomalyKind::BelievedOverlap,
            1_000_000,
            Some(1_100_000),
            &[1, 2],
        )];
        let mut inc = group(&a);
        inc[0].holders = vec![
            Holder {
                client: 1,
                acquired_us: Some(900_000),
                validity_end_us: Some(1_500_000),
                released_us: Some(1_100_000),
                ..Holder::default()
            },
            Holder {
                client: 2,
                token: Some(9),
                acquired_us: Some(1_000_000),
                validity_end_us: Some(1_600_000),
                released_us: Some(1_050_000),
                ..Holder::default()
            },
        ];
        explain(&mut inc, &a, &[]);
        assert_eq!(
            inc[0].cause,
            "c2 (token 9) acquired at 1.000 s while c1's lease was still valid for 500 ms; no fault active"
        );
    }
}
