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

/// A section as the ledger saw it.
#[derive(Debug, Clone)]
pub(crate) struct SectionSpan {
    client: u32,
    section_id: u64,
    token: Option<u64>,
    begin_us: u64,
    end_us: Option<u64>,
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
    windows: Vec<(u64, u64)>,
    open: HashMap<u64, OpenSection>,
    /// Per incident: rows kept, sections seen, rows omitted.
    pub(crate) rows: Vec<Vec<LedgerEvent>>,
    pub(crate) sections: Vec<Vec<SectionSpan>>,
    pub(crate) omitted: Vec<u64>,
}

impl LedgerWitness {
    pub(crate) fn new(incidents: &[Incident], anomalies_seqs: &[(usize, Vec<i64>)]) -> Self {
        let mut wanted_seqs: HashMap<i64, Vec<usize>> = HashMap::new();
        for (i, seqs) in anomalies_seqs {
            for s in seqs {
                wanted_seqs.entry(*s).or_default().push(*i);
            }
        }
        Self {
            involved: involved(incidents),
            wanted_seqs,
            windows: incidents.iter().map(|i| (i.start_us, i.end_us)).collect(),
            open: HashMap::new(),
            rows: vec![Vec::new(); incidents.len()],
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
        let span = SectionSpan {
            client: first.client,
            section_id: first.section_id,
            token: s.rows.iter().find_map(|r| r.fencing_token),
            begin_us,
            end_us,
        };
        for &i in &s.incidents {
            let (start, end) = self.windows[i];
            let hit = s.wanted_by.contains(&i)
                || (begin_us <= end && end_us.is_none_or(|e| e >= start));
            if !hit {
                continue;
            }
            let room = MAX_WITNESS_ROWS.saturating_sub(self.rows[i].len());
            let take = room.min(s.rows.len());
            self.rows[i].extend(s.rows[..take].iter().cloned());
            self.omitted[i] += (s.rows.len() - take) as u64;
            self.sections[i].push(span.clone());
        }
    }

    /// Closes sections still open when the ledger ends.
    pub(crate) fn finish(mut self) -> Self {
        let mut open: Vec<OpenSection> = self.open.drain().map(|(_, s)| s).collect();
        open.sort_by_key(|s| s.rows.first().map_or(0, |r| r.seq));
        for s in open {
            self.close(s, None);
        }
        for rows in &mut self.rows {
            rows.sort_by_key(|r| r.seq);
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
    pub(crate) ops: Vec<Vec<Op>>,
    pub(crate) leases: Vec<Vec<Holder>>,
    pub(crate) omitted: Vec<u64>,
}

impl HistoryWitness {
    pub(crate) fn new(incidents: &[Incident]) -> Self {
        Self {
            involved: involved(incidents),
            windows: incidents.iter().map(|i| (i.start_us, i.end_us)).collect(),
            current: HashMap::new(),
            ops: vec![Vec::new(); incidents.len()],
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
            HistoryEvent::Fault(_) => {}
        }
    }

    fn op(&mut self, op: &Op) {
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
            let room = MAX_WITNESS_OPS.saturating_sub(self.ops[i].len());
            let take = room.min(lease.ops.len());
            self.ops[i].extend(lease.ops[..take].iter().cloned());
            self.omitted[i] += (lease.ops.len() - take) as u64;
            self.leases[i].push(lease.holder.clone());
        }
    }

    /// Closes leases still open when the history ends.
    pub(crate) fn finish(mut self) -> Self {
        let mut open: Vec<((String, u32), LeaseSpan)> = self.current.drain().collect();
        open.sort_by_key(|(_, l)| l.holder.acquire_invoke_us);
        for (key, lease) in open {
            self.close(&key, lease);
        }
        for ops in &mut self.ops {
            ops.sort_by_key(|o| o.index);
        }
        self
    }
}

/// Puts both halves on the incidents: witness rows and ops, and holders (leases paired with
/// the sections that followed them, per client).
pub(crate) fn attach(
    incidents: &mut [Incident],
    history: Option<HistoryWitness>,
    ledger: Option<LedgerWitness>,
) {
    let (mut h_ops, mut h_leases, mut h_omitted) = match history {
        Some(h) => (h.ops, h.leases, h.omitted),
        None => Default::default(),
    };
    let (mut l_rows, mut l_sections, mut l_omitted) = match ledger {
        Some(l) => (l.rows, l.sections, l.omitted),
        None => Default::default(),
    };
    for (i, inc) in incidents.iter_mut().enumerate() {
        let leases = h_leases.get_mut(i).map(std::mem::take).unwrap_or_default();
        let sections = l_sections.get_mut(i).map(std::mem::take).unwrap_or_default();
        inc.holders = pair(leases, sections);
        inc.witness.ops = h_ops.get_mut(i).map(std::mem::take).unwrap_or_default();
        inc.witness.ledger = l_rows.get_mut(i).map(std::mem::take).unwrap_or_default();
        inc.witness.omitted = h_omitted.get_mut(i).map_or(0, |n| *n)
            + l_omitted.get_mut(i).map_or(0, |n| *n);
    }
}

/// Pairs each section with the latest lease of its client acquired before it began.
fn pair(mut leases: Vec<Holder>, mut sections: Vec<SectionSpan>) -> Vec<Holder> {
    leases.sort_by_key(|h| (h.acquired_us, h.client));
    sections.sort_by_key(|s| (s.begin_us, s.section_id));
    let mut out: Vec<Holder> = Vec::new();
    let mut used = vec![false; leases.len()];
    for s in sections {
        let idx = leases
            .iter()
            .enumerate()
            .filter(|(k, h)| {
                !used[*k]
                    && h.client == s.client
                    && !h.possible
                    && h.acquired_us.is_some_and(|a| a <= s.begin_us)
                    && (s.token.is_none() || h.token.is_none() || h.token == s.token)
            })
            .map(|(k, _)| k)
            .next_back();
        let mut h = match idx {
            Some(k) => {
                used[k] = true;
                leases[k].clone()
            }
            None => Holder {
                client: s.client,
                token: s.token,
                ..Holder::default()
            },
        };
        h.section_id = Some(s.section_id);
        h.section_begin_us = Some(s.begin_us);
        h.section_end_us = s.end_us;
        out.push(h);
    }
    out.extend(
        leases
            .into_iter()
            .zip(used)
            .filter(|(_, u)| !u)
            .map(|(h, _)| h),
    );
    out.sort_by_key(|h| {
        (
            h.acquired_us.or(h.section_begin_us).unwrap_or(u64::MAX),
            h.client,
        )
    });
    out.truncate(MAX_HOLDERS);
    out
}
