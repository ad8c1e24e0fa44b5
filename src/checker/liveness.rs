//! Rule 5: liveness — time a resource could not be acquired although nobody held it.
//!
//! A resource is **busy** while some client holds it as far as the lock service can know: from an
//! acquire `ok` until that client's release completes or its lease TTL runs out (`ok + ttl`,
//! moved by extends; forever without a TTL). A crashed holder's lease with a TTL stays busy
//! until that TTL (nobody releases it; waiting it out is not unavailability), or later where the
//! service's own rules say so: an etcd lease is renewed to a full TTL by a new leader, so a
//! fault that may change the leader ([`may_change_leader`]) during its life keeps it busy while
//! the fault lasts and for TTL + [`LEADER_CHANGE_ALLOWANCE_US`] after its heal. One without a
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
//! Clients that wait inside one long acquire fail nothing, so a resource nobody can take while
//! they wait leaves no failed attempt. The `run-end` mark (the moment the workload stopped)
//! closes that gap: if acquires are still in flight at the mark and nobody holds the resource,
//! the wait from when it was last free (or from the earliest of those acquires, if later) to the
//! mark is a stuck resource under the same rule, unless an acquire succeeds after it (in the
//! drain). Histories without the mark are judged on their failed attempts alone.
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
use crate::history::FaultWindow;

struct Busy {
    client: u32,
    /// When the service frees it; `None` = not before the client releases it (or, for a
    /// crashed lease, not before a fault that may restart it heals).
    until_us: Option<u64>,
    /// When the lease was granted (acquire ok), µs, and its TTL, µs (0 without one).
    ok_us: u64,
    ttl_us: u64,
    restart: LeaseRestart,
    /// Set for a lease the service restarts on a leader change ([`LeaseRestart`]) whose
    /// holder crashed: nobody renews or revokes it, so only the service's rules end it.
    crashed: Option<CrashedLease>,
}

/// A crashed holder's lease that a leader change may restart (etcd).
struct CrashedLease {
    /// When its holder took it (a fault healed before this cannot restart it), µs.
    ok_us: u64,
    ttl_us: u64,
    /// Latest expiry known so far, µs.
    expires_us: u64,
    /// Faults still open that began in its life: until they heal it may be restarted any time.
    open_faults: BTreeSet<u64>,
}

/// The service's own rule for a lease whose holder stopped renewing it, besides its TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseRestart {
    /// It expires `ttl` after the holder's last grant or renewal (Redis, PostgreSQL sessions).
    Never,
    /// A new leader renews every lease to a full TTL (etcd: the new leader's lessor promotes
    /// each lease to `now + TTL + election timeout`), so a leader change inside the lease's
    /// life moves its expiry to up to [`LEADER_CHANGE_ALLOWANCE_US`] + TTL after the change.
    OnLeaderChange,
}

/// How long after a fault heals a leader change it caused may still renew a lease, beyond the
/// TTL, µs: etcd's default election timeout, 1 s (the members lockbench starts use 500 ms).
pub(crate) const LEADER_CHANGE_ALLOWANCE_US: u64 = 1_000_000;

/// Whether a fault window may have changed the lock service's leader: node faults may (kill,
/// pause, failover, clock jump, and kinds this checker does not know); client faults cannot;
/// a network fault may only when it cuts or slows a link between servers (`nX-peer`,
/// `nX-repl`), not the clients' links alone (`nX`).
pub(crate) fn may_change_leader(kind: &str, targets: &[String]) -> bool {
    match kind {
        "client-pause" | "slow-work" | "client-crash" | "client-absent" => false,
        "latency" | "partition" => targets.iter().any(|t| t.contains('-')),
        _ => targets.is_empty() || targets.iter().any(|t| !t.starts_with("client:")),
    }
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
    /// The wait still going when the workload stopped with nobody holding the resource
    /// (from the `run-end` mark); judged for stuck at the end of the history.
    tail: Option<Window>,
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
        (invoke_us, ok_us): (u64, u64),
        ttl_ms: Option<u64>,
        restart: LeaseRestart,
    ) {
        self.prune(ok_us);
        self.max_ttl_ms = self.max_ttl_ms.max(ttl_ms.unwrap_or(0));
        self.busy.retain(|b| b.client != client);
        self.busy.push(Busy {
            client,
            until_us: ttl_ms.map(|t| ok_us + t * 1000),
            ok_us,
            ttl_us: ttl_ms.unwrap_or(0) * 1000,
            restart,
            crashed: None,
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
                ok_us: done_us,
                ttl_us: ttl * 1000,
                restart: LeaseRestart::Never,
                crashed: None,
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
    ///
    /// With [`LeaseRestart::OnLeaderChange`], the lease also runs until `TTL +`
    /// [`LEADER_CHANGE_ALLOWANCE_US`] after the heal of every fault in `faults` (and, through
    /// [`Availability::on_fault`], every later one) that may have changed the leader during its
    /// life, and for as long as such a fault is open. `faults`: the fault windows so far.
    pub(crate) fn on_crash<'a>(
        &mut self,
        client: u32,
        now_us: u64,
        faults: impl IntoIterator<Item = &'a FaultWindow>,
    ) {
        self.prune(now_us);
        let Some(b) = self
            .busy
            .iter_mut()
            .find(|b| b.client == client && b.until_us.is_some())
        else {
            self.end_busy(client, now_us);
            return;
        };
        if b.restart == LeaseRestart::OnLeaderChange {
            b.crashed = Some(CrashedLease {
                ok_us: b.ok_us,
                ttl_us: b.ttl_us,
                expires_us: b.until_us.expect("found with a TTL"),
                open_faults: BTreeSet::new(),
            });
            for f in faults {
                Self::restart_by(b, f);
            }
        }
    }

    /// A fault window started or healed: crashed leases that a leader change may restart are
    /// kept busy while it is open and until `TTL +` [`LEADER_CHANGE_ALLOWANCE_US`] after its
    /// heal (see [`Availability::on_crash`]).
    pub(crate) fn on_fault(&mut self, fault: &FaultWindow) {
        for b in &mut self.busy {
            Self::restart_by(b, fault);
        }
    }

    fn restart_by(b: &mut Busy, f: &FaultWindow) {
        let Some(lease) = &mut b.crashed else {
            return;
        };
        if !may_change_leader(&f.kind, &f.targets) {
            return;
        }
        // Still alive when the fault began, and the fault not over before it was granted.
        let alive_at_start = !lease.open_faults.is_empty() || f.start_us < lease.expires_us;
        let touches = lease.open_faults.contains(&f.id)
            || (alive_at_start && f.end_us.is_none_or(|e| e >= lease.ok_us));
        if !touches {
            return;
        }
        match f.end_us {
            None => {
                lease.open_faults.insert(f.id);
            }
            Some(end) => {
                lease.open_faults.remove(&f.id);
                let restarted = end
                    .saturating_add(lease.ttl_us)
                    .saturating_add(LEADER_CHANGE_ALLOWANCE_US);
                lease.expires_us = lease.expires_us.max(restarted);
            }
        }
        b.until_us = lease.open_faults.is_empty().then_some(lease.expires_us);
    }

    /// The workload stopped at `now_us` with `waiting` acquires (invoke µs, client) still in
    /// flight. If nobody holds the resource, the wait since it was last free (or since the
    /// earliest of them began, if later) is kept: unless an acquire succeeds afterwards (in the
    /// drain), [`Availability::finish`] judges it for stuck up to this mark.
    pub(crate) fn on_run_end(&mut self, now_us: u64, waiting: &BTreeSet<(u64, u32)>) {
        self.prune(now_us);
        self.touch(now_us);
        let Some(&(first_invoke, _)) = waiting.first() else {
            return;
        };
        if !self.busy.is_empty() {
            return;
        }
        let free_from = self
            .last_busy_end
            .map_or(first_invoke, |e| e.max(first_invoke));
        if free_from >= now_us {
            return;
        }
        self.tail = Some(Window {
            start_us: free_from,
            end_us: now_us,
            clients: waiting.iter().map(|&(_, c)| c).collect(),
        });
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
        let last_ok = self.last_ok_us;
        let untaken_since = move |w: &Window| last_ok.is_none_or(|ok| ok < w.start_us);
        // The wait at the run-end mark, joined to the failures right before it.
        let tail = self.tail.take().filter(|t| untaken_since(t)).map(|mut t| {
            if let Some(w) = &self.open {
                if untaken_since(w) && w.end_us >= t.start_us {
                    t.start_us = t.start_us.min(w.start_us);
                    t.end_us = t.end_us.max(w.end_us);
                    t.clients.extend(w.clients.iter().copied());
                }
            }
            t
        });
        let stuck = match tail {
            Some(t) if t.end_us - t.start_us >= threshold => {
                if self.open.as_ref().is_some_and(|w| w.start_us >= t.start_us) {
                    self.open = None;
                } else {
                    self.close_window(resource, limits, sink, stats);
                }
                Some(t)
            }
            _ => self
                .open
                .take_if(|w| untaken_since(w) && w.end_us - w.start_us >= threshold),
        };
        if let Some(w) = stuck {
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
