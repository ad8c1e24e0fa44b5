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

/// Compares the history with the ledger: every successful acquire is followed by exactly one
/// critical section (its `begin` step is queued before the client awaits anything), so the
/// history's successful acquires and the ledger's sections must be equal. More sections than
/// acquires means the history lost its tail (the process died before the writer flushed);
/// fewer means the ledger lost steps. Either way events are missing and nothing can be
/// concluded from the rest. `None` when they agree, or when one of the two files is absent
/// (that gap has its own reason).
pub(crate) fn ledger_mismatch(stats: &Stats, evidence: Evidence, ledger: bool) -> Option<String> {
    if !ledger || evidence.history_missing || stats.history_events == 0 {
        return None;
    }
    (stats.sections != stats.acquire_ok).then(|| {
        let (more, fewer) = if stats.sections > stats.acquire_ok {
            (
                "the history lost its tail (the process died, or the disk filled, before it was written?)",
                "",
            )
        } else {
            (
                "",
                "the ledger lost steps (the process died, or the disk filled, before they were committed?)",
            )
        };
        format!(
            "the ledger has {} critical section(s) but the history has {} successful \
             acquire(s): {}{}, so events are missing and the rest cannot be judged",
            stats.sections, stats.acquire_ok, more, fewer
        )
    })
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

/// Makes `report` `unknown` when `failed_steps` ledger steps failed to commit (disk full?):
/// missing begin/end steps look like holders that never left, so nothing the checker says
/// about mutual exclusion can be trusted, `invalid` included.
pub fn mark_incomplete_ledger(report: &mut CheckReport, failed_steps: u64) {
    if failed_steps == 0 {
        return;
    }
    report.verdict = Verdict::Unknown;
    report.unknown_reasons.push(format!(
        "{failed_steps} ledger step(s) failed to commit (disk full?): the ledger is incomplete"
    ));
}

/// Makes a `valid` report `unknown` when every critical section (`cut_sections` of them) was
/// cut at the end of the run: a `valid` would rest on sections that never wrote.
pub fn mark_all_cut(report: &mut CheckReport, cut_sections: u64) {
    let all_cut = cut_sections > 0 && cut_sections >= report.stats.sections;
    if all_cut && report.verdict == Verdict::Valid {
        report.verdict = Verdict::Unknown;
        report.unknown_reasons.push(format!(
            "every critical section ({cut_sections}) was cut at the end of the run: none \
             completed to check (hold longer than the run plus its drain grace?)"
        ));
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
    fn history_and_ledger_must_agree_in_both_directions() {
        // (history events, acquires ok, ledger sections, ledger present, history missing) → reason?
        type Case = (u64, u64, u64, bool, bool, Option<&'static str>);
        let cases: [Case; 6] = [
            (40, 10, 10, true, false, None),
            (
                40,
                10,
                13,
                true,
                false,
                Some("ledger has 13 critical section(s) but the history has 10"),
            ),
            (40, 10, 7, true, false, Some("the ledger lost steps")),
            (40, 10, 7, false, false, None),
            (0, 0, 7, true, false, None),
            (0, 0, 7, true, true, None),
        ];
        for (events, ok, sections, ledger, missing, want) in cases {
            let got = ledger_mismatch(
                &stats(events, ok, sections),
                Evidence {
                    history_missing: missing,
                },
                ledger,
            );
            match want {
                None => assert_eq!(got, None, "{events} {ok} {sections} {ledger}"),
                Some(w) => assert!(got.as_deref().is_some_and(|g| g.contains(w)), "{got:?}"),
            }
        }
        let tail = ledger_mismatch(&stats(40, 10, 13), LEDGER, true).unwrap();
        assert!(tail.contains("lost its tail"), "{tail}");
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

    #[test]
    fn an_incomplete_ledger_or_an_all_cut_run_is_never_judged() {
        let report = || {
            let mut r = crate::checker::check_in_memory(Vec::new(), None, &Default::default());
            r.unknown_reasons.clear();
            r
        };
        let mut r = report();
        r.verdict = Verdict::Invalid;
        mark_incomplete_ledger(&mut r, 0);
        assert_eq!(r.verdict, Verdict::Invalid);
        mark_incomplete_ledger(&mut r, 2);
        assert_eq!(r.verdict, Verdict::Unknown);
        assert!(r.unknown_reasons[0].starts_with("2 ledger step(s)"));

        let mut r = report();
        r.verdict = Verdict::Valid;
        r.stats = stats(10, 3, 3);
        mark_all_cut(&mut r, 2);
        assert_eq!(r.verdict, Verdict::Valid, "one section completed");
        mark_all_cut(&mut r, 3);
        assert_eq!(r.verdict, Verdict::Unknown);
        assert!(r.unknown_reasons[0].contains("every critical section (3)"));
        let mut r = report();
        r.verdict = Verdict::Invalid;
        r.stats = stats(10, 3, 3);
        mark_all_cut(&mut r, 3);
        assert_eq!(r.verdict, Verdict::Invalid, "real anomalies stay");
    }
}
