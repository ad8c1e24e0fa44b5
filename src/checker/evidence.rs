//! Is the evidence complete enough to support a verdict? A history that is missing, empty,
//! or does not match what the run measured can hide any violation, so it gives `unknown` with
//! the reason, never `valid`.

use super::verdict::{CheckReport, Stats, Verdict};

/// What the checker knows about the files it read, besides the counts in [`Stats`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evidence {
    /// `history.jsonl` did not exist.
    pub history_missing: bool,
}

/// Reasons the history cannot support a verdict, one sentence each (empty when there is
/// none): it is missing, or empty although the directory was checked.
pub(crate) fn gaps(stats: &Stats, evidence: Evidence) -> Vec<String> {
    let mut out = Vec::new();
    if evidence.history_missing {
        out.push("history.jsonl is missing: no operation can be checked".to_string());
    } else if stats.history_events == 0 {
        out.push("history.jsonl is empty: no operation was recorded".to_string());
    }
    out
}

/// Compares the history with what the driver measured during the run (`summary.json`'s
/// `acquired`): every successful acquire is both a sample and a history event, so a
/// difference means the history lost events or belongs to another run. Returns the reason.
pub fn measured_mismatch(report: &CheckReport, measured_acquired: u64) -> Option<String> {
    (report.stats.acquire_ok != measured_acquired).then(|| {
        format!(
            "the history has {} successful acquire(s) but the run measured {} (summary.json): \
             the history is incomplete or belongs to another run",
            report.stats.acquire_ok, measured_acquired
        )
    })
}

/// Makes `report` `unknown` for `reason` (an `invalid` verdict stays: its anomalies are real).
pub fn mark_unknown(report: &mut CheckReport, reason: String) {
    if report.verdict == Verdict::Valid {
        report.verdict = Verdict::Unknown;
    }
    if report.verdict == Verdict::Unknown {
        report.unknown_reasons.push(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(history_events: u64, acquire_ok: u64, sections: u64) -> Stats {
        Stats {
            history_events,
            acquire_ok,
            sections,
            ..Stats::default()
        }
    }

    const LEDGER: Evidence = Evidence {
        history_missing: false,
    };

    #[test]
    fn a_recorded_history_has_no_gap() {
        assert!(gaps(&stats(40, 10, 10), LEDGER).is_empty());
    }

    #[test]
    fn empty_or_missing_history_is_a_gap() {
        let g = gaps(&stats(0, 0, 10), LEDGER);
        assert!(g[0].contains("history.jsonl is empty"), "{g:?}");
        let missing = Evidence {
            history_missing: true,
        };
        assert!(gaps(&stats(0, 0, 10), missing)[0].contains("missing"));
    }

    #[test]
    fn a_history_that_does_not_match_the_measurement_is_unknown_unless_invalid() {
        let mut report = crate::checker::check_in_memory(Vec::new(), None, &Default::default());
        report.verdict = Verdict::Valid;
        report.unknown_reasons.clear();
        report.stats.acquire_ok = 7;
        assert_eq!(measured_mismatch(&report, 7), None);
        let reason = measured_mismatch(&report, 9).unwrap();
        assert!(reason.contains("7 successful acquire(s) but the run measured 9"));
        mark_unknown(&mut report, reason.clone());
        assert_eq!(report.verdict, Verdict::Unknown);
        assert_eq!(report.unknown_reasons, vec![reason.clone()]);
        report.verdict = Verdict::Invalid;
        report.unknown_reasons.clear();
        mark_unknown(&mut report, reason);
        assert_eq!(report.verdict, Verdict::Invalid);
        assert!(report.unknown_reasons.is_empty());
    }
}
