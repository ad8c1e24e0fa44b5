//! How an episode is judged: its span, its exposure, and what followed it.
//!
//! - **Span**: the windows that opened in `[start, end)`; from the first one's start to the end
//!   of the recovery gap (on to the next episode's first window when that opened late).
//! - **Exposure** (what [`Exposure`] asks for): `holder` — a client a client-fault window hit
//!   held a lease when it opened, or took one while it was open; `live-lease` — some lease was live when the first window
//!   opened; `acquire-in-flight` — an acquire was in flight when it opened or invoked before
//!   the heal; `baseline` — a lease was live at the planned start. An episode whose fault never
//!   opened a window is not exposed. An episode with damage in its span counts as exposed
//!   whatever its aim said (damage is never left out of the evidence).
//! - **Stuck**: the resource should be free at the heal, or when the lease live at the heal
//!   expires (or is released), whichever is later (an acquire with an unknown outcome may hold
//!   it too, until its invoke + TTL); it is stuck when nobody took it for two TTLs
//!   after that (one to take it, one to reconnect) although some client asked for it (only resources taken since the previous
//!   episode's heal count, so one stuck resource is not blamed on every later episode), or
//!   when the checker found a `stuck-resource` in the span.
//! - **Recovery**: from when the resource was free to take after the heal → the first `ok`
//!   acquire after the heal (any client, any resource) inside the span. Free to take: the heal,
//!   or, when a holder that held the resource at the heal released it later (the episode's
//!   planned hold, e.g. a session lock whose session outlived a partition), that release; a
//!   lease that had to expire (its holder crashed, paused or cut off) counts as unavailability.

use std::collections::BTreeMap;
use std::time::Duration;

use super::leases::{Lease, LockHistory};
use super::{is_damage, is_unsafe_belief, EpisodeOutcome, EpisodeSpec, Exposure};
use crate::checker::{Anomaly, AnomalyKind};
use crate::history::{FaultWindow, Op};

/// Where one episode sits on the run clock, µs.
struct Span<'a> {
    windows: Vec<&'a FaultWindow>,
    open_us: u64,
    end_us: u64,
    heal_us: Option<u64>,
}

pub(super) fn assess(
    trial: u32,
    specs: &[EpisodeSpec],
    ops: &[Op],
    windows: &[FaultWindow],
    anomalies: &[Anomaly],
    ttl: Duration,
) -> Vec<EpisodeOutcome> {
    let history = LockHistory::from_ops(ops);
    let spans = spans(specs, &latest_windows(windows));
    let mut owned: Vec<Vec<(u64, &Anomaly)>> = vec![Vec::new(); specs.len()];
    for a in anomalies.iter().filter(|a| matters(a.kind)) {
        let t = occurred_us(a, &history);
        if let Some(i) = spans.iter().position(|s| s.open_us <= t && t < s.end_us) {
            owned[i].push((t, a));
        }
    }
    let ttl_us = us(ttl);
    let mut previous_heal = 0;
    let mut out = Vec::with_capacity(specs.len());
    for ((spec, span), mut found) in specs.iter().zip(&spans).zip(owned) {
        found.sort_by_key(|(t, _)| *t);
        let mut e = outcome(trial, spec, span, &found, &history);
        e.stuck = found
            .iter()
            .any(|(_, a)| a.kind == AnomalyKind::StuckResource)
            || span
                .heal_us
                .is_some_and(|heal| stuck_after(heal, previous_heal, &history, ttl_us));
        out.push(e);
        previous_heal = span.heal_us.unwrap_or(span.open_us);
    }
    out
}

/// One episode's outcome from its span and the anomalies it owns (by time); `stuck` is left
/// to the caller.
fn outcome(
    trial: u32,
    spec: &EpisodeSpec,
    span: &Span<'_>,
    found: &[(u64, &Anomaly)],
    history: &LockHistory,
) -> EpisodeOutcome {
    let damage: Vec<(u64, AnomalyKind)> = found
        .iter()
        .filter(|(_, a)| is_damage(a.kind))
        .map(|(t, a)| (*t, a.kind))
        .collect();
    let mut kinds: Vec<AnomalyKind> = Vec::new();
    for (_, k) in &damage {
        if !kinds.contains(k) {
            kinds.push(*k);
        }
    }
    let (mut exposed, mut exposure) = exposure(spec, span, history);
    if !exposed && !damage.is_empty() {
        // Damage is the lock meeting the fault, whatever the aim said: never left out.
        exposed = true;
        exposure.push_str("; but damage followed in its span, so it counts");
    }
    EpisodeOutcome {
        trial,
        index: spec.index,
        start_us: span.open_us,
        heal_us: span.heal_us,
        end_us: span.end_us,
        targets: targets(span),
        exposed,
        exposure,
        unsafe_belief: kinds.is_empty() && found.iter().any(|(_, a)| is_unsafe_belief(a.kind)),
        damage: kinds,
        first_damage_us: damage.first().map(|(t, _)| *t),
        stuck: false,
        recovery_us: span.heal_us.and_then(|heal| {
            history
                .leases
                .iter()
                .filter(|l| l.acquired_us >= heal && l.acquired_us < span.end_us)
                .map(|l| {
                    l.acquired_us
                        .saturating_sub(released_after(heal, &l.resource, history))
                })
                .min()
        }),
        harness_lag_us: None,
    }
}

/// When `resource` was free to take after `heal`: the heal, or the latest successful release
/// (after it) of a lease taken on it before it. Expiry is not counted: waiting for a lease
/// whose holder is gone is the lock's own unavailability.
fn released_after(heal: u64, resource: &str, h: &LockHistory) -> u64 {
    h.leases_of(resource)
        .filter(|l| l.acquired_us <= heal)
        .filter_map(|l| l.released_us())
        .fold(heal, u64::max)
}

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// `1234.5 ms` for a time in µs.
fn ms(t_us: u64) -> String {
    format!("{:.1} ms", t_us as f64 / 1000.0)
}

/// Anomaly kinds an episode outcome reads (unavailability windows and possible overlaps do
/// not change it).
fn matters(kind: AnomalyKind) -> bool {
    is_damage(kind) || is_unsafe_belief(kind) || kind == AnomalyKind::StuckResource
}

/// The last record of every window (its heal when it has one), by start time.
fn latest_windows(windows: &[FaultWindow]) -> Vec<&FaultWindow> {
    let mut by_id: BTreeMap<u64, &FaultWindow> = BTreeMap::new();
    for w in windows {
        by_id.insert(w.id, w);
    }
    let mut v: Vec<&FaultWindow> = by_id.into_values().collect();
    v.sort_by_key(|w| (w.start_us, w.id));
    v
}

fn spans<'a>(specs: &[EpisodeSpec], windows: &[&'a FaultWindow]) -> Vec<Span<'a>> {
    let mut spans: Vec<Span<'a>> = specs
        .iter()
        .map(|spec| {
            let (start, end) = (us(spec.start), us(spec.end));
            let mine: Vec<&FaultWindow> = windows
                .iter()
                .copied()
                .filter(|w| w.start_us >= start && w.start_us < end)
                .collect();
            let heal_us = if mine.is_empty() {
                (spec.exposure == Exposure::Baseline).then(|| us(spec.heal))
            } else if mine.iter().all(|w| w.end_us.is_some()) {
                mine.iter().filter_map(|w| w.end_us).max()
            } else {
                None
            };
            Span {
                open_us: mine.first().map_or(start, |w| w.start_us),
                end_us: end,
                heal_us,
                windows: mine,
            }
        })
        .collect();
    for i in 1..spans.len() {
        let next_open = spans[i].open_us;
        let prev = &mut spans[i - 1];
        prev.end_us = prev.end_us.max(next_open);
    }
    spans
}

/// When an anomaly happened: its start, except for those found as an interval of several
/// holders, which the checker dates from the first holder's entry; those happened when the
/// next of their clients took the lease (the earliest `ok` acquire after the start, up to the
/// end).
fn occurred_us(a: &Anomaly, h: &LockHistory) -> u64 {
    if !a.kind.is_interval() {
        return a.time_us;
    }
    let end = a.end_us.unwrap_or(u64::MAX);
    h.leases_of(&a.resource)
        .filter(|l| a.clients.contains(&l.client))
        .map(|l| l.acquired_us)
        .filter(|&t| t > a.time_us && t <= end)
        .min()
        .unwrap_or(a.time_us)
}

fn targets(span: &Span<'_>) -> Vec<String> {
    let mut t: Vec<String> = Vec::new();
    for w in &span.windows {
        for name in &w.targets {
            if !t.contains(name) {
                t.push(name.clone());
            }
        }
    }
    t
}

/// `client:3` → 3.
fn client_target(name: &str) -> Option<u32> {
    name.strip_prefix("client:")?.parse().ok()
}

fn held(l: &Lease) -> String {
    let until = match (l.has_expiry(), l.believed_until()) {
        (false, _) => "no expiry".to_string(),
        (true, Some(u)) => format!("until {}", ms(u)),
        (true, None) => "no deadline".to_string(),
    };
    format!(
        "client:{} held {} (acquired at {}, {until})",
        l.client,
        l.resource,
        ms(l.acquired_us)
    )
}

/// Whether the episode met what it aimed at, and why (not), in one sentence.
fn exposure(spec: &EpisodeSpec, span: &Span<'_>, h: &LockHistory) -> (bool, String) {
    let first = match (span.windows.first(), spec.exposure) {
        (None, Exposure::Baseline) => None,
        (None, _) => {
            return (
                false,
                format!(
                    "no fault window opened between {} and {}: the fault was never injected",
                    ms(us(spec.start)),
                    ms(us(spec.end))
                ),
            )
        }
        (Some(w), _) => Some(*w),
    };
    let live = |t: u64| h.leases.iter().find(|l| l.live_at(t));
    match (spec.exposure, first) {
        (Exposure::Holder, _) => holder(span, h),
        (Exposure::LiveLease, Some(w)) => match live(w.start_us) {
            Some(l) => (
                true,
                format!("{} when {} opened at {}", held(l), w.kind, ms(w.start_us)),
            ),
            None => (
                false,
                format!(
                    "no lease was live when {} opened at {}",
                    w.kind,
                    ms(w.start_us)
                ),
            ),
        },
        (Exposure::AcquireInFlight, Some(w)) => {
            let to = span.heal_us.unwrap_or(span.end_us);
            match h
                .acquires
                .iter()
                .find(|a| a.in_flight_during(w.start_us, to))
            {
                Some(a) => (
                    true,
                    format!(
                        "an acquire of {} invoked at {} was in flight during {} ({} to {})",
                        a.resource,
                        ms(a.invoked_us),
                        w.kind,
                        ms(w.start_us),
                        ms(to)
                    ),
                ),
                None => (
                    false,
                    format!(
                        "no acquire was in flight during {} ({} to {})",
                        w.kind,
                        ms(w.start_us),
                        ms(to)
                    ),
                ),
            }
        }
        (_, _) => {
            let at = us(spec.start);
            match live(at) {
                Some(l) => (true, format!("{} at the planned start {}", held(l), ms(at))),
                None => (
                    false,
                    format!("no lease was live at the planned start {}", ms(at)),
                ),
            }
        }
    }
}

/// `holder` exposure: some client a window hit held a lease when that window opened, or took
/// one while it was open (a paused client stalls in its next section, a slow one stretches it,
/// a crashing one dies in it).
fn holder(span: &Span<'_>, h: &LockHistory) -> (bool, String) {
    let mut missed: Vec<String> = Vec::new();
    for w in &span.windows {
        let end = w.end_us.unwrap_or(span.end_us);
        for c in w.targets.iter().filter_map(|t| client_target(t)) {
            let mine = || h.leases.iter().filter(move |l| l.client == c);
            if let Some(l) = mine().find(|l| l.live_at(w.start_us)) {
                let why = format!("{} when {} hit it at {}", held(l), w.kind, ms(w.start_us));
                return (true, why);
            }
            if let Some(l) = mine().find(|l| l.acquired_us > w.start_us && l.acquired_us <= end) {
                let why = format!(
                    "{} while {} was on it ({} to {})",
                    held(l),
                    w.kind,
                    ms(w.start_us),
                    ms(end)
                );
                return (true, why);
            }
            missed.push(format!("client:{c} from {} to {}", ms(w.start_us), ms(end)));
        }
    }
    if missed.is_empty() {
        let targets = targets(span).join(", ");
        (
            false,
            format!("no window hit a client (targets: {targets})"),
        )
    } else {
        (
            false,
            format!("the clients hit held no lease ({})", missed.join(", ")),
        )
    }
}

/// TTLs a resource may stay untaken after it should have been free before it counts as stuck:
/// one for the lease to be taken, one for the clients to notice connections a fault cut (their
/// node timeout) and connect again. With one, every partition of a matrix with a 500 ms TTL
/// came out "stuck" from the clients' reconnect (~0.5 s) and a session lock whose holder's
/// session outlived the partition (its owner released it 0.75 s after the heal, as planned)
/// came out stuck too; slow recoveries still show in the recovery time, which the efficiency
/// rule compares.
const STUCK_AFTER_TTLS: u64 = 2;

/// Whether some resource stayed untaken for [`STUCK_AFTER_TTLS`] TTLs after it should have been
/// free.
///
/// Claimed jobs (`job:<id>`, the claim strategies) are judged as one queue: a done job is
/// never taken again (a claim of it fails as it should), so the queue is stuck when no job at
/// all was claimed for those TTLs after the heal although workers tried.
fn stuck_after(heal: u64, previous_heal: u64, h: &LockHistory, ttl_us: u64) -> bool {
    let claimed = |r: &str| crate::sink::is_claimed_job(r);
    if h.leases.iter().any(|l| claimed(&l.resource)) {
        let took = h
            .leases
            .iter()
            .any(|l| claimed(&l.resource) && l.acquired_us >= previous_heal);
        let horizon = heal + STUCK_AFTER_TTLS * ttl_us;
        if took && horizon <= h.last_us {
            let taken = h
                .leases
                .iter()
                .any(|l| claimed(&l.resource) && l.acquired_us >= heal && l.acquired_us <= horizon);
            let wanted = h.acquires.iter().any(|a| a.in_flight_during(heal, horizon));
            if !taken && wanted {
                return true;
            }
        }
    }
    h.resources().into_iter().filter(|r| !claimed(r)).any(|r| {
        let leases: Vec<&Lease> = h.leases_of(r).collect();
        // Taken since the previous episode: a resource stuck before is not this episode's.
        if !leases
            .iter()
            .any(|l| l.acquired_us >= previous_heal && l.acquired_us <= heal)
        {
            return false;
        }
        // A lease without expiry that was never released is free once its holder is gone:
        // it only delays the resource until its release. An acquire with an unknown outcome
        // invoked up to one TTL after the heal may hold the resource until its own expiry.
        let free_at = leases
            .iter()
            .filter(|l| l.acquired_us <= heal)
            .filter_map(|l| l.freed_us())
            .chain(
                h.acquires
                    .iter()
                    .filter(|a| a.resource == r && a.invoked_us <= heal + ttl_us)
                    .filter_map(|a| a.maybe_held_until),
            )
            .fold(heal, u64::max);
        let horizon = free_at + STUCK_AFTER_TTLS * ttl_us;
        if horizon > h.last_us {
            return false; // the history ends before we could tell
        }
        let taken = leases
            .iter()
            .any(|l| l.acquired_us >= heal && l.acquired_us <= horizon);
        let wanted = h
            .acquires
            .iter()
            .any(|a| a.resource == r && a.in_flight_during(free_at, horizon));
        !taken && wanted
    })
}
