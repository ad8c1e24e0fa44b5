//! What a matrix runs: the strategies, the fault classes, the trial count and the one
//! workload every cell shares; and the scenario each trial becomes.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`MatrixPlan`]: rows × columns, and each cell's trial sizing (episodes, trials, time) |
//! | `workload` | [`MatrixWorkload`]: the workload every cell shares, its presets and its check |
//! | `scenario` | the scenario and test of one trial, and the warnings they raise |
//! | `validate` | the plan's check before anything starts |

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fault::FaultClass;
use super::setup::{MatrixRow, PgSetup, RedisSetup};
use super::shape::{self, TrialInput, TrialShape};
use crate::strategy::StrategyKind;
use crate::topology::{ClusterSettings, TopologyKind};

mod scenario;
#[cfg(test)]
mod tests;
mod validate;
mod workload;

pub use workload::{work_title, MatrixWorkload};

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
    /// How the PostgreSQL rows reach the server (`--pg-setups`): each PostgreSQL strategy is
    /// a row per setup. Default: `direct` only.
    #[serde(default = "direct_only")]
    pub pg_setups: Vec<PgSetup>,
    /// `--workers N`: every trial's clients run in N `lockbench worker` processes
    /// (`docs/workers.md`); `None`: in the trial's own process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<crate::orchestration::test::WorkersSpec>,
    /// How the single-node Redis rows are deployed (`--redis-setups`): each such strategy is a
    /// row per setup ([`RedisSetup::repeats`]). Default: `standalone` only.
    #[serde(default = "standalone_only")]
    pub redis_setups: Vec<RedisSetup>,
}

fn direct_only() -> Vec<PgSetup> {
    vec![PgSetup::Direct]
}

fn standalone_only() -> Vec<RedisSetup> {
    vec![RedisSetup::Standalone]
}

impl MatrixPlan {
    /// A plan of `strategies` × `faults` with PostgreSQL reached directly.
    pub fn new(
        strategies: Vec<StrategyKind>,
        faults: Vec<FaultClass>,
        trials: u32,
        workload: MatrixWorkload,
    ) -> Self {
        Self {
            strategies,
            faults,
            trials,
            workload,
            pg_setups: direct_only(),
            workers: None,
            redis_setups: standalone_only(),
        }
    }

    /// The rows, in order: each strategy, a PostgreSQL one once per PostgreSQL setup, a
    /// single-node Redis one once per Redis setup ([`MatrixRow::expand`]).
    pub fn rows(&self) -> Vec<MatrixRow> {
        MatrixRow::expand(&self.strategies, &self.pg_setups, &self.redis_setups)
    }

    /// Every cell, row-major: each row × each fault class it runs ([`FaultClass::applies`]:
    /// the cluster columns only on the cluster rows).
    pub fn cells(&self) -> Vec<(MatrixRow, FaultClass)> {
        self.rows()
            .into_iter()
            .flat_map(|r| {
                self.faults
                    .iter()
                    .filter(move |f| f.applies(r))
                    .map(move |&f| (r, f))
            })
            .collect()
    }

    /// The Redis Cluster of the cluster rows: 3 shards, the workload's node timeout.
    pub fn cluster(&self) -> ClusterSettings {
        ClusterSettings {
            node_timeout: self.workload.cluster_node_timeout,
            ..ClusterSettings::default()
        }
    }

    /// The Redis strategies of the default rows: `single, single-fenced, redlock,
    /// redlock-fenced` (the default matrix adds [`MatrixPlan::ALTERNATIVES`]).
    pub const STRATEGIES: [StrategyKind; 4] = [
        StrategyKind::Single,
        StrategyKind::SingleFenced,
        StrategyKind::Redlock,
        StrategyKind::RedlockFenced,
    ];

    /// The alternatives to Redis the reference articles name, in the default rows after the
    /// Redis strategies.
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

    /// Episodes per trial of `row × fault`: one for a Sentinel failover and for a
    /// `client-crash` whose first crash leaves the resource stuck for good
    /// ([`shape::crash_leaves_key_forever`]); otherwise
    /// [`MatrixWorkload::episodes_per_trial`]. A bare strategy is its direct row.
    pub fn episodes_per_trial(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> u32 {
        let row = row.into();
        let strategy = row.strategy;
        let topology = fault.topology(row);
        if (fault == FaultClass::Failover && topology == TopologyKind::Sentinel)
            || (fault == FaultClass::ClientCrash && shape::crash_leaves_key_forever(strategy))
        {
            1
        } else {
            self.workload
                .episodes_per_trial(shape::exposure(fault, topology))
        }
    }

    /// One trial of `row × fault` laid out: lead-in, episodes, steps, run length.
    pub fn trial_shape(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> TrialShape {
        let row = row.into();
        let w = &self.workload;
        shape::trial(TrialInput {
            strategy: row.strategy,
            topology: fault.topology(row),
            cluster_node_timeout: w.cluster_node_timeout,
            acquire_timeout: w.acquire_timeout,
            class: fault,
            clients: w.clients,
            hold: w.hold.max(),
            ttl: w.ttl,
            episodes: self.episodes_per_trial(row, fault),
        })
    }

    /// The lease TTL of `row × fault`'s trials: the workload's, rounded up to whole
    /// seconds on etcd, [`shape::FAILOVER_TTL`] for a Sentinel failover and
    /// [`cluster_shape::lease_ttl`](super::cluster_shape::lease_ttl) for a cluster's failover columns (judge the episodes with
    /// this one).
    pub fn lease_ttl(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> Duration {
        self.trial_shape(row, fault).ttl
    }

    /// Run length of one trial of `row × fault` (lead-in + every episode).
    pub fn trial_duration(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> Duration {
        self.trial_shape(row, fault).duration
    }

    /// Trials `row × fault` plans to reach the exposed episodes wanted (every planned
    /// episode counted as exposed; at most `max_trials`).
    pub fn planned_trials(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> u32 {
        let row = row.into();
        let per = self.episodes_per_trial(row, fault).max(1);
        let wanted = match shape::exposure(fault, fault.topology(row)) {
            super::Exposure::Baseline => self.workload.episodes + self.workload.episodes / 3,
            _ => self.workload.episodes,
        };
        wanted
            .div_ceil(per)
            .clamp(1, self.workload.max_trials.max(1))
    }

    /// Planned wall time of one cell: its planned trials, each its run length plus the
    /// topology's start, check and teardown ([`shape::setup_allowance`]).
    pub fn planned_cell_time(&self, row: impl Into<MatrixRow>, fault: FaultClass) -> Duration {
        let row = row.into();
        let topology = fault.topology(row);
        (self.trial_duration(row, fault) + shape::setup_allowance(topology))
            * self.planned_trials(row, fault)
    }

    /// Planned wall time of the whole matrix with `concurrency` cells running at once on
    /// average: the sum of [`MatrixPlan::planned_cell_time`] over every cell, divided by it.
    pub fn planned_time(&self, concurrency: f64) -> Duration {
        let total: Duration = self
            .cells()
            .into_iter()
            .map(|(r, f)| self.planned_cell_time(r, f))
            .sum();
        total.div_f64(concurrency.max(1.0))
    }

    /// Trials in the whole matrix (at most `trials` per cell).
    pub fn total_trials(&self) -> u64 {
        self.cells().len() as u64 * u64::from(self.trials)
    }
}
