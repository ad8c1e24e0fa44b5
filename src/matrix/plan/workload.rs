//! The workload every cell of a matrix shares: its presets (`standard`, `--quick`), the
//! episodes a trial plans, and its own check.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::driver::{HoldTime, WorkKind};
use crate::matrix::cluster_shape;
use crate::matrix::episode::Exposure;

/// The workload shared by every cell of a matrix. Durations are serialized as ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixWorkload {
    /// Concurrent clients per trial (a `client-crash` trial adds one fresh client per crashed
    /// holder, see [`shape::trial`](crate::matrix::shape::trial)).
    pub clients: u32,
    /// Distinct resources (fewer = more contention).
    pub resources: u32,
    /// Time inside the critical section.
    pub hold: HoldTime,
    /// Lease TTL (etcd rounds it up to whole seconds, see [`shape::lease_ttl`](crate::matrix::shape::lease_ttl)).
    #[serde(with = "crate::duration_ms")]
    pub ttl: Duration,
    /// Seed of trial 1; trial `t` uses `seed + t − 1`.
    pub seed: u64,
    /// Delay between acquire attempts (jitter: half of it, set explicitly in each trial's
    /// scenario).
    #[serde(with = "crate::duration_ms")]
    pub retry_delay: Duration,
    /// Give up one acquire after this long (retries included).
    #[serde(with = "crate::duration_ms")]
    pub acquire_timeout: Duration,
    /// Per-node operation timeout: TTL/4 (the strategies' own default is TTL/10): a loaded
    /// 2-core machine misses a few tens of ms now and then, and each miss is an unknown
    /// acquire whose key then blocks the resource for a whole TTL.
    #[serde(with = "crate::duration_ms")]
    pub node_timeout: Duration,
    /// Exposed episodes wanted per cell (`--episodes`): trials run until a cell has them or
    /// `max_trials` ran. 30 exposed episodes without damage bound the damage rate below 10 %
    /// (95 %).
    #[serde(default = "default_episodes")]
    pub episodes: u32,
    /// Most trials per cell (`--max-trials`).
    #[serde(default = "default_max_trials")]
    pub max_trials: u32,
    /// `cluster-node-timeout` of the cluster rows' Redis Cluster (`--cluster-node-timeout`):
    /// a primary unreachable that long is marked failing and its replica promoted.
    #[serde(default = "default_cluster_node_timeout", with = "crate::duration_ms")]
    pub cluster_node_timeout: Duration,
    /// What each critical section of every trial protects (`--work`; default `row`): with
    /// `external`, each section also charges its job at the side-effect sink, and the decision
    /// answers for that work ([`crate::matrix::decision`]).
    #[serde(default)]
    pub work: WorkKind,
    /// `external` work: every call carries the job's idempotency key (`--idempotency-key`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotency_key: bool,
}

/// A kind of work in words, as the reports name it: `external work`, `job work with
/// idempotency keys` (`keyed`: every call to the sink carries one).
pub fn work_title(work: WorkKind, keyed: bool) -> String {
    if keyed {
        format!("{work} work with idempotency keys")
    } else {
        format!("{work} work")
    }
}

fn default_cluster_node_timeout() -> Duration {
    cluster_shape::DEFAULT_NODE_TIMEOUT
}

fn default_episodes() -> u32 {
    MatrixWorkload::standard().episodes
}

fn default_max_trials() -> u32 {
    MatrixWorkload::standard().max_trials
}

impl MatrixWorkload {
    /// The workload in one line for people: `4 clients, 1 resource, hold 50 ms, TTL 500 ms, …`.
    pub fn describe(&self) -> String {
        let hold = match self.hold {
            HoldTime::Fixed(d) => format!("{} ms", d.as_millis()),
            HoldTime::Range { min, max } => format!("{}–{} ms", min.as_millis(), max.as_millis()),
        };
        let work = match self.work {
            WorkKind::Row => String::new(),
            w => format!(", {}", work_title(w, self.idempotency_key)),
        };
        format!(
            "{} clients, {} resource(s), hold {hold}, TTL {} ms (etcd: whole seconds), node timeout {} ms, \
             acquire timeout {} ms, {} exposed episodes wanted per cell (at most {} trials), seed {} (+ trial − 1){work}",
            self.clients,
            self.resources,
            self.ttl.as_millis(),
            self.node_timeout.as_millis(),
            self.acquire_timeout.as_millis(),
            self.episodes,
            self.max_trials,
            self.seed
        )
    }

    /// The default: 4 clients on 1 resource (3 always waiting, so a lease is live almost all
    /// the time and every episode finds a holder within a few ms), hold 50 ms, TTL 500 ms
    /// (every episode lasts 0.5–2.5 TTL), node timeout 125 ms, 30 exposed episodes per cell.
    pub fn standard() -> Self {
        Self {
            clients: 4,
            resources: 1,
            hold: HoldTime::Fixed(Duration::from_millis(50)),
            ttl: Duration::from_millis(500),
            seed: 1,
            retry_delay: Duration::from_millis(10),
            acquire_timeout: Duration::from_secs(1),
            node_timeout: Duration::from_millis(125),
            episodes: 30,
            max_trials: 40,
            cluster_node_timeout: cluster_shape::DEFAULT_NODE_TIMEOUT,
            work: WorkKind::Row,
            idempotency_key: false,
        }
    }

    /// `--quick`: the same workload, 10 exposed episodes per cell.
    pub fn quick() -> Self {
        Self {
            episodes: 10,
            max_trials: 15,
            ..Self::standard()
        }
    }

    /// Episodes planned per trial whose episodes must meet `exposure` (before the per-strategy
    /// exceptions of [`MatrixPlan::episodes_per_trial`](super::MatrixPlan::episodes_per_trial)): the exposed episodes wanted plus a
    /// margin for the few that meet nothing. Aimed episodes wait for a holder, so nearly all
    /// of them are exposed (every one of 12 in each claim cell measured); a baseline period counts only when a lease is live at its start
    /// (about 4 in 5 of them), so baselines get a third more.
    pub fn episodes_per_trial(&self, exposure: Exposure) -> u32 {
        let wanted = self.episodes.max(1);
        if exposure == Exposure::Baseline {
            wanted + wanted / 3 + 2
        } else {
            wanted + wanted / 20 + 1
        }
    }

    /// Checks that the aimed episodes fit the workload.
    ///
    /// # Errors
    /// One sentence naming the flag to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.clients < 2 {
            return Err(
                "--clients must be at least 2 (an episode aims at the holder while others contend)"
                    .into(),
            );
        }
        if self.resources < 1 {
            return Err("--resources must be at least 1".into());
        }
        if self.ttl < Duration::from_millis(100) {
            return Err(
                "--ttl must be at least 100ms (fault windows and stretches are fractions of it)"
                    .into(),
            );
        }
        if self.hold.max() * 4 > self.ttl {
            return Err(format!(
                "--hold {} is too long for --ttl {}: the aimed episodes keep the holder inside half a TTL past its hold, \
                 which must stay inside its lease, so the hold must be at most a quarter of the TTL ({} ms)",
                humantime::format_duration(self.hold.max()),
                humantime::format_duration(self.ttl),
                (self.ttl / 4).as_millis()
            ));
        }
        if self.node_timeout.is_zero() || self.node_timeout * 2 > self.ttl {
            return Err(format!(
                "the node timeout ({} ms) must be above 0 and at most half of --ttl",
                self.node_timeout.as_millis()
            ));
        }
        if self.episodes == 0 {
            return Err("--episodes must be at least 1".into());
        }
        if self.max_trials == 0 {
            return Err("--max-trials must be at least 1".into());
        }
        Ok(())
    }
}
