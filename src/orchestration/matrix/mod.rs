//! The strategy × fault matrix (`lockbench matrix`): every selected strategy against every
//! fault class on one workload, each cell run as several trials, folded into one record per
//! cell and a decision table.
//!
//! | file | what |
//! |---|---|
//! | [`fault`] | the fault classes: topology, watchdog, what an episode does (in words) |
//! | [`shape`] | episode shapes per class × topology (aimed steps, heal, length, exposure) and a trial laid out from them |
//! | [`episode`] | fault episodes: planned, judged (exposed? damage, unsafe belief, stuck, recovery), added up |
//! | [`probe`] | the uncontended acquire probe per strategy (the efficiency rule's cost) |
//! | [`claims`] | claim scenarios mapped to cells, and whether the matrix agrees |
//! | [`plan`] | strategies × faults × trials and the shared workload; each trial's scenario |
//! | [`trial`] | one trial: the runner on the trial's test on a fresh topology, read back as a record |
//! | [`stats`] | Wilson score interval / exact one-sided bound for k of n |
//! | [`record`] | trial and cell records, and how trials fold into a cell |
//! | [`decision`] | the decision table read off the cells |
//!
//! Layout of `results/<time>-matrix/`:
//!
//! ```text
//! matrix.json   MatrixReport: workload, faults, one record per cell (with its trials), decision
//! matrix.csv    one row per cell
//! matrix.md     the table strategies × faults and the decision table
//! matrix.html   heat map, latency and throughput per cell, decision table
//! trials/<strategy>/<fault>/t<n>/   each trial's run directory (summary.json, checker.json, …)
//! ```
//!
//! Every file is written before the first trial and rewritten after each one, so a crash or a
//! Ctrl-C keeps every finished cell.

pub mod claims;
pub mod decision;
pub mod episode;
pub mod fault;
pub mod plan;
pub mod probe;
pub mod record;
pub mod shape;
pub mod stats;
pub mod trial;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use claims::{ClaimAgreement, ClaimSays};
pub use decision::{decide, DecisionTable};
pub use episode::{EpisodeOutcome, EpisodeSpec, EpisodeTally, Exposure};
pub use fault::FaultClass;
pub use plan::{MatrixPlan, MatrixWorkload};
pub use probe::ProbeRecord;
pub use record::{CellRecord, TrialRecord, TrialStatus};
pub use stats::{Interval, IntervalMethod};

use crate::orchestration::runner::{Backend, Progress};

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
    /// Trials per cell asked for.
    pub trials: u32,
    /// The shared workload.
    pub workload: MatrixWorkload,
    /// Strategy names, row order.
    pub strategies: Vec<String>,
    /// Fault classes, column order, with what each did per topology.
    pub faults: Vec<FaultDescription>,
    /// One record per strategy × fault (row-major: strategies, then faults).
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
        let mut cells = Vec::new();
        for &s in &plan.strategies {
            for &f in &plan.faults {
                let topology = f.topology(s);
                cells.push(CellRecord::fold(
                    s.name(),
                    f.name(),
                    topology.as_str(),
                    &f.describe(topology, w),
                    plan.trials,
                    Vec::new(),
                ));
            }
        }
        let faults = plan
            .faults
            .iter()
            .map(|&f| {
                let mut what = BTreeMap::new();
                for &s in &plan.strategies {
                    let t = f.topology(s);
                    what.entry(t.as_str().to_string())
                        .or_insert_with(|| f.describe(t, w));
                }
                FaultDescription {
                    name: f.name().to_string(),
                    what,
                }
            })
            .collect();
        let strategies: Vec<String> = plan.strategies.iter().map(|s| s.to_string()).collect();
        let decision = decide(&strategies, &cells, &[], &[], plan.workload.ttl);
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

    /// Replaces one cell's trials (refolding it) and the decision table.
    pub fn set_trials(&mut self, strategy: &str, fault: &str, trials: Vec<TrialRecord>) {
        if let Some(c) = self
            .cells
            .iter_mut()
            .find(|c| c.strategy == strategy && c.fault == fault)
        {
            *c = CellRecord::fold(
                &c.strategy,
                &c.fault,
                &c.topology,
                &c.what,
                c.trials_planned,
                trials,
            );
        }
        self.decision = decide(
            &self.strategies,
            &self.cells,
            &self.probes,
            &self.claims,
            self.workload.ttl,
        );
    }
}

/// What a running matrix reports, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum MatrixProgress<'a> {
    /// A trial starts.
    Trial {
        /// Strategy.
        strategy: StrategyKindName<'a>,
        /// Fault class.
        fault: FaultClass,
        /// 1-based trial number.
        trial: u32,
        /// Trials finished so far in the whole matrix.
        done: u64,
    },
    /// About once a second inside a trial: time since its start and its planned run time.
    Tick {
        /// Time since the trial's clients started.
        elapsed: Duration,
        /// Its planned run time.
        duration: Duration,
    },
    /// A trial ended and the files were rewritten.
    TrialDone {
        /// Its record.
        record: &'a TrialRecord,
        /// Trials finished so far.
        done: u64,
    },
}

/// A strategy's name (borrowed).
pub type StrategyKindName<'a> = &'a str;

/// Runs every trial of `plan`, fault class by fault class (so a partial matrix compares every
/// strategy on the faults it reached), updating `report` and calling `persist` after each
/// trial. Stops between trials (and inside one, through the chaos runner) when `shutdown`
/// flips: the report is then `interrupted`, with every finished cell kept. Every trial runs on
/// `backend` (local processes, or containers with `--backend docker`).
pub async fn run_matrix(
    plan: &MatrixPlan,
    backend: &Backend,
    matrix_dir: &Path,
    report: &mut MatrixReport,
    shutdown: watch::Receiver<bool>,
    mut persist: impl FnMut(&MatrixReport),
    mut progress: impl FnMut(MatrixProgress<'_>),
) {
    persist(report);
    let mut done = 0u64;
    'outer: for &fault in &plan.faults {
        for &strategy in &plan.strategies {
            let mut trials = Vec::new();
            for t in 1..=plan.trials {
                if *shutdown.borrow() {
                    break 'outer;
                }
                progress(MatrixProgress::Trial {
                    strategy: strategy.name(),
                    fault,
                    trial: t,
                    done,
                });
                let record = trial::run_trial(
                    plan,
                    backend,
                    trial::TrialKey {
                        strategy,
                        fault,
                        trial: t,
                    },
                    matrix_dir,
                    shutdown.clone(),
                    |e| {
                        if let Progress::Tick {
                            elapsed, duration, ..
                        } = e
                        {
                            progress(MatrixProgress::Tick {
                                elapsed,
                                duration: duration.unwrap_or_default(),
                            });
                        }
                    },
                )
                .await;
                done += 1;
                let stop = record.status == TrialStatus::Interrupted;
                trials.push(record);
                report.set_trials(strategy.name(), fault.name(), trials.clone());
                persist(report);
                progress(MatrixProgress::TrialDone {
                    record: trials.last().expect("just pushed"),
                    done,
                });
                if stop {
                    break 'outer;
                }
            }
        }
    }
    report.finished_at = Some(chrono::Utc::now().to_rfc3339());
    report.status = if *shutdown.borrow() {
        MatrixStatus::Interrupted
    } else {
        MatrixStatus::Completed
    };
    persist(report);
}
