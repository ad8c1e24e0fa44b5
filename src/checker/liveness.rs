//! Rule 5: liveness — time a resource could not be acquired although nobody held it.
//!
//! A resource is **busy** while some client holds it as far as the lock service can know: from an
//! acquire `ok` until that client's release completes or its lease TTL runs out (`ok + ttl`,
//! moved by extends; forever without a TTL). A crashed holder's lease with a TTL stays busy
//! until that TTL (nobody releases it; waiting it out is not unavailability); one without a
//! TTL ends at the crash (a session lock dies with the session; a `no-ttl` key left behind
//! then shows as unexplained failures, hence stuck). An `info` acquire with a TTL also counts
//! as busy until `info + ttl` (it may have taken the lock), so failures it could explain are not
//! blamed on the lock.
//!
//! A failed or unknown acquire `[invoke, done]` is **explained** if the resource was busy at some
//! moment of it, or if another client's acquire that was in flight during it later returned `ok`
//! (that client may have won the race). Unexplained attempts are held until no acquire invoked
//! before their end is still in flight, then merged into **unavailability windows** (attempts
//! separated by no successful acquire belong to one window). A window still open at the end of the
//! history with no successful acquire after it began, lasting at least
//! `max(stuck_after_ms, 2 × the largest TTL used on the resource)`, is a **stuck resource**.
//!
//! ## Waiting view
//! Failed attempts miss a client that waits inside one long acquire (retries, a paused node):
//! it fails nothing, it just waits. So availability is also measured from the waiting side: a
//! resource is **blocked** while at least one acquire is in flight and nobody holds it (busy
//! as above). Blocked stretches of at least `min_unavailable_ms` (shorter ones are the normal
//! acquire round trip and retry delay) are summed; `wait_availability_pct` is
//! `100 × (1 − blocked / observed time)`: the share of time a client that wanted the lock
//! could get it.

use std::collections::{BTreeSet, VecDeque};

use super::verdict::{Anomaly, AnomalyKind, AnomalySink, Stats};

struct Busy {
    client: u32,
    until_us: Option<u64>,
}

struct Suspect {
    invoke_us: u64,
    done_us: u64,
    client: u32,
}

struct Window {
    start_us: u64,
    end_us: u64,
    clients: BTreeSet<u32>,
}

/// Liveness thresholds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LivenessLimits {
    pub(crate) min_unavailable_us: u64,
    pub(crate) stuck_after_us: u64,
}

/// Per-resource availability state.
#[derive(Default)]
pub(crate) struct Availability {
    busy: Vec<Busy>,
    last_busy_end: Option<u64>,
    suspects: VecDeque<Suspect>,
    open: Option<Window>,
    /// Ok times after the open window's end (to tell whether a later suspect starts a new window).
    oks_since_open: VecDeque<u64>,
    last_ok_us: Option<u64>,
    first_us: Option<u64>,
    last_us: u64,
    max_ttl_ms: u64,
    unavailable_us: u64,
    degraded: bool,
    /// Waiting view: last event time seen, current blocked stretch, blocked total (µs).
    wait_last_us: Option<u64>,
    wait_stretch: Option<(u64, u64)>,
    blocked_us: u64,
}

impl Availability {
    /// Records that the resource was observed at `t` (for the observed span).
    pub(crate) fn touch(&mut self, t: u64) {
        self.first_us.get_or_insert(t);
        self.last_us = self.last_us.max(t);
    }

    /// Waiting view: accounts the time since the previous event, during which an acquire was
    /// in flight iff `waiting` (call before the event at `now_us` changes anything).
    pub(crate) fn advance(&mut self, now_us: u64, waiting: bool, limits: LivenessLimits) {
        let Some(last) = self
            .wait_last_us
            .replace(now_us.max(self.wait_last_us.unwrap_or(0)))
        else {
            return;
        };
        if !waiting || now_us <= last {
            return;
        }
        let busy_until = self
            .busy
            .iter()
            .map(|b| b.until_us.unwrap_or(u64::MAX))
            .max();
        let free_from = busy_until.map_or(last, |u| u.max(last));
        if free_from >= now_us {
            return;
        }
        match &mut self.wait_stretch {
            Some((_, end)) if *end >= free_from => *end = now_us,
            _ => {
                self.close_stretch(limits);
                self.wait_stretch = Some((free_from, now_us));
            }
        }
    }

    fn close_stretch(&mut self, limits: LivenessLimits) {
        if let Some((start, end)) = self.wait_stretch.take() {
            if end - start >= limits.min_unavailable_us {
                self.blocked_us += end - start;
            }
        }
    }

    /// Waiting view: blocked µs (call after [`Availability::finish`]).
    pub(crate) fn blocked_us(&mut self, limits: LivenessLimits) -> u64 {
        self.close_stretch(limits);
        self.blocked_us
    }

    fn prune(&mut self, now_us: u64) {
        let mut last = self.last_busy_end;
        self.busy.retain(|b| match b.until_us {
            Some(u) if u <= now_us => {
                last = Some(last.map_or(u, |l| l.max(u)));
                false
            }
            _ => true,
        });
        self.last_busy_end = last;
    }

    fn end_busy(&mut self, client: u32, now_us: u64) {
        let before = self.busy.len();
        self.busy.retain(|b| b.client != client);
        if self.busy.len() != before {
            self.last_busy_end = Some(self.last_busy_end.map_or(now_us, |l| l.max(now_us)));
        }
    }

    pub(crate) fn on_acquire_ok(
        &mut self,
        client: u32,
        invoke_us: u64,
        ok_us: u64,
        ttl_ms: Option<u64>,
    ) {
        self.prune(ok_us);
        self.max_ttl_ms = self.max_ttl_ms.max(ttl_ms.unwrap_or(0));
        self.busy.retain(|b| b.client != client);
        self.busy.push(Busy {
            client,
            until_us: ttl_ms.map(|t| ok_us + t * 1000),
        });
        self.last_ok_us = Some(ok_us);
        if self.open.is_some() {
            self.oks_since_open.push_back(ok_us);
        }
        // This acquire was in flight during any suspect that ended after it was invoked.
        self.suspects
            .retain(|s| s.done_us < invoke_us || s.client == client);
    }

    pub(crate) fn on_acquire_failed(
        &mut self,
        client: u32,
        invoke_us: u64,
        done_us: u64,
        info_ttl_ms: Option<u64>,
    ) {
        self.prune(done_us);
        let explained = self.busy.iter().any(|b| b.client != client)
            || self.last_busy_end.is_some_and(|e| e >= invoke_us);
        if !explained {
            self.suspects.push_back(Suspect {
                invoke_us,
                done_us,
                client,
            });
        }
        if let Some(ttl) = info_ttl_ms {
            // It may have won the race against suspects it overlapped, like an ok would have.
            self.suspects
                .retain(|s| s.done_us < invoke_us || s.client == client);
            self.busy.retain(|b| b.client != client);
            self.busy.push(Busy {
                client,
                until_us: Some(done_us + ttl * 1000),
            });
        }
    }

    pub(crate) fn on_extend_ok(&mut self, client: u32, ok_us: u64, ttl_ms: Option<u64>) {
        self.prune(ok_us);
        if let Some(b) = self.busy.iter_mut().find(|b| b.client == client) {
            b.until_us = ttl_ms.map(|t| ok_us + t * 1000);
        }
    }

    /// Release completed (any outcome): it holds nothing any more.
    pub(crate) fn on_end(&mut self, client: u32, now_us: u64) {
        self.prune(now_us);
        self.end_busy(client, now_us);
    }

    /// Client crashed. Nobody releases its lease: one with a TTL stays busy until the TTL runs
    /// out (the service frees it then; waiting it out is the design, not unavailability). One
    /// without a TTL ends now: a session lock ends with the crashed process's session, and a
    /// `no-ttl` key that stays forever shows as failures nobody explains, hence stuck.
    pub(crate) fn on_crash(&mut self, client: u32, now_us: u64) {
        self.prune(now_us);
        let expires = self
            .busy
            .iter()
            .any(|b| b.client == client && b.until_us.is_some());
        if !expires {
            self.end_busy(client, now_us);
        }
    }

    /// Settles suspects that no in-flight acquire can explain any more. `min_pending_invoke`:
    /// earliest invoke of an acquire on this resource still in flight; `None` settles all.
    pub(crate) fn settle(
        &mut self,
        min_pending_invoke: Option<u64>,
        resource: &str,
        limits: LivenessLimits,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        while let Some(s) = self.suspects.front() {
            if min_pending_invoke.is_some_and(|p| p <= s.done_us) {
                break;
            }
            let s = self.suspects.pop_front().expect("front");
            let merge = match &self.open {
                Some(w) => {
                    s.invoke_us <= w.end_us
                        || !self.oks_since_open.iter().any(|&ok| ok <= s.invoke_us)
                }
                None => false,
            };
            if merge {
                let w = self.open.as_mut().expect("open");
                w.start_us = w.start_us.min(s.invoke_us);
                w.end_us = w.end_us.max(s.done_us);
                w.clients.insert(s.client);
                let end = w.end_us;
                self.oks_since_open.retain(|&ok| ok > end);
            } else {
                self.close_window(resource, limits, sink, stats);
                self.open = Some(Window {
                    start_us: s.invoke_us,
                    end_us: s.done_us,
                    clients: BTreeSet::from([s.client]),
                });
                let last_ok = self.last_ok_us;
                self.oks_since_open.clear();
                self.oks_since_open
                    .extend(last_ok.filter(|&ok| ok > s.done_us));
            }
        }
    }

    fn close_window(
        &mut self,
        resource: &str,
        limits: LivenessLimits,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        let Some(w) = self.open.take() else {
            return;
        };
        let len = w.end_us - w.start_us;
        self.unavailable_us += len;
        stats.unavailability_windows += 1;
        if len >= limits.min_unavailable_us {
            self.degraded = true;
            sink.push(Anomaly {
                kind: AnomalyKind::Unavailable,
                resource: resource.to_string(),
                time_us: w.start_us,
                end_us: Some(w.end_us),
                clients: w.clients.into_iter().collect(),
                tokens: Vec::new(),
                holders: None,
                ledger_seqs: Vec::new(),
                fault_ids: Vec::new(),
                detail: format!(
                    "acquires of {resource} failed for {} ms although nobody held it",
                    len / 1000
                ),
            });
        }
    }

    /// End of history: settles everything, decides stuck, returns (unavailable µs, observed µs, degraded).
    pub(crate) fn finish(
        &mut self,
        resource: &str,
        limits: LivenessLimits,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) -> (u64, u64, bool) {
        self.settle(None, resource, limits, sink, stats);
        let threshold = limits.stuck_after_us.max(2 * self.max_ttl_ms * 1000);
        let stuck = self.open.as_ref().is_some_and(|w| {
            self.last_ok_us.is_none_or(|ok| ok < w.start_us) && w.end_us - w.start_us >= threshold
        });
        if stuck {
            let w = self.open.take().expect("open");
            let len = w.end_us - w.start_us;
            self.unavailable_us += len;
            self.degraded = true;
            stats.unavailability_windows += 1;
            stats.stuck_resources += 1;
            sink.push(Anomaly {
                kind: AnomalyKind::StuckResource,
                resource: resource.to_string(),
                time_us: w.start_us,
                end_us: Some(w.end_us),
                clients: w.clients.into_iter().collect(),
                tokens: Vec::new(),
                holders: None,
                ledger_seqs: Vec::new(),
                fault_ids: Vec::new(),
                detail: format!(
                    "nobody could acquire {resource} for the last {} ms of the run although nobody held it",
                    len / 1000
                ),
            });
        } else {
            self.close_window(resource, limits, sink, stats);
        }
        let observed = self.last_us - self.first_us.unwrap_or(self.last_us);
        (self.unavailable_us, observed, self.degraded)
    }
}
