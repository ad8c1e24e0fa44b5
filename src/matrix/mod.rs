//! The strategy × fault matrix (`lockbench matrix`): every selected strategy against every
//! fault class on one workload, each cell run as several trials, folded into one record per
//! cell and a decision table.
//!
//! | file | what |
//! |---|---|
//! | [`fault`] | the fault classes: topology, watchdog, what an episode does (in words) |
//! | [`service`] | each lock service's registration in the matrix (`redis`, `postgres`, `etcd`): where faults land on its topologies, restart and set-up times, its own words for its faults |
//! | [`shape`] | episode shapes per class, from the service's facts (aimed steps, heal, length, exposure), and a trial laid out from them |
//! | [`describe`] | an episode in words, from the service's facts and words, by fault family |
//! | [`cluster_shape`] | the episode shapes of a Redis Cluster row's failover columns (shard failover, `CLUSTER FAILOVER` modes, primary paused past the node timeout) |
//! | [`cluster_partition`] | the cluster's `cluster-minority-partition` episode: the lock's primary cut off the bus and its replica with the holder on its side (claim 20g) |
//! | [`episode`] | fault episodes: planned, judged (exposed? damage, unsafe belief, stuck, recovery), added up |
//! | [`probe`] | the uncontended acquire probe per strategy (the efficiency rule's cost) |
//! | [`claims`] | claim scenarios mapped to cells, and whether the matrix agrees |
//! | [`setup`] | how PostgreSQL rows reach the server (directly or behind PgBouncer), how single-node Redis rows are deployed (standalone or on a Redis Cluster), and the rows they make |
//! | [`plan`] | strategies × faults × trials and the shared workload; each trial's scenario |
//! | [`run`] | probes, then cells: trials until enough exposed episodes, several cells at once |
//! | [`trial`] | one trial: the runner on the trial's test on a fresh topology, read back as a record |
//! | `trial_thread` | a trial on a thread and runtime of its own, its record sent back with its harness health |
//! | [`stats`] | Wilson score interval / exact one-sided bound for k of n |
//! | [`record`] | trial and cell records, and how trials fold into a cell |
//! | [`decision`] | the decision table read off the cells |
//! | [`works`] | a matrix per kind of work (`--work external,job`) and the run's answer per kind |
//!
//! Layout of `results/<time>-matrix/`:
//!
//! ```text
//! matrix.json   MatrixReport: workload, faults, probes, one record per cell (with its trials
//!               and episodes), claims agreement, decision
//! matrix.csv    one row per cell
//! matrix.md     the table strategies × faults, claims agreement, decision table
//! matrix.html   heat map (damage rate per cell), claims agreement, decision table, latency
//! probes/<strategy>/                the uncontended probe's run directory (per row)
//! trials/<strategy>/<fault>/t<n>/   each trial's run directory (summary.json, checker.json, …);
//!                                   a row behind PgBouncer or on a cluster is
//!                                   `<strategy>@<setup>` (`single@cluster`)
//! ```
//!
//! Every file is written before the first trial and rewritten after each one, so a crash or a
//! Ctrl-C keeps every finished cell.

pub mod claims;
pub mod cluster_partition;
pub mod cluster_shape;
pub mod decision;
pub mod describe;
pub mod episode;
pub mod fault;
pub mod plan;
pub mod probe;
pub mod record;
pub mod run;
pub mod service;
pub mod setup;
pub mod shape;
pub mod stats;
pub mod trial;
mod trial_thread;
pub mod works;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use claims::{ClaimAgreement, ClaimSays};
pub use decision::thin::{Need, ThinEvidence};
pub use decision::{decide, decide_for, DecisionTable};
pub use episode::{EpisodeOutcome, EpisodeSpec, EpisodeTally, Exposure};
pub use fault::FaultClass;
pub use plan::{MatrixPlan, MatrixWorkload};
pub use probe::ProbeRecord;
pub use record::{CellRecord, TrialRecord, TrialStatus};
pub use run::{run_matrix, JobsRecord, MatrixProgress, MatrixRunOptions, SetAsideTrial, Shortfall};
pub use setup::{MatrixRow, PgSetup, RedisSetup};
pub use stats::{Interval, IntervalMethod};
pub use works::{WorkSection, WorksReport};

/// Where a matrix stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum MatrixStatus {
    /// Trials still running; the files are rewritten after each.
    Running,
    /// Every trial ran.
    Completed,
    /// Stopped by Ctrl-C / SIGTERM: finished cells kept, the rest `not-run`.
    Interrupted,
}

/// A fault class as the report describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultDescription {
    /// Class name.
    pub name: String,
    /// Topology name → what the fault does there (targets, timing).
    pub what: BTreeMap<String, String>,
}

/// `matrix.json`: everything the matrix measured, one record per cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixReport {
    /// `lockbench` version that wrote it.
    pub lockbench_version: String,
    /// Directory name under `results/`.
    pub run_id: String,
    /// RFC 3339 start (UTC).
    pub started_at: String,
    /// RFC 3339 end (UTC), once finished.
    pub finished_at: Option<String>,
    /// Where it stands.
    pub status: MatrixStatus,
    /// Most trials per cell (`--max-trials`; each cell's own bound is its `trials_planned`).
    pub trials: u32,
    /// The shared workload.
    pub workload: MatrixWorkload,
    /// Row labels, row order: the strategy's name, and for a PostgreSQL strategy behind a
    /// pooler `strategy · setup` ([`MatrixRow::label`]).
    pub strategies: Vec<String>,
    /// Fault classes, column order, with what each did per topology.
    pub faults: Vec<FaultDescription>,
    /// One record per row × fault the row runs ([`FaultClass::applies`]; row-major: rows,
    /// then faults); a cell's `strategy` is its row label.
    pub cells: Vec<CellRecord>,
    /// Exposed episodes wanted per cell (`--episodes`).
    #[serde(default)]
    pub episodes_wanted: u32,
    /// The uncontended probe of each strategy (row order).
    #[serde(default)]
    pub probes: Vec<ProbeRecord>,
    /// Every claim mapped to a cell of this matrix, with whether the cell agrees.
    #[serde(default)]
    pub claims: Vec<ClaimAgreement>,
    /// Cells that ended with fewer exposed episodes than wanted, and why.
    #[serde(default)]
    pub shortfalls: Vec<Shortfall>,
    /// Trials at once: asked, last, and why it backed off.
    #[serde(default)]
    pub jobs: JobsRecord,
    /// Trials left out of their cell because the harness lagged while they ran beside others.
    #[serde(default)]
    pub set_aside: Vec<SetAsideTrial>,
    /// Wall time so far (the whole run once finished), ms.
    #[serde(default)]
    pub wall_ms: u64,
    /// Exposed episodes (every cell) per minute of wall time.
    #[serde(default)]
    pub exposed_per_minute: Option<f64>,
    /// The decision table read off `cells`, `probes` and `claims`.
    pub decision: DecisionTable,
    /// Path (relative to this directory) of another report this one links, e.g. the claim
    /// scenarios' `comparison.html`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_report: Option<String>,
}

impl MatrixReport {
    /// A report with every cell `not-run`.
    pub fn new(plan: &MatrixPlan, run_id: &str) -> Self {
        let w = &plan.workload;
        let rows = plan.rows();
        let mut cells = Vec::new();
        for (row, f) in plan.cells() {
            let topology = f.topology(row);
            cells.push(CellRecord::fold(
                &row.label(),
                f.name(),
                topology.as_str(),
                &f.describe(topology, w),
                plan.trials,
                Vec::new(),
            ));
            if let Some(c) = cells.last_mut() {
                c.lease_ttl_ms = plan.lease_ttl(row, f).as_millis() as u64;
            }
        }
        let faults = plan
            .faults
            .iter()
            .map(|&f| {
                let mut what = BTreeMap::new();
                for &row in rows.iter().filter(|&&r| f.applies(r)) {
                    let t = f.topology(row);
                    what.entry(t.as_str().to_string())
                        .or_insert_with(|| f.describe(t, w));
                }
                FaultDescription {
                    name: f.name().to_string(),
                    what,
                }
            })
            .collect();
        let strategies: Vec<String> = rows.iter().map(MatrixRow::label).collect();
        let decision = decide_for(&strategies, &cells, &[], &[], &plan.workload);
        Self {
            lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
            run_id: run_id.to_string(),
            started_at: chrono::Utc::now().to_rfc3339(),
            finished_at: None,
            status: MatrixStatus::Running,
            trials: plan.trials,
            workload: plan.workload.clone(),
            strategies,
            faults,
            cells,
            episodes_wanted: 0,
            probes: Vec::new(),
            claims: Vec::new(),
            shortfalls: Vec::new(),
            jobs: JobsRecord::default(),
            set_aside: Vec::new(),
            wall_ms: 0,
            exposed_per_minute: None,
            decision,
            linked_report: None,
        }
    }

    /// The cell of `strategy × fault`.
    pub fn cell(&self, strategy: &str, fault: &str) -> Option<&CellRecord> {
        self.cells
            .iter()
            .find(|c| c.strategy == strategy && c.fault == fault)
    }

    /// Replaces one cell's trials (refolding it) and the decision table (with the claims as
    /// they stand; [`run_matrix`] recomputes the claims agreement after each trial).
    pub fn set_trials(&mut self, strategy: &str, fault: &str, trials: Vec<TrialRecord>) {
        if let Some(c) = self
            .cells
            .iter_mut()
            .find(|c| c.strategy == strategy && c.fault == fault)
        {
            let lease_ttl_ms = c.lease_ttl_ms;
            *c = CellRecord::fold(
                &c.strategy,
                &c.fault,
                &c.topology,
                &c.what,
                c.trials_planned,
                trials,
            );
            c.lease_ttl_ms = lease_ttl_ms;
        }
        self.decision = decide_for(
            &self.strategies,
            &self.cells,
            &self.probes,
            &self.claims,
            &self.workload,
        );
    }

    /// Sets the bound on one cell's trials (its `trials_planned`).
    pub fn set_bound(&mut self, strategy: &str, fault: &str, bound: u32) {
        if let Some(c) = self
            .cells
            .iter_mut()
            .find(|c| c.strategy == strategy && c.fault == fault)
        {
            c.trials_planned = bound;
        }
    }

    /// The uncontended probe of `strategy`, when it ran.
    pub fn probe(&self, strategy: &str) -> Option<&ProbeRecord> {
        self.probes
            .iter()
            .find(|p| p.strategy == strategy && p.error.is_none())
    }

    /// The claims this matrix contradicts.
    pub fn contradictions(&self) -> Vec<&ClaimAgreement> {
        self.claims
            .iter()
            .filter(|c| c.agrees == Some(false))
            .collect()
    }

    /// What makes each answer's evidence thin, cell by cell: (efficiency, correctness), read
    /// off the cells, probes and claims as the decision table's notes are
    /// ([`decision::thin`]).
    pub fn thin_evidence(&self) -> (ThinEvidence, ThinEvidence) {
        let of = |need, recommended: &[String]| {
            ThinEvidence::of(
                need,
                recommended,
                &self.strategies,
                &self.cells,
                &self.probes,
                &self.claims,
            )
        };
        (
            of(Need::Efficiency, &self.decision.efficiency.recommended),
            of(Need::Correctness, &self.decision.correctness.recommended),
        )
    }

    /// Why `strategy × fault` has fewer exposed episodes than wanted, when it does.
    pub fn shortfall(&self, strategy: &str, fault: &str) -> Option<&Shortfall> {
        self.shortfalls
            .iter()
            .find(|s| s.strategy == strategy && s.fault == fault)
    }
}
