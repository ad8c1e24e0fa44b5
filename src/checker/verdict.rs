//! What the checker returns: the verdict, the anomalies and the counts (`checker.json`).

use serde::{Deserialize, Serialize};

use crate::history::FaultWindow;
use crate::ledger::FenceMode;

/// Safety verdict of a run: `valid`, `unknown` or `invalid` (in JSON, on the console and in
/// reports; the one verdict type of the crate).
///
/// Ordered by severity, `valid` < `unknown` < `invalid`, so the worse of two verdicts is their
/// maximum ([`Verdict::worst`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Verdict {
    /// No safety anomaly, and the evidence was complete enough to say so.
    Valid,
    /// No certain safety anomaly, but the evidence cannot rule one out (see `unknown_reasons`).
    Unknown,
    /// At least one safety anomaly (see [`AnomalyKind::is_safety`]).
    Invalid,
}

impl Verdict {
    /// The worse of two verdicts (`invalid` > `unknown` > `valid`).
    pub fn worst(self, other: Verdict) -> Verdict {
        self.max(other)
    }
}

/// Liveness summary, separate from the safety verdict.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Liveness {
    /// No unavailability window of at least `min_unavailable_ms`.
    Live,
    /// Some resource could not be acquired for a while although nobody held it.
    Degraded,
    /// Some resource stayed unacquirable until the end of the history.
    Stuck,
}

/// Kinds of anomaly. docs/design.md numbers the rules 1–6.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AnomalyKind {
    /// Rule 1: a section began (ledger commit order) while another was inside.
    MutexViolation,
    /// Rule 2: the ledger accepted a write with a token lower than one it had accepted.
    StaleWriteAccepted,
    /// Rule 2: the ledger rejected a stale write (fencing did its job; not a safety anomaly).
    StaleWriteRejected,
    /// Rule 3: an accepted write overwrote increments it had not read.
    LostUpdate,
    /// Rule 4: an acquire returned a token lower than one returned before it was invoked.
    TokenRegression,
    /// Rule 4: two acquisitions returned the same token.
    TokenDuplicate,
    /// Rule 5: a resource stayed unacquirable, with nobody holding it, until the end.
    StuckResource,
    /// Rule 5: a window in which acquires failed although nobody held the resource.
    Unavailable,
    /// Rule 6: two clients' validity windows overlapped (both believed they held the lock).
    BelievedOverlap,
    /// Rule 6: a validity window overlapped a window an `info` acquire may have held.
    PossibleOverlap,
    /// Rule 7: the side-effect sink applied two or more charges for one job (`external` work).
    DuplicateEffect,
    /// Rule 7: the sink applied a charge for a job no critical section did.
    UnexpectedEffect,
    /// Rule 7: the sink answered a repeat of an idempotency key without applying it again
    /// (the key did its job; not a safety anomaly).
    EffectDeduplicated,
    /// Rule 8: a job was executed by two or more sections (`external` and `job` work): work
    /// done twice, which an at-least-once queue allows (not a safety anomaly by itself; its
    /// damage shows as a `duplicate-effect` at the sink or at the row).
    DuplicateExecution,
    /// Rule 8: a worker completed a claimed job (its completion took effect) after another
    /// worker had re-claimed it: the job is marked done while its new owner still works, and
    /// the new owner's outcome no longer decides it.
    ZombieCompletion,
    /// Rule 8: the completion of a worker whose claim had been taken over was refused (the
    /// owner guard did its job; not a safety anomaly).
    StaleCompletionRefused,
}

impl AnomalyKind {
    /// Kinds found as an interval with several holders (mutex violation, believed or possible
    /// overlap) rather than at one write or acquire.
    pub fn is_interval(self) -> bool {
        matches!(
            self,
            AnomalyKind::MutexViolation
                | AnomalyKind::BelievedOverlap
                | AnomalyKind::PossibleOverlap
        )
    }

    /// Kinds that make the verdict `invalid`.
    pub fn is_safety(self) -> bool {
        matches!(
            self,
            AnomalyKind::MutexViolation
                | AnomalyKind::StaleWriteAccepted
                | AnomalyKind::LostUpdate
                | AnomalyKind::TokenRegression
                | AnomalyKind::TokenDuplicate
                | AnomalyKind::BelievedOverlap
                | AnomalyKind::DuplicateEffect
                | AnomalyKind::UnexpectedEffect
                | AnomalyKind::ZombieCompletion
        )
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// Resource name.
    pub resource: String,
    /// Start, µs on the run clock.
    pub time_us: u64,
    /// End (for windows and episodes), µs on the run clock.
    pub end_us: Option<u64>,
    /// Clients involved, ascending.
    pub clients: Vec<u32>,
    /// Fencing tokens involved, ascending (empty for unfenced strategies).
    pub tokens: Vec<u64>,
    /// Most holders inside / believing at once (mutex violations and overlaps).
    pub holders: Option<u32>,
    /// Ledger `events.seq` of the offending steps (look them up with sqlite3).
    pub ledger_seqs: Vec<i64>,
    /// Ids of the fault windows it fell in (or that ended less than `fault_grace_ms` before it).
    pub fault_ids: Vec<u64>,
    /// One human sentence.
    pub detail: String,
}

/// Counts over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Rule 1: overlap episodes seen by the ledger (one episode lasts while ≥ 2 holders are inside).
    pub mutex_violations: u64,
    /// Most sections inside one resource at once according to the ledger (1 when all is well).
    pub max_concurrent_holders: u32,
    pub stale_writes_accepted: u64,
    pub stale_writes_rejected: u64,
    /// Σ over resources of max(0, accepted writes − final counter).
    pub lost_updates: u64,
    pub token_regressions: u64,
    pub token_duplicates: u64,
    pub stuck_resources: u64,
    /// Σ of unavailability windows, ms.
    pub unavailable_ms: u64,
    pub unavailability_windows: u64,
    pub acquire_ok: u64,
    pub acquire_fail: u64,
    pub acquire_info: u64,
    /// Failed or unknown acquires classed [`crate::history::ErrorKind::Timeout`].
    pub acquire_timeouts: u64,
    /// Failed or unknown acquires classed `connection` or `other`.
    pub acquire_errors: u64,
    /// 100 × (1 − unavailable time / observed time), over all resources.
    pub availability_pct: f64,
    /// Rule 5, waiting view: Σ of stretches of at least `min_unavailable_ms` during which some
    /// client was waiting for a resource (an acquire in flight, retries included) while nobody
    /// held it, ms.
    #[serde(default)]
    pub wait_blocked_ms: u64,
    /// 100 × (1 − `wait_blocked_ms` / observed time), over all resources: the share of time a
    /// client that wanted the lock could get it. `None` in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_availability_pct: Option<f64>,
    /// Rule 6: episodes in which ≥ 2 clients believed they held the same resource.
    pub believed_overlaps: u64,
    /// Most clients believing they held one resource at once.
    pub max_believed_holders: u32,
    /// Overlap episodes that involve an `info` acquire's possible window only.
    pub possible_overlaps: u64,
    /// Operations invoked but never completed when the history ends.
    pub incomplete_ops: u64,
    /// `adapter:*` strategies: sections after whose work the library itself said it no longer
    /// owned the lock (`hold` answered `owns: false`); each ends that client's believed hold.
    #[serde(default)]
    pub library_lost_notices: u64,
    /// Rule 8, claimed jobs (`job:<id>`): completions that took effect after another worker
    /// had re-claimed the job (`zombie-completion`).
    #[serde(default)]
    pub zombie_completions: u64,
    /// Rule 8: completions refused because another worker had re-claimed the job.
    #[serde(default)]
    pub stale_completions_refused: u64,
    pub history_events: u64,
    pub ledger_events: u64,
    pub sections: u64,
    /// Rule 7 (`external` work, a `sink.sqlite` beside the ledger): what the side-effect sink
    /// applied per job. `None` for a run without a sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<crate::checker::effects::EffectStats>,
}

/// The checker's result; written as `checker.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub verdict: Verdict,
    pub liveness: Liveness,
    /// Why the verdict is `unknown` (empty otherwise).
    pub unknown_reasons: Vec<String>,
    pub stats: Stats,
    /// Anomalies, in the order found, at most `max_anomalies_per_kind` per kind.
    pub anomalies: Vec<Anomaly>,
    /// Anomalies found but not listed because of the per-kind cap.
    pub anomalies_omitted: u64,
    /// The ledger's fence mode (`None` when checked without a ledger).
    pub fence_mode: Option<FenceMode>,
    /// Every fault window of the run (latest record per id).
    pub fault_windows: Vec<FaultWindow>,
    /// Whether the history ended with an incomplete line.
    pub history_truncated: bool,
    /// The listed anomalies grouped as a reader sees them, with holders, witness and cause
    /// (absent in files written before incidents existed).
    #[serde(default)]
    pub incidents: Vec<crate::checker::Incident>,
    /// Whether some anomalies were not listed (per-kind cap), so incidents cover only the
    /// listed ones.
    #[serde(default)]
    pub incidents_partial: bool,
}

impl CheckReport {
    /// Incidents that contain a safety anomaly.
    pub fn safety_incidents(&self) -> impl Iterator<Item = &crate::checker::Incident> {
        self.incidents.iter().filter(|i| i.safety)
    }

    /// Anomalies of one kind.
    pub fn of_kind(&self, kind: AnomalyKind) -> impl Iterator<Item = &Anomaly> {
        self.anomalies.iter().filter(move |a| a.kind == kind)
    }
}

/// Collects anomalies with a per-kind cap.
#[derive(Debug, Default)]
pub(crate) struct AnomalySink {
    pub(crate) list: Vec<Anomaly>,
    per_kind: std::collections::HashMap<AnomalyKind, u64>,
    cap: u64,
    pub(crate) omitted: u64,
}

impl AnomalySink {
    pub(crate) fn new(cap: u64) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, a: Anomaly) {
        let n = self.per_kind.entry(a.kind).or_insert(0);
        *n += 1;
        if *n <= self.cap {
            self.list.push(a);
        } else {
            self.omitted += 1;
        }
    }

    pub(crate) fn merge(&mut self, other: AnomalySink) {
        for a in other.list {
            self.push(a);
        }
        self.omitted += other.omitted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant_names::assert_names_match_serde;

    #[test]
    fn verdict_names_match_serde() {
        assert_names_match_serde::<Verdict>();
    }

    #[test]
    fn liveness_names_match_serde() {
        assert_names_match_serde::<Liveness>();
    }

    #[test]
    fn anomaly_kind_names_match_serde() {
        assert_names_match_serde::<AnomalyKind>();
    }

    #[test]
    fn the_worst_verdict_is_invalid_then_unknown() {
        use Verdict::*;
        assert_eq!(Valid.worst(Unknown), Unknown);
        assert_eq!(Invalid.worst(Unknown), Invalid);
        assert_eq!(Unknown.worst(Invalid), Invalid);
        assert_eq!(
            [Valid, Valid].into_iter().fold(Valid, Verdict::worst),
            Valid
        );
    }
}
