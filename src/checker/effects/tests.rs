//! Rule 7 on hand-built sink tables and ledgers.

use proptest::prelude::*;

use super::*;
use crate::sink::Charge;

fn event(seq: i64, section: u64, client: u32, step: Step, value: Option<i64>) -> LedgerEvent {
    LedgerEvent {
        seq,
        time_us: seq as u64 * 10,
        section_id: section,
        client,
        resource: "r0".into(),
        fencing_token: Some(section + 100),
        step,
        value,
        accepted: true,
        reason: None,
    }
}

/// A section that began, read `read`, wrote and ended.
fn section(jobs: &mut SectionJobs, seq: i64, id: u64, client: u32, read: i64) {
    jobs.feed(&event(seq, id, client, Step::Begin, None));
    jobs.feed(&event(seq + 1, id, client, Step::Read, Some(read)));
    jobs.feed(&event(seq + 2, id, client, Step::Write, Some(read + 1)));
    jobs.feed(&event(seq + 3, id, client, Step::End, None));
}

fn request(
    seq: i64,
    job: &str,
    client: u32,
    section: u64,
    key: bool,
    outcome: Outcome,
) -> SinkRequest {
    SinkRequest {
        seq,
        time_us: seq as u64 * 1000,
        charge: Charge {
            job: job.into(),
            client,
            section_id: section,
        },
        idempotency_key: key.then(|| job.to_string()),
        outcome,
        charge_id: (outcome != Outcome::Conflict).then_some(seq),
    }
}

#[test]
fn a_paused_holder_that_charges_its_successors_job_again_is_a_duplicate_effect() {
    let mut jobs = SectionJobs::default();
    section(&mut jobs, 1, 0, 0, 5); // client 0 read 5, paused, wrote late
    section(&mut jobs, 5, 1, 2, 5); // client 2 took over and read 5 as well
    section(&mut jobs, 9, 2, 2, 6);
    let requests = [
        request(1, "r0:5", 2, 1, false, Outcome::Applied),
        request(2, "r0:6", 2, 2, false, Outcome::Applied),
        request(3, "r0:5", 0, 0, false, Outcome::Applied),
    ];
    let f = judge(&requests, &jobs, 100);
    assert_eq!(f.stats.charges, 3);
    assert_eq!(f.stats.jobs_charged, 2);
    assert_eq!(f.stats.duplicate_effects, 1);
    assert_eq!(f.stats.extra_charges, 1);
    assert_eq!(f.stats.unexpected_effects, 0);
    // Rule 8: job r0:5 was executed by sections 0 and 1.
    assert_eq!(
        (
            f.stats.executions,
            f.stats.duplicate_executions,
            f.stats.extra_executions
        ),
        (3, 1, 1)
    );
    assert!(f.unknown_reasons.is_empty());
    let [a, twice] = &f.anomalies.list[..] else {
        panic!("{:?}", f.anomalies.list)
    };
    assert_eq!(twice.kind, AnomalyKind::DuplicateExecution);
    assert!(!twice.kind.is_safety());
    assert_eq!(
        (twice.clients.clone(), twice.holders),
        (vec![0, 2], Some(2))
    );
    assert_eq!(twice.ledger_seqs, vec![1, 5]);
    assert_eq!((twice.time_us, twice.end_us), (50, Some(50)));
    assert!(
        twice
            .detail
            .contains("job r0:5 was executed by 2 sections (0, 1)"),
        "{}",
        twice.detail
    );
    assert_eq!(a.kind, AnomalyKind::DuplicateEffect);
    assert_eq!(a.resource, "r0");
    assert_eq!(a.clients, vec![0, 2]);
    assert_eq!(a.tokens, vec![100, 101]);
    assert_eq!(a.holders, Some(2));
    assert_eq!((a.time_us, a.end_us), (3000, Some(3000)));
    assert_eq!(a.ledger_seqs, vec![5, 1]);
    assert!(
        a.detail.contains("job r0:5 was charged 2 times"),
        "{}",
        a.detail
    );
    assert!(a.detail.contains("cannot check a token"), "{}", a.detail);
}

#[test]
fn an_idempotency_key_turns_the_repeat_into_a_replay_and_a_conflict_not_a_charge() {
    let mut jobs = SectionJobs::default();
    section(&mut jobs, 1, 0, 0, 5);
    section(&mut jobs, 5, 1, 2, 5);
    section(&mut jobs, 9, 2, 1, 5);
    let mut requests = [
        request(1, "r0:5", 2, 1, true, Outcome::Applied),
        request(2, "r0:5", 0, 0, true, Outcome::Replayed),
        request(3, "r0:5", 1, 2, true, Outcome::Conflict),
    ];
    requests[1].charge_id = Some(1); // the sink answers a replay with the first charge
    let f = judge(&requests, &jobs, 100);
    assert_eq!(
        (
            f.stats.charges,
            f.stats.replayed,
            f.stats.conflicts,
            f.stats.duplicate_effects
        ),
        (1, 1, 1, 0)
    );
    let kinds: Vec<AnomalyKind> = f.anomalies.list.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AnomalyKind::EffectDeduplicated,
            AnomalyKind::EffectDeduplicated,
            AnomalyKind::DuplicateExecution
        ]
    );
    assert_eq!(f.stats.extra_executions, 2);
    assert!(kinds.iter().all(|k| !k.is_safety()));
    assert!(f.anomalies.list[0]
        .detail
        .contains("answered with the first charge (1)"));
    assert!(f.anomalies.list[1].detail.contains("409"));
}

#[test]
fn a_charge_for_a_job_no_section_did_is_unexpected() {
    let mut jobs = SectionJobs::default();
    section(&mut jobs, 1, 0, 0, 5);
    let requests = [
        request(1, "r0:7", 0, 0, false, Outcome::Applied), // section 0 read 5, not 7
        request(2, "r0:1", 3, 44, false, Outcome::Applied), // no section 44
    ];
    let f = judge(&requests, &jobs, 100);
    assert_eq!(f.stats.unexpected_effects, 2);
    assert_eq!(f.stats.duplicate_effects, 0);
    let details: Vec<&str> = f.anomalies.list.iter().map(|a| a.detail.as_str()).collect();
    assert!(
        details[0].contains("its section 0 did job r0:5"),
        "{details:?}"
    );
    assert!(details[1].contains("no section 44"), "{details:?}");
    assert!(f
        .anomalies
        .list
        .iter()
        .all(|a| a.kind == AnomalyKind::UnexpectedEffect));
}

#[test]
fn a_section_that_wrote_without_a_recorded_call_is_missing_evidence() {
    let mut jobs = SectionJobs::default();
    section(&mut jobs, 1, 0, 0, 5);
    section(&mut jobs, 5, 1, 0, 6);
    // A section cut before its write made no call and is not missing evidence.
    jobs.feed(&event(9, 2, 1, Step::Begin, None));
    jobs.feed(&event(10, 2, 1, Step::Read, Some(7)));
    let f = judge(
        &[request(1, "r0:5", 0, 0, false, Outcome::Applied)],
        &jobs,
        100,
    );
    assert_eq!(f.stats.sections_without_call, 1);
    assert_eq!(f.unknown_reasons.len(), 1);
    assert!(
        f.unknown_reasons[0].starts_with("1 section(s)"),
        "{:?}",
        f.unknown_reasons
    );
}

#[test]
fn a_claimed_job_is_its_own_name_whatever_its_row_read() {
    // Two executions of claimed job 17: the first read its row at 0, the rescue at 1 (the
    // first had written). Both did job:17, and the sink's charge for it matches either.
    let mut jobs = SectionJobs::default();
    let claimed = |seq, section, client, step, value| LedgerEvent {
        resource: "job:17".into(),
        ..event(seq, section, client, step, value)
    };
    for (seq, id, client, read) in [(1, 0, 0, 0), (5, 1, 1, 1)] {
        jobs.feed(&claimed(seq, id, client, Step::Begin, None));
        jobs.feed(&claimed(seq + 1, id, client, Step::Read, Some(read)));
        jobs.feed(&claimed(seq + 2, id, client, Step::Write, Some(read + 1)));
    }
    let requests = [
        request(1, "job:17", 0, 0, true, Outcome::Applied),
        request(2, "job:17", 1, 1, true, Outcome::Replayed),
    ];
    let f = judge(&requests, &jobs, 100);
    assert_eq!(f.stats.unexpected_effects, 0, "{:?}", f.anomalies.list);
    assert_eq!((f.stats.duplicate_executions, f.stats.replayed), (1, 1));
    let twice = f
        .anomalies
        .list
        .iter()
        .find(|a| a.kind == AnomalyKind::DuplicateExecution)
        .unwrap();
    assert_eq!(twice.resource, "job:17");
    assert!(
        twice.detail.starts_with("job job:17 was executed by 2"),
        "{}",
        twice.detail
    );
}

proptest! {
    /// Every job charged twice is found, once, and nothing else is called a duplicate; the
    /// counts add up whatever the mix of outcomes.
    #[test]
    fn duplicates_are_found_and_none_invented(
        calls in prop::collection::vec((0i64..6, 0u32..4, 0u8..3), 0..60)
    ) {
        let mut jobs = SectionJobs::default();
        let mut requests = Vec::new();
        let mut applied: BTreeMap<i64, u64> = BTreeMap::new();
        for (i, &(job, client, outcome)) in calls.iter().enumerate() {
            let id = i as u64;
            section(&mut jobs, i as i64 * 4 + 1, id, client, job);
            let outcome = [Outcome::Applied, Outcome::Replayed, Outcome::Conflict][outcome as usize];
            if outcome == Outcome::Applied {
                *applied.entry(job).or_insert(0) += 1;
            }
            requests.push(request(i as i64 + 1, &job_name("r0", job), client, id, true, outcome));
        }
        let f = judge(&requests, &jobs, 1000);
        let expected: BTreeSet<String> = applied
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(j, _)| job_name("r0", *j))
            .collect();
        let found: BTreeSet<String> = f
            .anomalies
            .list
            .iter()
            .filter(|a| a.kind == AnomalyKind::DuplicateEffect)
            .map(|a| a.detail.split_whitespace().nth(1).unwrap().to_string())
            .collect();
        prop_assert_eq!(&found, &expected);
        prop_assert_eq!(f.stats.duplicate_effects, expected.len() as u64);
        let extra: u64 = applied.values().map(|n| n.saturating_sub(1)).sum();
        prop_assert_eq!(f.stats.extra_charges, extra);
        prop_assert_eq!(f.stats.charges + f.stats.replayed + f.stats.conflicts, calls.len() as u64);
        prop_assert_eq!(f.stats.unexpected_effects, 0);
        prop_assert_eq!(f.stats.sections_without_call, 0);
        // Rule 8: a job is executed once per section that read it.
        let mut executions: BTreeMap<i64, u64> = BTreeMap::new();
        for &(job, _, _) in &calls {
            *executions.entry(job).or_insert(0) += 1;
        }
        let twice = executions.values().filter(|&&n| n > 1).count() as u64;
        prop_assert_eq!(f.stats.duplicate_executions, twice);
        prop_assert_eq!(f.stats.executions, calls.len() as u64);
        let listed = f.anomalies.list.iter().filter(|a| a.kind == AnomalyKind::DuplicateExecution).count();
        prop_assert_eq!(listed as u64, twice);
    }
}

#[test]
fn compute_work_counts_each_jobs_executions_and_the_time_every_repeat_took() {
    let mut jobs = SectionJobs::default();
    section(&mut jobs, 1, 0, 0, 5); // 10–40 µs: job r0:5 first
    section(&mut jobs, 5, 1, 2, 5); // 50–80 µs: r0:5 again, 30 µs wasted
    section(&mut jobs, 9, 2, 2, 6); // r0:6 once
    section(&mut jobs, 13, 3, 1, 5); // 130–160 µs: r0:5 a third time, 30 µs more
    let f = judge_executions(&jobs, 10);
    assert_eq!(f.stats.executions, 4);
    assert_eq!(f.stats.duplicate_executions, 1);
    assert_eq!(f.stats.extra_executions, 2);
    assert_eq!(f.stats.wasted_work_us, 60);
    assert_eq!(f.stats.charges + f.stats.requests, 0, "no sink is judged");
    assert!(f.unknown_reasons.is_empty());
    let kinds: Vec<AnomalyKind> = f.anomalies.list.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [AnomalyKind::DuplicateExecution]);
    assert_eq!(f.anomalies.list[0].holders, Some(3));
    // A section cut by a crash counts up to the crash.
    let mut crashed = SectionJobs::default();
    section(&mut crashed, 1, 0, 0, 7);
    crashed.feed(&event(20, 1, 1, Step::Begin, None));
    crashed.feed(&event(21, 1, 1, Step::Read, Some(7)));
    crashed.feed(&event(25, 1, 1, Step::Crash, None));
    assert_eq!(judge_executions(&crashed, 10).stats.wasted_work_us, 50);
}
