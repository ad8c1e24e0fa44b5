//! Fault episodes: a matrix trial cycles its fault class many times (fault → heal → recovery
//! gap), as Jepsen's nemesis packages do. Each episode is aimed at the lock's state (the
//! holder, a live lease, an acquire in flight) and judged afterwards, from the trial's history
//! and checker findings: was it **exposed** (did the fault meet what it aimed at), and what
//! followed in its window or recovery gap (**damage**, **unsafe belief**, **stuck**,
//! **recovery time**). Only exposed episodes count as evidence.
//!
//! Pure data and arithmetic: no I/O here ([`assess`] takes what the trial recorded).

mod judge;
mod leases;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stats::Interval;
use crate::checker::{Anomaly, AnomalyKind};
use crate::history::{FaultWindow, Op};

/// What an episode must meet to count as exposed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Exposure {
    /// A client fault (`client-pause`, `client-crash`, `session-loss`, `slow-work`): the client
    /// the fault hit held a lease (acquired, not yet released or lost) when its window opened,
    /// or took one while it was open.
    Holder,
    /// A node or network fault: some lease was live (acquired, validity not over, not released)
    /// when the window opened.
    LiveLease,
    /// `latency`: an acquire was in flight when the window opened, or was invoked inside it.
    AcquireInFlight,
    /// `none`: the baseline period counts as exposed when a lease was live at its start.
    Baseline,
}

/// One planned episode of a trial: offsets from the start of the run (the run clock's origin).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSpec {
    /// 1-based episode number within its trial.
    pub index: u32,
    /// When its first fault step is scheduled.
    #[serde(with = "crate::duration_ms")]
    pub start: Duration,
    /// When its last fault is planned to be healed (= `start` for instant faults).
    #[serde(with = "crate::duration_ms")]
    pub heal: Duration,
    /// End of its recovery gap (the next episode's start, or the end of the run).
    #[serde(with = "crate::duration_ms")]
    pub end: Duration,
    /// What it must meet to count.
    pub exposure: Exposure,
}

/// What one episode met and what followed it. Times in µs on the run clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeOutcome {
    /// 1-based trial number.
    pub trial: u32,
    /// 1-based episode number within the trial.
    pub index: u32,
    /// When its first fault window opened (the planned start when none opened).
    pub start_us: u64,
    /// When its last fault window closed (`None`: never healed inside the run).
    pub heal_us: Option<u64>,
    /// End of its recovery gap.
    pub end_us: u64,
    /// What the fault windows hit (`n1`, `client:3`, …).
    pub targets: Vec<String>,
    /// Whether it met what it aimed at.
    pub exposed: bool,
    /// Why (not) exposed, one sentence (`client:3 held resource 0 since 1234 ms`).
    pub exposure: String,
    /// Damage found in its window or recovery gap: mutual-exclusion violation at the ledger,
    /// accepted stale write, lost update, repeated or regressed token ([`is_damage`]); each
    /// kind once, in the order they first happened.
    pub damage: Vec<AnomalyKind>,
    /// Start of the first damaging anomaly, µs.
    pub first_damage_us: Option<u64>,
    /// Two believed holders whose stale writes the resource rejected (believed overlap,
    /// rejected stale write), without damage.
    pub unsafe_belief: bool,
    /// Nobody could take the resource for longer than two TTLs after it should have become free.
    pub stuck: bool,
    /// From when the resource was free to take after the heal (the heal, or the later release
    /// of a holder that kept it past the heal) → first successful acquire, µs (`None`: no
    /// acquire after the heal in the gap).
    pub recovery_us: Option<u64>,
    /// The harness's largest scheduling lag (µs) in the seconds the episode's span overlapped
    /// (from one TTL before its start), when it reached the overload limit
    /// ([`crate::results::HarnessHealth::lag_limit_us`]): the episode is set aside, since its
    /// outcome may be the harness's rather than the lock's ([`mark_harness_lag`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_lag_us: Option<u64>,
}

impl EpisodeOutcome {
    /// Whether it counts as evidence: exposed, and no harness lag in its span.
    pub fn is_evidence(&self) -> bool {
        self.exposed && self.harness_lag_us.is_none()
    }
}

/// The first damaging episode of a cell, to link from the heat map to its timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// Trial run directory, relative to the matrix directory (`trials/single/failover/t1`).
    pub dir: String,
    /// 1-based trial number.
    pub trial: u32,
    /// Episode number within the trial.
    pub episode: u32,
    /// Start of the damaging anomaly, µs on that trial's run clock.
    pub time_us: u64,
    /// Its kind.
    pub kind: AnomalyKind,
}

/// A cell's episodes added up (every trial of the cell).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeTally {
    /// Episodes that ran (every trial, exposed or not).
    pub total: u32,
    /// Episodes that met what they aimed at with no harness lag in their span (the evidence).
    pub exposed: u32,
    /// Episodes that met what they aimed at but were set aside: the harness lagged in their
    /// span ([`EpisodeOutcome::harness_lag_us`]).
    #[serde(default)]
    pub set_aside: u32,
    /// Exposed episodes with damage.
    pub damaging: u32,
    /// Exposed episodes with unsafe belief and no damage.
    pub unsafe_belief: u32,
    /// Exposed episodes after which the resource stayed stuck.
    pub stuck: u32,
    /// `damaging` of `exposed` with its 95 % interval (Wilson; exact one-sided when k = 0).
    pub damage_rate: Option<Interval>,
    /// Recovery time p50 over exposed episodes that recovered, ms.
    pub recovery_p50_ms: Option<f64>,
    /// Recovery time p99, ms.
    pub recovery_p99_ms: Option<f64>,
    /// The first damaging episode.
    pub first_incident: Option<Incident>,
}

/// Anomaly kinds that are damage at the resource (both writers' effects applied).
pub fn is_damage(kind: AnomalyKind) -> bool {
    matches!(
        kind,
        AnomalyKind::MutexViolation
            | AnomalyKind::StaleWriteAccepted
            | AnomalyKind::LostUpdate
            | AnomalyKind::TokenRegression
            | AnomalyKind::TokenDuplicate
            | AnomalyKind::DuplicateEffect
            | AnomalyKind::UnexpectedEffect
            | AnomalyKind::ZombieCompletion
    )
}

/// Anomaly kinds that show two believed holders without damage.
pub fn is_unsafe_belief(kind: AnomalyKind) -> bool {
    matches!(
        kind,
        AnomalyKind::BelievedOverlap | AnomalyKind::StaleWriteRejected
    )
}

/// Judges the planned episodes `specs` of trial `trial` from what the run recorded: its
/// history's operations (`ops`, in history order), its fault windows (a window recorded twice,
/// at start and heal, counts once: its last record), the checker's findings, and the lease TTL.
///
/// An episode owns the fault windows that opened in `[start, end)` and the anomalies that
/// happened in its span: from its first window's start (the planned start when none opened) to
/// the end of its recovery gap, which runs on to the next episode's first window when that
/// one opened late (a `holder` target waits up to 5 s for a holder). An anomaly found as an
/// interval (mutual-exclusion violation, believed overlap) happened when its second holder
/// took the lease, not when the first did (the checker dates it from the first, often before
/// the fault).
///
/// Exposure is what the spec's [`Exposure`] asks for, judged at its first window's start (a
/// lease is held from its `ok` acquire until its release is invoked, an extend fails, or its
/// validity deadline — or invoke + TTL — passes; one without expiry until its release; a
/// client fault also meets a lease its client takes while the window is open); an episode
/// whose fault opened no window is not exposed (except the `none` baseline, judged at its
/// planned start); an episode with damage in its span counts as exposed whatever its aim said. Stuck: some resource taken since the previous episode's heal was not
/// taken again within two `ttl`s of when it should have been free (the heal, or the end of the
/// lease live at the heal, whichever is later) although a client asked for it, or the
/// checker found a stuck resource in the span. Recovery: from when the resource was free to
/// take (the heal, or the later release of a holder that kept it past the heal) → first `ok`
/// acquire in the span. An episode still open when the history ended has no heal: no recovery, and stuck
/// only by the checker's finding.
pub fn assess(
    trial: u32,
    specs: &[EpisodeSpec],
    ops: &[Op],
    windows: &[FaultWindow],
    anomalies: &[Anomaly],
    ttl: Duration,
) -> Vec<EpisodeOutcome> {
    judge::assess(trial, specs, ops, windows, anomalies, ttl)
}

impl EpisodeTally {
    /// Adds up a cell's episodes, each with its trial's run directory (relative to the matrix
    /// directory) for the incident link, in trial order. Only exposed episodes count in
    /// `damaging`, `unsafe_belief`, `stuck`, the rate and the recovery times (nearest-rank
    /// p50/p99, ms); the first incident is the earliest damaging exposed episode (lowest trial,
    /// then earliest damage).
    pub fn of(outcomes: &[(String, EpisodeOutcome)]) -> Self {
        let exposed: Vec<&(String, EpisodeOutcome)> =
            outcomes.iter().filter(|(_, e)| e.is_evidence()).collect();
        let count = |f: &dyn Fn(&EpisodeOutcome) -> bool| {
            exposed.iter().filter(|(_, e)| f(e)).count() as u32
        };
        let damaging = count(&|e| !e.damage.is_empty());
        let mut recovery: Vec<u64> = exposed.iter().filter_map(|(_, e)| e.recovery_us).collect();
        recovery.sort_unstable();
        let first_incident = exposed
            .iter()
            .filter(|(_, e)| !e.damage.is_empty())
            .min_by_key(|(_, e)| (e.trial, e.first_damage_us.unwrap_or(e.start_us), e.index))
            .map(|(dir, e)| Incident {
                dir: dir.clone(),
                trial: e.trial,
                episode: e.index,
                time_us: e.first_damage_us.unwrap_or(e.start_us),
                kind: e.damage[0],
            });
        Self {
            total: outcomes.len() as u32,
            exposed: exposed.len() as u32,
            set_aside: outcomes
                .iter()
                .filter(|(_, e)| e.exposed && e.harness_lag_us.is_some())
                .count() as u32,
            damaging,
            unsafe_belief: count(&|e| e.unsafe_belief),
            stuck: count(&|e| e.stuck),
            damage_rate: Interval::of(u64::from(damaging), exposed.len() as u64),
            recovery_p50_ms: percentile_ms(&recovery, 0.50),
            recovery_p99_ms: percentile_ms(&recovery, 0.99),
            first_incident,
        }
    }
}

/// Sets [`EpisodeOutcome::harness_lag_us`] on each episode whose span — from `lookback_us`
/// (one lease TTL: a section stalled before the fault can overrun its lease inside it) before
/// its start to its end — overlaps a second of the run whose largest harness lag
/// (`lag_per_second_us[i]` for second `i` of the run clock) reached `limit_us`.
///
/// A stuck episode with neither damage nor unsafe belief is settled two lease TTLs
/// (`2 × lookback_us`) after its heal: nobody took the resource in that time, which a lag under
/// the limit cannot cause, so lag after that point does not set it aside (its recovery gap
/// may run to the end of the trial).
pub fn mark_harness_lag(
    episodes: &mut [EpisodeOutcome],
    lag_per_second_us: &[u64],
    limit_us: u64,
    lookback_us: u64,
) {
    for e in episodes {
        let first = (e.start_us.saturating_sub(lookback_us) / 1_000_000) as usize;
        let settled = if e.stuck && e.damage.is_empty() && !e.unsafe_belief {
            let heal = e.heal_us.unwrap_or(e.start_us);
            e.end_us.min(heal + 2 * lookback_us)
        } else {
            e.end_us
        };
        let last = (settled.max(e.start_us + 1).div_ceil(1_000_000)) as usize;
        e.harness_lag_us = lag_per_second_us
            .iter()
            .take(last)
            .skip(first)
            .copied()
            .max()
            .filter(|&lag| lag >= limit_us);
    }
}

/// Nearest-rank percentile `p` (0–1] of sorted µs values, in ms; `None` when empty.
fn percentile_ms(sorted_us: &[u64], p: f64) -> Option<f64> {
    let n = sorted_us.len();
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted_us[rank - 1] as f64 / 1000.0)
}
