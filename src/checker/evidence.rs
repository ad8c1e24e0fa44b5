//! Is the evidence complete enough to support a verdict? A history and a ledger that do not
//! match (one of them missing, empty or cut) can hide any violation, so they give `unknown`
//! with the reason, never `valid`.

use super::verdict::Stats;

/// What the checker knows about the files it read, besides the counts in [`Stats`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evidence {
    /// `history.jsonl` did not exist.
    pub history_missing: bool,
    /// A ledger was read (mutual exclusion at the resource was checkable).
    pub ledger_present: bool,
}

/// Reasons the history and ledger cannot support a verdict, one sentence each (empty when
/// they are consistent). Every critical section in the ledger starts after a successful
/// acquire in the history, so a ledger with more sections than the history has successful
/// acquires means the history lost events; a ledger without any section although acquires
/// succeeded means the ledger lost them.
pub(crate) fn gaps(stats: &Stats, evidence: Evidence) -> Vec<String> {
    let mut out = Vec::new();
    if evidence.history_missing {
        out.push("history.jsonl is missing: no operation can be checked".to_string());
    } else if stats.history_events == 0 {
        out.push("history.jsonl is empty: no operation was recorded".to_string());
    }
    if !evidence.ledger_present {
        return out;
    }
    if stats.history_events > 0 && stats.sections > stats.acquire_ok {
        out.push(format!(
            "the ledger has {} critical section(s) but the history only {} successful \
             acquire(s): the history is incomplete or belongs to another run",
            stats.sections, stats.acquire_ok
        ));
    }
    if stats.sections == 0 && stats.acquire_ok > 0 {
        out.push(format!(
            "the ledger has no critical section although {} acquire(s) succeeded: the ledger is \
             empty or belongs to another run",
            stats.acquire_ok
        ));
    }
    out
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
        ledger_present: true,
    };

    #[test]
    fn matching_history_and_ledger_have_no_gap() {
        assert!(gaps(&stats(40, 10, 10), LEDGER).is_empty());
        // A section cut before `begin` (acquired, never entered) is no gap.
        assert!(gaps(&stats(40, 10, 9), LEDGER).is_empty());
    }

    #[test]
    fn empty_or_missing_history_is_a_gap() {
        let g = gaps(&stats(0, 0, 10), LEDGER);
        assert!(g[0].contains("history.jsonl is empty"), "{g:?}");
        let missing = Evidence {
            history_missing: true,
            ..LEDGER
        };
        assert!(gaps(&stats(0, 0, 10), missing)[0].contains("missing"));
    }

    #[test]
    fn mismatched_counts_are_gaps() {
        let g = gaps(&stats(12, 3, 10), LEDGER);
        assert!(
            g.iter().any(|r| r.contains("10 critical section(s)")),
            "{g:?}"
        );
        let g = gaps(&stats(12, 3, 0), LEDGER);
        assert!(g.iter().any(|r| r.contains("no critical section")), "{g:?}");
    }
}
