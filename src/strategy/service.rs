//! The lock services: the kinds of server a strategy locks on, and what each one is called
//! and reached by.
//!
//! This is the first of a service's registrations; each later layer keeps its own facts about
//! a service in one place, keyed by [`LockService`], and every one matches on it without a
//! wildcard, so a new service is refused by the compiler until each is written:
//!
//! | layer | registration | what it says |
//! |---|---|---|
//! | strategy | [`LockService::spec`] (here) | name, URL schemes, the backend file that acquires and releases |
//! | strategy | `Backend::connect` (`strategy/backend.rs`) | the connection each client holds |
//! | topology | `TopologyKind::service`, `TopologyKind::default_for` (`topology/pairing.rs`) | which local topologies run it, the one a strategy gets by default |
//! | topology | `ServerProgram` (`topology/program.rs`), `non_redis_program` (`topology/external.rs`) | the server it starts, the program behind a URL |
//! | topology | `Topology::start_local` (`topology/start.rs`) | how each of its local topologies starts (one arm per topology) |
//! | matrix | `matrix::service::shape` (`matrix/service/`) | where an episode's faults land, how long its nodes take to come back, how its faults read in the report |
//!
//! `tests/lock_service_registry.rs` checks that every service is complete in each of them.

/// The kind of server a strategy locks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockService {
    /// Redis nodes (`single`, `five`, `sentinel`, `cluster` topologies, or `redis://` URLs).
    Redis,
    /// A PostgreSQL server (`postgres` topology, or a `postgres://` URL).
    Postgres,
    /// An etcd cluster (`etcd` topology, or `http://` client URLs).
    Etcd,
}

/// What a lock service is called and reached by ([`LockService::spec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The kebab-case name (`redis`, `postgres`, `etcd`), as in results and messages.
    pub name: &'static str,
    /// The URL schemes of its nodes, without `://` (`redis`, `rediss`; `postgres`,
    /// `postgresql`; `http`, `https`): an `external` URL with one of them is for this service.
    pub url_schemes: &'static [&'static str],
    /// The file, under `src/strategy/`, whose backend acquires and releases on it.
    pub backend_file: &'static str,
}

impl LockService {
    /// Every service, in display order.
    pub const ALL: [LockService; 3] =
        [LockService::Redis, LockService::Postgres, LockService::Etcd];

    /// The service's registration in this layer: its name, URL schemes and backend file.
    pub fn spec(self) -> ServiceSpec {
        match self {
            LockService::Redis => ServiceSpec {
                name: "redis",
                url_schemes: &["redis", "rediss"],
                backend_file: "redis.rs",
            },
            LockService::Postgres => ServiceSpec {
                name: "postgres",
                url_schemes: &["postgres", "postgresql"],
                backend_file: "postgres.rs",
            },
            LockService::Etcd => ServiceSpec {
                name: "etcd",
                url_schemes: &["http", "https"],
                backend_file: "etcd.rs",
            },
        }
    }

    /// The kebab-case name (`redis`, `postgres`, `etcd`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The service a node URL is for, by its scheme ([`ServiceSpec::url_schemes`]); `None` for
    /// a scheme no service has (a URL with no scheme among them).
    pub fn of_url(url: &str) -> Option<LockService> {
        let scheme = url.trim().split_once("://")?.0;
        Self::ALL
            .into_iter()
            .find(|s| s.spec().url_schemes.contains(&scheme))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_service_by_scheme() {
        assert_eq!(
            LockService::of_url("redis://127.0.0.1:6379"),
            Some(LockService::Redis)
        );
        assert_eq!(
            LockService::of_url("rediss://h:1"),
            Some(LockService::Redis)
        );
        assert_eq!(
            LockService::of_url(" postgresql://u@h/db"),
            Some(LockService::Postgres)
        );
        assert_eq!(
            LockService::of_url("https://h:2379"),
            Some(LockService::Etcd)
        );
        assert_eq!(LockService::of_url("unix:///tmp/redis.sock"), None);
        assert_eq!(LockService::of_url("127.0.0.1:6379"), None);
    }

    #[test]
    fn names_and_schemes_are_distinct() {
        let mut names: Vec<_> = LockService::ALL.iter().map(|s| s.name()).collect();
        names.dedup();
        assert_eq!(names, ["redis", "postgres", "etcd"]);
        let mut schemes: Vec<_> = LockService::ALL
            .iter()
            .flat_map(|s| s.spec().url_schemes.iter().copied())
            .collect();
        let n = schemes.len();
        schemes.sort_unstable();
        schemes.dedup();
        assert_eq!(schemes.len(), n, "a scheme belongs to one service");
    }
}
