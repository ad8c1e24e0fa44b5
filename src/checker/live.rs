//! The checker's streaming part: rules 1–3 ([`exclusion`](super::exclusion)) applied to a
//! ledger while a run is still writing it, for the live metrics (`--metrics`).
//!
//! [`LedgerWatch`] feeds ledger events in commit order through the same analysis the checker
//! runs on a finished ledger, so a count it gives at the end of a run equals the checker's:
//! mutual-exclusion violations (an overlap episode counts from its first overlapping `begin`,
//! not only once it ends), stale writes accepted and rejected. Lost updates are counted write by
//! write (the checker also compares each resource's accepted writes with its final counter).
//! History rules (token order, liveness, believed overlaps) need the whole history and are not
//! streamed.

use crate::ledger::{FenceMode, LedgerEvent};

use super::exclusion::LedgerAnalysis;
use super::verdict::AnomalyKind;

/// Ledger anomalies found so far in one run.
pub struct LedgerWatch {
    analysis: LedgerAnalysis,
}

impl std::fmt::Debug for LedgerWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerWatch")
            .field("counts", &self.counts())
            .finish()
    }
}

impl LedgerWatch {
    /// A watch over a ledger in `mode` (its `meta.fence_mode`). Keeps per-resource state only,
    /// and no anomaly list.
    pub fn new(mode: FenceMode) -> Self {
        Self {
            analysis: LedgerAnalysis::new(mode, 0),
        }
    }

    /// The next event in commit order.
    pub fn feed(&mut self, ev: &LedgerEvent) {
        self.analysis.feed(ev);
    }

    /// Anomalies so far, by kind, in this order: mutex violations (episodes ended or still
    /// open), stale writes accepted, stale writes rejected (fencing at work: not damage), lost
    /// updates (increments lost, write by write). Each count only grows as events are fed.
    pub fn counts(&self) -> [(AnomalyKind, u64); 4] {
        let s = &self.analysis.stats;
        [
            (
                AnomalyKind::MutexViolation,
                s.mutex_violations + self.analysis.open_episodes(),
            ),
            (AnomalyKind::StaleWriteAccepted, s.stale_writes_accepted),
            (AnomalyKind::StaleWriteRejected, s.stale_writes_rejected),
            (AnomalyKind::LostUpdate, self.analysis.lost_updates_seen()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{RejectReason, Step};

    fn ev(
        seq: i64,
        section: u64,
        step: Step,
        token: Option<u64>,
        value: Option<i64>,
    ) -> LedgerEvent {
        LedgerEvent {
            seq,
            time_us: seq as u64 * 1_000,
            section_id: section,
            client: section as u32,
            resource: "r0".into(),
            fencing_token: token,
            step,
            value,
            accepted: true,
            reason: None,
        }
    }

    fn count(w: &LedgerWatch, kind: AnomalyKind) -> u64 {
        w.counts().iter().find(|(k, _)| *k == kind).unwrap().1
    }

    #[test]
    fn an_overlap_counts_at_its_second_begin_and_once_when_it_ends() {
        let mut w = LedgerWatch::new(FenceMode::Unfenced);
        w.feed(&ev(1, 1, Step::Begin, None, None));
        w.feed(&ev(2, 1, Step::Read, None, Some(0)));
        assert_eq!(count(&w, AnomalyKind::MutexViolation), 0);
        w.feed(&ev(3, 2, Step::Begin, None, None));
        assert_eq!(count(&w, AnomalyKind::MutexViolation), 1, "open episode");
        w.feed(&ev(4, 2, Step::Read, None, Some(0)));
        w.feed(&ev(5, 2, Step::Write, None, Some(1)));
        w.feed(&ev(6, 2, Step::End, None, None));
        assert_eq!(
            count(&w, AnomalyKind::MutexViolation),
            1,
            "ended: still one"
        );
        // The first holder's late write of 0 + 1 overwrites the second's increment.
        w.feed(&ev(7, 1, Step::Write, None, Some(1)));
        w.feed(&ev(8, 1, Step::End, None, None));
        assert_eq!(count(&w, AnomalyKind::MutexViolation), 1);
        assert_eq!(count(&w, AnomalyKind::LostUpdate), 1);
        assert_eq!(count(&w, AnomalyKind::StaleWriteAccepted), 0);
    }

    #[test]
    fn a_fenced_out_holder_is_no_overlap_and_its_rejected_write_is_counted() {
        let mut w = LedgerWatch::new(FenceMode::Fenced);
        w.feed(&ev(1, 1, Step::Begin, Some(1), None));
        w.feed(&ev(2, 2, Step::Begin, Some(2), None));
        // Fenced: the token-2 begin put the token-1 section out; no second holder inside.
        assert_eq!(count(&w, AnomalyKind::MutexViolation), 0);
        let mut stale = ev(3, 1, Step::Write, Some(1), Some(1));
        stale.accepted = false;
        stale.reason = Some(RejectReason::Stale);
        w.feed(&stale);
        assert_eq!(count(&w, AnomalyKind::StaleWriteRejected), 1);
        assert_eq!(count(&w, AnomalyKind::StaleWriteAccepted), 0);
        assert_eq!(count(&w, AnomalyKind::MutexViolation), 0);
    }
}
