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

use serde::{Deserialize, Serialize};

use super::verdict::{Anomaly, AnomalyKind};
use crate::history::Op;
use crate::ledger::LedgerEvent;

mod cause;
#[cfg(test)]
mod tests;

pub(crate) use cause::explain;
pub use cause::fault_clients;

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
            | AnomalyKind::DuplicateEffect
            | AnomalyKind::UnexpectedEffect
            | AnomalyKind::EffectDeduplicated
            | AnomalyKind::DuplicateExecution
            | AnomalyKind::ZombieCompletion
            | AnomalyKind::StaleCompletionRefused
    )
}

/// Rank for [`Incident::kind`]: lower is more telling.
fn rank(kind: AnomalyKind) -> u8 {
    match kind {
        AnomalyKind::MutexViolation => 0,
        AnomalyKind::BelievedOverlap => 1,
        AnomalyKind::DuplicateEffect => 2,
        AnomalyKind::StaleWriteAccepted => 3,
        AnomalyKind::LostUpdate => 4,
        AnomalyKind::UnexpectedEffect => 5,
        AnomalyKind::TokenRegression => 6,
        AnomalyKind::TokenDuplicate => 7,
        AnomalyKind::PossibleOverlap => 8,
        AnomalyKind::StaleWriteRejected => 9,
        AnomalyKind::EffectDeduplicated => 10,
        AnomalyKind::ZombieCompletion => 5,
        AnomalyKind::DuplicateExecution => 9,
        AnomalyKind::StaleCompletionRefused => 10,
        AnomalyKind::StuckResource | AnomalyKind::Unavailable => 11,
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
