//! Decision-rule properties on hand-made matrices.

use super::*;
use crate::driver::WorkKind;
use crate::matrix::MatrixWorkload;

/// The lease TTL the hand-made matrices ran with.
const TEST_TTL: Duration = Duration::from_millis(500);
use crate::matrix::claims::tests::cell;
use crate::matrix::claims::{agreement, mapped_claims};
use crate::matrix::setup::MatrixRow;

const FAULTS: [&str; 4] = ["none", "client-pause", "client-crash", "failover"];

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Every strategy × [`FAULTS`] with `exposed` exposed episodes, no damage, nothing stuck.
fn clean(strategies: &[&str], exposed: u32) -> Vec<CellRecord> {
    strategies
        .iter()
        .flat_map(|s| FAULTS.iter().map(move |f| cell(s, f, exposed, 0, 0)))
        .collect()
}

fn set(cells: &mut [CellRecord], s: &str, f: &str, edit: impl FnOnce(&mut CellRecord)) {
    edit(
        cells
            .iter_mut()
            .find(|c| c.strategy == s && c.fault == f)
            .unwrap(),
    );
}

fn probe(s: &str, servers: u32, p50: u64, p99: u64) -> ProbeRecord {
    ProbeRecord {
        strategy: s.into(),
        topology: "x".into(),
        servers,
        acquires: 2000,
        p50_us: p50,
        p99_us: p99,
        dir: format!("probes/{s}"),
        error: None,
    }
}

/// The claims of a matrix of `strategies` × [`FAULTS`], judged on `cells`.
fn claims(strategies: &[&str], cells: &[CellRecord]) -> Vec<ClaimAgreement> {
    let rows: Vec<MatrixRow> = strategies
        .iter()
        .map(|s| MatrixRow::direct(s.parse().unwrap()))
        .collect();
    let faults: Vec<FaultClass> = FAULTS.iter().map(|f| f.parse().unwrap()).collect();
    agreement(&mapped_claims(&rows, &faults), cells)
}

#[test]
fn a_damaging_episode_or_a_damage_claim_keeps_a_strategy_out_and_is_cited() {
    let s = ["single", "single-fenced", "redlock-fenced", "naive-del"];
    let mut cells = clean(&s, 30);
    set(&mut cells, "single", "client-pause", |c| {
        *c = cell("single", "client-pause", 30, 2, 0)
    });
    let claims = claims(&s, &cells);
    let d = decide(&names(&s), &cells, &[], &claims, TEST_TTL);
    let c = &d.correctness;
    assert_eq!(c.recommended, vec!["redlock-fenced".to_string()]);
    assert!(
        c.rows[0].reason.starts_with(
            "2 of 30 exposed episodes damaging in single × client-pause; first: mutex-violation at 2345 ms, \
             episode 3 of trials/single/client-pause/t1"
        ),
        "{}",
        c.rows[0].reason
    );
    // single-fenced: clean cells, but claim 05b shows it repeating tokens after a failover
    // (the matrix contradicts the claim here, which does not make it safe).
    assert!(!c.rows[1].eligible);
    assert!(
        c.rows[1]
            .reason
            .contains("claim 05b (chaos/05b-failover-repeats-tokens.toml) shows damage in single-fenced × failover (this matrix contradicts it"),
        "{}",
        c.rows[1].reason
    );
    assert!(c.rows[3].reason.starts_with("negative control"));
    // 0 of 30 in each class: < 1 − 0.05^(1/30) = 9.5 %.
    assert_eq!(
        c.rows[2].bound.as_deref(),
        Some("damage < 9.5 % per episode in each of 4 classes (≥ 30 exposed each)")
    );
    assert!(c
        .bound
        .as_deref()
        .unwrap()
        .starts_with("redlock-fenced: damage < 9.5 %"));
    let thin = c.thin.as_deref().unwrap();
    assert!(
        thin.contains("claim 05b (single-fenced × failover says damage) is contradicted"),
        "{thin}"
    );
    // Damage the checker found outside every exposed episode keeps it out too.
    set(&mut cells, "redlock-fenced", "none", |c| {
        let damaged = cell("redlock-fenced", "none", 1, 1, 0);
        (c.anomalies, c.trials) = (damaged.anomalies, damaged.trials);
    });
    let d = decide(&names(&s), &cells, &[], &claims, TEST_TTL);
    assert!(d.correctness.recommended.is_empty());
    assert!(d.correctness.rows[2].reason.contains(
        "1 damage anomaly(ies) outside the exposed episodes in redlock-fenced × none (first in t1)"
    ));
}

#[test]
fn a_class_below_the_minimum_keeps_a_strategy_out_and_below_thirty_is_thin() {
    let s = ["redlock-fenced", "etcd-lease"];
    let mut cells = clean(&s, 30);
    set(&mut cells, "redlock-fenced", "failover", |c| {
        c.episodes.exposed = 9
    });
    let d = decide(&names(&s), &cells, &[], &[], TEST_TTL);
    assert_eq!(d.correctness.recommended, vec!["etcd-lease".to_string()]);
    assert_eq!(
        d.correctness.rows[0].reason,
        "only 9 of 32 episodes exposed in redlock-fenced × failover (fewer than 10)"
    );
    set(&mut cells, "redlock-fenced", "failover", |c| {
        *c = cell("redlock-fenced", "failover", 12, 0, 0)
    });
    let d = decide(&names(&s), &cells, &[], &[], TEST_TTL);
    assert_eq!(d.correctness.recommended, names(&s));
    // The weakest class sets the bound: 0 of 12 → < 22.1 %.
    assert_eq!(
        d.correctness.rows[0].bound.as_deref(),
        Some("damage < 22.1 % per episode in each of 4 classes (≥ 12 exposed each)")
    );
    let thin = d.correctness.thin.unwrap();
    assert!(
        thin.contains("fewer than 30 exposed episodes in redlock-fenced × failover (12 exposed)"),
        "{thin}"
    );
    // A cell in which no episode ran counts neither way, but some class must count.
    set(&mut cells, "etcd-lease", "failover", |c| {
        c.episodes = Default::default()
    });
    let d = decide(&names(&s), &cells, &[], &[], TEST_TTL);
    assert!(d.correctness.rows[1].eligible);
    assert!(d.correctness.rows[1]
        .reason
        .contains("no episode ran in etcd-lease × failover"));
    for f in FAULTS {
        set(&mut cells, "etcd-lease", f, |c| {
            c.episodes = Default::default()
        });
    }
    let d = decide(&names(&s), &cells, &[], &[], TEST_TTL);
    assert!(!d.correctness.rows[1].eligible);
    assert_eq!(
        d.correctness.rows[1].reason,
        "no fault class with 10 exposed episodes"
    );
}

#[test]
fn overlapping_probes_tie_and_the_tie_goes_to_fewer_servers() {
    let s = ["single", "redlock", "pg-advisory", "single-fenced"];
    let cells = clean(&s, 30);
    let probes = vec![
        probe("single", 1, 100, 900),
        // Faster, but five servers: overlapping intervals, so fewer servers wins.
        probe("redlock", 5, 80, 400),
        probe("pg-advisory", 1, 300, 3000),
        // Same servers, but its interval starts above single's: not tied.
        probe("single-fenced", 1, 5000, 9000),
    ];
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    let e = &d.efficiency;
    assert_eq!(e.recommended, names(&["single", "pg-advisory"]));
    assert!(e.answer.contains("tied"), "{}", e.answer);
    assert!(e.rows.iter().all(|r| r.eligible), "{:?}", e.rows);
    assert_eq!(e.rows[1].servers, Some(5));
    // single's interval [100, 900] and pg's [300, 3000] overlap; with pg at [950, 3000]
    // they no longer do.
    let mut apart = probes.clone();
    apart[2] = probe("pg-advisory", 1, 950, 3000);
    let d = decide(&names(&s), &cells, &apart, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single"]));
    // A quiet run's p99 does not narrow the interval below 2 × p50: [100, 200] and
    // [190, 250] are tied.
    let quiet = vec![
        probe("single", 1, 100, 110),
        probe("pg-advisory", 1, 190, 250),
    ];
    let d = decide(&names(&s), &cells, &quiet, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single", "pg-advisory"]));
    // No probe: not ranked, and said so.
    assert!(d.efficiency.rows[1]
        .reason
        .ends_with("no uncontended probe (no probe run): not ranked"));
    assert!(d
        .efficiency
        .thin
        .unwrap()
        .contains("no uncontended probe for redlock, single-fenced (not ranked)"));
}

#[test]
fn a_stuck_strategy_is_never_the_efficiency_pick() {
    let s = ["single", "redlock", "setnx-expire"];
    let mut cells = clean(&s, 30);
    set(&mut cells, "single", "client-crash", |c| {
        c.episodes.stuck = 1
    });
    let probes = vec![
        probe("single", 1, 100, 900),
        probe("redlock", 5, 400, 900),
        probe("setnx-expire", 1, 90, 800),
    ];
    // setnx-expire is never stuck in these cells, but claim 13 says it gets stuck.
    let claims = claims(&s, &cells);
    let d = decide(&names(&s), &cells, &probes, &claims, TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["redlock"]));
    assert!(d.efficiency.rows[0]
        .reason
        .contains("stuck after 1 of 30 exposed episodes in single × client-crash"));
    assert!(d.efficiency.rows[2]
        .reason
        .contains("claim 13 (chaos/13-setnx-expire-crash.toml) shows it stuck"));
}

#[test]
fn recovery_must_stay_within_twice_the_best_p50() {
    let s = ["single", "pg-advisory"];
    let mut cells = clean(&s, 30);
    set(&mut cells, "single", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(1150.0);
        c.episodes.recovery_p99_ms = Some(1200.0);
    });
    // The best's slowest episode (its p99) does not move the limit: only its p50 does.
    set(&mut cells, "pg-advisory", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(300.0);
        c.episodes.recovery_p99_ms = Some(2000.0);
    });
    let probes = vec![
        probe("single", 1, 100, 900),
        probe("pg-advisory", 1, 120, 900),
    ];
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["pg-advisory"]));
    assert_eq!(
        d.efficiency.rows[0].reason,
        "recovery p50 1150 ms in single × client-crash vs at most 1100 ms (2 × the best p50, 300 ms, \
         of pg-advisory (at least that p50 + 100 ms), plus one TTL, 500 ms)"
    );
    // The cell's own TTL counts where it was recorded: 1150 ms is within 600 + 1000 ms.
    set(&mut cells, "single", "client-crash", |c| {
        c.lease_ttl_ms = 1000
    });
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single", "pg-advisory"]));
    set(&mut cells, "single", "client-crash", |c| c.lease_ttl_ms = 0);
    // A lease lock may wait out one TTL beyond the best's interval: 1100 ms is within 600 +
    // 500 ms.
    set(&mut cells, "single", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(1100.0)
    });
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single", "pg-advisory"]));
    // A session lock has no TTL to wait out: no allowance (700 ms against 2 × 300 ms).
    let s2 = ["single", "pg-advisory-fenced"];
    let mut cells2 = clean(&s2, 30);
    set(&mut cells2, "single", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(300.0);
        c.episodes.recovery_p99_ms = Some(300.0);
    });
    set(&mut cells2, "pg-advisory-fenced", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(700.0);
        c.episodes.recovery_p99_ms = Some(900.0);
    });
    let probes2 = vec![
        probe("single", 1, 100, 900),
        probe("pg-advisory-fenced", 1, 120, 900),
    ];
    let d = decide(&names(&s2), &cells2, &probes2, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single"]));
    assert!(d.efficiency.rows[1].reason.contains(
        "recovery p50 700 ms in pg-advisory-fenced × client-crash vs at most 600 ms (2 × the best p50, 300 ms, \
         of single (at least that p50 + 100 ms))"
    ), "{}", d.efficiency.rows[1].reason);
    // Below the floor nothing counts: 105 ms against a best p50 of 10 ms is "at once" (within
    // 10 + 100 ms), for a lock without a TTL too.
    set(&mut cells2, "single", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(10.0)
    });
    set(&mut cells2, "pg-advisory-fenced", "client-crash", |c| {
        c.episodes.recovery_p50_ms = Some(105.0)
    });
    let d = decide(&names(&s2), &cells2, &probes2, &[], TEST_TTL);
    assert_eq!(
        d.efficiency.recommended,
        names(&["single", "pg-advisory-fenced"])
    );
}

#[test]
fn a_class_best_recovery_ignores_stuck_episodes_in_other_classes() {
    let s = ["single", "pg-advisory", "etcd-lease"];
    let mut cells = clean(&s, 30);
    for (name, p50) in [
        ("etcd-lease", 200.0),
        ("single", 529.0),
        ("pg-advisory", 780.0),
    ] {
        set(&mut cells, name, "failover", |c| {
            c.episodes.recovery_p50_ms = Some(p50)
        });
    }
    // etcd-lease got stuck in client-pause: it is no efficiency pick, but its failover
    // recovery still sets that class's limit (2 × 200 ms), which pg-advisory misses.
    set(&mut cells, "etcd-lease", "client-pause", |c| {
        c.episodes.stuck = 2
    });
    let probes = vec![
        probe("single", 1, 100, 200),
        probe("pg-advisory", 1, 110, 220),
        probe("etcd-lease", 3, 3000, 8000),
    ];
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single"]));
    assert!(
        d.efficiency.rows[1].reason.contains(
            "recovery p50 780 ms in pg-advisory × failover vs at most 400 ms (2 × the best p50, 200 ms, of etcd-lease"
        ),
        "{}",
        d.efficiency.rows[1].reason
    );
    // Stuck in failover itself: it no longer sets the limit there (single does:
    // 2 × 529 ms), and pg-advisory is within it.
    set(&mut cells, "etcd-lease", "failover", |c| {
        c.episodes.stuck = 1
    });
    let d = decide(&names(&s), &cells, &probes, &[], TEST_TTL);
    assert_eq!(d.efficiency.recommended, names(&["single", "pg-advisory"]));
}

#[test]
fn the_answer_depends_on_the_input_only() {
    let s = ["single", "single-fenced", "redlock", "pg-advisory-fenced"];
    let mut cells = clean(&s, 30);
    set(&mut cells, "single", "failover", |c| {
        *c = cell("single", "failover", 30, 4, 0)
    });
    let probes = vec![
        probe("single", 1, 100, 900),
        probe("single-fenced", 1, 110, 700),
        probe("redlock", 5, 400, 900),
        probe("pg-advisory-fenced", 1, 130, 4000),
    ];
    let claims = claims(&s, &cells);
    let d = decide(&names(&s), &cells, &probes, &claims, TEST_TTL);
    assert_eq!(d, decide(&names(&s), &cells, &probes, &claims, TEST_TTL));
    let mut shuffled = cells.clone();
    shuffled.reverse();
    shuffled.swap(1, 7);
    let mut probes_shuffled = probes.clone();
    probes_shuffled.reverse();
    assert_eq!(
        d,
        decide(&names(&s), &shuffled, &probes_shuffled, &claims, TEST_TTL)
    );
    // Noise inside the intervals moves nothing: the tied set stays in row order.
    let mut noisy = probes.clone();
    noisy[0] = probe("single", 1, 125, 3000);
    noisy[1] = probe("single-fenced", 1, 95, 400);
    let n = decide(&names(&s), &cells, &noisy, &claims, TEST_TTL);
    assert_eq!(n.efficiency.recommended, d.efficiency.recommended);
    assert_eq!(n.correctness, d.correctness);
}

const ROWS: [&str; 7] = [
    "single",
    "single-fenced",
    "redlock",
    "redlock-fenced",
    "pg-advisory",
    "etcd-lease",
    "naive-del",
];

/// A cell's exposed, damaging and stuck episodes and recovery p50 (ms).
type CellFigures = (u32, u32, u32, u32);
/// A probe's servers, p50 (µs) and p99 − p50 (µs).
type ProbeFigures = (u32, u64, u64);

/// One cell's figures: exposed, damaging, stuck, recovery p50 (ms); and one probe per row.
fn matrix() -> impl proptest::strategy::Strategy<Value = (Vec<CellFigures>, Vec<ProbeFigures>)> {
    use proptest::prelude::*;
    let cell = (
        0u32..40,
        prop_oneof![6 => Just(0u32), 1 => 1u32..3],
        prop_oneof![8 => Just(0u32), 1 => Just(1u32)],
        1u32..1500,
    );
    let probe = (
        prop_oneof![Just(1u32), Just(3), Just(5)],
        50u64..2000,
        0u64..5000,
    );
    (
        proptest::collection::vec(cell, ROWS.len() * FAULTS.len()),
        proptest::collection::vec(probe, ROWS.len()),
    )
}

proptest::proptest! {
    #[test]
    fn picks_never_rest_on_damage_stuck_thin_evidence_or_cell_order((figures, probe_figures) in matrix()) {
        let mut cells = Vec::new();
        for (i, &(exposed, damaging, stuck, p50)) in figures.iter().enumerate() {
            let (s, f) = (ROWS[i / FAULTS.len()], FAULTS[i % FAULTS.len()]);
            let mut c = cell(s, f, exposed, damaging.min(exposed), stuck.min(exposed));
            c.episodes.recovery_p50_ms = Some(f64::from(p50));
            c.episodes.recovery_p99_ms = Some(f64::from(p50) * 1.5);
            cells.push(c);
        }
        let probes: Vec<ProbeRecord> = ROWS
            .iter()
            .zip(&probe_figures)
            .map(|(s, &(servers, p50, extra))| probe(s, servers, p50, p50 + extra))
            .collect();
        let claims = claims(&ROWS, &cells);
        let d = decide(&names(&ROWS), &cells, &probes, &claims, TEST_TTL);
        let of = |s: &String| cells_of(&cells, s);
        for s in &d.correctness.recommended {
            proptest::prop_assert!(!is_control(s));
            proptest::prop_assert!(of(s).iter().all(|c| c.episodes.damaging == 0 && c.episodes.exposed >= MIN_EXPOSED));
            proptest::prop_assert!(!claims.iter().any(|a| &a.strategy == s && a.says == ClaimSays::Damage));
        }
        let servers: Vec<Option<u32>> = d.efficiency.rows.iter().filter(|r| r.eligible).map(|r| r.servers).collect();
        for s in &d.efficiency.recommended {
            proptest::prop_assert!(!is_control(s));
            proptest::prop_assert!(of(s).iter().all(|c| c.episodes.stuck == 0 && c.episodes.exposed >= MIN_EXPOSED));
            let mine = d.efficiency.rows.iter().find(|r| &r.strategy == s).unwrap();
            proptest::prop_assert_eq!(Some(mine.servers), servers.iter().copied().min());
        }
        let mut reversed = cells.clone();
        reversed.reverse();
        proptest::prop_assert_eq!(&d, &decide(&names(&ROWS), &reversed, &probes, &claims, TEST_TTL));
    }
}

#[test]
fn an_answer_from_a_matrix_that_left_fault_classes_out_names_them() {
    let s = ["single-fenced", "pg-advisory-fenced"];
    let cells = clean(&s, 30);
    let probes = [
        probe("single-fenced", 1, 300, 600),
        probe("pg-advisory-fenced", 1, 400, 900),
    ];
    let t = decide(&names(&s), &cells, &probes, &claims(&s, &cells), TEST_TTL);
    // FAULTS runs none, client-pause, client-crash and failover: the other 8 were not tried.
    let untried = [
        "latency",
        "partition-minority",
        "partition-holder",
        "crash-restart-empty",
        "node-pause",
        "clock-jump",
        "session-loss",
        "slow-work",
    ];
    for r in [&t.correctness, &t.efficiency] {
        assert!(!r.recommended.is_empty(), "{r:?}");
        assert_eq!(r.untried, names(&untried), "{}", r.need);
        assert!(
            r.answer.ends_with(&format!(
                "not tried: {} (this answer says nothing about them)",
                untried.join(", ")
            )),
            "{}",
            r.answer
        );
    }
    // A matrix with every class says nothing of the kind.
    let all: Vec<CellRecord> = s
        .iter()
        .flat_map(|st| {
            FaultClass::ALL
                .iter()
                .map(move |f| cell(st, f.name(), 30, 0, 0))
        })
        .collect();
    let t = decide(&names(&s), &all, &probes, &[], TEST_TTL);
    assert!(t.correctness.untried.is_empty());
    assert!(
        !t.correctness.answer.contains("not tried"),
        "{}",
        t.correctness.answer
    );
}

#[test]
fn with_external_work_the_answers_name_the_work_and_none_points_to_an_idempotency_key() {
    let s = ["single-fenced", "etcd-lease"];
    let mut cells = clean(&s, 30);
    // Under a client pause both fenced locks charge a job twice at the sink.
    for st in s {
        set(&mut cells, st, "client-pause", |c| c.episodes.damaging = 4);
    }
    let probes = [
        probe("single-fenced", 1, 300, 600),
        probe("etcd-lease", 3, 900, 2000),
    ];
    let mut w = MatrixWorkload::quick();
    w.work = WorkKind::External;
    let t = decide_for(&names(&s), &cells, &probes, &[], &w);
    assert_eq!(t.work, WorkKind::External);
    assert!(t.correctness.recommended.is_empty());
    assert!(
        t.correctness.answer.starts_with(
            "none for external work (a call to a side effect that cannot check a token): a \
             holder stalled past its lease still makes its call"
        ),
        "{}",
        t.correctness.answer
    );
    assert!(t.correctness.answer.contains("--idempotency-key"));
    assert!(
        t.correctness.rule.contains("no job charged twice"),
        "{}",
        t.correctness.rule
    );
    assert!(
        t.efficiency.answer.starts_with("for external work"),
        "{}",
        t.efficiency.answer
    );
    // With keys and no damage, the qualifying locks are named for that work.
    let clean_cells = clean(&s, 30);
    w.idempotency_key = true;
    let t = decide_for(&names(&s), &clean_cells, &probes, &[], &w);
    assert_eq!(t.correctness.recommended, names(&s));
    assert!(
        t.correctness.answer.starts_with(
            "for external work, every call with an idempotency key: single-fenced, etcd-lease"
        ),
        "{}",
        t.correctness.answer
    );
    // Row work reads as before.
    let t = decide_for(
        &names(&s),
        &clean_cells,
        &probes,
        &[],
        &MatrixWorkload::quick(),
    );
    assert_eq!(t.work, WorkKind::Row);
    assert!(
        t.correctness
            .answer
            .starts_with("single-fenced, etcd-lease"),
        "{}",
        t.correctness.answer
    );
}
