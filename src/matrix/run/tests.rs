use super::*;
use crate::matrix::setup::MatrixRow;
use crate::strategy::StrategyKind;

#[test]
fn concurrency_steps_up_again_after_enough_clean_trials_never_above_what_was_asked() {
    let mut jobs = JobsRecord {
        asked: 4,
        last: 2,
        backoff: Some("backed off from 3 to 2".into()),
        clean: 0,
    };
    for _ in 1..STEP_UP_AFTER {
        assert_eq!(jobs.clean_trial(), None);
    }
    assert_eq!(
        jobs.clean_trial().as_deref(),
        Some("back up to 3 trial(s) at a time after 4 trials in a row without lag")
    );
    assert_eq!((jobs.last, jobs.clean), (3, 0));
    for _ in 0..STEP_UP_AFTER {
        jobs.clean_trial();
    }
    assert_eq!(jobs.last, 4);
    // Never above what was asked.
    for _ in 0..3 * STEP_UP_AFTER {
        assert_eq!(jobs.clean_trial(), None);
    }
    assert_eq!(jobs.last, 4);
    assert!(jobs
        .backoff
        .as_deref()
        .unwrap()
        .starts_with("backed off from 3 to 2; then back up to 3 trial(s)"));
}

#[test]
fn the_default_bound_allows_half_the_planned_episodes_to_miss() {
    assert_eq!(default_trial_bound(0, 30), 1);
    assert_eq!(default_trial_bound(10, 30), 6);
    assert_eq!(default_trial_bound(7, 30), 10);
    assert_eq!(default_trial_bound(40, 30), 2);
    assert_eq!(default_trial_bound(3, 10), 8);
}

fn cell(planned: usize, bound: u32, kept: u32, in_flight: u32) -> CellRun {
    CellRun {
        row: MatrixRow::direct(StrategyKind::Single),
        fault: FaultClass::Failover,
        planned,
        bound,
        lag_allowance: true,
        trials: (1..=kept)
            .map(|t| TrialRecord::not_run(t, 1, format!("t{t}"), TrialStatus::Completed, None))
            .collect(),
        launched: kept + in_flight,
        in_flight,
        failed: 0,
        done: false,
    }
}

#[test]
fn a_cell_starts_trials_only_while_its_running_ones_cannot_reach_the_episodes_wanted() {
    // One episode per trial (a Sentinel failover), 3 wanted: up to 3 at once.
    assert!(cell(1, 6, 0, 0).wants_trial(0, 3));
    assert!(cell(1, 6, 0, 2).wants_trial(0, 3));
    assert!(!cell(1, 6, 0, 3).wants_trial(0, 3));
    assert!(cell(1, 6, 2, 0).wants_trial(2, 3));
    assert!(!cell(1, 6, 3, 0).wants_trial(3, 3));
    // 33 episodes per trial, 30 wanted: one trial, a second only if the first fell short.
    assert!(!cell(33, 2, 0, 1).wants_trial(0, 30));
    assert!(cell(33, 2, 1, 0).wants_trial(25, 30));
    // The bound counts running trials; a failing cell stops; nothing planned: one trial.
    assert!(!cell(1, 6, 4, 2).wants_trial(4, 30));
    let mut failing = cell(1, 6, 2, 0);
    failing.failed = FAILED_TRIALS_LIMIT;
    assert!(!failing.wants_trial(0, 3));
    assert!(cell(0, 1, 0, 0).wants_trial(0, 30));
    assert!(!cell(0, 1, 1, 0).wants_trial(0, 30));
    assert!(cell(0, 1, 1, 0)
        .shortfall(0, 30)
        .unwrap()
        .contains("no episode"));
    assert!(cell(1, 6, 6, 0)
        .shortfall(4, 30)
        .unwrap()
        .contains("4 of 30"));
    assert_eq!(cell(1, 6, 6, 0).shortfall(30, 30), None);
}

#[test]
fn trials_the_harness_lag_left_without_evidence_do_not_count_toward_the_bound() {
    let lagged = |t: u32, lag: Option<u64>| {
        let mut r = TrialRecord::not_run(t, 1, format!("t{t}"), TrialStatus::Completed, None);
        r.episodes = vec![crate::matrix::EpisodeOutcome {
            trial: t,
            index: 1,
            start_us: 1_000_000,
            heal_us: Some(1_500_000),
            end_us: 2_000_000,
            targets: vec!["client:1".into()],
            exposed: true,
            exposure: String::new(),
            damage: vec![],
            first_damage_us: None,
            unsafe_belief: false,
            stuck: true,
            recovery_us: None,
            harness_lag_us: lag,
        }];
        r
    };
    // 4 of 6 trials kept, 3 of them lost to lag: one counts, so more may run.
    let mut c = cell(1, 6, 0, 0);
    c.trials = vec![
        lagged(1, Some(150_000)),
        lagged(2, Some(150_000)),
        lagged(3, Some(150_000)),
        lagged(4, None),
    ];
    assert!(c.wants_trial(1, 10));
    // A trial with evidence counts; at twice the bound the cell ends however it lagged.
    c.trials = (1..=6).map(|t| lagged(t, None)).collect();
    assert!(!c.wants_trial(6, 10));
    c.trials = (1..=12).map(|t| lagged(t, Some(150_000))).collect();
    assert!(!c.wants_trial(0, 10));
    assert!(c
        .shortfall(0, 10)
        .unwrap()
        .contains("12 of them with every exposed episode set aside"));
}

#[test]
fn a_lagging_trial_beside_others_is_set_aside_only_when_no_counted_episode_explains_its_verdict() {
    let plan = MatrixPlan::new(
        vec![StrategyKind::Single],
        vec![FaultClass::Failover],
        1,
        super::super::MatrixWorkload::quick(),
    );
    use crate::checker::Verdict;
    let finished = |trial: u32, verdict: Verdict, lag: bool| Finished {
        cell: 0,
        record: TrialRecord {
            verdict: Some(verdict),
            ..TrialRecord::not_run(trial, 1, format!("t{trial}"), TrialStatus::Completed, None)
        },
        lag: lag.then(|| "harness overloaded: lagged 300 ms".to_string()),
    };
    let mut report = MatrixReport::new(&plan, "m");
    report.jobs = JobsRecord {
        asked: 4,
        last: 4,
        ..JobsRecord::default()
    };
    let mut c = cell(100, 10, 0, 5);
    let mut said = Vec::new();
    let mut progress = |p: MatrixProgress<'_>| {
        if let MatrixProgress::BackOff { note } = p {
            said.push(note.to_string());
        }
    };
    // Lagged beside others but valid: kept (its lagged episodes are set aside instead).
    settle(
        &mut c,
        &mut report,
        &finished(1, Verdict::Valid, true),
        true,
        30,
        &mut progress,
    );
    // Lagged beside others and invalid: set aside, the cell runs another.
    settle(
        &mut c,
        &mut report,
        &finished(2, Verdict::Invalid, true),
        true,
        30,
        &mut progress,
    );
    // Lagged beside others and invalid, with damage in an episode the lag did not touch:
    // kept (that damage is the lock's).
    let mut damaged = finished(4, Verdict::Invalid, true);
    damaged.record.episodes = vec![crate::matrix::EpisodeOutcome {
        trial: 4,
        index: 1,
        start_us: 1_000_000,
        heal_us: Some(1_500_000),
        end_us: 2_000_000,
        targets: vec!["n1".into()],
        exposed: true,
        exposure: String::new(),
        damage: vec![crate::checker::AnomalyKind::MutexViolation],
        first_damage_us: Some(1_700_000),
        unsafe_belief: false,
        stuck: false,
        recovery_us: None,
        harness_lag_us: None,
    }];
    settle(&mut c, &mut report, &damaged, true, 30, &mut progress);
    // Lagged beside others, valid, 1 of 11 episodes set aside: kept, and no back-off.
    let last = report.jobs.last;
    let mut cheap = finished(5, Verdict::Valid, true);
    cheap.record.episodes = (1..=11)
        .map(|i| crate::matrix::EpisodeOutcome {
            index: i,
            damage: vec![],
            first_damage_us: None,
            harness_lag_us: (i == 3).then_some(120_000),
            ..damaged.record.episodes[0].clone()
        })
        .collect();
    settle(&mut c, &mut report, &cheap, true, 30, &mut progress);
    assert_eq!(report.jobs.last, last, "a lag that cost 1 of 11 episodes");
    // Lagged alone and invalid: kept (nothing else ran to blame).
    settle(
        &mut c,
        &mut report,
        &finished(3, Verdict::Invalid, true),
        false,
        30,
        &mut progress,
    );
    let kept: Vec<u32> = c.trials.iter().map(|t| t.trial).collect();
    assert_eq!(kept, vec![1, 4, 5, 3]);
    assert_eq!(report.set_aside.len(), 1);
    assert_eq!(report.set_aside[0].dir, "t2");
    assert_eq!(report.jobs.last, 1, "each lagging trial backs off one step");
    assert!(
        said[0].ends_with(
            "(kept without the episodes the lag overlapped): harness overloaded: lagged 300 ms"
        ),
        "{said:?}"
    );
    assert!(
        said[1].contains("was not valid with no damage in an episode that counts: set aside"),
        "{said:?}"
    );
}

#[test]
fn wall_time_reads_in_minutes() {
    assert_eq!(wall_text(725_000), "12 min 5 s");
    assert_eq!(wall_text(4_250), "4.2 s");
}

#[test]
fn a_long_back_off_history_reads_in_brief_for_the_terminal() {
    let mut jobs = JobsRecord {
        asked: 4,
        last: 4,
        backoff: None,
        clean: 0,
    };
    assert_eq!(jobs.backoff_brief(), None);
    jobs.say("backed off from 4 to 3 trial(s) at a time after t1 (kept): late 0.5 s".into());
    jobs.say("backed off from 3 to 2 trial(s) at a time after t2 (kept): late 0.7 s".into());
    assert_eq!(jobs.backoff_brief(), jobs.backoff, "two steps: whole");
    jobs.last = 2;
    for _ in 0..STEP_UP_AFTER {
        jobs.clean_trial();
    }
    jobs.say("backed off from 3 to 2 trial(s) at a time after t9 (kept): late 0.3 s".into());
    jobs.last = 2;
    assert_eq!(
        jobs.backoff_brief().unwrap(),
        "backed off 3 time(s) and stepped back up 1 time(s), ending at 2 of 4 trial(s) at a time \
         (every step in matrix.md)"
    );
}

#[test]
fn many_shortfalls_read_in_brief_and_a_few_are_printed_each() {
    let short = |strategy: &str, fault: &str, exposed: u32| Shortfall {
        strategy: strategy.into(),
        fault: fault.into(),
        exposed,
        wanted: 30,
        reason: "the bound".into(),
    };
    let mut all: Vec<Shortfall> = (1..=6).map(|i| short("single", "failover", i)).collect();
    assert_eq!(Shortfall::brief(&all), None);
    all.push(short("etcd-lease", "node-pause", 0));
    assert_eq!(
        Shortfall::brief(&all).unwrap(),
        "7 cell(s) with fewer than the 30 exposed episodes wanted (by strategy: single 6, \
         etcd-lease 1; by fault: failover 6, node-pause 1; fewest: etcd-lease × node-pause (0), \
         single × failover (1), single × failover (2)); why, cell by cell: matrix.md, \"Every cell\""
    );
}
