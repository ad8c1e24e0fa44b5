//! How the matrix reaches PostgreSQL (`--pg-setups`): directly, or behind PgBouncer in one of
//! its pool modes. Every PostgreSQL strategy row is repeated once per setup and labelled with
//! it (`pg-advisory · pgbouncer-transaction`); rows of the other services are run once, as
//! they are. The default (`direct` only) keeps the matrix as it was without the option.

use serde::{Deserialize, Serialize};

use crate::strategy::{LockService, StrategyKind};
use crate::topology::{PoolMode, PoolReset, PoolerSettings};

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

/// One row of the matrix: a strategy, and for a PostgreSQL strategy how it reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatrixRow {
    /// The strategy.
    pub strategy: StrategyKind,
    /// How it reaches PostgreSQL (always [`PgSetup::Direct`] for the other services).
    pub setup: PgSetup,
}

/// Between a strategy and its setup in a row label.
pub const LABEL_SEPARATOR: &str = " · ";

impl MatrixRow {
    /// `strategy` reached directly.
    pub fn direct(strategy: StrategyKind) -> Self {
        Self {
            strategy,
            setup: PgSetup::Direct,
        }
    }

    /// The row's name in every report: the strategy's name when direct, else
    /// `strategy · setup` (`pg-advisory · pgbouncer-transaction`).
    pub fn label(&self) -> String {
        match self.setup {
            PgSetup::Direct => self.strategy.to_string(),
            s => format!("{}{LABEL_SEPARATOR}{s}", self.strategy),
        }
    }

    /// The row's directory name under `trials/` and `probes/`: the strategy's name when
    /// direct, else `strategy@setup`.
    pub fn dir_name(&self) -> String {
        match self.setup {
            PgSetup::Direct => self.strategy.to_string(),
            s => format!("{}@{s}", self.strategy),
        }
    }

    /// The rows of `strategies` × `setups`: each PostgreSQL strategy once per setup (in the
    /// order of `setups`), every other strategy once, direct; in the order of `strategies`.
    pub fn expand(strategies: &[StrategyKind], setups: &[PgSetup]) -> Vec<MatrixRow> {
        let mut rows = Vec::new();
        for &strategy in strategies {
            if strategy.service() == LockService::Postgres {
                rows.extend(setups.iter().map(|&setup| MatrixRow { strategy, setup }));
            } else {
                rows.push(Self::direct(strategy));
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

/// The setup a row label names (`direct` when it names none), `None` when the part after the
/// separator is no setup.
pub fn label_setup(label: &str) -> Option<PgSetup> {
    match label.split_once(LABEL_SEPARATOR) {
        None => Some(PgSetup::Direct),
        Some((_, s)) => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<PgSetup>();
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
        let direct = MatrixRow::expand(&[S::Single, S::PgAdvisory], &[PgSetup::Direct]);
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
