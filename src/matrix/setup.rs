//! How a row reaches its lock service. PostgreSQL (`--pg-setups`): directly, or behind
//! PgBouncer in one of its pool modes. Redis (`--redis-setups`): the strategy's own standalone
//! topology (one node, Sentinel, five nodes), or a Redis Cluster. Every PostgreSQL strategy row
//! is repeated once per PostgreSQL setup, every single-node Redis strategy row once per Redis
//! setup, each labelled with it (`pg-advisory · pgbouncer-transaction`, `single · cluster`);
//! the other rows run once, as they are. The defaults (`direct`, `standalone`) keep the matrix
//! as it was without the options.

use serde::{Deserialize, Serialize};

use crate::strategy::{LockService, StrategyKind};
use crate::topology::{ClusterSettings, PoolMode, PoolReset, PoolerSettings, TopologyKind};

/// Server connections of the transaction pooler: fewer than the matrix's clients, as a
/// transaction pooler is deployed (many clients, few server sessions), so clients share them.
pub const TRANSACTION_POOL_SIZE: u32 = 2;

/// One way of reaching the PostgreSQL server.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PgSetup {
    /// Straight to the server, one session per client (no pooler).
    #[default]
    Direct,
    /// PgBouncer in session mode, [`crate::topology::pgbouncer::DEFAULT_POOL_SIZE`] server
    /// connections, PgBouncer's default reset (`DISCARD ALL` when a client leaves).
    PgbouncerSession,
    /// PgBouncer in session mode without a reset (`server_reset_query =`): a server
    /// connection goes back to the pool with whatever its session holds (claim 17a).
    PgbouncerSessionNoReset,
    /// PgBouncer in transaction mode with [`TRANSACTION_POOL_SIZE`] server connections.
    PgbouncerTransaction,
}

impl std::str::FromStr for PgSetup {
    type Err = String;

    /// `direct`, `pgbouncer-session`, `pgbouncer-session-no-reset` or
    /// `pgbouncer-transaction`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "PostgreSQL setup", "PostgreSQL setups")
    }
}

impl PgSetup {
    /// Its name (`pgbouncer-transaction`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The pooler of this setup's topology (`None`: direct).
    pub fn pooler(self) -> Option<PoolerSettings> {
        let session = PoolerSettings::pgbouncer(PoolMode::Session);
        Some(match self {
            PgSetup::Direct => return None,
            PgSetup::PgbouncerSession => session,
            PgSetup::PgbouncerSessionNoReset => PoolerSettings {
                reset: PoolReset::None,
                ..session
            },
            PgSetup::PgbouncerTransaction => PoolerSettings {
                pool_size: TRANSACTION_POOL_SIZE,
                ..PoolerSettings::pgbouncer(PoolMode::Transaction)
            },
        })
    }

    /// The setup in words, completing "PostgreSQL measured …".
    pub fn describe(self) -> String {
        match self.pooler() {
            None => "directly, one session per client".into(),
            Some(p) => {
                let reset = match p.reset {
                    PoolReset::None => ", no reset of returned server connections",
                    PoolReset::DiscardAll | PoolReset::Default => "",
                };
                format!(
                    "behind PgBouncer in {} mode ({} server connection(s){reset})",
                    p.pool_mode, p.pool_size
                )
            }
        }
    }

    /// The sentence the decision text carries for `setups`: "PostgreSQL measured directly,
    /// one session per client" or one clause per setup, joined.
    pub fn sentence(setups: &[PgSetup]) -> String {
        let parts: Vec<String> = setups.iter().map(|s| s.describe()).collect();
        format!("PostgreSQL measured {}", parts.join("; and "))
    }
}

/// How a single-node Redis strategy's row is deployed.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum RedisSetup {
    /// The strategy's own topology ([`TopologyKind::default_for`]): one node, Sentinel for
    /// `failover` and for `single-wait`.
    #[default]
    Standalone,
    /// A Redis Cluster (`cluster` topology: 3 shards, a primary and a replica each), the
    /// lock's key on one shard; every node fault aims at that shard's primary.
    Cluster,
}

impl std::str::FromStr for RedisSetup {
    type Err = String;

    /// `standalone` or `cluster`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "Redis setup", "Redis setups")
    }
}

impl RedisSetup {
    /// Its name (`cluster`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether `strategy` has a row per Redis setup: a Redis strategy that locks on one node
    /// (not a quorum, not an adapter), which a cluster serves on the shard of its key.
    pub fn repeats(strategy: StrategyKind) -> bool {
        strategy.service() == LockService::Redis && !strategy.is_quorum() && !strategy.is_adapter()
    }

    /// The sentence the decision text carries for the cluster rows `labels` on a cluster of
    /// `cluster`'s shape: what was measured, in words.
    pub fn cluster_sentence(labels: &[&str], cluster: &ClusterSettings) -> String {
        format!(
            "Redis Cluster measured ({}): {} shards, a primary and one replica each ({} \
             redis-server processes), cluster-node-timeout {} ms, the lock's key (and a fenced \
             strategy's counter, by hash tag) on one shard; every node fault aimed at that \
             shard's primary (its replica for the CLUSTER FAILOVER columns)",
            labels.join(", "),
            cluster.shards,
            cluster.node_count(),
            cluster.node_timeout.as_millis()
        )
    }
}

/// One row of the matrix: a strategy, how a PostgreSQL strategy reaches the server, and how a
/// single-node Redis strategy is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatrixRow {
    /// The strategy.
    pub strategy: StrategyKind,
    /// How it reaches PostgreSQL (always [`PgSetup::Direct`] for the other services).
    pub setup: PgSetup,
    /// How a Redis strategy is deployed (always [`RedisSetup::Standalone`] for the other
    /// services and for Redlock).
    #[serde(default)]
    pub redis: RedisSetup,
}

/// Between a strategy and its setup in a row label.
pub const LABEL_SEPARATOR: &str = " · ";

impl MatrixRow {
    /// `strategy` reached directly.
    pub fn direct(strategy: StrategyKind) -> Self {
        Self {
            strategy,
            setup: PgSetup::Direct,
            redis: RedisSetup::Standalone,
        }
    }

    /// `strategy` on a Redis Cluster.
    pub fn cluster(strategy: StrategyKind) -> Self {
        Self {
            redis: RedisSetup::Cluster,
            ..Self::direct(strategy)
        }
    }

    /// Whether this row runs on a Redis Cluster.
    pub fn on_cluster(&self) -> bool {
        self.redis == RedisSetup::Cluster
    }

    /// The topology the row runs on when no fault class moves it: `cluster` for a cluster
    /// row, else the strategy's own ([`TopologyKind::default_for`]).
    pub fn home_topology(&self) -> TopologyKind {
        if self.on_cluster() {
            TopologyKind::Cluster
        } else {
            TopologyKind::default_for(self.strategy)
        }
    }

    /// The setup part of the label (`pgbouncer-transaction`, `cluster`), `None` when the row
    /// is direct and standalone.
    fn setup_name(&self) -> Option<&'static str> {
        match (self.setup, self.redis) {
            (PgSetup::Direct, RedisSetup::Standalone) => None,
            (PgSetup::Direct, r) => Some(r.name()),
            (s, _) => Some(s.name()),
        }
    }

    /// The row's name in every report: the strategy's name when direct and standalone, else
    /// `strategy · setup` (`pg-advisory · pgbouncer-transaction`, `single · cluster`).
    pub fn label(&self) -> String {
        match self.setup_name() {
            None => self.strategy.to_string(),
            Some(s) => format!("{}{LABEL_SEPARATOR}{s}", self.strategy),
        }
    }

    /// The row's directory name under `trials/` and `probes/`: the strategy's name when
    /// direct and standalone, else `strategy@setup` (`single@cluster`).
    pub fn dir_name(&self) -> String {
        match self.setup_name() {
            None => self.strategy.to_string(),
            Some(s) => format!("{}@{s}", self.strategy),
        }
    }

    /// The rows of `strategies` × setups: each PostgreSQL strategy once per PostgreSQL setup
    /// (in the order of `pg`), each single-node Redis strategy ([`RedisSetup::repeats`]) once
    /// per Redis setup (in the order of `redis`), every other strategy once, direct and
    /// standalone; in the order of `strategies`.
    pub fn expand(
        strategies: &[StrategyKind],
        pg: &[PgSetup],
        redis: &[RedisSetup],
    ) -> Vec<MatrixRow> {
        let mut rows = Vec::new();
        for &strategy in strategies {
            let direct = Self::direct(strategy);
            if strategy.service() == LockService::Postgres {
                rows.extend(pg.iter().map(|&setup| MatrixRow { setup, ..direct }));
            } else if RedisSetup::repeats(strategy) {
                rows.extend(redis.iter().map(|&redis| MatrixRow { redis, ..direct }));
            } else {
                rows.push(direct);
            }
        }
        rows
    }
}

impl From<StrategyKind> for MatrixRow {
    fn from(strategy: StrategyKind) -> Self {
        Self::direct(strategy)
    }
}

impl std::fmt::Display for MatrixRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// The strategy a row label names (`pg-advisory · pgbouncer-transaction` → `pg-advisory`),
/// `None` when the label starts with no strategy name.
pub fn label_strategy(label: &str) -> Option<StrategyKind> {
    label
        .split(LABEL_SEPARATOR)
        .next()
        .and_then(|s| s.parse().ok())
}

/// The PostgreSQL setup a row label names (`direct` when it names none), `None` when the part
/// after the separator is no PostgreSQL setup.
pub fn label_setup(label: &str) -> Option<PgSetup> {
    match label.split_once(LABEL_SEPARATOR) {
        None => Some(PgSetup::Direct),
        Some((_, s)) => s.parse().ok(),
    }
}

/// The Redis setup a row label names (`standalone` when it names none), `None` when the part
/// after the separator is no Redis setup.
pub fn label_redis_setup(label: &str) -> Option<RedisSetup> {
    match label.split_once(LABEL_SEPARATOR) {
        None => Some(RedisSetup::Standalone),
        Some((_, s)) => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<PgSetup>();
        crate::variant_names::assert_names_match_serde::<RedisSetup>();
    }

    #[test]
    fn single_node_redis_rows_repeat_per_redis_setup_and_others_run_once() {
        use StrategyKind as S;
        let rows = MatrixRow::expand(
            &[
                S::Single,
                S::Redlock,
                S::SingleWait,
                S::PgAdvisory,
                S::NaiveDel,
            ],
            &[PgSetup::Direct],
            &[RedisSetup::Standalone, RedisSetup::Cluster],
        );
        let labels: Vec<String> = rows.iter().map(MatrixRow::label).collect();
        assert_eq!(
            labels,
            [
                "single",
                "single · cluster",
                "redlock",
                "single-wait",
                "single-wait · cluster",
                "pg-advisory",
                "naive-del",
                "naive-del · cluster",
            ]
        );
        assert_eq!(rows[1].dir_name(), "single@cluster");
        assert_eq!(rows[1].home_topology(), TopologyKind::Cluster);
        assert_eq!(rows[3].home_topology(), TopologyKind::Sentinel);
        for r in &rows {
            assert_eq!(label_strategy(&r.label()), Some(r.strategy));
            assert_eq!(label_redis_setup(&r.label()), Some(r.redis), "{r}");
        }
        // Cluster only: the single-node rows move, Redlock and PostgreSQL stay.
        let only = MatrixRow::expand(
            &[S::Single, S::RedlockFenced, S::EtcdLease],
            &[PgSetup::Direct],
            &[RedisSetup::Cluster],
        );
        assert_eq!(
            only,
            [
                MatrixRow::cluster(S::Single),
                MatrixRow::direct(S::RedlockFenced),
                MatrixRow::direct(S::EtcdLease)
            ]
        );
        assert_eq!(
            "sentinel".parse::<RedisSetup>().unwrap_err(),
            "unknown Redis setup `sentinel`: valid Redis setups are standalone, cluster"
        );
    }

    #[test]
    fn a_bad_setup_is_refused_listing_the_valid_ones() {
        assert_eq!(
            "pgbouncer-transaction".parse(),
            Ok(PgSetup::PgbouncerTransaction)
        );
        let err = "pgbouncer".parse::<PgSetup>().unwrap_err();
        assert_eq!(
            err,
            "unknown PostgreSQL setup `pgbouncer`: valid PostgreSQL setups are direct, \
             pgbouncer-session, pgbouncer-session-no-reset, pgbouncer-transaction"
        );
    }

    #[test]
    fn postgres_rows_repeat_per_setup_and_others_run_once() {
        use StrategyKind as S;
        let rows = MatrixRow::expand(
            &[S::Single, S::PgAdvisory, S::EtcdLease, S::PgAdvisoryXact],
            &[PgSetup::Direct, PgSetup::PgbouncerTransaction],
            &[RedisSetup::Standalone],
        );
        let labels: Vec<String> = rows.iter().map(MatrixRow::label).collect();
        assert_eq!(
            labels,
            [
                "single",
                "pg-advisory",
                "pg-advisory · pgbouncer-transaction",
                "etcd-lease",
                "pg-advisory-xact",
                "pg-advisory-xact · pgbouncer-transaction",
            ]
        );
        assert_eq!(rows[2].dir_name(), "pg-advisory@pgbouncer-transaction");
        for r in &rows {
            assert_eq!(label_strategy(&r.label()), Some(r.strategy));
            assert_eq!(label_setup(&r.label()), Some(r.setup));
        }
        // Direct only: exactly the strategies, as before the option.
        let direct = MatrixRow::expand(
            &[S::Single, S::PgAdvisory],
            &[PgSetup::Direct],
            &[RedisSetup::Standalone],
        );
        assert_eq!(
            direct,
            [
                MatrixRow::direct(S::Single),
                MatrixRow::direct(S::PgAdvisory)
            ]
        );
    }

    #[test]
    fn each_setup_is_its_pooler() {
        assert_eq!(PgSetup::Direct.pooler(), None);
        let t = PgSetup::PgbouncerTransaction.pooler().unwrap();
        assert_eq!(
            (t.pool_mode, t.pool_size, t.reset),
            (PoolMode::Transaction, 2, PoolReset::Default)
        );
        let n = PgSetup::PgbouncerSessionNoReset.pooler().unwrap();
        assert_eq!((n.pool_mode, n.reset), (PoolMode::Session, PoolReset::None));
        assert_eq!(
            PgSetup::sentence(&[PgSetup::Direct, PgSetup::PgbouncerTransaction]),
            "PostgreSQL measured directly, one session per client; and behind PgBouncer in \
             transaction mode (2 server connection(s))"
        );
    }
}
