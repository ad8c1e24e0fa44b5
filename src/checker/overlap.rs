//! Rule 6: believed overlaps, from the clients' own validity windows on the run clock.
//!
//! A client believes it holds a resource from its acquire `ok` until the earliest of its release
//! invoke, its validity deadline (moved by each extend `ok`) and its crash. Two such windows of
//! different clients that overlap mean the lock granted two valid leases at once: a **believed
//! overlap** (safety anomaly). An `info` acquire may have taken the lock at any time between its
//! invoke and its completion, so it counts as *possibly* held from its invoke until its TTL ends
//! after its completion (or until its release invoke/crash); an overlap that needs such a window
//! is a **possible overlap**: listed, but neither `invalid` nor a reason for `unknown` (the
//! ledger, which saw every section that ran, decides; docs/design.md).
//!
//! Overlaps are grouped into episodes that last while ≥ 2 windows are open on the resource.

use std::collections::BTreeSet;

use super::verdict::{Anomaly, AnomalyKind, AnomalySink, Stats};

struct Window {
    client: u32,
    start_us: u64,
    deadline_us: Option<u64>,
    token: Option<u64>,
    possible: bool,
}

struct Episode {
    start_us: u64,
    clients: BTreeSet<u32>,
    tokens: BTreeSet<u64>,
    max_definite: u32,
    definite: bool,
}

/// Per-resource believed windows.
#[derive(Default)]
pub(crate) struct BelievedWindows {
    active: Vec<Window>,
    episode: Option<Episode>,
    /// Latest end of a definite window that has closed, and its client.
    last_definite_end: Option<(u64, u32, Option<u64>)>,
}

impl BelievedWindows {
    fn prune(&mut self, now_us: u64) {
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].deadline_us.is_some_and(|d| d <= now_us) {
                let w = self.active.swap_remove(i);
                self.closed(&w, w.deadline_us.unwrap_or(now_us));
            } else {
                i += 1;
            }
        }
    }

    fn closed(&mut self, w: &Window, end_us: u64) {
        if !w.possible && self.last_definite_end.is_none_or(|(e, _, _)| end_us >= e) {
            self.last_definite_end = Some((end_us, w.client, w.token));
        }
    }

    fn remove_client(&mut self, client: u32, end_us: u64) {
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].client == client {
                let w = self.active.swap_remove(i);
                self.closed(&w, end_us.min(w.deadline_us.unwrap_or(u64::MAX)));
            } else {
                i += 1;
            }
        }
    }

    fn open(&mut self, w: Window, stats: &mut Stats) {
        let others: Vec<&Window> = self
            .active
            .iter()
            .filter(|o| o.client != w.client)
            .collect();
        // A possible window also overlaps definite windows that closed after it may have started.
        let late_closed = if w.possible {
            self.last_definite_end
                .filter(|&(e, c, _)| e > w.start_us && c != w.client)
        } else {
            None
        };
        if !others.is_empty() || late_closed.is_some() {
            let definite_now =
                others.iter().filter(|o| !o.possible).count() as u32 + u32::from(!w.possible);
            let ep = self.episode.get_or_insert_with(|| Episode {
                start_us: others
                    .iter()
                    .map(|o| o.start_us)
                    .chain([w.start_us])
                    .min()
                    .unwrap_or(w.start_us),
                clients: BTreeSet::new(),
                tokens: BTreeSet::new(),
                max_definite: 0,
                definite: false,
            });
            for o in others.iter().copied().chain([&w]) {
                ep.clients.insert(o.client);
                ep.tokens.extend(o.token);
            }
            if let Some((_, c, t)) = late_closed {
                ep.clients.insert(c);
                ep.tokens.extend(t);
            }
            ep.max_definite = ep.max_definite.max(definite_now);
            if definite_now >= 2 {
                ep.definite = true;
                stats.max_believed_holders = stats.max_believed_holders.max(definite_now);
            }
        }
        self.active.retain(|o| o.client != w.client);
        self.active.push(w);
    }

    /// A definite window opens at `ok_us` (acquire ok).
    pub(crate) fn on_acquire_ok(
        &mut self,
        client: u32,
        ok_us: u64,
        deadline_us: Option<u64>,
        token: Option<u64>,
        stats: &mut Stats,
    ) {
        self.prune(ok_us);
        stats.max_believed_holders = stats.max_believed_holders.max(1);
        if deadline_us.is_some_and(|d| d <= ok_us) {
            // The reply came after the lease was already invalid: the client holds nothing.
            self.remove_client(client, ok_us);
            return;
        }
        self.open(
            Window {
                client,
                start_us: ok_us,
                deadline_us,
                token,
                possible: false,
            },
            stats,
        );
    }

    /// An `info` acquire `[invoke_us, info_us]`: possibly held until `info_us + ttl`.
    pub(crate) fn on_acquire_info(
        &mut self,
        client: u32,
        invoke_us: u64,
        info_us: u64,
        ttl_ms: Option<u64>,
        stats: &mut Stats,
    ) {
        self.prune(info_us);
        self.open(
            Window {
                client,
                start_us: invoke_us,
                deadline_us: ttl_ms.map(|t| info_us + t * 1000),
                token: None,
                possible: true,
            },
            stats,
        );
    }

    /// An extend `ok` at `ok_us` with a new deadline. If the client's window had already ended,
    /// the extend opens a new one (the lock service said it still held the lease).
    pub(crate) fn on_extend_ok(
        &mut self,
        client: u32,
        ok_us: u64,
        deadline_us: Option<u64>,
        token: Option<u64>,
        stats: &mut Stats,
    ) {
        self.prune(ok_us);
        if let Some(w) = self
            .active
            .iter_mut()
            .find(|w| w.client == client && !w.possible)
        {
            w.deadline_us = deadline_us;
        } else {
            self.on_acquire_ok(client, ok_us, deadline_us, token, stats);
        }
    }

    /// The client stops believing (release invoke or crash) at `now_us`.
    pub(crate) fn on_end(&mut self, client: u32, now_us: u64) {
        self.prune(now_us);
        self.remove_client(client, now_us);
    }

    /// Closes the episode if at most one window is still open at `now_us`.
    pub(crate) fn settle(
        &mut self,
        now_us: u64,
        resource: &str,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        if self.episode.is_some() {
            self.prune(now_us);
            if self.active.len() <= 1 {
                self.close_episode(now_us, resource, sink, stats);
            }
        }
    }

    /// Closes any open episode (end of history).
    pub(crate) fn finish(
        &mut self,
        now_us: u64,
        resource: &str,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        self.close_episode(now_us, resource, sink, stats);
    }

    fn close_episode(
        &mut self,
        end_us: u64,
        resource: &str,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        let Some(ep) = self.episode.take() else {
            return;
        };
        let kind = if ep.definite {
            stats.believed_overlaps += 1;
            AnomalyKind::BelievedOverlap
        } else {
            stats.possible_overlaps += 1;
            AnomalyKind::PossibleOverlap
        };
        let detail = if ep.definite {
            format!(
                "{} clients believed they held {resource} at once (clients {:?})",
                ep.max_definite, ep.clients
            )
        } else {
            format!(
                "an acquire with unknown outcome may have held {resource} while another client held it (clients {:?})",
                ep.clients
            )
        };
        sink.push(Anomaly {
            kind,
            resource: resource.to_string(),
            time_us: ep.start_us,
            end_us: Some(end_us),
            clients: ep.clients.into_iter().collect(),
            tokens: ep.tokens.into_iter().collect(),
            holders: Some(ep.max_definite),
            ledger_seqs: Vec::new(),
            fault_ids: Vec::new(),
            detail,
        });
    }
}
