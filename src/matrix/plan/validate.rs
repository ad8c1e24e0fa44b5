//! The plan's check before anything starts: what was asked, the workload, the cluster's
//! settings and every trial's scenario.

use super::MatrixPlan;
use crate::matrix::fault::FaultClass;
use crate::matrix::setup::MatrixRow;
use crate::orchestration::scenario::validate;

impl MatrixPlan {
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
        if self.pg_setups.is_empty() {
            return Err("--pg-setups needs at least one PostgreSQL setup (e.g. direct)".into());
        }
        for (i, p) in self.pg_setups.iter().enumerate() {
            if self.pg_setups[..i].contains(p) {
                return Err(format!("PostgreSQL setup {p} is listed twice"));
            }
        }
        if self.redis_setups.is_empty() {
            return Err("--redis-setups needs at least one Redis setup (e.g. standalone)".into());
        }
        for (i, r) in self.redis_setups.iter().enumerate() {
            if self.redis_setups[..i].contains(r) {
                return Err(format!("Redis setup {r} is listed twice"));
            }
        }
        self.validate_cluster()?;
        self.workload.validate()?;
        for (row, f) in self.cells() {
            let per = self.episodes_per_trial(row, f);
            if per * self.workload.max_trials < self.workload.episodes {
                return Err(format!(
                    "--max-trials {} cannot reach --episodes {} in {row} × {f} ({per} episode(s) per trial): \
                     raise --max-trials to at least {}",
                    self.workload.max_trials,
                    self.workload.episodes,
                    self.workload.episodes.div_ceil(per)
                ));
            }
            let scenario = self.scenario(row, f, 1);
            validate::validate(&scenario)
                .map_err(|(_, message)| format!("{row} × {f}: {message}"))?;
        }
        Ok(())
    }

    /// The cluster's part of [`MatrixPlan::validate`]: a cluster column needs a cluster row,
    /// and the node timeout must outlast `node-pause`'s pause of the primary (6/5 TTL), or
    /// that column would fail the shard over.
    fn validate_cluster(&self) -> Result<(), String> {
        let rows = self.rows();
        let clustered = rows.iter().any(MatrixRow::on_cluster);
        if let Some(f) = self.faults.iter().find(|f| f.cluster_only()) {
            if !clustered {
                return Err(format!(
                    "fault class {f} runs only on Redis Cluster rows: add --redis-setups cluster (with a \
                     single-node Redis strategy such as single) or leave {f} out"
                ));
            }
        }
        if !clustered {
            return Ok(());
        }
        let nt = self.workload.cluster_node_timeout;
        self.cluster()
            .validate()
            .map_err(|e| format!("--cluster-node-timeout: {e}"))?;
        let pause = self.workload.ttl * 6 / 5;
        if self.faults.contains(&FaultClass::NodePause) && nt <= pause {
            return Err(format!(
                "--cluster-node-timeout {} ms must be longer than node-pause's pause of the primary (6/5 of --ttl: {} ms), \
                 or that column would fail the shard over (cluster-pause is the column that does)",
                nt.as_millis(),
                pause.as_millis()
            ));
        }
        Ok(())
    }
}
