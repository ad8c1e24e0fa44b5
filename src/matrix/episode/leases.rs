//! Leases and acquires read back from a history's operations, for judging episodes: who held
//! what when (the client's belief), when the lock service freed it, and which acquires were in
//! flight. Times in µs on the run clock.

use std::collections::HashMap;

use crate::history::{Op, OpFn, OpKind};

/// One lease: from an `ok` acquire to its release, loss or expiry.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Lease {
    /// Its holder.
    pub client: u32,
    /// The locked resource.
    pub resource: String,
    /// The acquire's `ok`.
    pub acquired_us: u64,
    /// The client's validity deadline (`validity_deadline_us`, else invoke + TTL), moved by
    /// each `ok` extend; `None`: no expiry (a PostgreSQL advisory lock).
    deadline_us: Option<u64>,
    /// When the client gave it up: its release invoked, or an extend failed.
    gave_up_us: Option<u64>,
    /// When the lock service lets it expire: invoke + TTL of the acquire or of the latest `ok`
    /// extend (at least the client's deadline); `None`: no expiry.
    expiry_us: Option<u64>,
    /// The release's `ok`.
    released_us: Option<u64>,
}

impl Lease {
    /// Until when its client believed it held it (deadline, release invoke or failed extend,
    /// whichever came first); `None`: no expiry and never given up.
    pub fn believed_until(&self) -> Option<u64> {
        min_opt(self.deadline_us, self.gave_up_us)
    }

    /// Whether it expires by itself (a TTL or validity deadline).
    pub fn has_expiry(&self) -> bool {
        self.deadline_us.is_some()
    }

    /// Whether its client held it at `t`: acquired at or before `t`, not yet given up or
    /// expired.
    pub fn live_at(&self, t: u64) -> bool {
        self.acquired_us <= t && self.believed_until().is_none_or(|u| u > t)
    }

    /// When the lock service freed it: its release's `ok` or its expiry, whichever came first;
    /// `None`: no expiry and never released.
    pub fn freed_us(&self) -> Option<u64> {
        min_opt(self.expiry_us, self.released_us)
    }

    /// When its holder gave it back by a release that succeeded (`None`: never, or the
    /// release failed: the lease had expired or was lost first).
    pub fn released_us(&self) -> Option<u64> {
        self.released_us
    }
}

/// One acquire: invoked, and completed (`ok` or not) or still in flight at the end.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Acquire {
    /// Resource asked for.
    pub resource: String,
    /// Its invoke.
    pub invoked_us: u64,
    /// Its completion (`None`: still in flight when the history ends).
    pub done_us: Option<u64>,
    /// Until when it may have held the resource although its client never heard so: invoke +
    /// TTL for an acquire that completed `info` (unknown outcome); `None` otherwise.
    pub maybe_held_until: Option<u64>,
}

impl Acquire {
    /// Whether it was in flight at some moment of `[from, to]`.
    pub fn in_flight_during(&self, from: u64, to: u64) -> bool {
        self.invoked_us <= to && self.done_us.is_none_or(|d| d >= from)
    }
}

/// Every lease and acquire of a history.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct LockHistory {
    /// In order of acquisition.
    pub leases: Vec<Lease>,
    /// In order of invocation.
    pub acquires: Vec<Acquire>,
    /// Time of the last operation.
    pub last_us: u64,
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn plus_ttl(invoked_us: u64, ttl_ms: Option<u64>) -> Option<u64> {
    ttl_ms.map(|ms| invoked_us + ms * 1000)
}

/// The invoke a completion answers: time and requested TTL.
#[derive(Clone, Copy)]
struct Invoked {
    time_us: u64,
    ttl_ms: Option<u64>,
    acquire: Option<usize>,
}

impl LockHistory {
    /// Reads `ops` (in history order). A completion answers the last invoke of the same
    /// client and function; a lease is keyed by client and resource.
    pub fn from_ops(ops: &[Op]) -> Self {
        let mut h = Self::default();
        let mut invoked: HashMap<(u32, OpFn), Invoked> = HashMap::new();
        let mut current: HashMap<(u32, &str), usize> = HashMap::new();
        for op in ops {
            h.last_us = h.last_us.max(op.time_us);
            let key = (op.client, op.resource.as_str());
            if op.kind == OpKind::Invoke {
                let acquire = (op.f == OpFn::Acquire).then(|| {
                    h.acquires.push(Acquire {
                        resource: op.resource.clone(),
                        invoked_us: op.time_us,
                        done_us: None,
                        maybe_held_until: None,
                    });
                    h.acquires.len() - 1
                });
                invoked.insert(
                    (op.client, op.f),
                    Invoked {
                        time_us: op.time_us,
                        ttl_ms: op.ttl_ms,
                        acquire,
                    },
                );
                if op.f == OpFn::Release {
                    if let Some(&i) = current.get(&key) {
                        let l = &mut h.leases[i];
                        l.gave_up_us = min_opt(l.gave_up_us, Some(op.time_us));
                    }
                }
                continue;
            }
            let inv = invoked.get(&(op.client, op.f)).copied();
            match op.f {
                OpFn::Acquire => {
                    if let Some(v) = inv {
                        if let Some(a) = v.acquire.and_then(|i| h.acquires.get_mut(i)) {
                            a.done_us = Some(op.time_us);
                            if op.kind == OpKind::Info {
                                a.maybe_held_until = plus_ttl(a.invoked_us, v.ttl_ms);
                            }
                        }
                    }
                    if op.kind == OpKind::Ok {
                        let lease = new_lease(op, inv);
                        current.insert(key, h.leases.len());
                        h.leases.push(lease);
                    }
                }
                OpFn::Extend => {
                    if let Some(&i) = current.get(&key) {
                        extend(&mut h.leases[i], op, inv);
                    }
                }
                OpFn::Release => {
                    if let Some(i) = current.remove(&key) {
                        let l = &mut h.leases[i];
                        l.gave_up_us = min_opt(l.gave_up_us, Some(op.time_us));
                        if op.kind == OpKind::Ok {
                            l.released_us = Some(op.time_us);
                        }
                    }
                }
            }
        }
        h
    }

    /// Leases of `resource`.
    pub fn leases_of<'a>(&'a self, resource: &'a str) -> impl Iterator<Item = &'a Lease> + 'a {
        self.leases.iter().filter(move |l| l.resource == resource)
    }

    /// Every resource an acquire asked for, sorted.
    pub fn resources(&self) -> Vec<&str> {
        let mut r: Vec<&str> = self.acquires.iter().map(|a| a.resource.as_str()).collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

fn new_lease(op: &Op, inv: Option<Invoked>) -> Lease {
    let invoked_us = inv.map_or(op.time_us, |v| v.time_us);
    let ttl_ms = op.ttl_ms.or(inv.and_then(|v| v.ttl_ms));
    let by_ttl = plus_ttl(invoked_us, ttl_ms);
    let deadline_us = op.validity_deadline_us.or(by_ttl);
    Lease {
        client: op.client,
        resource: op.resource.clone(),
        acquired_us: op.time_us,
        deadline_us,
        gave_up_us: None,
        expiry_us: by_ttl
            .map(|e| e.max(deadline_us.unwrap_or(0)))
            .or(deadline_us),
        released_us: None,
    }
}

fn extend(l: &mut Lease, op: &Op, inv: Option<Invoked>) {
    match op.kind {
        OpKind::Ok => {
            let invoked_us = inv.map_or(op.time_us, |v| v.time_us);
            let by_ttl = plus_ttl(invoked_us, op.ttl_ms.or(inv.and_then(|v| v.ttl_ms)));
            if let Some(d) = op.validity_deadline_us.or(by_ttl) {
                l.deadline_us = Some(d);
                l.expiry_us = Some(l.expiry_us.unwrap_or(0).max(by_ttl.unwrap_or(d)).max(d));
            }
        }
        OpKind::Fail => l.gave_up_us = min_opt(l.gave_up_us, Some(op.time_us)),
        OpKind::Info | OpKind::Invoke => {}
    }
}
