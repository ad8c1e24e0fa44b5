//! The answers for the work a matrix's trials did (the rules are the module's; only what
//! the answers say changes).
//!
//! `compute` work: a job computed twice is waste, so the correctness answer defers to the
//! efficiency one.
//!
//! `external` work: a duplicate or unexpected charge at the side-effect sink is damage, so a
//! fenced lock no longer protects what a correctness answer promises; when no lock qualifies,
//! the answer says that the effect needs an idempotency key of its own.
//!
//! `job` work: a queue of jobs, each to be done once, whose effect goes to a
//! side-effect sink that cannot check a token. "The best lock is no lock": a lock-free claim
//! row (`claim-update`, a conditional `UPDATE` on the jobs table) that qualifies is answered
//! first, as **no lock**, before any lock that qualifies too — it needs no lock server and no
//! lock round trip, only the database the jobs already live in. So the servers a lock row
//! costs for job work count that database too ([`with_the_jobs_database`]): a Redis or etcd
//! lock is run beside it, a PostgreSQL advisory lock can live in it. The rules are the same as for
//! every work kind (the module docs); what counts as damage adds the sink's duplicate and
//! unexpected charges and the zombie completion ([`crate::matrix::episode::is_damage`]).

use super::{label_strategy, DecisionTable, Recommendation};
use crate::matrix::probe::ProbeRecord;
use crate::strategy::LockService;

/// The probes with the servers job work costs: a lock that does not live in PostgreSQL runs
/// beside the database the jobs live in (one server more); a PostgreSQL lock and a claim row
/// use that database itself.
pub(super) fn with_the_jobs_database(probes: &[ProbeRecord]) -> Vec<ProbeRecord> {
    probes
        .iter()
        .map(|p| {
            let mut p = p.clone();
            let beside = label_strategy(&p.strategy)
                .is_some_and(|k| k.service() != LockService::Postgres && p.servers > 0);
            if beside {
                p.servers += 1;
            }
            p
        })
        .collect()
}

/// Rewrites both answers of `table` for compute work: a job computed twice is waste, never
/// damage (its checker never judges it `invalid`), so the correctness answer defers to the
/// efficiency one — "a plain `SET NX PX` is plenty" when it is the cheapest lock not stuck.
pub(super) fn answer_for_compute(table: &mut DecisionTable) {
    let work = "compute work (a job computed twice is waste, not damage)";
    let e = &mut table.efficiency;
    e.answer = format!("for {work}: {}", e.answer);
    let efficient = e.recommended.clone();
    let c = &mut table.correctness;
    c.rule = format!(
        "{} — not needed for {work}: the lock's double grants only cost work done again",
        c.rule
    );
    c.answer = if efficient.is_empty() {
        format!("not needed for {work}; and no row qualifies for efficiency either (see it)")
    } else {
        format!(
            "not needed for {work}: take the efficiency answer ({})",
            efficient.join(", ")
        )
    };
    c.recommended = efficient;
}

/// Rewrites both answers of `table` for external work (`keyed`: every call carries an
/// idempotency key).
pub(super) fn answer_for_external(table: &mut DecisionTable, keyed: bool) {
    let keyed = if keyed {
        "external work, every call with an idempotency key"
    } else {
        "external work (a call to a side effect that cannot check a token)"
    };
    let c = &mut table.correctness;
    c.rule = format!(
        "{} — and, for {keyed}, no job charged twice or charged unasked at the sink",
        c.rule
    );
    if c.recommended.is_empty() {
        c.answer = format!(
            "none for {keyed}: a holder stalled past its lease still makes its call, and no \
             fencing token reaches the effect; give every call an idempotency key the \
             effect applies once (--idempotency-key), then any lock that is not stuck will do"
        );
    } else {
        c.answer = format!("for {keyed}: {}", c.answer);
    }
    let e = &mut table.efficiency;
    e.answer = format!("for {keyed}: {}", e.answer);
}

/// Rewrites both answers of `table` for job work (`keyed`: every effect carries an idempotency
/// key): names the work, puts a qualifying claim row first as "no lock", and when no row
/// qualifies for correctness, says what would.
pub(super) fn answer_for_jobs(table: &mut DecisionTable, keyed: bool) {
    let work = if keyed {
        "job work, every effect with an idempotency key"
    } else {
        "job work (each job's effect at a sink that cannot check a token)"
    };
    let c = &mut table.correctness;
    c.rule = format!(
        "{} — and, for {work}, no job charged twice or charged unasked at the sink and no \
         completion of a job another worker had claimed again (zombie completion)",
        c.rule
    );
    if c.recommended.is_empty() {
        let hint = if keyed {
            "a row that stays undamaged needs its completion guarded by the claim's owner and \
             its row fenced by the claim (claim-update), or a fenced lock from a consensus system"
        } else {
            "a worker stalled past its lease or claim still makes the job's call, which no token \
             reaches; give every effect an idempotency key the sink applies once \
             (--idempotency-key), and a claimed queue (claim-update, claim-skip-locked) needs no \
             lock at all"
        };
        c.answer = format!("none for {work}: {hint}");
    } else {
        no_lock_first(c, work);
    }
    let e = &mut table.efficiency;
    e.rule = format!(
        "{} — for {work}, a row's servers count the database the jobs live in (a Redis or etcd \
         lock runs beside it; a PostgreSQL lock and a claim use it)",
        e.rule
    );
    no_lock_first(e, work);
}

/// True for a row of a claim strategy (`claim-update`, `claim-skip-locked`, …, also behind
/// a setup label).
fn is_claim(row: &str) -> bool {
    label_strategy(row).is_some_and(|k| k.is_claim())
}

/// Prefixes the answer with the work and, when a claim row is recommended, moves the claim
/// rows to the front of `recommended` and opens the answer with "no lock".
fn no_lock_first(r: &mut Recommendation, work: &str) {
    let (free, locks): (Vec<String>, Vec<String>) =
        r.recommended.iter().cloned().partition(|s| is_claim(s));
    if free.is_empty() {
        r.answer = format!("for {work}: {}", r.answer);
        return;
    }
    let also = if locks.is_empty() {
        String::new()
    } else {
        format!("; locks that qualify too: {}", locks.join(", "))
    };
    r.answer = format!(
        "for {work}: no lock — {} (each job claimed in the database the jobs live in, by a \
         conditional UPDATE or a row lock; no lock server){also}. In full: {}",
        free.join(", "),
        r.answer
    );
    r.recommended = free.into_iter().chain(locks).collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(recommended: &[&str], answer: &str) -> Recommendation {
        Recommendation {
            need: "correctness".into(),
            rule: "a rule".into(),
            recommended: recommended.iter().map(|s| s.to_string()).collect(),
            answer: answer.into(),
            bound: None,
            thin: None,
            rows: Vec::new(),
            untried: Vec::new(),
        }
    }

    fn table(correct: &[&str], efficient: &[&str]) -> DecisionTable {
        DecisionTable {
            efficiency: Recommendation {
                need: "efficiency".into(),
                ..rec(efficient, "the cheapest")
            },
            correctness: rec(correct, "no damage"),
            work: crate::driver::WorkKind::Job,
        }
    }

    #[test]
    fn compute_work_defers_correctness_to_the_efficiency_answer() {
        let mut t = table(&["single-fenced"], &["single"]);
        answer_for_compute(&mut t);
        let c = &t.correctness;
        assert_eq!(c.recommended, ["single"]);
        assert!(
            c.answer
                .starts_with("not needed for compute work (a job computed twice is waste"),
            "{}",
            c.answer
        );
        assert!(
            c.answer.ends_with("take the efficiency answer (single)"),
            "{}",
            c.answer
        );
        assert!(t.efficiency.answer.starts_with("for compute work"));
        let mut none = table(&["single-fenced"], &[]);
        answer_for_compute(&mut none);
        assert!(none.correctness.recommended.is_empty());
        assert!(none
            .correctness
            .answer
            .contains("no row qualifies for efficiency either"));
    }

    #[test]
    fn a_qualifying_claim_row_is_answered_first_as_no_lock() {
        let mut t = table(&["pg-advisory-fenced", "claim-update"], &["single"]);
        answer_for_jobs(&mut t, true);
        let c = &t.correctness;
        assert_eq!(c.recommended, ["claim-update", "pg-advisory-fenced"]);
        assert!(
            c.answer.starts_with(
                "for job work, every effect with an idempotency key: no lock — claim-update"
            ),
            "{}",
            c.answer
        );
        assert!(c
            .answer
            .contains("locks that qualify too: pg-advisory-fenced"));
        assert!(c.answer.ends_with("In full: no damage"), "{}", c.answer);
        assert!(c.rule.contains("zombie completion"), "{}", c.rule);
        let e = &t.efficiency;
        assert_eq!(e.recommended, ["single"]);
        assert_eq!(
            e.answer,
            "for job work, every effect with an idempotency key: the cheapest"
        );
    }

    #[test]
    fn a_lock_beside_the_jobs_database_costs_one_server_more() {
        let probe = |strategy: &str, servers| ProbeRecord {
            strategy: strategy.into(),
            topology: String::new(),
            servers,
            acquires: 1,
            p50_us: 1,
            p99_us: 1,
            dir: String::new(),
            error: None,
        };
        let counted = with_the_jobs_database(&[
            probe("single-fenced", 1),
            probe("etcd-lease", 3),
            probe("pg-advisory-fenced", 1),
            probe("claim-update", 1),
        ]);
        let servers: Vec<u32> = counted.iter().map(|p| p.servers).collect();
        assert_eq!(servers, [2, 4, 1, 1]);
    }

    #[test]
    fn with_nothing_qualifying_the_answer_says_what_would() {
        let mut t = table(&[], &["claim-update"]);
        answer_for_jobs(&mut t, false);
        let c = &t.correctness;
        assert!(
            c.answer.starts_with("none for job work (each job's effect"),
            "{}",
            c.answer
        );
        assert!(c.answer.contains("--idempotency-key"), "{}", c.answer);
        assert!(c.answer.contains("claim-update"), "{}", c.answer);
        assert!(t.efficiency.answer.contains("no lock — claim-update"));
    }
}
