//! Witnesses: a second, filtered pass over the ledger and the history that collects, for each
//! incident, the ledger rows and history ops that prove it, and its holders.
//!
//! It runs only when there are incidents, and keeps state only for the (resource, client) pairs
//! they involve: per open section its rows, per lease its ops. A section belongs to an incident
//! when it is on the incident's resource, its client is involved, and `[begin, end]` meets the
//! incident's interval (or one of its rows is an anomaly's `ledger_seqs`). A lease (acquire
//! invoke → release / crash / next acquire) belongs to it the same way, with `[ok, release]`
//! (or `[invoke, info + TTL]` for an acquire of unknown outcome). Leases and sections are then
//! paired per client: a section belongs to the lease whose `ok` precedes its `begin`.

use std::collections::HashMap;

use super::incident::{Holder, Incident, MAX_HOLDERS, MAX_WITNESS_OPS, MAX_WITNESS_ROWS};
use crate::history::{HistoryEvent, Op, OpFn, OpKind};
use crate::ledger::{LedgerEvent, Step};

/// Who is involved where: (resource, client) → incident indexes.
type Involved = HashMap<(String, u32), Vec<usize>>;

fn involved(incidents: &[Incident]) -> Involved {
    let mut map: Involved = HashMap::new();
    for (i, inc) in incidents.iter().enumerate() {
        for &c in &inc.clients {
            map.entry((inc.resource.clone(), c)).or_default().push(i);
        }
    }
    map
}

/// Per incident, the ledger seqs its anomalies name (`named`) and those that must be shown.
pub(crate) struct WantedSeqs {
    pub(crate) incident: usize,
    pub(crate) named: Vec<i64>,
    pub(crate) must: Vec<i64>,
}

/// A section as the ledger saw it.
#[derive(Debug, Clone)]
pub(crate) struct SectionSpan {
    client: u32,
    section_id: u64,
    token: Option<u64>,
    begin_us: u64,
    end_us: Option<u64>,
    /// Whether a row of it must be shown for some incident.
    must: Vec<usize>,
}

struct OpenSection {
    rows: Vec<LedgerEvent>,
    incidents: Vec<usize>,
    /// Incidents whose anomalies name one of its rows.
    wanted_by: Vec<usize>,
}

/// The ledger half of the witness pass.
pub(crate) struct LedgerWitness {
    involved: Involved,
    wanted_seqs: HashMap<i64, Vec<usize>>,
    must_seqs: HashMap<i64, Vec<usize>>,
    windows: Vec<(u64, u64)>,
    open: HashMap<u64, OpenSection>,
    /// Per incident: candidate sections with their rows (at most [`MAX_CANDIDATES`]).
    pub(crate) sections: Vec<Vec<(SectionSpan, Vec<LedgerEvent>)>>,
    /// Per incident: rows of sections over [`MAX_CANDIDATES`].
    pub(crate) omitted: Vec<u64>,
}

/// Most sections (and leases) considered per incident; the telling ones are then chosen.
const MAX_CANDIDATES: usize = 256;

impl LedgerWitness {
    /// `seqs`: per incident, the ledger seqs its anomalies name, and those that must be shown
    /// (a stale or lost write itself).
    pub(crate) fn new(incidents: &[Incident], seqs: &[WantedSeqs]) -> Self {
        let mut wanted_seqs: HashMap<i64, Vec<usize>> = HashMap::new();
        let mut must_seqs: HashMap<i64, Vec<usize>> = HashMap::new();
        for w in seqs {
            for s in &w.named {
                wanted_seqs.entry(*s).or_default().push(w.incident);
            }
            for s in &w.must {
                must_seqs.entry(*s).or_default().push(w.incident);
            }
        }
        Self {
            involved: involved(incidents),
            wanted_seqs,
            must_seqs,
            windows: incidents.iter().map(|i| (i.start_us, i.end_us)).collect(),
            open: HashMap::new(),
            sections: vec![Vec::new(); incidents.len()],
            omitted: vec![0; incidents.len()],
        }
    }

    pub(crate) fn feed(&mut self, ev: &LedgerEvent) {
        let wanted = self.wanted_seqs.get(&ev.seq);
        if !self.open.contains_key(&ev.section_id) {
            let key = (ev.resource.clone(), ev.client);
            let candidates = self.involved.get(&key);
            if candidates.is_none() && wanted.is_none() {
                return;
            }
            self.open.insert(
                ev.section_id,
                OpenSection {
                    rows: Vec::new(),
                    incidents: candidates.cloned().unwrap_or_default(),
                    wanted_by: Vec::new(),
                },
            );
        }
        let s = self.open.get_mut(&ev.section_id).expect("inserted");
        if let Some(w) = wanted {
            for &i in w {
                if !s.incidents.contains(&i) {
                    s.incidents.push(i);
                }
                s.wanted_by.push(i);
            }
        }
        s.rows.push(ev.clone());
        if matches!(ev.step, Step::End | Step::Crash) {
            let s = self.open.remove(&ev.section_id).expect("open");
            self.close(s, Some(ev.time_us));
        }
    }

    fn close(&mut self, s: OpenSection, end_us: Option<u64>) {
        let Some(first) = s.rows.first() else {
            return;
        };
        let begin_us = first.time_us;
        let must: Vec<usize> = s
            .rows
            .iter()
            .filter_map(|r| self.must_seqs.get(&r.seq))
            .flatten()
            .copied()
            .collect();
        let span = SectionSpan {
            client: first.client,
            section_id: first.section_id,
            token: s.rows.iter().find_map(|r| r.fencing_token),
            begin_us,
            end_us,
            must,
        };
        for &i in &s.incidents {
            let (start, end) = self.windows[i];
            let hit =
                s.wanted_by.contains(&i) || (begin_us <= end && end_us.is_none_or(|e| e >= start));
            if !hit {
                continue;
            }
            if self.sections[i].len() < MAX_CANDIDATES || span.must.contains(&i) {
                self.sections[i].push((span.clone(), s.rows.clone()));
            } else {
                self.omitted[i] += s.rows.len() as u64;
            }
        }
    }

    /// Closes sections still open when the ledger ends.
    pub(crate) fn finish(mut self) -> Self {
        let mut open: Vec<OpenSection> = self.open.drain().map(|(_, s)| s).collect();
        open.sort_by_key(|s| s.rows.first().map_or(0, |r| r.seq));
        for s in open {
            self.close(s, None);
        }
        self
    }
}

/// A lease as the history saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaseSpan {
    holder: Holder,
    ops: Vec<Op>,
    /// When the lease stopped (release invoke, crash, next acquire); `None` = history ended.
    until_us: Option<u64>,
}

/// The history half of the witness pass.
pub(crate) struct HistoryWitness {
    involved: Involved,
    windows: Vec<(u64, u64)>,
    current: HashMap<(String, u32), LeaseSpan>,
    /// Per incident: candidate leases with their ops (at most [`MAX_CANDIDATES`]).
    pub(crate) leases: Vec<Vec<(Holder, Vec<Op>)>>,
    /// Per incident: ops of leases over [`MAX_CANDIDATES`].
    pub(crate) omitted: Vec<u64>,
    /// Per incident: releases by clients outside it shortly before or during it (invoke and
    /// completion), at most [`MAX_FOREIGN`]: a release that frees another client's lock shows.
    pub(crate) foreign: Vec<Vec<Op>>,
    /// Incident indexes per resource, and each client's last release invoke on them.
    by_resource: HashMap<String, Vec<usize>>,
    release_invokes: HashMap<(String, u32), Op>,
    clients: Vec<Vec<u32>>,
}

/// Foreign releases kept per incident (invoke + completion each).
const MAX_FOREIGN: usize = 16;
/// How long before an incident a foreign release is still of interest, µs.
const FOREIGN_BEFORE_US: u64 = 1_000_000;

impl HistoryWitness {
    pub(crate) fn new(incidents: &[Incident]) -> Self {
        let mut by_resource: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, inc) in incidents.iter().enumerate() {
            by_resource.entry(inc.resource.clone()).or_default().push(i);
        }
        Self {
            foreign: vec![Vec::new(); incidents.len()],
            by_resource,
            release_invokes: HashMap::new(),
            clients: incidents.iter().map(|i| i.clients.clone()).collect(),
            involved: involved(incidents),
            windows: incidents.iter().map(|i| (i.start_us, i.end_us)).collect(),
            current: HashMap::new(),
            leases: vec![Vec::new(); incidents.len()],
            omitted: vec![0; incidents.len()],
        }
    }

    pub(crate) fn feed(&mut self, ev: &HistoryEvent) {
        match ev {
            HistoryEvent::Op(op) => self.op(op),
            HistoryEvent::Crash(c) => {
                let keys: Vec<(String, u32)> = self
                    .current
                    .keys()
                    .filter(|(_, client)| *client == c.client)
                    .cloned()
                    .collect();
                for key in keys {
                    let mut lease = self.current.remove(&key).expect("present");
                    lease.holder.released_us.get_or_insert(c.time_us);
                    lease.until_us = Some(c.time_us);
                    self.close(&key, lease);
                }
            }
            HistoryEvent::Fault(_) | HistoryEvent::RunEnd(_) => {}
        }
    }

    fn foreign_release(&mut self, op: &Op) {
        let Some(incidents) = self.by_resource.get(&op.resource) else {
            return;
        };
        let key = (op.resource.clone(), op.client);
        if op.kind == OpKind::Invoke {
            self.release_invokes.insert(key, op.clone());
            return;
        }
        let invoke = self.release_invokes.remove(&key);
        for &i in incidents {
            let (start, end) = self.windows[i];
            let near = op.time_us + FOREIGN_BEFORE_US >= start && op.time_us <= end;
            if !near || self.clients[i].contains(&op.client) || self.foreign[i].len() >= MAX_FOREIGN
            {
                continue;
            }
            self.foreign[i].extend(invoke.iter().cloned());
            self.foreign[i].push(op.clone());
        }
    }

    fn op(&mut self, op: &Op) {
        if op.f == OpFn::Release {
            self.foreign_release(op);
        }
        let key = (op.resource.clone(), op.client);
        if !self.involved.contains_key(&key) {
            return;
        }
        if op.f == OpFn::Acquire && op.kind == OpKind::Invoke {
            if let Some(mut prev) = self.current.remove(&key) {
                prev.until_us = Some(op.time_us);
                self.close(&key, prev);
            }
            let mut lease = LeaseSpan::default();
            lease.holder.client = op.client;
            lease.holder.acquire_invoke_us = Some(op.time_us);
            lease.ops.push(op.clone());
            self.current.insert(key, lease);
            return;
        }
        let Some(lease) = self.current.get_mut(&key) else {
            return;
        };
        lease.ops.push(op.clone());
        let h = &mut lease.holder;
        match (op.f, op.kind) {
            (OpFn::Acquire, OpKind::Ok) => {
                h.acquired_us = Some(op.time_us);
                h.token = op.fencing_token;
                h.validity_end_us = op.validity_deadline_us;
            }
            (OpFn::Acquire, OpKind::Info) => {
                h.possible = true;
                h.acquired_us = Some(op.time_us);
                h.validity_end_us = op.ttl_ms.map(|t| op.time_us + t * 1000);
            }
            (OpFn::Extend, OpKind::Ok) => {
                h.validity_end_us = op.validity_deadline_us;
                h.token = h.token.or(op.fencing_token);
            }
            (OpFn::Release, OpKind::Invoke) => {
                h.released_us.get_or_insert(op.time_us);
            }
            (OpFn::Release, _) => {
                // The lease's story ends with the release's outcome.
                let lease = self.current.remove(&key).expect("present");
                let until = lease.holder.released_us.or(Some(op.time_us));
                let mut lease = lease;
                lease.until_us = until;
                self.close(&key, lease);
            }
            _ => {}
        }
    }

    fn close(&mut self, key: &(String, u32), lease: LeaseSpan) {
        let Some(acquired) = lease.holder.acquired_us else {
            return; // a failed acquire: nobody held anything
        };
        let from = if lease.holder.possible {
            lease.holder.acquire_invoke_us.unwrap_or(acquired)
        } else {
            acquired
        };
        let Some(incidents) = self.involved.get(key) else {
            return;
        };
        // A possible holder may hold until its TTL ends; a definite one until it let go.
        let to = if lease.holder.possible {
            lease.holder.validity_end_us.or(lease.until_us)
        } else {
            lease.until_us
        };
        for &i in incidents {
            let (start, end) = self.windows[i];
            if from > end || to.is_some_and(|t| t < start) {
                continue;
            }
            if self.leases[i].len() < MAX_CANDIDATES {
                self.leases[i].push((lease.holder.clone(), lease.ops.clone()));
            } else {
                self.omitted[i] += lease.ops.len() as u64;
            }
        }
    }

    /// Closes leases still open when the history ends.
    pub(crate) fn finish(mut self) -> Self {
        let mut open: Vec<((String, u32), LeaseSpan)> = self.current.drain().collect();
        open.sort_by_key(|(_, l)| l.holder.acquire_invoke_us);
        for (key, lease) in open {
            self.close(&key, lease);
        }
        self
    }
}

/// Puts both halves on the incidents: leases are paired with the sections that followed them
/// (per client), the most telling pairs become the holders (see [`choose`]), and their rows
/// and ops the witness.
pub(crate) fn attach(
    incidents: &mut [Incident],
    history: Option<HistoryWitness>,
    ledger: Option<LedgerWitness>,
) {
    let (mut leases, h_omitted, mut foreign) = match history {
        Some(h) => (h.leases, h.omitted, h.foreign),
        None => Default::default(),
    };
    let (mut sections, l_omitted) = match ledger {
        Some(l) => (l.sections, l.omitted),
        None => Default::default(),
    };
    for (i, inc) in incidents.iter_mut().enumerate() {
        let l = leases.get_mut(i).map(std::mem::take).unwrap_or_default();
        let s = sections.get_mut(i).map(std::mem::take).unwrap_or_default();
        let mut pairs = pair(l, s, i);
        for p in &mut pairs {
            p.holder.compute_overstay();
        }
        let total: u64 = pairs
            .iter()
            .map(|p| (p.ops.len() + p.rows.len()) as u64)
            .sum();
        let chosen = choose(pairs);
        let mut holders = Vec::new();
        let (mut rows, mut ops) = (Vec::new(), Vec::new());
        for p in chosen {
            holders.push(p.holder);
            rows.extend(p.rows);
            ops.extend(p.ops);
        }
        rows.sort_by_key(|r| r.seq);
        rows.truncate(MAX_WITNESS_ROWS);
        ops.truncate(MAX_WITNESS_OPS);
        // Other clients' releases only explain a lock granted twice.
        let others = foreign
            .get_mut(i)
            .map(std::mem::take)
            .filter(|_| inc.kind.is_interval())
            .unwrap_or_default();
        let room = (MAX_WITNESS_OPS + MAX_FOREIGN).saturating_sub(ops.len());
        ops.extend(others.into_iter().take(room));
        ops.sort_by_key(|o| o.index);
        holders.sort_by_key(|h| {
            (
                h.acquired_us.or(h.section_begin_us).unwrap_or(u64::MAX),
                h.client,
            )
        });
        let shown = (rows.len() + ops.len()) as u64;
        inc.holders = holders;
        inc.witness.ledger = rows;
        inc.witness.ops = ops;
        inc.witness.omitted = total.saturating_sub(shown)
            + h_omitted.get(i).copied().unwrap_or(0)
            + l_omitted.get(i).copied().unwrap_or(0);
    }
}

/// A lease and the section it ran, with their evidence.
struct Paired {
    holder: Holder,
    ops: Vec<Op>,
    rows: Vec<LedgerEvent>,
    /// A row of it must be shown (it is the anomaly itself).
    must: bool,
}

/// Pairs each section with the latest unused lease of its client acquired before it began.
fn pair(
    mut leases: Vec<(Holder, Vec<Op>)>,
    mut sections: Vec<(SectionSpan, Vec<LedgerEvent>)>,
    incident: usize,
) -> Vec<Paired> {
    leases.sort_by_key(|(h, _)| (h.acquired_us, h.client));
    sections.sort_by_key(|(s, _)| (s.begin_us, s.section_id));
    let mut used = vec![false; leases.len()];
    let mut out: Vec<Paired> = Vec::new();
    for (s, rows) in sections {
        let idx = leases
            .iter()
            .enumerate()
            .filter(|(k, (h, _))| {
                !used[*k]
                    && h.client == s.client
                    && !h.possible
                    && h.acquired_us.is_some_and(|a| a <= s.begin_us)
                    && (s.token.is_none() || h.token.is_none() || h.token == s.token)
            })
            .map(|(k, _)| k)
            .next_back();
        let (mut holder, ops) = match idx {
            Some(k) => {
                used[k] = true;
                leases[k].clone()
            }
            None => (
                Holder {
                    client: s.client,
                    token: s.token,
                    ..Holder::default()
                },
                Vec::new(),
            ),
        };
        holder.section_id = Some(s.section_id);
        holder.section_begin_us = Some(s.begin_us);
        holder.section_end_us = s.end_us;
        out.push(Paired {
            holder,
            ops,
            rows,
            must: s.must.contains(&incident),
        });
    }
    out.extend(
        leases
            .into_iter()
            .zip(used)
            .filter(|(_, u)| !u)
            .map(|((holder, ops), _)| Paired {
                holder,
                ops,
                rows: Vec::new(),
                must: false,
            }),
    );
    out
}

/// The most telling [`MAX_HOLDERS`] pairs: those holding the anomaly's own rows, then those
/// that outlived their lease (longest first), then the others in acquire order (the first
/// holders to overlap).
fn choose(mut pairs: Vec<Paired>) -> Vec<Paired> {
    pairs.sort_by_key(|p| {
        let late = p.holder.overstay_ms.filter(|o| *o > 0);
        (
            !p.must,
            late.is_none(),
            std::cmp::Reverse(late.unwrap_or(0)),
            p.holder
                .acquired_us
                .or(p.holder.section_begin_us)
                .unwrap_or(u64::MAX),
        )
    });
    pairs.truncate(MAX_HOLDERS);
    pairs
}
