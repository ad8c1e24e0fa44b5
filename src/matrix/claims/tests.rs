use std::path::Path;

use super::*;
use crate::checker::Verdict;
use crate::driver::WorkKind;
use crate::matrix::episode::{EpisodeTally, Incident};
use crate::matrix::record::tests::trial;
use crate::nemesis::{FailoverMethod, FaultKind};
use crate::orchestration::scenario::Scenario;
use crate::topology::TopologyKind;
use crate::topology::{PoolMode, PoolReset};

#[test]
fn claim_says_names_match_serde() {
    crate::variant_names::assert_names_match_serde::<ClaimSays>();
}

/// The nemesis faults that make a scenario's schedule an instance of `class`.
fn kinds_of(class: FaultClass) -> &'static [FaultKind] {
    match class {
        FaultClass::None => &[],
        FaultClass::Latency => &[FaultKind::Latency],
        // 06 kills the minority for six TTLs: as good as cut off.
        FaultClass::PartitionMinority => &[FaultKind::Partition, FaultKind::Kill],
        FaultClass::PartitionHolder => &[FaultKind::Partition],
        FaultClass::CrashRestartEmpty => &[FaultKind::Kill],
        FaultClass::NodePause => &[FaultKind::PauseNode],
        FaultClass::ClockJump => &[FaultKind::ClockJump],
        FaultClass::ClientPause => &[FaultKind::ClientPause],
        FaultClass::ClientCrash => &[FaultKind::ClientCrash],
        // 11a: the holder stalls and its connection is refused and dropped.
        FaultClass::SessionLoss => &[FaultKind::Partition],
        FaultClass::Failover => &[FaultKind::Failover, FaultKind::Kill],
        FaultClass::SlowWork => &[FaultKind::SlowWork],
        FaultClass::ClusterFailover
        | FaultClass::ClusterFailoverForce
        | FaultClass::ClusterFailoverTakeover => &[FaultKind::Failover],
        FaultClass::ClusterPause => &[FaultKind::PauseNode],
        FaultClass::ClusterMinorityPartition => &[FaultKind::Partition],
    }
}

/// The failover method a scenario's failover must use to be an instance of `class` on a
/// cluster row (`None`: any).
fn method_of(class: FaultClass) -> Option<FailoverMethod> {
    match class {
        FaultClass::Failover => Some(FailoverMethod::KillPrimary),
        FaultClass::ClusterFailover => Some(FailoverMethod::ClusterFailover),
        FaultClass::ClusterFailoverForce => Some(FailoverMethod::ClusterFailoverForce),
        FaultClass::ClusterFailoverTakeover => Some(FailoverMethod::ClusterFailoverTakeover),
        _ => None,
    }
}

fn claim_id(s: &Scenario) -> String {
    s.name.split('-').next().unwrap_or_default().to_string()
}

/// A cluster row's file fails over by the column's method under replication lag, and the
/// minority partition is a bus cut with clients on the primary's side.
fn assert_cluster_row(row: &ClaimCell, s: &Scenario, what: &str) {
    if row.redis == RedisSetup::Cluster {
        let m = method_of(row.fault);
        assert!(
            m.is_none()
                || s.nemesis.iter().any(|n| n.fault == FaultKind::Failover
                    && n.method.unwrap_or_default() == m.unwrap()),
            "{what}: the file's failover is not {m:?}"
        );
        assert!(
            s.nemesis
                .iter()
                .any(|n| n.link == Some(crate::nemesis::Link::Replication)),
            "{what}: the cluster's failover columns run under replication lag"
        );
        // The minority partition is a bus cut with clients on the primary's side.
        assert_eq!(
            row.fault == FaultClass::ClusterMinorityPartition,
            s.nemesis
                .iter()
                .any(|n| n.link == Some(crate::nemesis::Link::Bus) && n.with_clients.is_some()),
            "{what}: a bus cut with clients on the cut side is this column's"
        );
    }
}

#[test]
fn the_table_agrees_with_every_scenario_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
    let scenarios = Scenario::load_all(&dir).expect("chaos/ parses");
    let by_file = |file: &str| {
        scenarios
            .iter()
            .find(|s| s.path.ends_with(file.trim_start_matches("chaos/")))
            .unwrap_or_else(|| panic!("{file} is not in chaos/"))
    };
    let is_damage_name = |k: &String| k.parse::<AnomalyKind>().is_ok_and(is_damage);
    for row in CLAIMS {
        let s = by_file(row.file);
        let what = format!(
            "{} {} × {} says {}",
            row.claim, row.strategy, row.fault, row.says
        );
        assert_eq!(claim_id(s), row.claim, "{what}: file and claim id");
        let e = s
            .expect
            .get(row.strategy.name())
            .unwrap_or_else(|| panic!("{what}: no [expect.{}]", row.strategy));
        let holds = match row.says {
            ClaimSays::Damage => e.anomalies.iter().any(is_damage_name),
            ClaimSays::NoDamage => e.verdict == "valid" || e.absent.iter().any(is_damage_name),
            ClaimSays::Stuck => e.anomalies.iter().any(|k| k == "stuck-resource"),
            ClaimSays::NotStuck => e.absent.iter().any(|k| k == "stuck-resource"),
        };
        assert!(holds, "{what}: the file expects {e:?}");
        let faulted = if row.fault == FaultClass::None {
            s.nemesis.is_empty()
        } else {
            s.nemesis
                .iter()
                .any(|n| kinds_of(row.fault).contains(&n.fault))
        };
        assert!(
            faulted,
            "{what}: the file's faults are not an instance of {}",
            row.fault
        );
        // The row's setup is the file's pooler: the same mode, and a returned server
        // connection reset or not alike (PgBouncer's default reset in session mode is
        // the `DISCARD ALL` a file may set explicitly).
        let resets = |p: &crate::topology::PoolerSettings| p.reset != PoolReset::None;
        let pooler = row.setup.pooler();
        assert_eq!(
            pooler.map(|p| (p.pool_mode, resets(&p))),
            s.pooler.map(|p| (p.pool_mode, resets(&p))),
            "{what}: setup {} is not the file's pooler {:?}",
            row.setup,
            s.pooler
        );
        if let (Some(p), Some(f)) = (pooler, s.pooler) {
            if p.pool_mode == PoolMode::Transaction {
                assert!(
                    p.pool_size < 4 && f.pool_size < s.workload.clients,
                    "{what}: clients must share server connections"
                );
            }
        }
        // A matrix of the file's work (and key) maps it, and one of another work does not.
        assert_eq!(
            (s.workload.work, s.workload.idempotency_key),
            (row.work, row.idempotency_key),
            "{what}: a mapped claim is its file's work"
        );
        assert!(
            s.pg_settings.is_empty() && s.workload.pg_pool.is_none(),
            "{what}: the matrix sets no server setting and no client pool"
        );
        // A cluster row is a cluster file, with the cluster's failover of the column's
        // method (the lag and the node timeout are the matrix's own, see the module docs).
        assert_eq!(
            row.redis == RedisSetup::Cluster,
            s.topology == TopologyKind::Cluster,
            "{what}: setup {} is not the file's topology {}",
            row.redis,
            s.topology
        );
        assert_cluster_row(row, s, &what);
    }
    // Every strategy a file expects something of is mapped or left out with a reason.
    for s in &scenarios {
        let id = claim_id(s);
        for name in s.expect.keys() {
            let mapped = CLAIMS
                .iter()
                .any(|r| r.claim == id && r.strategy.name() == name);
            let left = LEFT_OUT
                .iter()
                .any(|(c, k, _)| *c == id && k.name() == name);
            assert!(
                mapped ^ left,
                "{}: [expect.{name}] must be mapped to a cell or left out (mapped {mapped}, left out {left})",
                s.path.display()
            );
        }
    }
}

#[test]
fn a_matrix_maps_the_claims_of_its_own_kind_of_work_and_key_only() {
    use StrategyKind as S;
    let rows: Vec<MatrixRow> = [
        S::Single,
        S::SingleFenced,
        S::ClaimUpdate,
        S::ClaimSkipLocked,
        S::ClaimSkipLockedLease,
    ]
    .into_iter()
    .map(MatrixRow::from)
    .collect();
    let faults = [
        FaultClass::ClientPause,
        FaultClass::ClientCrash,
        FaultClass::SessionLoss,
    ];
    let ids = |work, keyed| -> Vec<(&str, &str, ClaimSays)> {
        mapped_claims_for(&rows, &faults, work, keyed)
            .iter()
            .map(|c| (c.claim, c.strategy.name(), c.says))
            .collect()
    };
    use ClaimSays::*;
    assert_eq!(
        ids(WorkKind::External, false),
        [("35a", "single", Damage), ("35a", "single-fenced", Damage)]
    );
    assert_eq!(
        ids(WorkKind::External, true),
        [
            ("35b", "single", Damage),
            ("35b", "single-fenced", NoDamage)
        ]
    );
    assert_eq!(
        ids(WorkKind::Job, false),
        [
            ("35c", "claim-update", Damage),
            ("35e", "claim-skip-locked", NoDamage),
            ("35e", "claim-skip-locked-lease", NoDamage),
            ("35f", "claim-skip-locked", NoDamage),
            ("35f", "claim-skip-locked-lease", Damage),
            ("35g", "claim-skip-locked", Damage)
        ]
    );
    assert_eq!(
        ids(WorkKind::Job, true),
        [("35d", "claim-update", NoDamage)]
    );
    // A row matrix of the same rows keeps the row claims only; compute maps none.
    let row: Vec<&str> = ids(WorkKind::Row, false).iter().map(|c| c.0).collect();
    assert_eq!(row, ["01", "01", "02", "04", "04", "10b", "13", "13"]);
    assert!(ids(WorkKind::Compute, false).is_empty());
}

#[test]
fn mapped_claims_keep_the_cells_of_the_matrix_only() {
    let got = mapped_claims(
        &[StrategyKind::Single.into(), StrategyKind::Redlock.into()],
        &[FaultClass::Failover, FaultClass::ClientPause],
    );
    let ids: Vec<(&str, &str)> = got.iter().map(|c| (c.claim, c.strategy.name())).collect();
    assert_eq!(
        ids,
        vec![
            ("02", "single"),
            ("04", "single"),
            ("05a", "single"),
            ("09", "redlock"),
            ("10b", "single")
        ]
    );
    assert!(mapped_claims(&[StrategyKind::EtcdLease.into()], &[FaultClass::None]).is_empty());
    // The pooler claims only where their setup is a row.
    let pg = [StrategyKind::PgAdvisory, StrategyKind::PgAdvisoryXact];
    let standalone = [RedisSetup::Standalone];
    let direct = MatrixRow::expand(&pg, &[PgSetup::Direct], &standalone);
    assert!(mapped_claims(&direct, &[FaultClass::None]).is_empty());
    let pooled = MatrixRow::expand(
        &pg,
        &[PgSetup::Direct, PgSetup::PgbouncerTransaction],
        &standalone,
    );
    let got = mapped_claims(&pooled, &[FaultClass::None, FaultClass::ClientCrash]);
    let ids: Vec<(&str, String, ClaimSays)> = got
        .iter()
        .map(|c| (c.claim, c.row().label(), c.says))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("11b", "pg-advisory".into(), ClaimSays::NoDamage),
            ("11b", "pg-advisory".into(), ClaimSays::NotStuck),
            (
                "15",
                "pg-advisory · pgbouncer-transaction".into(),
                ClaimSays::Damage
            ),
            (
                "15",
                "pg-advisory-xact · pgbouncer-transaction".into(),
                ClaimSays::NoDamage
            ),
        ]
    );
}

#[test]
fn the_cluster_claims_are_judged_on_the_cluster_rows_only() {
    use FaultClass as F;
    let faults = [F::Failover]
        .into_iter()
        .chain(F::CLUSTER)
        .collect::<Vec<_>>();
    let strategies = [StrategyKind::Single, StrategyKind::SingleWait];
    let standalone = MatrixRow::expand(&strategies, &[PgSetup::Direct], &[RedisSetup::Standalone]);
    let ids: Vec<&str> = mapped_claims(&standalone, &faults)
        .iter()
        .map(|c| c.claim)
        .collect();
    assert_eq!(ids, ["05a"], "Sentinel's failover cell only");
    let both = MatrixRow::expand(
        &strategies,
        &[PgSetup::Direct],
        &[RedisSetup::Standalone, RedisSetup::Cluster],
    );
    let got: Vec<(&str, String, &str, ClaimSays)> = mapped_claims(&both, &faults)
        .iter()
        .map(|c| (c.claim, c.row().label(), c.fault.name(), c.says))
        .collect();
    assert_eq!(
        got,
        [
            ("05a", "single".into(), "failover", ClaimSays::Damage),
            (
                "20a",
                "single · cluster".into(),
                "failover",
                ClaimSays::Damage
            ),
            (
                "20b",
                "single · cluster".into(),
                "cluster-failover",
                ClaimSays::NoDamage
            ),
            (
                "20c",
                "single · cluster".into(),
                "cluster-failover-force",
                ClaimSays::Damage
            ),
            (
                "20d",
                "single · cluster".into(),
                "cluster-failover-takeover",
                ClaimSays::Damage
            ),
            (
                "20e",
                "single-wait · cluster".into(),
                "failover",
                ClaimSays::NoDamage
            ),
            (
                "20g",
                "single · cluster".into(),
                "cluster-minority-partition",
                ClaimSays::Damage
            ),
        ]
    );
    // Judged against the cell of the cluster row, not the Sentinel one of the same name.
    let sentinel = cell("single", "failover", 12, 0, 0);
    let cluster = cell("single · cluster", "failover", 11, 4, 0);
    let claims = mapped_claims(&both, &[F::Failover]);
    let a = agreement(&claims, &[sentinel, cluster]);
    assert_eq!(
        a[0].agrees,
        Some(false),
        "05a on Sentinel: {}",
        a[0].observed
    );
    assert_eq!(
        a[1].agrees,
        Some(true),
        "20a on the cluster: {}",
        a[1].observed
    );
    assert_eq!(a[2].agrees, None, "20e: its cell is not given");
}

/// A run cell of `strategy × fault` whose episodes add up to `exposed` exposed episodes,
/// `damaging` of them damaging and `stuck` of them stuck.
pub(crate) fn cell(
    strategy: &str,
    fault: &str,
    exposed: u32,
    damaging: u32,
    stuck: u32,
) -> CellRecord {
    let anomalies: &[(&str, u64)] = if damaging > 0 {
        &[("mutex-violation", 1)]
    } else {
        &[]
    };
    let verdict = if damaging > 0 {
        Verdict::Invalid
    } else {
        Verdict::Valid
    };
    let mut c = CellRecord::fold(
        strategy,
        fault,
        "single",
        "x",
        1,
        vec![trial(1, verdict, 100, anomalies, 5000, 10.0)],
    );
    c.episodes = EpisodeTally {
        total: exposed + 2,
        exposed,
        damaging,
        stuck,
        damage_rate: crate::matrix::Interval::of(u64::from(damaging), u64::from(exposed)),
        recovery_p50_ms: Some(20.0),
        recovery_p99_ms: Some(80.0),
        first_incident: (damaging > 0).then(|| Incident {
            dir: format!("trials/{strategy}/{fault}/t1"),
            trial: 1,
            episode: 3,
            time_us: 2_345_000,
            kind: AnomalyKind::MutexViolation,
        }),
        ..EpisodeTally::default()
    };
    c
}

fn judged(says: ClaimSays, c: CellRecord) -> ClaimAgreement {
    let claim = ClaimCell {
        claim: "x",
        file: "chaos/x.toml",
        strategy: c.strategy.parse().unwrap(),
        setup: PgSetup::Direct,
        redis: RedisSetup::Standalone,
        fault: c.fault.parse().unwrap(),
        says,
        work: WorkKind::Row,
        idempotency_key: false,
    };
    agreement(&[claim], &[c]).remove(0)
}

#[test]
fn damage_claims_agree_on_one_damaging_episode_and_are_contradicted_by_ten_clean_ones() {
    let a = judged(ClaimSays::Damage, cell("single", "failover", 3, 1, 0));
    assert_eq!(a.agrees, Some(true), "{}", a.observed);
    assert!(
        a.observed.contains("1 of 3 exposed episodes damaging (first: mutex-violation at 2345 ms in trials/single/failover/t1 episode 3)"),
        "{}",
        a.observed
    );
    let a = judged(ClaimSays::Damage, cell("single", "failover", 10, 0, 0));
    assert_eq!(a.agrees, Some(false), "{}", a.observed);
    let a = judged(ClaimSays::Damage, cell("single", "failover", 9, 0, 0));
    assert_eq!(a.agrees, None);
    assert!(
        a.observed.contains("only 9 exposed episode(s) of 11"),
        "{}",
        a.observed
    );
}

#[test]
fn no_damage_claims_are_contradicted_by_any_damage_and_agree_on_ten_clean_episodes() {
    let fenced = |exposed, damaging| cell("single-fenced", "client-pause", exposed, damaging, 0);
    assert_eq!(
        judged(ClaimSays::NoDamage, fenced(2, 1)).agrees,
        Some(false)
    );
    assert_eq!(
        judged(ClaimSays::NoDamage, fenced(10, 0)).agrees,
        Some(true)
    );
    assert_eq!(judged(ClaimSays::NoDamage, fenced(9, 0)).agrees, None);
    // Damage the checker found outside every exposed episode contradicts it too.
    let mut c = fenced(12, 0);
    c.anomalies = cell("single", "none", 1, 1, 0).anomalies;
    let a = judged(ClaimSays::NoDamage, c);
    assert_eq!(a.agrees, Some(false));
    assert!(
        a.observed.contains("1 damage anomaly(ies) outside"),
        "{}",
        a.observed
    );
}

#[test]
fn stuck_claims_and_cells_not_run() {
    let crash = |exposed, stuck| cell("setnx-expire", "client-crash", exposed, 0, stuck);
    assert_eq!(judged(ClaimSays::Stuck, crash(1, 1)).agrees, Some(true));
    assert_eq!(judged(ClaimSays::Stuck, crash(10, 0)).agrees, Some(false));
    assert_eq!(judged(ClaimSays::Stuck, crash(4, 0)).agrees, None);
    assert_eq!(judged(ClaimSays::NotStuck, crash(1, 1)).agrees, Some(false));
    assert_eq!(judged(ClaimSays::NotStuck, crash(10, 0)).agrees, Some(true));
    let not_run = CellRecord::fold("single", "failover", "sentinel", "x", 3, vec![]);
    let a = judged(ClaimSays::Damage, not_run);
    assert_eq!(
        (a.agrees, a.observed.as_str()),
        (None, "cell not run (not run)")
    );
    let claims = mapped_claims(&[StrategyKind::Single.into()], &[FaultClass::Failover]);
    let a = agreement(&claims, &[]);
    assert_eq!(a[0].agrees, None);
    assert_eq!(a[0].observed, "cell not in this matrix");
    assert_eq!(a[0].file, "chaos/05a-failover-loses-lock.toml");
}
