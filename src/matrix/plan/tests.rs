use super::*;
use crate::driver::HoldTime;
use crate::matrix::episode::Exposure;
use crate::nemesis::{FaultKind, Link, Target};

fn plan(workload: MatrixWorkload) -> MatrixPlan {
    let mut strategies = MatrixPlan::STRATEGIES.to_vec();
    strategies.extend(MatrixPlan::CONTROLS);
    strategies.extend(MatrixPlan::ALTERNATIVES);
    strategies.push(StrategyKind::SingleWait);
    // The PostgreSQL variants a user can add as rows (`--strategies`).
    strategies.extend([StrategyKind::PgAdvisoryXact, StrategyKind::PgAdvisoryWait]);
    MatrixPlan::new(strategies, FaultClass::ALL.to_vec(), 3, workload)
}

#[test]
fn warnings_are_counted_per_cell_once_each() {
    let mut p = plan(MatrixWorkload::quick());
    // The default strategies raise no warning in any class.
    p.strategies = MatrixPlan::STRATEGIES.to_vec();
    assert_eq!(p.warnings(), Vec::<(String, usize)>::new());
    // `no-ttl` has nothing to watch: the watchdog classes run it unwatched.
    p.strategies = vec![StrategyKind::Single, StrategyKind::NoTtl];
    let watched = p
        .faults
        .iter()
        .filter(|f| p.scenario(StrategyKind::NoTtl, **f, 1).workload.watchdog)
        .count();
    assert!(watched >= 1);
    let w = p.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].0.starts_with("--watchdog with no-ttl: "), "{}", w[0].0);
    assert_eq!(w[0].1, watched);
}

#[test]
fn every_cell_of_the_default_and_quick_matrix_is_a_valid_scenario() {
    plan(MatrixWorkload::standard()).validate().unwrap();
    plan(MatrixWorkload::quick()).validate().unwrap();
}

#[test]
fn pg_setups_put_every_postgres_cell_behind_its_pooler_and_leave_the_rest() {
    use strum::VariantArray;
    let mut p = plan(MatrixWorkload::quick());
    let direct = p.rows().len();
    p.pg_setups = PgSetup::VARIANTS.to_vec();
    p.validate().unwrap();
    let pg = p
        .strategies
        .iter()
        .filter(|s| s.service() == crate::strategy::LockService::Postgres)
        .count();
    assert_eq!(pg, 4);
    assert_eq!(p.rows().len(), direct + pg * 3);
    assert_eq!(p.total_trials(), (p.rows().len() * 12) as u64 * 3);
    for row in p.rows() {
        for f in FaultClass::ALL {
            let s = p.scenario(row, f, 1);
            assert_eq!(s.pooler, row.setup.pooler(), "{row} × {f}");
            assert_eq!(s.topology, f.topology(row.strategy), "{row} × {f}");
            assert_eq!(s.strategies, vec![row.strategy]);
            assert!(s.name.starts_with(&row.dir_name()), "{}", s.name);
        }
    }
    let pooled = MatrixRow {
        setup: PgSetup::PgbouncerTransaction,
        ..MatrixRow::direct(StrategyKind::PgAdvisory)
    };
    let t = p.test(pooled, FaultClass::None, 2);
    assert_eq!(t.topology.pooler, PgSetup::PgbouncerTransaction.pooler());
    assert_eq!(
        p.test(StrategyKind::PgAdvisory, FaultClass::None, 2)
            .topology
            .pooler,
        None
    );
    p.pg_setups = vec![PgSetup::Direct, PgSetup::Direct];
    assert_eq!(
        p.validate().unwrap_err(),
        "PostgreSQL setup direct is listed twice"
    );
    p.pg_setups.clear();
    assert!(p.validate().unwrap_err().contains("--pg-setups"));
}

#[test]
fn cluster_rows_run_every_column_on_the_cluster_aimed_at_the_lock_shard() {
    use strum::VariantArray;
    let mut p = plan(MatrixWorkload::quick());
    p.strategies = vec![
        StrategyKind::Single,
        StrategyKind::SingleWait,
        StrategyKind::Redlock,
    ];
    p.faults = FaultClass::VARIANTS.to_vec();
    p.redis_setups = vec![RedisSetup::Standalone, RedisSetup::Cluster];
    p.workload.cluster_node_timeout = Duration::from_millis(1500);
    p.validate().unwrap();
    let labels: Vec<String> = p.rows().iter().map(MatrixRow::label).collect();
    assert_eq!(
        labels,
        [
            "single",
            "single · cluster",
            "single-wait",
            "single-wait · cluster",
            "redlock"
        ]
    );
    // The cluster columns only on the cluster rows, and no clock jump there: 3 standalone
    // rows × 12, 2 × 16.
    assert_eq!(p.cells().len(), 3 * 12 + 2 * 16);
    assert_eq!(p.total_trials(), (3 * 12 + 2 * 16) * 3);
    let row = MatrixRow::cluster(StrategyKind::Single);
    assert!(!FaultClass::ClockJump.applies(row));
    for f in FaultClass::VARIANTS
        .iter()
        .copied()
        .filter(|f| f.applies(row))
    {
        let s = p.scenario(row, f, 1);
        assert_eq!(s.topology, TopologyKind::Cluster, "{f}");
        assert_eq!(
            s.cluster.map(|c| (c.shards, c.node_timeout)),
            Some((3, Duration::from_millis(1500))),
            "{f}"
        );
        assert!(s.name.starts_with("single@cluster-"), "{}", s.name);
        // No node fault names a node: the lock's shard moves with every failover.
        for st in &s.nemesis {
            assert!(!matches!(&st.target, Target::Nodes(_)), "{f}: {st:?}");
        }
    }
    let paused = p.scenario(row, FaultClass::NodePause, 1);
    assert_eq!(paused.nemesis[1].target, Target::Primary);
    assert!(paused.nemesis[1].duration.unwrap() < Duration::from_millis(1500));
    let pause = p.scenario(row, FaultClass::ClusterPause, 1);
    assert!(pause.nemesis[1].duration.unwrap() > Duration::from_secs(3));
    // Every minority-partition episode cuts the bus longer than the node timeout, the
    // holder on the primary's side, and needs the clients' own proxies.
    let cut = p.scenario(row, FaultClass::ClusterMinorityPartition, 1);
    let buses: Vec<_> = cut
        .nemesis
        .iter()
        .filter(|st| st.link == Some(Link::Bus))
        .collect();
    assert_eq!(
        buses.len() as u32,
        p.episodes_per_trial(row, FaultClass::ClusterMinorityPartition)
    );
    for b in buses {
        assert_eq!(b.with_clients, Some(crate::nemesis::ClientSide::Holder));
        assert!(b.duration.unwrap() >= Duration::from_millis(1500) * 2);
    }
    let sentinel = p.scenario(StrategyKind::Single, FaultClass::Failover, 1);
    assert_eq!(sentinel.topology, TopologyKind::Sentinel);
    assert_eq!(sentinel.cluster, None);
    assert_eq!(
        p.lease_ttl(row, FaultClass::ClusterFailover),
        Duration::from_millis(3500)
    );
    assert_eq!(
        p.lease_ttl(row, FaultClass::None),
        Duration::from_millis(500)
    );
}

#[test]
fn cluster_settings_that_cannot_work_are_refused_naming_the_flag() {
    let mut p = plan(MatrixWorkload::quick());
    p.strategies = vec![StrategyKind::Single];
    p.faults = vec![FaultClass::None, FaultClass::ClusterFailoverTakeover];
    let err = p.validate().unwrap_err();
    assert!(
        err.contains("cluster-failover-takeover runs only on Redis Cluster rows")
            && err.contains("--redis-setups cluster"),
        "{err}"
    );
    p.redis_setups = vec![RedisSetup::Cluster];
    p.validate().unwrap();
    p.faults.push(FaultClass::NodePause);
    p.workload.cluster_node_timeout = Duration::from_millis(600);
    let err = p.validate().unwrap_err();
    assert!(
        err.starts_with("--cluster-node-timeout 600 ms must be longer than node-pause's pause"),
        "{err}"
    );
    p.workload.cluster_node_timeout = Duration::from_millis(50);
    assert!(p
        .validate()
        .unwrap_err()
        .starts_with("--cluster-node-timeout: "));
    p.workload.cluster_node_timeout = Duration::from_millis(1000);
    p.redis_setups = vec![RedisSetup::Cluster, RedisSetup::Cluster];
    assert_eq!(
        p.validate().unwrap_err(),
        "Redis setup cluster is listed twice"
    );
    p.redis_setups.clear();
    assert!(p.validate().unwrap_err().contains("--redis-setups"));
    // Redlock alone has no cluster row: the cluster setup changes nothing.
    p.redis_setups = vec![RedisSetup::Cluster];
    p.strategies = vec![StrategyKind::Redlock];
    p.faults = vec![FaultClass::None];
    assert_eq!(p.rows(), [MatrixRow::direct(StrategyKind::Redlock)]);
}

#[test]
fn topologies_follow_the_strategy_and_the_fault() {
    let p = plan(MatrixWorkload::standard());
    let t = |s, f| p.scenario(s, f, 1).topology;
    assert_eq!(
        t(StrategyKind::Single, FaultClass::Latency),
        TopologyKind::Single
    );
    assert_eq!(
        t(StrategyKind::Single, FaultClass::Failover),
        TopologyKind::Sentinel
    );
    assert_eq!(
        t(StrategyKind::Redlock, FaultClass::Failover),
        TopologyKind::Five
    );
    assert_eq!(
        t(StrategyKind::PgAdvisoryFenced, FaultClass::Failover),
        TopologyKind::Postgres
    );
    assert_eq!(
        t(StrategyKind::EtcdLease, FaultClass::Latency),
        TopologyKind::Etcd
    );
    assert!(
        p.scenario(StrategyKind::PgAdvisory, FaultClass::ClockJump, 1)
            .nemesis
            .is_empty(),
        "no clock to jump on PostgreSQL"
    );
    let etcd_failover = p.scenario(StrategyKind::EtcdLease, FaultClass::Failover, 1);
    assert_eq!(etcd_failover.nemesis[0].target, Target::Holder);
    assert_eq!(etcd_failover.nemesis[1].target, Target::Primary);
    assert_eq!(
        etcd_failover.workload.ttl,
        Duration::from_secs(1),
        "etcd: whole seconds"
    );
    // single-wait needs replicas: Sentinel in every class, node faults on the primary n1.
    for f in FaultClass::ALL {
        assert_eq!(
            t(StrategyKind::SingleWait, f),
            TopologyKind::Sentinel,
            "{f}"
        );
    }
    let paused = p.scenario(StrategyKind::SingleWait, FaultClass::NodePause, 1);
    assert_eq!(paused.nemesis[1].fault, FaultKind::PauseNode);
    assert_eq!(paused.nemesis[1].target, Target::Nodes(vec!["n1".into()]));
    assert!(paused.description.contains("n1 (the primary"));
    let redlock_failover = p.scenario(StrategyKind::Redlock, FaultClass::Failover, 1);
    assert_eq!(redlock_failover.nemesis[1].fault, FaultKind::Kill);
    let slow = p.scenario(StrategyKind::Single, FaultClass::SlowWork, 2);
    assert!(slow.workload.watchdog);
    assert_eq!(slow.seed, 2);
    assert!(
        !p.scenario(StrategyKind::Single, FaultClass::ClientPause, 1)
            .workload
            .watchdog
    );
}

/// Every strategy the matrix can run, one per topology it can land on, and the
/// single-node Redis ones on a cluster too.
fn every_topology() -> Vec<MatrixRow> {
    use StrategyKind as S;
    let mut rows: Vec<MatrixRow> = [
        S::Single,
        S::Redlock,
        S::SingleWait,
        S::PgAdvisory,
        S::EtcdLease,
        S::SetnxExpire,
    ]
    .map(MatrixRow::direct)
    .to_vec();
    rows.extend([S::Single, S::SingleWait, S::SetnxExpire].map(MatrixRow::cluster));
    rows
}

/// Every column `row` runs.
fn columns(row: MatrixRow) -> Vec<FaultClass> {
    <FaultClass as strum::VariantArray>::VARIANTS
        .iter()
        .copied()
        .filter(|f| f.applies(row))
        .collect()
}

#[test]
fn every_episode_holds_its_own_steps_and_the_specs_agree_with_the_schedule() {
    for w in [MatrixWorkload::standard(), MatrixWorkload::quick()] {
        let p = plan(w.clone());
        for s in every_topology() {
            for f in columns(s) {
                let shape = p.trial_shape(s, f);
                let specs = p.episode_specs(s, f);
                let scenario = p.scenario(s, f, 1);
                let cell = format!("{s} × {f}");
                assert_eq!(specs, shape.episodes, "{cell}");
                assert_eq!(specs.len() as u32, p.episodes_per_trial(s, f), "{cell}");
                assert_eq!(scenario.nemesis, shape.steps, "{cell}");
                assert_eq!(scenario.workload.duration, shape.duration, "{cell}");
                let lead_in = specs[0].start;
                assert!(lead_in >= shape::lease_ttl(shape.topology, w.ttl), "{cell}");
                for (i, e) in specs.iter().enumerate() {
                    assert_eq!(e.index, i as u32 + 1, "{cell}");
                    assert!(e.start <= e.heal && e.heal <= e.end, "{cell}: {e:?}");
                    let next = specs.get(i + 1).map_or(shape.duration, |n| n.start);
                    assert_eq!(e.end, next, "{cell}: episodes back to back");
                    let own: Vec<_> = scenario
                        .nemesis
                        .iter()
                        .filter(|st| st.at >= e.start && st.at < e.end)
                        .collect();
                    let baseline = e.exposure == Exposure::Baseline;
                    assert_eq!(own.is_empty(), baseline, "{cell}: episode {}", e.index);
                    for st in own {
                        let until = st.at + st.duration.unwrap_or_default();
                        assert!(until <= e.end, "{cell}: {st:?} outlasts episode {e:?}");
                        assert!(st.at + Duration::from_millis(2) >= e.start);
                    }
                }
                // Before the first episode only the trial-wide steps: clients kept out
                // (late joiners, crashed holders' replacements) and replication lag.
                for st in scenario.nemesis.iter().filter(|st| st.at < lead_in) {
                    assert!(
                        matches!(st.fault, FaultKind::ClientAbsent | FaultKind::Latency)
                            && st.at.is_zero(),
                        "{cell}: {st:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn aimed_episodes_wait_for_the_holder_and_hit_it_first() {
    let p = plan(MatrixWorkload::standard());
    for s in every_topology() {
        for f in columns(s) {
            let scenario = p.scenario(s, f, 1);
            let specs = p.episode_specs(s, f);
            for e in specs.iter().filter(|e| e.exposure != Exposure::Baseline) {
                let mut own = scenario.nemesis.iter().filter(|st| st.at >= e.start);
                let mut first = own
                    .next()
                    .filter(|st| st.at == e.start)
                    .unwrap_or_else(|| panic!("{s} × {f}: nothing at {e:?}"));
                if first.fault == FaultKind::ClientAbsent {
                    // A cluster's lagged failover keeps every client away, lags the
                    // replication, lets them back in; the holder step takes the first in
                    // (so its key is in the lag), then the fault.
                    assert!(s.on_cluster(), "{s} × {f}");
                    assert_eq!(
                        first.target,
                        Target::Clients((0..p.workload.clients).collect())
                    );
                    let back = first.at + first.duration.unwrap();
                    let lag = own.next().unwrap();
                    assert_eq!(lag.link, Some(Link::Replication), "{s} × {f}");
                    assert!(lag.at < back, "{s} × {f}: the lag is in place first");
                    first = own.next().unwrap();
                    assert_eq!(first.at, back, "{s} × {f}");
                    let fault = own.next().unwrap();
                    assert_eq!(fault.at, first.at + shape::AIM_GAP, "{s} × {f}");
                    assert_eq!(fault.target, Target::Primary, "{s} × {f}");
                }
                let aimed = first.target == Target::Holder;
                // Only latency lands unaimed: with clients contending an acquire is
                // always in flight.
                assert_eq!(aimed, f != FaultClass::Latency, "{s} × {f}: {first:?}");
            }
        }
    }
}

#[test]
fn partition_holder_cuts_the_holder_alone_wherever_clients_can_have_own_proxies() {
    let p = plan(MatrixWorkload::quick());
    for s in every_topology() {
        let f = FaultClass::PartitionHolder;
        let scenario = p.scenario(s, f, 1);
        let cuts: Vec<_> = scenario
            .nemesis
            .iter()
            .filter(|st| st.fault == FaultKind::Partition)
            .collect();
        assert_eq!(cuts.len() as u32, p.episodes_per_trial(s, f), "{s}");
        let alone = !shape::shared_proxies(f.topology(s));
        for st in cuts {
            assert_eq!(st.cuts_clients(), alone, "{s}: {st:?}");
            let want = if alone {
                Target::Holder
            } else {
                Target::AllNodes
            };
            assert_eq!(st.target, want, "{s}");
        }
    }
}

#[test]
fn client_crash_replaces_every_crashed_holder_and_stuck_controls_get_one_episode() {
    let p = plan(MatrixWorkload::standard());
    let scenario = p.scenario(StrategyKind::Single, FaultClass::ClientCrash, 1);
    let specs = p.episode_specs(StrategyKind::Single, FaultClass::ClientCrash);
    let w = &p.workload;
    assert_eq!(
        scenario.workload.clients,
        w.clients + specs.len() as u32 - 1
    );
    let joins: Vec<_> = scenario
        .nemesis
        .iter()
        .filter(|st| st.fault == FaultKind::ClientAbsent)
        .collect();
    assert_eq!(joins.len(), specs.len() - 1);
    for (k, j) in joins.iter().enumerate() {
        assert_eq!(j.target, Target::Clients(vec![w.clients + k as u32]));
        let join = j.duration.unwrap();
        assert!(join < specs[k + 1].start, "joins before episode {}", k + 2);
        assert!(
            join > specs[k].start + p.workload.hold.max(),
            "after crash {}",
            k + 1
        );
    }
    for s in [StrategyKind::SetnxExpire, StrategyKind::NoTtl] {
        assert_eq!(p.episode_specs(s, FaultClass::ClientCrash).len(), 1, "{s}");
    }
    assert!(
        p.episode_specs(StrategyKind::PgAdvisory, FaultClass::ClientCrash)
            .len()
            > 1
    );
}

#[test]
fn a_sentinel_failover_trial_is_one_episode_with_a_lease_that_outlasts_it() {
    let p = plan(MatrixWorkload::standard());
    for s in [
        StrategyKind::Single,
        StrategyKind::SingleFenced,
        StrategyKind::SingleWait,
    ] {
        let scenario = p.scenario(s, FaultClass::Failover, 1);
        let specs = p.episode_specs(s, FaultClass::Failover);
        assert_eq!(specs.len(), 1);
        assert_eq!(p.lease_ttl(s, FaultClass::Failover), shape::FAILOVER_TTL);
        let lag = scenario
            .nemesis
            .iter()
            .find(|st| st.fault == FaultKind::Latency)
            .unwrap();
        assert_eq!(lag.link, Some(Link::Replication));
        assert!(lag.at + lag.duration.unwrap() > specs[0].start + shape::FAILOVER_ALLOWANCE);
        let expected = if s == StrategyKind::SingleWait {
            Target::Nodes(vec!["n3".into()])
        } else {
            Target::Primary
        };
        assert_eq!(lag.target, expected, "{s}");
        let kill = scenario
            .nemesis
            .iter()
            .find(|st| st.fault == FaultKind::Failover)
            .unwrap();
        assert_eq!(kill.at, specs[0].start + shape::AIM_GAP);
        let stretch = scenario
            .nemesis
            .iter()
            .find(|st| st.fault == FaultKind::SlowWork)
            .unwrap();
        // The stretched holder's lease is still live when the new primary takes over.
        assert!(
            p.workload.hold.max() + stretch.extra.unwrap() < shape::FAILOVER_TTL,
            "{s}"
        );
        assert!(stretch.extra.unwrap() > shape::FAILOVER_ALLOWANCE);
    }
}

#[test]
fn stretches_without_renewal_stay_inside_the_lease() {
    let p = plan(MatrixWorkload::standard());
    for s in every_topology() {
        for f in columns(s) {
            let scenario = p.scenario(s, f, 1);
            if scenario.workload.watchdog {
                continue;
            }
            for st in scenario
                .nemesis
                .iter()
                .filter(|st| st.fault == FaultKind::SlowWork)
            {
                let inside = p.workload.hold.max() + st.extra.unwrap_or_default();
                assert!(
                    inside * 5 <= scenario.workload.ttl * 4,
                    "{s} × {f}: the stretch alone would outlast the lease"
                );
            }
        }
    }
}

/// The default matrix the issue budgets: 7 strategies × 12 classes.
fn budgeted(workload: MatrixWorkload) -> MatrixPlan {
    let mut strategies = MatrixPlan::STRATEGIES.to_vec();
    strategies.extend(MatrixPlan::ALTERNATIVES);
    MatrixPlan::new(strategies, FaultClass::ALL.to_vec(), 1, workload)
}

#[test]
fn the_default_and_quick_matrix_fit_their_time_budgets() {
    let default = budgeted(MatrixWorkload::standard());
    let quick = budgeted(MatrixWorkload::quick());
    let minutes = |p: &MatrixPlan, c: f64| p.planned_time(c).as_secs_f64() / 60.0;
    // Up to 4 trials at once on 2 cores (the default). Planned (setup allowances measured
    // with the release build): default 13.5 min, --quick 5.0 min (54.0 and 20.1 min of
    // trials one after another); the targets are 20 and 6 minutes.
    assert!(minutes(&default, 4.0) <= 16.0, "{}", minutes(&default, 4.0));
    assert!(minutes(&quick, 4.0) <= 5.5, "{}", minutes(&quick, 4.0));
    for p in [&default, &quick] {
        for &s in &p.strategies {
            for &f in &p.faults {
                let planned = p.planned_trials(s, f) * p.episodes_per_trial(s, f);
                assert!(planned >= p.workload.episodes, "{s} × {f}: {planned}");
                assert!(p.planned_trials(s, f) <= p.workload.max_trials, "{s} × {f}");
            }
        }
    }
}

#[test]
fn settings_that_cannot_fit_are_refused_naming_the_flag() {
    let refused = |change: fn(&mut MatrixWorkload)| {
        let mut w = MatrixWorkload::standard();
        change(&mut w);
        plan(w).validate().unwrap_err()
    };
    let err = refused(|w| w.hold = HoldTime::Fixed(Duration::from_millis(200)));
    assert!(
        err.contains("--hold 200ms") && err.contains("125 ms"),
        "{err}"
    );
    assert!(refused(|w| w.ttl = Duration::from_millis(50)).contains("--ttl"));
    assert!(refused(|w| w.clients = 1).contains("--clients"));
    assert!(refused(|w| w.episodes = 0).contains("--episodes"));
    let err = refused(|w| w.max_trials = 20);
    assert!(
        err.contains("--max-trials 20 cannot reach --episodes 30") && err.contains("at least 30"),
        "{err}"
    );
    let mut p = plan(MatrixWorkload::standard());
    p.faults.push(FaultClass::None);
    assert!(p.validate().unwrap_err().contains("listed twice"));
}
