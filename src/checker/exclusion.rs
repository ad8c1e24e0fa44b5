//! Rules 1–3, from the ledger's commit order alone (no clocks): mutual-exclusion violations,
//! stale writes, lost updates.
//!
//! * **Inside**: a section is inside its resource from its accepted `begin` until its `end` or
//!   `crash`. In a fenced ledger a section is also out once a step with a higher token has been
//!   accepted on the resource (it is fenced out: every later write of it is rejected), so a
//!   paused holder whose lease expired is not counted as a second holder when fencing works.
//! * **Mutex violation**: an accepted `begin` while another section is inside. Consecutive
//!   violations are grouped into one episode that lasts while ≥ 2 sections are inside; the
//!   anomaly names every client and token of the episode and the most holders inside at once.
//! * **Stale write**: a write whose token is lower than the highest token of any accepted begin
//!   or write on the resource before it. Accepted = damage (safety anomaly); rejected with reason
//!   `stale` = fencing worked (counted, listed as non-safety).
//! * **Lost update**: replaying accepted writes in commit order, a write of value `v` when the
//!   counter is `c` with `v ≤ c` overwrote `c + 1 − v` increments. The count in the stats is the
//!   authoritative Σ max(0, accepted writes − final counter) per resource.

use std::collections::{BTreeSet, HashMap};

use crate::ledger::{FenceMode, LedgerEvent, RejectReason, Step};

use super::verdict::{Anomaly, AnomalyKind, AnomalySink, Stats};

struct Inside {
    section_id: u64,
    client: u32,
    token: Option<u64>,
    begin_us: u64,
    seq: i64,
}

struct Episode {
    start_us: u64,
    clients: BTreeSet<u32>,
    tokens: BTreeSet<u64>,
    seqs: Vec<i64>,
    max_holders: u32,
}

#[derive(Default)]
struct ResourceLedger {
    inside: Vec<Inside>,
    episode: Option<Episode>,
    max_token: Option<u64>,
    counter: i64,
    last_writer: Option<(u32, Option<u64>)>,
    accepted_writes: u64,
    /// Increments lost as seen write by write.
    lost_seen: u64,
    last_write: Option<(u64, i64)>,
}

impl ResourceLedger {
    /// An accepted begin: in a fenced ledger the sections with a lower token are fenced out;
    /// the section is inside, and two or more inside open (or extend) an overlap episode.
    fn begin(&mut self, ev: &LedgerEvent, mode: FenceMode, stats: &mut Stats) {
        if let (FenceMode::Fenced, Some(t)) = (mode, ev.fencing_token) {
            self.inside.retain(|s| s.token.is_some_and(|st| st >= t));
        }
        self.inside.retain(|s| s.section_id != ev.section_id);
        self.inside.push(Inside {
            section_id: ev.section_id,
            client: ev.client,
            token: ev.fencing_token,
            begin_us: ev.time_us,
            seq: ev.seq,
        });
        self.max_token = max_opt(self.max_token, ev.fencing_token);
        let n = self.inside.len() as u32;
        stats.max_concurrent_holders = stats.max_concurrent_holders.max(n);
        if n >= 2 {
            let ep = self.episode.get_or_insert_with(|| Episode {
                start_us: self.inside.iter().map(|s| s.begin_us).min().unwrap_or(0),
                clients: BTreeSet::new(),
                tokens: BTreeSet::new(),
                seqs: Vec::new(),
                max_holders: 0,
            });
            for s in &self.inside {
                ep.clients.insert(s.client);
                ep.tokens.extend(s.token);
                if !ep.seqs.contains(&s.seq) && ep.seqs.len() < 64 {
                    ep.seqs.push(s.seq);
                }
            }
            ep.max_holders = ep.max_holders.max(n);
        }
    }

    /// A write: accepted, it may be stale (damage) or overwrite increments (lost update) and
    /// fences out lower tokens; rejected as stale, fencing worked.
    fn write(
        &mut self,
        ev: &LedgerEvent,
        mode: FenceMode,
        stats: &mut Stats,
        sink: &mut AnomalySink,
    ) {
        let stale = matches!((ev.fencing_token, self.max_token), (Some(t), Some(m)) if t < m);
        if ev.accepted {
            if stale {
                stats.stale_writes_accepted += 1;
                sink.push(Anomaly {
                    kind: AnomalyKind::StaleWriteAccepted,
                    resource: ev.resource.clone(),
                    time_us: ev.time_us,
                    end_us: None,
                    clients: vec![ev.client],
                    tokens: vec![ev.fencing_token.unwrap_or(0), self.max_token.unwrap_or(0)],
                    holders: None,
                    ledger_seqs: vec![ev.seq],
                    fault_ids: Vec::new(),
                    detail: format!(
                        "client {} wrote with token {} after token {} had been accepted, and the write was accepted",
                        ev.client,
                        ev.fencing_token.unwrap_or(0),
                        self.max_token.unwrap_or(0)
                    ),
                });
            }
            let v = ev.value.unwrap_or(0);
            if v <= self.counter {
                self.lost_update(ev, v, sink);
            }
            self.counter = v;
            self.accepted_writes += 1;
            self.last_write = Some((ev.time_us, ev.seq));
            self.last_writer = Some((ev.client, ev.fencing_token));
            self.max_token = max_opt(self.max_token, ev.fencing_token);
            if mode == FenceMode::Fenced {
                if let Some(t) = ev.fencing_token {
                    self.inside.retain(|s| s.token.is_some_and(|st| st >= t));
                }
            }
        } else if ev.reason == Some(RejectReason::Stale) {
            stats.stale_writes_rejected += 1;
            sink.push(Anomaly {
                kind: AnomalyKind::StaleWriteRejected,
                resource: ev.resource.clone(),
                time_us: ev.time_us,
                end_us: None,
                clients: vec![ev.client],
                tokens: ev.fencing_token.into_iter().chain(self.max_token).collect(),
                holders: None,
                ledger_seqs: vec![ev.seq],
                fault_ids: Vec::new(),
                detail: format!(
                    "the ledger rejected client {}'s write with stale token {:?} (fencing worked)",
                    ev.client, ev.fencing_token
                ),
            });
        }
    }

    /// An accepted write of `v` over a counter at or above it: `counter + 1 − v` increments lost.
    fn lost_update(&mut self, ev: &LedgerEvent, v: i64, sink: &mut AnomalySink) {
        let lost = (self.counter + 1 - v) as u64;
        self.lost_seen += lost;
        let mut clients = vec![ev.client];
        let mut tokens: Vec<u64> = ev.fencing_token.into_iter().collect();
        if let Some((c, t)) = self.last_writer {
            clients.push(c);
            tokens.extend(t);
        }
        clients.sort_unstable();
        clients.dedup();
        tokens.sort_unstable();
        tokens.dedup();
        sink.push(Anomaly {
            kind: AnomalyKind::LostUpdate,
            resource: ev.resource.clone(),
            time_us: ev.time_us,
            end_us: None,
            clients,
            tokens,
            holders: None,
            ledger_seqs: vec![ev.seq],
            fault_ids: Vec::new(),
            detail: format!(
                "client {} wrote {} over counter {}: {} increment(s) lost",
                ev.client, v, self.counter, lost
            ),
        });
    }
}

/// Streaming analysis of ledger events in commit order; per-resource state only.
pub(crate) struct LedgerAnalysis {
    mode: FenceMode,
    resources: HashMap<String, ResourceLedger>,
    pub(crate) sink: AnomalySink,
    pub(crate) stats: Stats,
    last_us: u64,
}

impl LedgerAnalysis {
    pub(crate) fn new(mode: FenceMode, cap: u64) -> Self {
        Self {
            mode,
            resources: HashMap::new(),
            sink: AnomalySink::new(cap),
            stats: Stats::default(),
            last_us: 0,
        }
    }

    pub(crate) fn feed(&mut self, ev: &LedgerEvent) {
        self.stats.ledger_events += 1;
        self.last_us = self.last_us.max(ev.time_us);
        if !self.resources.contains_key(&ev.resource) {
            self.resources
                .insert(ev.resource.clone(), ResourceLedger::default());
        }
        let r = self.resources.get_mut(&ev.resource).expect("inserted");
        match ev.step {
            Step::Begin => {
                self.stats.sections += 1;
                if !ev.accepted {
                    return;
                }
                r.begin(ev, self.mode, &mut self.stats);
            }
            Step::Read => {}
            Step::Write => r.write(ev, self.mode, &mut self.stats, &mut self.sink),
            Step::End | Step::Crash => {
                r.inside.retain(|s| s.section_id != ev.section_id);
            }
        }
        if r.inside.len() <= 1 {
            if let Some(ep) = r.episode.take() {
                emit_episode(
                    &mut self.sink,
                    &mut self.stats,
                    &ev.resource,
                    ep,
                    ev.time_us,
                );
            }
        }
    }

    /// Overlap episodes begun and not yet over (each becomes one mutex violation when it ends,
    /// or at [`finish`](Self::finish)).
    pub(crate) fn open_episodes(&self) -> u64 {
        self.resources
            .values()
            .filter(|r| r.episode.is_some())
            .count() as u64
    }

    /// Increments lost so far, as seen write by write (the final count also compares each
    /// resource's accepted writes with its final counter).
    pub(crate) fn lost_updates_seen(&self) -> u64 {
        self.resources.values().map(|r| r.lost_seen).sum()
    }

    /// Closes open episodes and applies the final counters (`None`: use the replayed ones).
    pub(crate) fn finish(
        mut self,
        final_counters: Option<&[(String, i64)]>,
    ) -> (Stats, AnomalySink) {
        let mut names: Vec<String> = self.resources.keys().cloned().collect();
        names.sort();
        for name in names {
            let r = self.resources.get_mut(&name).expect("present");
            if let Some(ep) = r.episode.take() {
                emit_episode(&mut self.sink, &mut self.stats, &name, ep, self.last_us);
            }
            let fin = final_counters
                .and_then(|c| c.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
                .unwrap_or(r.counter);
            let lost = (r.accepted_writes as i64 - fin).max(0) as u64;
            self.stats.lost_updates += lost;
            // Lost updates are decided by the final counter even if no single write showed them.
            if lost > r.lost_seen {
                let (time_us, seq) = r.last_write.unwrap_or((self.last_us, 0));
                self.sink.push(Anomaly {
                    kind: AnomalyKind::LostUpdate,
                    resource: name.clone(),
                    time_us,
                    end_us: None,
                    clients: Vec::new(),
                    tokens: Vec::new(),
                    holders: None,
                    ledger_seqs: vec![seq],
                    fault_ids: Vec::new(),
                    detail: format!(
                        "{} accepted writes but the final counter of {name} is {fin}",
                        r.accepted_writes
                    ),
                });
            }
        }
        (self.stats, self.sink)
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn emit_episode(
    sink: &mut AnomalySink,
    stats: &mut Stats,
    resource: &str,
    ep: Episode,
    end_us: u64,
) {
    stats.mutex_violations += 1;
    sink.push(Anomaly {
        kind: AnomalyKind::MutexViolation,
        resource: resource.to_string(),
        time_us: ep.start_us,
        end_us: Some(end_us),
        clients: ep.clients.iter().copied().collect(),
        tokens: ep.tokens.iter().copied().collect(),
        holders: Some(ep.max_holders),
        ledger_seqs: ep.seqs,
        fault_ids: Vec::new(),
        detail: format!(
            "{} holders were inside {resource} at once (clients {:?})",
            ep.max_holders, ep.clients
        ),
    });
}
