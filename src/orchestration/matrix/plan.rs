//! What a matrix runs: the strategies, the fault classes, the trial count and the one
//! workload every cell shares; and the scenario each trial becomes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fault::FaultClass;
use crate::driver::HoldTime;
use crate::orchestration::scenario::{validate, Scenario, ScenarioWorkload};
use crate::orchestration::test::Test;
use crate::strategy::StrategyKind;
use crate::topology::Persistence;

/// The workload shared by every cell of a matrix. Durations are serialized as ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixWorkload {
    /// Concurrent clients per trial.
    pub clients: u32,
    /// Distinct resources (fewer = more contention).
    pub resources: u32,
    /// Time inside the critical section.
    pub hold: HoldTime,
    /// Lease TTL.
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Run time of one trial.
    #[serde(with = "crate::duration_ms")]
    pub trial_duration: Duration,
    /// When the fault starts, as an offset from the trial's start.
    #[serde(with = "crate::duration_ms")]
    pub fault_at: Duration,
    /// Seed of trial 1; trial `t` uses `seed + t − 1`.
    pub seed: u64,
    /// Delay between acquire attempts (jitter: half of it, set explicitly in each trial's
    /// scenario).
    #[serde(with = "crate::duration_ms")]
    pub retry_delay: Duration,
    /// Give up one acquire after this long (retries included).
    #[serde(with = "crate::duration_ms")]
    pub acquire_timeout: Duration,
    /// Per-node operation timeout. TTL/4 (the strategies' own default is TTL/10): a loaded
    /// 2-core machine running debug builds misses 100 ms now and then, and each miss is an
    /// unknown acquire whose key then blocks the resource for a whole TTL.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
}

impl MatrixWorkload {
    /// The workload in one line for people: `8 clients, 2 resources, hold 50 ms, TTL 1000 ms, …`.
    pub fn describe(&self) -> String {
        let hold = match self.hold {
            HoldTime::Fixed(d) => format!("{} ms", d.as_millis()),
            HoldTime::Range { min, max } => format!("{}–{} ms", min.as_millis(), max.as_millis()),
        };
        format!(
            "{} clients, {} resources, hold {hold}, TTL {} ms, node timeout {} ms, acquire timeout {} ms, \
             {} ms per trial, faults from {} ms, seed {} (+ trial − 1)",
            self.clients,
            self.resources,
            self.ttl.as_millis(),
            self.node_timeout.as_millis(),
            self.acquire_timeout.as_millis(),
            self.trial_duration.as_millis(),
            self.fault_at.as_millis(),
            self.seed
        )
    }

    /// The default: 8 clients, 2 resources, hold 50 ms, TTL 1 s, 6 s per trial, fault at
    /// 1.5 s. Six seconds (the example says 8) keep 4 strategies × 10 faults × 3
    /// trials under 20 minutes on 2 cores; every fault window ends by 3.5 s, so each trial
    /// still measures 2.5 s of recovery.
    pub fn standard() -> Self {
        Self {
            clients: 8,
            resources: 2,
            hold: HoldTime::Fixed(Duration::from_millis(50)),
            ttl: Duration::from_secs(1),
            trial_duration: Duration::from_secs(6),
            fault_at: Duration::from_millis(1500),
            seed: 1,
            retry_delay: Duration::from_millis(10),
            acquire_timeout: Duration::from_secs(1),
            node_timeout: Duration::from_millis(250),
        }
    }

    /// `--quick`: the same workload with 4 s trials and the fault at 1 s (the longest fault
    /// window, 2 TTL, ends at 3 s).
    pub fn quick() -> Self {
        Self {
            trial_duration: Duration::from_secs(4),
            fault_at: Duration::from_secs(1),
            ..Self::standard()
        }
    }

    /// Checks that every fault fits: the longest window (2 TTL from `fault_at`) must end at
    /// least one TTL before the trial does.
    ///
    /// # Errors
    /// One sentence naming the setting to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.clients < 2 {
            return Err("--clients must be at least 2 (client faults stall half of them)".into());
        }
        if self.resources < 1 {
            return Err("--resources must be at least 1".into());
        }
        if self.ttl < Duration::from_millis(20) {
            return Err("--ttl must be at least 20ms (fault windows are fractions of it)".into());
        }
        if self.fault_at.is_zero() {
            return Err(
                "--fault-at must be above 0 (the first part of a trial is the baseline)".into(),
            );
        }
        let needed = self.fault_at + self.ttl * 3;
        if self.trial_duration < needed {
            return Err(format!(
                "--trial-duration {} is too short: faults start at {} and the longest lasts 2 TTL, plus one TTL of recovery: at least {} ms",
                humantime::format_duration(self.trial_duration),
                humantime::format_duration(self.fault_at),
                needed.as_millis()
            ));
        }
        Ok(())
    }
}

/// The whole matrix: rows (strategies) × columns (fault classes) × trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixPlan {
    /// Strategies, in row order.
    pub strategies: Vec<StrategyKind>,
    /// Fault classes, in column order.
    pub faults: Vec<FaultClass>,
    /// Trials per cell (each its own seed, topology and keys).
    pub trials: u32,
    /// The shared workload.
    pub workload: MatrixWorkload,
}

impl MatrixPlan {
    /// The default strategies: `single, single-fenced, redlock, redlock-fenced`.
    pub const STRATEGIES: [StrategyKind; 4] = [
        StrategyKind::Single,
        StrategyKind::SingleFenced,
        StrategyKind::Redlock,
        StrategyKind::RedlockFenced,
    ];

    /// The alternatives to Redis the reference articles name (`--strategies` picks them).
    pub const ALTERNATIVES: [StrategyKind; 3] = [
        StrategyKind::PgAdvisory,
        StrategyKind::PgAdvisoryFenced,
        StrategyKind::EtcdLease,
    ];

    /// The negative controls `--controls` adds.
    pub const CONTROLS: [StrategyKind; 5] = [
        StrategyKind::NaiveDel,
        StrategyKind::GetThenDel,
        StrategyKind::NoTtl,
        StrategyKind::SetnxExpire,
        StrategyKind::UncheckedExtend,
    ];

    /// The scenario of one trial: the cell's topology, the fault's schedule on it, the
    /// shared workload with this trial's seed, no expectations (the matrix measures).
    pub fn scenario(&self, strategy: StrategyKind, fault: FaultClass, trial: u32) -> Scenario {
        let w = &self.workload;
        let topology = fault.topology(strategy);
        Scenario {
            name: format!("{strategy}-{fault}-t{trial}"),
            claim: format!("matrix cell {strategy} × {fault}, trial {trial}"),
            description: fault.describe(topology, w.clients, w.ttl, w.fault_at),
            topology,
            persistence: Persistence::None,
            strategies: vec![strategy],
            seed: w.seed + u64::from(trial.saturating_sub(1)),
            workload: ScenarioWorkload {
                clients: w.clients,
                resources: w.resources,
                hold: w.hold,
                ttl: w.ttl,
                duration: w.trial_duration,
                retry_attempts: Some(100_000),
                retry_delay: Some(w.retry_delay),
                retry_jitter: Some(w.retry_delay / 2),
                acquire_timeout: Some(w.acquire_timeout),
                watchdog: fault.watchdog(),
                node_timeout: Some(w.node_timeout),
                response_timeout: None,
                connect_timeout: None,
                rate: None,
            },
            nemesis: fault.schedule(topology, w.clients, w.ttl, w.trial_duration, w.fault_at),
            expect: Default::default(),
            path: Default::default(),
        }
    }

    /// The planned episodes of every trial of `strategy × fault` (offsets on the run clock).
    pub fn episode_specs(
        &self,
        strategy: StrategyKind,
        fault: FaultClass,
    ) -> Vec<super::episode::EpisodeSpec> {
        let _ = (strategy, fault);
        Vec::new()
    }

    /// The test of one trial: [`MatrixPlan::scenario`] resolved (what it leaves out comes from
    /// the same defaults as every test).
    pub fn test(&self, strategy: StrategyKind, fault: FaultClass, trial: u32) -> Test {
        self.scenario(strategy, fault, trial).to_test()
    }

    /// Checks the plan before anything starts: at least one strategy, fault and trial, no
    /// duplicates, a workload every fault fits in, and every trial's scenario valid.
    ///
    /// # Errors
    /// One sentence saying what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.strategies.is_empty() {
            return Err("--strategies needs at least one strategy".into());
        }
        if self.faults.is_empty() {
            return Err("--faults needs at least one fault class".into());
        }
        if self.trials == 0 {
            return Err("--trials must be at least 1".into());
        }
        for (i, s) in self.strategies.iter().enumerate() {
            if self.strategies[..i].contains(s) {
                return Err(format!("strategy {s} is listed twice"));
            }
        }
        for (i, f) in self.faults.iter().enumerate() {
            if self.faults[..i].contains(f) {
                return Err(format!("fault class {f} is listed twice"));
            }
        }
        self.workload.validate()?;
        for &s in &self.strategies {
            for &f in &self.faults {
                let scenario = self.scenario(s, f, 1);
                validate::validate(&scenario)
                    .map_err(|(_, message)| format!("{s} × {f}: {message}"))?;
            }
        }
        Ok(())
    }

    /// Trials in the whole matrix.
    pub fn total_trials(&self) -> u64 {
        (self.strategies.len() * self.faults.len()) as u64 * u64::from(self.trials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::{FaultKind, Target};
    use crate::topology::TopologyKind;

    fn plan(workload: MatrixWorkload) -> MatrixPlan {
        let mut strategies = MatrixPlan::STRATEGIES.to_vec();
        strategies.extend(MatrixPlan::CONTROLS);
        strategies.extend(MatrixPlan::ALTERNATIVES);
        strategies.push(StrategyKind::SingleWait);
        MatrixPlan {
            strategies,
            faults: FaultClass::ALL.to_vec(),
            trials: 3,
            workload,
        }
    }

    #[test]
    fn every_cell_of_the_default_and_quick_matrix_is_a_valid_scenario() {
        plan(MatrixWorkload::standard()).validate().unwrap();
        plan(MatrixWorkload::quick()).validate().unwrap();
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
        assert_eq!(etcd_failover.nemesis[0].target, Target::Primary);
        // single-wait needs replicas: Sentinel in every class, node faults on the primary n1.
        for f in FaultClass::ALL {
            assert_eq!(
                t(StrategyKind::SingleWait, f),
                TopologyKind::Sentinel,
                "{f}"
            );
        }
        let paused = p.scenario(StrategyKind::SingleWait, FaultClass::NodePause, 1);
        assert_eq!(paused.nemesis[0].target, Target::Nodes(vec!["n1".into()]));
        assert!(paused.description.contains("n1 (the primary"));
        let redlock_failover = p.scenario(StrategyKind::Redlock, FaultClass::Failover, 1);
        assert_eq!(redlock_failover.nemesis[0].fault, FaultKind::Kill);
        let slow = p.scenario(StrategyKind::Single, FaultClass::SlowWork, 2);
        assert!(slow.workload.watchdog);
        assert_eq!(slow.seed, 2);
        assert!(
            !p.scenario(StrategyKind::Single, FaultClass::ClientPause, 1)
                .workload
                .watchdog
        );
    }

    #[test]
    fn a_trial_too_short_for_the_faults_is_refused_with_the_minimum() {
        let mut w = MatrixWorkload::standard();
        w.trial_duration = Duration::from_secs(3);
        let err = plan(w).validate().unwrap_err();
        assert!(err.contains("at least 4500 ms"), "{err}");
        let mut p = plan(MatrixWorkload::standard());
        p.faults.push(FaultClass::None);
        assert!(p.validate().unwrap_err().contains("listed twice"));
    }
}
