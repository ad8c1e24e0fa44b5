//! PgBouncer in front of the `postgres` topology's server (`--pooler pgbouncer`).
//!
//! Debian's `pgbouncer` binary runs as one more [`super::LocalNode`] (`pooler`), a direct child
//! tracked by the [`super::reaper`] like the servers, so it is stopped on every exit path. Its
//! directory holds `pgbouncer.ini` and `userlist.txt`, written by lockbench before each launch,
//! and `stdio.log` (PgBouncer logs to stderr). It listens on 127.0.0.1 (TCP only) and forwards
//! database `postgres` to the server as user `lockbench` (trust authentication on both hops,
//! as the server lockbench starts uses).
//!
//! | setting | values | PgBouncer key |
//! |---|---|---|
//! | pool mode | `session` (a client keeps one server connection until it disconnects), `transaction` (a server connection per transaction) | `pool_mode` |
//! | pool size | server connections per user and database, ≥ 1 | `default_pool_size` |
//! | reset | `default` (PgBouncer's own: `DISCARD ALL` when a session-mode client disconnects, nothing in transaction mode), `discard-all` (`DISCARD ALL` whenever a server connection goes back to the pool, in both modes), `none` (nothing: a returned server connection keeps its session, advisory locks included) | `server_reset_query`, `server_reset_query_always` |
//!
//! `DISCARD ALL` frees the advisory locks the session holds (it runs
//! `pg_advisory_unlock_all()`, PostgreSQL manual, "DISCARD"). Source: PgBouncer documentation,
//! "Configuration" (`pool_mode`, `default_pool_size`, `server_reset_query`,
//! `server_reset_query_always`).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::TopologyError;

/// How PgBouncer hands server connections to clients.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PoolMode {
    /// A server connection per client connection, returned when the client disconnects.
    Session,
    /// A server connection per transaction (each statement outside one is its own).
    #[default]
    Transaction,
}

impl std::str::FromStr for PoolMode {
    type Err = String;

    /// `session` or `transaction`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "pool mode", "pool modes")
    }
}

/// What PgBouncer runs on a server connection it takes back into the pool.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PoolReset {
    /// PgBouncer's default: `server_reset_query = DISCARD ALL`, run only when a session-mode
    /// client disconnects (`server_reset_query_always = 0`); transaction mode resets nothing.
    #[default]
    Default,
    /// `DISCARD ALL` every time a server connection goes back to the pool, in both modes
    /// (`server_reset_query_always = 1`): no session state, advisory locks included, outlives
    /// the client (session mode) or the transaction (transaction mode) that left it.
    DiscardAll,
    /// No reset (`server_reset_query =` empty): a server connection goes back to the pool with
    /// its session as the last client left it, advisory locks included, and the next client
    /// handed that connection inherits them.
    None,
}

impl PoolReset {
    /// The `pgbouncer.ini` lines: `server_reset_query` and `server_reset_query_always`.
    fn ini_lines(self) -> &'static str {
        match self {
            PoolReset::Default => {
                "server_reset_query = DISCARD ALL\nserver_reset_query_always = 0\n"
            }
            PoolReset::DiscardAll => {
                "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n"
            }
            PoolReset::None => "server_reset_query =\nserver_reset_query_always = 0\n",
        }
    }
}

impl std::str::FromStr for PoolReset {
    type Err = String;

    /// `default`, `discard-all` or `none`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "pooler reset", "pooler resets")
    }
}

/// The pooler between the clients and the `postgres` topology's server.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PoolerKind {
    /// PgBouncer.
    Pgbouncer,
}

impl std::str::FromStr for PoolerKind {
    type Err = String;

    /// `pgbouncer`.
    ///
    /// # Errors
    /// A message listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::variant_names::parse_named(s, "pooler", "poolers")
    }
}

/// A pooler in front of the server: which one, its pool mode and its pool size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolerSettings {
    /// Which pooler.
    pub kind: PoolerKind,
    /// Session or transaction pooling.
    #[serde(default)]
    pub pool_mode: PoolMode,
    /// Server connections PgBouncer opens at most (per user and database), ≥ 1.
    #[serde(default = "default_pool_size")]
    pub pool_size: u32,
    /// What PgBouncer runs on a server connection it takes back (default: its own default).
    #[serde(default)]
    pub reset: PoolReset,
}

/// PgBouncer's own default `default_pool_size`.
pub const DEFAULT_POOL_SIZE: u32 = 20;

fn default_pool_size() -> u32 {
    DEFAULT_POOL_SIZE
}

impl PoolerSettings {
    /// PgBouncer in `mode` with [`DEFAULT_POOL_SIZE`] server connections.
    pub fn pgbouncer(pool_mode: PoolMode) -> Self {
        Self {
            kind: PoolerKind::Pgbouncer,
            pool_mode,
            pool_size: DEFAULT_POOL_SIZE,
            reset: PoolReset::Default,
        }
    }

    /// Checks the values a parser accepts but PgBouncer would not.
    ///
    /// # Errors
    /// [`TopologyError::PoolSize`](crate::topology::TopologyError::PoolSize) for a pool of 0.
    pub fn validate(&self) -> Result<(), crate::topology::TopologyError> {
        if self.pool_size == 0 {
            return Err(crate::topology::TopologyError::PoolSize);
        }
        Ok(())
    }
}

/// PgBouncer as one local node: its settings and the server it forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBouncerNode {
    /// Pool mode and size.
    pub settings: PoolerSettings,
    /// `host:port` of the server (or of the proxy in front of it).
    pub server: String,
}

/// The files of a PgBouncer listening on 127.0.0.1:`port`: `pgbouncer.ini` and
/// `userlist.txt` in `dir`.
///
/// # Errors
/// [`TopologyError::Io`] when a file cannot be written; [`TopologyError::ProxyTarget`] when
/// `node.server` is not `host:port`.
pub fn write_files(node: &PgBouncerNode, dir: &Path, port: u16) -> Result<(), TopologyError> {
    let users = dir.join("userlist.txt");
    fs::write(&users, "\"lockbench\" \"\"\n")
        .map_err(|e| TopologyError::io(format!("writing {}", users.display()), e))?;
    let ini = dir.join("pgbouncer.ini");
    fs::write(&ini, render_ini(node, &users, port)?)
        .map_err(|e| TopologyError::io(format!("writing {}", ini.display()), e))
}

fn render_ini(node: &PgBouncerNode, users: &Path, port: u16) -> Result<String, TopologyError> {
    let (host, server_port) =
        node.server
            .rsplit_once(':')
            .ok_or_else(|| TopologyError::ProxyTarget {
                target: node.server.clone(),
                reason: "the server PgBouncer forwards to is not host:port".into(),
            })?;
    let mut ini = String::new();
    let _ = writeln!(ini, ";; generated by lockbench");
    let _ = writeln!(ini, "[databases]");
    let _ = writeln!(
        ini,
        "postgres = host={host} port={server_port} dbname=postgres user=lockbench"
    );
    let _ = writeln!(ini, "[pgbouncer]");
    let _ = writeln!(ini, "listen_addr = 127.0.0.1");
    let _ = writeln!(ini, "listen_port = {port}");
    // TCP only: a socket path in a deep run directory is too long, and clients use TCP.
    let _ = writeln!(ini, "unix_socket_dir =");
    let _ = writeln!(ini, "auth_type = trust");
    let _ = writeln!(ini, "auth_file = {}", users.display());
    let _ = writeln!(ini, "pool_mode = {}", node.settings.pool_mode);
    let _ = writeln!(ini, "default_pool_size = {}", node.settings.pool_size);
    ini.push_str(node.settings.reset.ini_lines());
    let _ = writeln!(ini, "max_client_conn = 2000");
    // A server restarted by the nemesis is logged into again after 1 s (default 15 s).
    let _ = writeln!(ini, "server_login_retry = 1");
    let _ = writeln!(ini, "log_connections = 0");
    let _ = writeln!(ini, "log_disconnections = 0");
    Ok(ini)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_list_the_valid_values() {
        crate::variant_names::assert_names_match_serde::<PoolMode>();
        crate::variant_names::assert_names_match_serde::<PoolerKind>();
        crate::variant_names::assert_names_match_serde::<PoolReset>();
        assert_eq!(
            "discard-all".parse::<PoolReset>(),
            Ok(PoolReset::DiscardAll)
        );
        assert_eq!("none".parse::<PoolReset>(), Ok(PoolReset::None));
        let err = "always".parse::<PoolReset>().unwrap_err();
        assert!(
            err.contains("`always`") && err.contains("default, discard-all, none"),
            "{err}"
        );
        assert_eq!("session".parse::<PoolMode>(), Ok(PoolMode::Session));
        assert_eq!("transaction".parse::<PoolMode>(), Ok(PoolMode::Transaction));
        let err = "statement".parse::<PoolMode>().unwrap_err();
        assert!(
            err.contains("`statement`") && err.contains("session, transaction"),
            "{err}"
        );
        let err = "odyssey".parse::<PoolerKind>().unwrap_err();
        assert!(
            err.contains("`odyssey`") && err.contains("pgbouncer"),
            "{err}"
        );
    }

    #[test]
    fn a_zero_pool_is_refused() {
        let mut s = PoolerSettings::pgbouncer(PoolMode::Session);
        assert!(s.validate().is_ok());
        s.pool_size = 0;
        assert!(s.validate().unwrap_err().to_string().contains("at least 1"));
    }

    #[test]
    fn ini_names_the_server_mode_and_size() {
        let node = PgBouncerNode {
            settings: PoolerSettings {
                kind: PoolerKind::Pgbouncer,
                pool_mode: PoolMode::Transaction,
                pool_size: 3,
                reset: PoolReset::Default,
            },
            server: "127.0.0.1:5999".into(),
        };
        let ini = render_ini(&node, Path::new("/run/u.txt"), 6001).unwrap();
        assert!(
            ini.contains("postgres = host=127.0.0.1 port=5999 dbname=postgres user=lockbench\n"),
            "{ini}"
        );
        assert!(ini.contains("listen_port = 6001\n"), "{ini}");
        assert!(ini.contains("pool_mode = transaction\n"), "{ini}");
        assert!(ini.contains("default_pool_size = 3\n"), "{ini}");
        assert!(ini.contains("auth_file = /run/u.txt\n"), "{ini}");
        assert!(
            ini.contains("server_reset_query = DISCARD ALL\nserver_reset_query_always = 0\n"),
            "{ini}"
        );
        for (reset, lines) in [
            (
                PoolReset::DiscardAll,
                "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n",
            ),
            (
                PoolReset::None,
                "server_reset_query =\nserver_reset_query_always = 0\n",
            ),
        ] {
            let node = PgBouncerNode {
                settings: PoolerSettings {
                    reset,
                    ..node.settings
                },
                ..node.clone()
            };
            let ini = render_ini(&node, Path::new("/u"), 1).unwrap();
            assert!(ini.contains(lines), "{reset}: {ini}");
        }
        let bad = PgBouncerNode {
            server: "nowhere".into(),
            ..node
        };
        assert!(render_ini(&bad, Path::new("/u"), 1).is_err());
    }
}
