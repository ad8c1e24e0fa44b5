//! Which strategy runs on which topology: the one place where a [`StrategyKind`] meets a
//! [`TopologyKind`] (and the [`ServerProgram`] or URL behind a node).
//!
//! The strategy says what it needs and nothing about topologies: the service it locks on
//! ([`StrategyKind::service`]), whether it takes a quorum of independent nodes
//! ([`StrategyKind::is_quorum`]) and whether it needs a primary with replicas
//! ([`StrategyKind::needs_replicas`]). The rules here turn that into a topology:
//!
//! | strategy needs | default topology | refused on |
//! |---|---|---|
//! | PostgreSQL | `postgres` | every other local topology |
//! | etcd | `etcd` | every other local topology |
//! | Redis, a quorum | `five` | `postgres`, `etcd` |
//! | Redis, replicas (`single-wait`) | `sentinel` | `single`, `five` (no replicas), `postgres`, `etcd` |
//! | Redis | `single` | `postgres`, `etcd` |
//!
//! `cluster` takes the single-key Redis strategies (one lock on the shard of the resource's
//! slot) and refuses the quorum ones (Redlock wants independent nodes, not one cluster).
//!
//! `external` takes any strategy; each of its URLs must be for the strategy's service
//! ([`check_url_serves`]).

use super::{ServerProgram, TopologyError, TopologyKind};
use crate::strategy::{LockService, StrategyKind};

impl TopologyKind {
    /// The lock service this topology runs (`None` for `external`, whose URLs decide).
    pub fn service(self) -> Option<LockService> {
        match self {
            TopologyKind::Single
            | TopologyKind::Five
            | TopologyKind::Sentinel
            | TopologyKind::Cluster => Some(LockService::Redis),
            TopologyKind::Postgres => Some(LockService::Postgres),
            TopologyKind::Etcd => Some(LockService::Etcd),
            TopologyKind::External => None,
        }
    }

    /// The local topology a strategy runs on when none is given: `five` for the quorum
    /// strategies, `sentinel` for `single-wait`, `postgres` / `etcd` for theirs, `single`
    /// otherwise.
    pub fn default_for(kind: StrategyKind) -> TopologyKind {
        match kind.service() {
            LockService::Postgres => TopologyKind::Postgres,
            LockService::Etcd => TopologyKind::Etcd,
            LockService::Redis if kind.is_quorum() => TopologyKind::Five,
            LockService::Redis if kind.needs_replicas() => TopologyKind::Sentinel,
            LockService::Redis => TopologyKind::Single,
        }
    }

    /// Checks that `kind` can lock on this topology (a Redis strategy on Redis nodes, and so
    /// on; `external` takes any, its URLs are checked with [`check_url_serves`]).
    ///
    /// # Errors
    /// [`TopologyError::WrongService`], naming the strategy, the topology and the topology to
    /// use instead.
    pub fn check_serves(self, kind: StrategyKind) -> Result<(), TopologyError> {
        match self.service() {
            Some(service) if service != kind.service() => Err(TopologyError::WrongService {
                strategy: kind.name(),
                service: kind.service().name(),
                topology: self,
                runs: service.name(),
                instead: Self::default_for(kind),
            }),
            _ => Ok(()),
        }
    }

    /// Checks that this topology has the shape `kind` needs: `single-wait` needs replicas, so
    /// it does not fit `single` or `five` (every attempt would fail with "no replica
    /// acknowledged"); `external` is allowed (the user's primary may have replicas). The
    /// `adapter:*` strategies fit `single` (`five` for a quorum library) and `external` only.
    ///
    /// # Errors
    /// [`TopologyError::AdapterShape`], [`TopologyError::QuorumOnCluster`] or
    /// [`TopologyError::NoReplicas`]: one sentence saying why not and which topology to use.
    pub fn check_shape(self, kind: StrategyKind) -> Result<(), TopologyError> {
        // The shipped adapters drive libraries that lock on one Redis node, or on a quorum of
        // independent ones.
        if kind.is_adapter() && kind != StrategyKind::AdapterCommand {
            let (fits, what) = if kind.is_quorum() {
                (TopologyKind::Five, "a quorum of independent Redis nodes")
            } else {
                (TopologyKind::Single, "one Redis node")
            };
            if self != fits && self != TopologyKind::External {
                return Err(TopologyError::AdapterShape {
                    strategy: kind.name(),
                    what,
                    topology: self,
                    fits,
                });
            }
        }
        if self == TopologyKind::Cluster && kind.is_quorum() {
            return Err(TopologyError::QuorumOnCluster(kind.name()));
        }
        if kind.needs_replicas() && matches!(self, TopologyKind::Single | TopologyKind::Five) {
            return Err(TopologyError::NoReplicas {
                strategy: kind.name(),
                topology: self,
            });
        }
        Ok(())
    }
}

impl ServerProgram {
    /// The lock service this program provides.
    pub fn service(&self) -> LockService {
        match self {
            ServerProgram::Redis => LockService::Redis,
            ServerProgram::Postgres | ServerProgram::PgBouncer(_) => LockService::Postgres,
            ServerProgram::Etcd(_) => LockService::Etcd,
        }
    }
}

/// The lock service behind a node URL: `postgres://` / `postgresql://` PostgreSQL,
/// `http://` / `https://` etcd, anything else Redis.
pub fn url_service(url: &str) -> LockService {
    LockService::of_url(url).unwrap_or(LockService::Redis)
}

/// Checks that `url` (a node of topology `external`) is for the service `kind` locks on.
///
/// # Errors
/// `the URL is for {service}, but strategy {kind} locks on {service}`.
pub fn check_url_serves(url: &str, kind: StrategyKind) -> Result<(), TopologyError> {
    let service = url_service(url);
    if service != kind.service() {
        return Err(TopologyError::WrongUrlService {
            url_service: service.name(),
            strategy: kind.name(),
            service: kind.service().name(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_wait_needs_a_topology_with_replicas() {
        use StrategyKind::*;
        let err = TopologyKind::Single
            .check_shape(SingleWait)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no replicas") && err.contains("use topology sentinel"),
            "{err}"
        );
        assert!(TopologyKind::Five.check_shape(SingleWait).is_err());
        assert!(TopologyKind::Sentinel.check_shape(SingleWait).is_ok());
        assert!(TopologyKind::Cluster.check_shape(SingleWait).is_ok());
        assert!(TopologyKind::Cluster.check_shape(Single).is_ok());
        assert!(TopologyKind::Cluster
            .check_shape(StrategyKind::Redlock)
            .unwrap_err()
            .to_string()
            .contains("use topology five"));
        assert!(TopologyKind::External.check_shape(SingleWait).is_ok());
        for &a in StrategyKind::adapters() {
            let home = TopologyKind::default_for(a);
            assert!(home.check_shape(a).is_ok(), "{a}");
            let other = if home == TopologyKind::Five {
                TopologyKind::Single
            } else {
                TopologyKind::Five
            };
            let err = other.check_shape(a).unwrap_err().to_string();
            assert!(err.contains(&format!("use topology {home}")), "{err}");
        }
        assert_eq!(
            TopologyKind::default_for(StrategyKind::AdapterPotteryRedlock),
            TopologyKind::Five
        );
        for &k in StrategyKind::all() {
            if k != SingleWait {
                assert!(TopologyKind::Single.check_shape(k).is_ok(), "{k}");
            }
        }
    }

    #[test]
    fn every_strategy_is_served_by_its_default_topology_and_refused_by_other_services() {
        for &k in StrategyKind::all() {
            let home = TopologyKind::default_for(k);
            assert_eq!(home.service(), Some(k.service()), "{k}");
            home.check_serves(k).unwrap();
            home.check_shape(k).unwrap();
            TopologyKind::External.check_serves(k).unwrap();
        }
        let err = TopologyKind::Single
            .check_serves(StrategyKind::PgAdvisory)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "strategy pg-advisory locks on postgres, but topology `single` runs redis: \
             use topology `postgres`"
        );
        assert_eq!(
            TopologyKind::default_for(StrategyKind::Redlock),
            TopologyKind::Five
        );
        assert_eq!(
            TopologyKind::default_for(StrategyKind::SingleWait),
            TopologyKind::Sentinel
        );
    }

    #[test]
    fn urls_name_their_service() {
        assert_eq!(url_service("redis://127.0.0.1:6379"), LockService::Redis);
        assert_eq!(url_service(" postgres://u@h/db"), LockService::Postgres);
        assert_eq!(url_service("http://127.0.0.1:2379"), LockService::Etcd);
        check_url_serves("http://127.0.0.1:2379", StrategyKind::EtcdLease).unwrap();
        assert_eq!(
            check_url_serves("redis://h:1", StrategyKind::PgAdvisory)
                .unwrap_err()
                .to_string(),
            "the URL is for redis, but strategy pg-advisory locks on postgres"
        );
    }
}
