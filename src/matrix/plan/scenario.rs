//! The scenario (and test) of one trial of a cell, and the warnings a plan's tests raise.

use super::MatrixPlan;
use crate::matrix::episode::EpisodeSpec;
use crate::matrix::fault::FaultClass;
use crate::matrix::setup::MatrixRow;
use crate::orchestration::scenario::{Scenario, ScenarioWorkload};
use crate::orchestration::test::Test;
use crate::topology::{Persistence, TopologyKind};

impl MatrixPlan {
    /// The scenario of one trial of `row × fault`: the cell's topology (behind the row's
    /// pooler, [`PgSetup::pooler`]), its episodes' steps one after the other, the shared
    /// workload with this trial's seed, no expectations (the matrix measures). A bare
    /// strategy is its direct row.
    pub fn scenario(&self, row: impl Into<MatrixRow>, fault: FaultClass, trial: u32) -> Scenario {
        let row = row.into();
        let w = &self.workload;
        let strategy = row.strategy;
        let shape = self.trial_shape(row, fault);
        Scenario {
            name: format!("{}-{fault}-t{trial}", row.dir_name()),
            claim: format!("matrix cell {row} × {fault}, trial {trial}"),
            description: fault.describe(shape.topology, w),
            topology: shape.topology,
            persistence: Persistence::None,
            pooler: row.setup.pooler(),
            pg_settings: Vec::new(),
            cluster: (shape.topology == TopologyKind::Cluster).then(|| self.cluster()),
            strategies: vec![strategy],
            seed: w.seed + u64::from(trial.saturating_sub(1)),
            workload: ScenarioWorkload {
                clients: shape.clients,
                resources: w.resources,
                hold: w.hold,
                ttl: shape.ttl,
                duration: shape.duration,
                retry_attempts: Some(100_000),
                retry_delay: Some(w.retry_delay),
                retry_jitter: Some(w.retry_delay / 2),
                acquire_timeout: Some(w.acquire_timeout),
                watchdog: shape.watchdog,
                node_timeout: Some(w.node_timeout),
                response_timeout: None,
                connect_timeout: None,
                rate: None,
                pg_pool: None,
                pg_pool_recycle: None,
                adapter_processes: None,
                work: w.work,
                idempotency_key: w.idempotency_key,
                adapter: None,
            },
            nemesis: shape.steps,
            expect: Default::default(),
            workers: self.workers.map(|w| w.workers),
            launcher: self.workers.map(|w| w.launcher),
            path: Default::default(),
        }
    }

    /// The planned episodes of every trial of `row × fault` (offsets on the run clock;
    /// the same for every trial of the cell).
    pub fn episode_specs(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> Vec<EpisodeSpec> {
        self.trial_shape(row, fault).episodes
    }

    /// The test of one trial: [`MatrixPlan::scenario`] resolved (what it leaves out comes from
    /// the same defaults as every test).
    pub fn test(&self, row: impl Into<MatrixRow>, fault: FaultClass, trial: u32) -> Test {
        self.scenario(row, fault, trial).to_test()
    }

    /// The warnings `run` and `chaos` print ([`Test::warnings`]), for every cell's trials, each
    /// distinct sentence once with the number of cells it applies to, in plan order. Every trial
    /// of a cell has the same test but its seed, so a cell's warnings are its trials' warnings.
    pub fn warnings(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for (row, f) in self.cells() {
            for w in self.test(row, f, 1).warnings() {
                match out.iter_mut().find(|(seen, _)| *seen == w) {
                    Some((_, n)) => *n += 1,
                    None => out.push((w, 1)),
                }
            }
        }
        out
    }
}
