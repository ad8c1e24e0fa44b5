//! The plan of `lockbench matrix` and how to run it, from defaults (or `--quick`), then
//! `matrix.toml` (`--config`), then flags; validated before anything starts.

use std::time::Duration;

use serde::Deserialize;

use lockbench::driver::WorkKind;
use lockbench::matrix::run::default_trial_bound;
use lockbench::matrix::{
    FaultClass, MatrixPlan, MatrixRunOptions, MatrixWorkload, PgSetup, RedisSetup,
};
use lockbench::orchestration::runner::Backend;
use lockbench::strategy::StrategyKind;

use super::MatrixArgs;
use crate::cli::args::positive_duration;

/// `matrix.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    strategies: Option<Vec<String>>,
    faults: Option<Vec<String>>,
    pg_setups: Option<Vec<String>>,
    redis_setups: Option<Vec<String>>,
    cluster_node_timeout: Option<String>,
    episodes: Option<u32>,
    #[serde(alias = "trials")]
    max_trials: Option<u32>,
    jobs: Option<u32>,
    clients: Option<u32>,
    resources: Option<u32>,
    hold: Option<String>,
    ttl: Option<String>,
    seed: Option<u64>,
    work: Option<String>,
    idempotency_key: Option<bool>,
}

/// Exposed episodes per cell by default (`< 10 %` at 95 % when none is damaging).
pub const DEFAULT_EPISODES: u32 = 30;
/// Exposed episodes per cell with `--quick`.
pub const QUICK_EPISODES: u32 = 10;

/// Trials at once by default: 4 when the machine has 2 cores or more, else 1. A trial's 4
/// clients hold a lock most of the time and its nodes and proxy mostly wait (a trial uses a
/// few % of a core between its topology's start and its check), so 4 at once fit on 2 cores;
/// the matrix steps down one at a time whenever a trial's harness lags.
fn default_jobs() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 {
        4
    } else {
        1
    }
}

/// The columns without `--faults` (or `faults` in matrix.toml): every class, and the cluster
/// columns too when a cluster row runs them.
pub(super) fn default_faults(cluster: bool) -> Vec<FaultClass> {
    let cluster_columns = if cluster {
        &FaultClass::CLUSTER[..]
    } else {
        &[]
    };
    FaultClass::ALL
        .into_iter()
        .chain(cluster_columns.iter().copied())
        .collect()
}

/// The rows of a plan: strategies (in row order), PostgreSQL setups, Redis setups.
type Rows = (Vec<StrategyKind>, Vec<PgSetup>, Vec<RedisSetup>);

impl MatrixArgs {
    /// The plan and how to run it, for a matrix of one kind of work (the first of `--work`).
    #[cfg(test)]
    pub(super) fn plan(&self, backend: Backend) -> Result<(MatrixPlan, MatrixRunOptions), String> {
        let mut plans = self.plans(backend)?;
        Ok(plans.remove(0))
    }

    /// One plan per kind of work (`--work row,external,job`, in that order; one plan when one
    /// kind or none is named), each with how to run it: defaults (or --quick), then
    /// matrix.toml, then flags; validated. With several kinds, a row runs on each kind it
    /// serves: a claim strategy (`claim-update`) on `job` only.
    pub(super) fn plans(
        &self,
        backend: Backend,
    ) -> Result<Vec<(MatrixPlan, MatrixRunOptions)>, String> {
        let file = self.file()?;
        let works = self.works(&file)?;
        let several = works.len() > 1;
        if several && !works.contains(&WorkKind::Job) {
            let (strategies, ..) = self.rows(&file, WorkKind::Job, false)?;
            if let Some(s) = strategies.iter().find(|s| s.is_claim()) {
                return Err(format!(
                    "--work {}: strategy {s} takes a job from its jobs table, so it serves job \
                     work only (add job to --work)",
                    works
                        .iter()
                        .map(|w| w.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
        }
        works
            .into_iter()
            .map(|work| {
                self.plan_for(&file, work, several, backend.clone())
                    .map_err(|e| {
                        if several {
                            format!("--work {work}: {e}")
                        } else {
                            e
                        }
                    })
            })
            .collect()
    }

    /// The kinds of work: `--work`, else matrix.toml's `work` (comma-separated), else `row`;
    /// each once, in the order given.
    fn works(&self, file: &MatrixFile) -> Result<Vec<WorkKind>, String> {
        let named = match (&self.work, &file.work) {
            (Some(w), _) => w.clone(),
            (None, Some(w)) => w
                .split(',')
                .map(|k| crate::cli::args::work_kind(k.trim()).map_err(|e| self.in_file("work", e)))
                .collect::<Result<_, _>>()?,
            (None, None) => vec![WorkKind::Row],
        };
        let mut works = Vec::new();
        for w in named {
            if !works.contains(&w) {
                works.push(w);
            }
        }
        if works.is_empty() {
            return Err(self.in_file("work", "names no kind of work".into()));
        }
        Ok(works)
    }

    /// The plan of one kind of work; `several`: one of several kinds, where a strategy that
    /// cannot serve `work` is left out of it instead of refused.
    fn plan_for(
        &self,
        file: &MatrixFile,
        work: WorkKind,
        several: bool,
        backend: Backend,
    ) -> Result<(MatrixPlan, MatrixRunOptions), String> {
        let (strategies, pg_setups, redis_setups) = self.rows(file, work, several)?;
        let faults = match (&self.faults, &file.faults) {
            (Some(f), _) => f.clone(),
            (None, Some(f)) => f
                .iter()
                .map(|n| {
                    n.parse::<FaultClass>()
                        .map_err(|e| self.in_file("faults", e))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => default_faults(redis_setups.contains(&RedisSetup::Cluster)),
        };
        let mut w = self.workload(file, work)?;
        if several && !work.calls_sink() {
            // The key is carried by the call to the sink: the kinds that make none run without.
            w.idempotency_key = false;
        }
        let episodes = self.episodes.or(file.episodes).unwrap_or(if self.quick {
            QUICK_EPISODES
        } else {
            DEFAULT_EPISODES
        });
        if episodes == 0 {
            return Err(self.in_file("episodes", "must be at least 1".into()));
        }
        let jobs = self.jobs.or(file.jobs).unwrap_or_else(default_jobs);
        if !(1..=16).contains(&jobs) {
            return Err(self.in_file("jobs", format!("{jobs}: must be 1 to 16")));
        }
        let max_trials = self.max_trials.or(file.max_trials);
        if max_trials == Some(0) {
            return Err(self.in_file("max_trials", "must be at least 1".into()));
        }
        w.episodes = episodes;
        let mut plan = MatrixPlan {
            pg_setups,
            workers: self.coordinator.spec()?,
            redis_setups,
            ..MatrixPlan::new(strategies, faults, 1, w)
        };
        // The plan's trial count is the largest bound of any cell (what the header promises).
        plan.trials = max_trials.unwrap_or_else(|| {
            plan.cells()
                .into_iter()
                .map(|(r, f)| default_trial_bound(plan.episode_specs(r, f).len(), episodes))
                .max()
                .unwrap_or(1)
        });
        // The workload carries the bound too (its own check needs it to reach the episodes).
        plan.workload.max_trials = plan.trials;
        plan.validate()?;
        Ok((
            plan,
            MatrixRunOptions {
                backend,
                episodes_wanted: episodes,
                max_trials,
                jobs,
                metrics: None,
                ledger: self.coordinator.ledger.clone(),
            },
        ))
    }

    /// `matrix.toml` (`--config`), or every key unset.
    fn file(&self) -> Result<MatrixFile, String> {
        Ok(match &self.config {
            None => MatrixFile::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("{}: cannot read: {e}", p.display()))?;
                toml::from_str(&text)
                    .map_err(|e| format!("{}: {}", p.display(), e.message().trim()))?
            }
        })
    }

    /// A problem with the key `what`, naming `matrix.toml` when there is one.
    fn in_file(&self, what: &str, e: String) -> String {
        match &self.config {
            Some(p) => format!("{}: {what}: {e}", p.display()),
            None => e,
        }
    }

    /// A duration key of `matrix.toml`, when set.
    fn file_duration(&self, v: &Option<String>, what: &str) -> Result<Option<Duration>, String> {
        v.as_deref()
            .map(|s| positive_duration(s).map_err(|e| self.in_file(what, format!("{s:?} {e}"))))
            .transpose()
    }

    /// The rows: the strategies (with `--controls` added), the PostgreSQL setups and the
    /// Redis setups.
    fn rows(&self, file: &MatrixFile, work: WorkKind, several: bool) -> Result<Rows, String> {
        // `job` work adds the lock-free alternatives to the default rows (and a control).
        let job = work == WorkKind::Job;
        let strategies = match (&self.strategies, &file.strategies) {
            (Some(s), _) => s.clone(),
            (None, Some(s)) => s
                .iter()
                .map(|n| {
                    n.parse::<StrategyKind>()
                        .map_err(|e| self.in_file("strategies", e.to_string()))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => MatrixPlan::STRATEGIES
                .into_iter()
                .chain(MatrixPlan::ALTERNATIVES)
                .chain(job.then_some(StrategyKind::ClaimUpdate))
                .chain(job.then_some(StrategyKind::ClaimSkipLocked))
                .collect(),
        };
        let mut strategies = strategies;
        if several && !job {
            // A claim takes a job from its jobs table: it runs in the job matrix only.
            strategies.retain(|s| !s.is_claim());
            if strategies.is_empty() {
                return Err(format!(
                    "no strategy serves {work} work (a claim strategy serves job work only)"
                ));
            }
        }
        if self.controls {
            let unguarded = job.then_some(StrategyKind::ClaimUpdateUnguarded);
            for c in MatrixPlan::CONTROLS.into_iter().chain(unguarded) {
                if !strategies.contains(&c) {
                    strategies.push(c);
                }
            }
        }
        let pg_setups = match (&self.pg_setups, &file.pg_setups) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => p
                .iter()
                .map(|n| {
                    n.parse::<PgSetup>()
                        .map_err(|e| self.in_file("pg_setups", e))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => vec![PgSetup::Direct],
        };
        let redis_setups = match (&self.redis_setups, &file.redis_setups) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => p
                .iter()
                .map(|n| {
                    n.parse::<RedisSetup>()
                        .map_err(|e| self.in_file("redis_setups", e))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => vec![RedisSetup::Standalone],
        };
        Ok((strategies, pg_setups, redis_setups))
    }

    /// The shared workload: the standard one (or `--quick`'s), then `matrix.toml`, then the
    /// flags (the episodes wanted and the bound on trials are the caller's).
    fn workload(&self, file: &MatrixFile, work: WorkKind) -> Result<MatrixWorkload, String> {
        let mut w = if self.quick {
            MatrixWorkload::quick()
        } else {
            MatrixWorkload::standard()
        };
        if let Some(v) = self
            .cluster_node_timeout
            .or(self.file_duration(&file.cluster_node_timeout, "cluster_node_timeout")?)
        {
            w.cluster_node_timeout = v;
        }
        if let Some(v) = self.clients.or(file.clients) {
            w.clients = v;
        }
        if let Some(v) = self.resources.or(file.resources) {
            w.resources = v;
        }
        if let Some(h) = self.hold {
            w.hold = h;
        } else if let Some(h) = &file.hold {
            w.hold = h
                .parse()
                .map_err(|e| self.in_file("hold", format!("{h:?}: {e}")))?;
        }
        if let Some(v) = self.ttl.or(self.file_duration(&file.ttl, "ttl")?) {
            w.ttl = v;
            // Keep the acquire timeout two TTLs and the node timeout a quarter, as by default.
            w.acquire_timeout = v * 2;
            w.node_timeout = v / 4;
        }
        if let Some(v) = self.seed.or(file.seed) {
            w.seed = v;
        }
        w.work = work;
        w.idempotency_key = self.idempotency_key || file.idempotency_key.unwrap_or(false);
        Ok(w)
    }
}
