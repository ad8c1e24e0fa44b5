//! What a [`super::LocalNode`] runs besides `redis-server`: a PostgreSQL server or an etcd
//! member, each in its node directory, on a port of 127.0.0.1.
//!
//! | program | binary (searched on `PATH`, then Debian's locations) | data | ready when |
//! |---|---|---|---|
//! | `redis-server` | `redis-server` | none (or AOF) | `PING` answers |
//! | PostgreSQL | `postgres`, `initdb` (`/usr/lib/postgresql/<newest>/bin`) | `<dir>/data`, made by `initdb` at start | `SELECT 1` answers |
//! | etcd | `etcd` | `<dir>/data` | `GET /health` says `true` (the cluster has a leader) |
//! | PgBouncer ([`super::pgbouncer`]) | `pgbouncer` (`/usr/sbin`) | none; `pgbouncer.ini`, `userlist.txt` | `SELECT 1` through it answers (a real query, from the server) |
//!
//! PostgreSQL (and PgBouncer) refuse to run as root: when lockbench runs as root, `initdb`,
//! `postgres` and `pgbouncer` run as
//! the `postgres` system user (Debian's `postgresql` package creates it), the node directory is
//! given to that user, and the directories above it inside the run directory get `o+x` so that
//! user can reach it. Both servers keep their data across a nemesis restart (they are durable by
//! design); a fresh start removes it.

use std::ffi::CString;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::pgbouncer::{self, PgBouncerNode};
use super::TopologyError;

/// The server a local node runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerProgram {
    /// `redis-server` with a generated `redis.conf`.
    #[default]
    Redis,
    /// A PostgreSQL server (`postgres -D <dir>/data`), user `lockbench`, trust authentication
    /// on 127.0.0.1 only.
    Postgres,
    /// One member of an etcd cluster.
    Etcd(EtcdMember),
    /// PgBouncer in front of a PostgreSQL server.
    PgBouncer(PgBouncerNode),
}

/// How one etcd member joins its cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// Port its peers connect to (on 127.0.0.1).
    pub peer_port: u16,
    /// `host:port` it tells its peers to use (its peer proxy, or 127.0.0.1:`peer_port`).
    pub advertise_peer: String,
    /// `name=http://host:port,…` of every member (the advertised peer addresses).
    pub initial_cluster: String,
    /// Cluster token, unique per run, so members of two runs never join each other.
    pub cluster_token: String,
}

/// Heartbeat interval of the etcd members lockbench starts (ms): a tenth of the election
/// timeout, as etcd's tuning guide advises.
pub const ETCD_HEARTBEAT_MS: u64 = 50;
/// Election timeout of the etcd members lockbench starts (ms). etcd's smallest lease TTL is
/// 1.5 × this, rounded up to a second: 1 s here (with etcd's default 1000 ms it would be 2 s).
pub const ETCD_ELECTION_MS: u64 = 500;
/// `max_connections` of the PostgreSQL servers lockbench starts (each client holds one session).
pub const PG_MAX_CONNECTIONS: u32 = 300;

impl ServerProgram {
    /// The binary's file name, for messages.
    pub fn binary_name(&self) -> &'static str {
        match self {
            ServerProgram::Redis => "redis-server",
            ServerProgram::Postgres => "postgres",
            ServerProgram::Etcd(_) => "etcd",
            ServerProgram::PgBouncer(_) => "pgbouncer",
        }
    }

    /// The Debian package that provides the binary.
    pub fn package(&self) -> &'static str {
        match self {
            ServerProgram::Redis => "redis-server",
            ServerProgram::Postgres => "postgresql",
            ServerProgram::Etcd(_) => "etcd-server",
            ServerProgram::PgBouncer(_) => "pgbouncer",
        }
    }

    /// The URL clients use to reach a node of this program on `port`.
    pub fn url(&self, port: u16) -> String {
        match self {
            ServerProgram::Redis => format!("redis://127.0.0.1:{port}"),
            ServerProgram::Postgres | ServerProgram::PgBouncer(_) => {
                format!("postgres://lockbench@127.0.0.1:{port}/postgres")
            }
            ServerProgram::Etcd(_) => format!("http://127.0.0.1:{port}"),
        }
    }

    /// The file the server logs to, inside its node directory.
    pub fn log_file(&self) -> &'static str {
        match self {
            ServerProgram::Redis => "redis.log",
            ServerProgram::Postgres | ServerProgram::Etcd(_) | ServerProgram::PgBouncer(_) => {
                "stdio.log"
            }
        }
    }

    /// Whether a signal must also reach the server's child processes. PostgreSQL serves each
    /// session from its own backend process, and every child calls `setsid()`, so neither the
    /// postmaster alone nor its process group covers them: pausing only the postmaster would
    /// pause nothing that serves clients.
    pub fn signals_children(&self) -> bool {
        matches!(self, ServerProgram::Postgres)
    }

    /// How long a stop waits after the polite signal before SIGKILL, when it differs from the
    /// default 5 s: an etcd member that loses its peers while stopping waits for them for
    /// seconds, and its data is thrown away with the run anyway, so 1 s.
    pub fn stop_grace(&self) -> Option<Duration> {
        matches!(self, ServerProgram::Etcd(_)).then_some(Duration::from_secs(1))
    }

    /// Finds the binary: `explicit`, else `PATH`, else Debian's location
    /// (`/usr/lib/postgresql/<newest>/bin` for PostgreSQL, `/usr/sbin` for PgBouncer).
    ///
    /// # Errors
    /// [`TopologyError::ServerNotFound`] naming the package to install.
    pub fn find_binary(&self, explicit: Option<&Path>) -> Result<PathBuf, TopologyError> {
        let name = self.binary_name();
        let not_found = |location: String| TopologyError::ServerNotFound {
            program: name,
            package: self.package(),
            location,
        };
        if let Some(path) = explicit {
            return if is_executable(path) {
                Ok(path.to_path_buf())
            } else {
                Err(not_found(format!("at {}", path.display())))
            };
        }
        find_on_path(name)
            .or_else(|| match self {
                ServerProgram::Postgres => newest_postgres_bin().map(|d| d.join(name)),
                ServerProgram::PgBouncer(_) => Some(Path::new("/usr/sbin").join(name)),
                _ => None,
            })
            .filter(|p| is_executable(p))
            .ok_or_else(|| {
                not_found(match self {
                    ServerProgram::PgBouncer(_) => "on PATH or in /usr/sbin".into(),
                    _ => "on PATH or in /usr/lib/postgresql/*/bin".into(),
                })
            })
    }

    /// Prepares a fresh data directory: removes `<dir>/data`; for PostgreSQL runs `initdb`
    /// (bounded by `timeout`) next to `binary`.
    ///
    /// # Errors
    /// [`TopologyError::Io`], or [`TopologyError::NodeStart`] when `initdb` fails.
    pub async fn prepare_data(
        &self,
        name: &str,
        dir: &Path,
        binary: &Path,
        timeout: Duration,
    ) -> Result<(), TopologyError> {
        let data = dir.join("data");
        if data.exists() {
            fs::remove_dir_all(&data)
                .map_err(|e| TopologyError::io(format!("removing {}", data.display()), e))?;
        }
        if let ServerProgram::PgBouncer(_) = self {
            if let Some(user) = service_user()? {
                give_to(dir, &user)?;
            }
            return Ok(());
        }
        if !matches!(self, ServerProgram::Postgres) {
            return Ok(());
        }
        let user = service_user()?;
        if let Some(user) = &user {
            give_to(dir, user)?;
        }
        let initdb = binary.with_file_name("initdb");
        let mut command = Command::new(&initdb);
        command
            .arg("-D")
            .arg(&data)
            .args(["-U", "lockbench", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C")
            .current_dir(dir);
        if let Some(user) = &user {
            command.uid(user.uid).gid(user.gid);
        }
        let output = tokio::time::timeout(
            timeout.max(Duration::from_secs(30)),
            tokio::task::spawn_blocking(move || command.output()),
        )
        .await;
        let failed = |reason: String, log: String| TopologyError::NodeStart {
            node: name.to_string(),
            port: 0,
            reason,
            log_path: dir.join("initdb.log"),
            log_tail: log,
        };
        match output {
            Err(_) => Err(failed(
                "initdb did not finish in time".into(),
                String::new(),
            )),
            Ok(Err(e)) => Err(failed(format!("initdb: {e}"), String::new())),
            Ok(Ok(Err(e))) => Err(failed(
                format!("cannot run {}: {e}", initdb.display()),
                String::new(),
            )),
            Ok(Ok(Ok(out))) => {
                let log = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                let _ = fs::write(dir.join("initdb.log"), &log);
                if out.status.success() {
                    Ok(())
                } else {
                    Err(failed(format!("initdb exited with {}", out.status), log))
                }
            }
        }
    }

    /// The command that runs the server on `port` in `dir` (for Redis, with `conf`; for
    /// PostgreSQL, each of `settings` as `-c key=value` after lockbench's own; for PgBouncer,
    /// with its files written first, see [`pgbouncer::write_files`]).
    ///
    /// # Errors
    /// [`TopologyError::Io`] when the `postgres` user cannot be looked up or PgBouncer's
    /// files cannot be written.
    pub fn command(
        &self,
        name: &str,
        binary: &Path,
        dir: &Path,
        port: u16,
        conf: &Path,
        settings: &[String],
    ) -> Result<Command, TopologyError> {
        let mut command = Command::new(binary);
        command.current_dir(dir);
        match self {
            ServerProgram::Redis => {
                command.arg(conf);
            }
            ServerProgram::Postgres => {
                command
                    .arg("-D")
                    .arg(dir.join("data"))
                    .arg("-p")
                    .arg(port.to_string())
                    // TCP only: a Unix socket path in a deep run directory exceeds the 107
                    // bytes a socket path may have, and clients use TCP anyway.
                    .args(["-c", "unix_socket_directories="])
                    .args(["-c", "listen_addresses=127.0.0.1"])
                    .args(["-c", &format!("max_connections={PG_MAX_CONNECTIONS}")])
                    .args(["-c", "shared_buffers=32MB"])
                    .args(["-c", "logging_collector=off"]);
                for setting in settings {
                    command.arg("-c").arg(setting);
                }
                if let Some(user) = service_user()? {
                    command.uid(user.uid).gid(user.gid);
                }
            }
            ServerProgram::PgBouncer(node) => {
                pgbouncer::write_files(node, dir, port)?;
                command.arg(dir.join("pgbouncer.ini"));
                if let Some(user) = service_user()? {
                    command.uid(user.uid).gid(user.gid);
                }
            }
            ServerProgram::Etcd(m) => {
                command
                    .arg("--name")
                    .arg(name)
                    .arg("--data-dir")
                    .arg(dir.join("data"))
                    .arg("--listen-client-urls")
                    .arg(format!("http://127.0.0.1:{port}"))
                    .arg("--advertise-client-urls")
                    .arg(format!("http://127.0.0.1:{port}"))
                    .arg("--listen-peer-urls")
                    .arg(format!("http://127.0.0.1:{}", m.peer_port))
                    .arg("--initial-advertise-peer-urls")
                    .arg(format!("http://{}", m.advertise_peer))
                    .arg("--initial-cluster")
                    .arg(&m.initial_cluster)
                    .arg("--initial-cluster-token")
                    .arg(&m.cluster_token)
                    .args(["--initial-cluster-state", "new"])
                    .arg("--heartbeat-interval")
                    .arg(ETCD_HEARTBEAT_MS.to_string())
                    .arg("--election-timeout")
                    .arg(ETCD_ELECTION_MS.to_string())
                    .args(["--log-level", "warn", "--logger", "zap"]);
            }
        }
        Ok(command)
    }

    /// One readiness probe of a node at `url`, bounded by `timeout`.
    ///
    /// # Errors
    /// What the probe got instead of a healthy answer.
    pub async fn probe(&self, url: &str, timeout: Duration) -> Result<(), String> {
        match self {
            ServerProgram::Redis => unreachable!("redis nodes are probed with PING"),
            ServerProgram::Postgres | ServerProgram::PgBouncer(_) => {
                tokio::time::timeout(timeout, async {
                    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                        .await
                        .map_err(|e| crate::strategy::describe_postgres_error(&e))?;
                    let task = tokio::spawn(connection);
                    let result = client
                        .simple_query("SELECT 1")
                        .await
                        .map_err(|e| crate::strategy::describe_postgres_error(&e));
                    drop(client);
                    let _ = task.await;
                    result.map(|_| ())
                })
                .await
                .map_err(|_| "no answer to SELECT 1".to_string())?
            }
            ServerProgram::Etcd(_) => {
                let client = reqwest::Client::builder()
                    .timeout(timeout)
                    .build()
                    .map_err(|e| e.to_string())?;
                let body = client
                    .get(format!("{url}/health"))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?
                    .text()
                    .await
                    .map_err(|e| e.to_string())?;
                if body.contains("\"true\"") {
                    Ok(())
                } else {
                    Err(format!("/health answered {body}"))
                }
            }
        }
    }
}

/// The name of the etcd member that leads the cluster now: each member is asked
/// `POST /v3/maintenance/status` (bounded by `timeout` each); the member whose own ID equals
/// the leader ID any of them reports is the leader.
///
/// # Errors
/// A message when no member answers or none of them is the reported leader.
pub async fn etcd_leader(
    members: &[crate::node::NodeEndpoint],
    timeout: Duration,
) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let id = |v: &serde_json::Value| -> Option<String> {
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut ids = Vec::new();
    let mut leader: Option<String> = None;
    let mut last_error = String::from("no member");
    for m in members {
        let answer = async {
            client
                .post(format!(
                    "{}/v3/maintenance/status",
                    m.url.trim_end_matches('/')
                ))
                .body("{}")
                .send()
                .await?
                .json::<serde_json::Value>()
                .await
        }
        .await;
        match answer {
            Ok(v) => {
                let own = v.pointer("/header/member_id").and_then(id);
                if let Some(l) = v.get("leader").and_then(id).filter(|l| l != "0") {
                    leader = Some(l);
                }
                ids.push((m.name.clone(), own));
            }
            Err(e) => last_error = format!("{}: {e}", m.name),
        }
    }
    let leader = leader.ok_or_else(|| format!("no member reports a leader ({last_error})"))?;
    ids.into_iter()
        .find(|(_, own)| own.as_deref() == Some(leader.as_str()))
        .map(|(name, _)| name)
        .ok_or_else(|| format!("the leader {leader} did not answer ({last_error})"))
}

/// Owner of PostgreSQL's processes when lockbench runs as root.
struct ServiceUser {
    uid: u32,
    gid: u32,
}

/// The `postgres` user when running as root (PostgreSQL refuses root), else `None`.
fn service_user() -> Result<Option<ServiceUser>, TopologyError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = CString::new("postgres").expect("no NUL");
    // SAFETY: getpwnam returns a pointer to static storage or NULL; we copy the two fields
    // before any other call that could overwrite it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        return Err(TopologyError::io(
            "PostgreSQL refuses to run as root and there is no `postgres` user",
            std::io::Error::other("install `postgresql` (it creates the user) or run as a user"),
        ));
    }
    // SAFETY: entry is non-null and points to a valid passwd record.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    Ok(Some(ServiceUser { uid, gid }))
}

/// Gives `dir` to `user` and lets every user traverse the directories above it that this
/// process owns and that lack `o+x` (a private temporary directory, say).
fn give_to(dir: &Path, user: &ServiceUser) -> Result<(), TopologyError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid))
        .map_err(|e| TopologyError::io(format!("giving {} to postgres", dir.display()), e))?;
    let me = unsafe { libc::geteuid() };
    for ancestor in dir.ancestors().skip(1) {
        let Ok(meta) = fs::metadata(ancestor) else {
            break;
        };
        let mode = meta.permissions().mode();
        if mode & 0o001 != 0 {
            continue;
        }
        if meta.uid() != me {
            break;
        }
        fs::set_permissions(ancestor, fs::Permissions::from_mode(mode | 0o001)).map_err(|e| {
            TopologyError::io(
                format!("letting postgres through {}", ancestor.display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// Pids of the live direct children of `parent` (read from `/proc/<pid>/stat`).
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // After "(name)": state, then ppid.
                    let rest = stat.rsplit(')').next()?.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Whether process `pid` still runs (exists and is not a zombie), from `/proc/<pid>/stat`.
pub fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// `/usr/lib/postgresql/<highest version>/bin`, where Debian installs the server.
fn newest_postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_alive_until_it_exits() {
        assert!(is_alive(std::process::id()));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(is_alive(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(child.id()), "reaped: no /proc entry");
        assert!(!is_alive(u32::MAX));
    }

    #[test]
    fn urls_and_logs_per_program() {
        assert_eq!(ServerProgram::Redis.url(7000), "redis://127.0.0.1:7000");
        assert_eq!(
            ServerProgram::Postgres.url(7001),
            "postgres://lockbench@127.0.0.1:7001/postgres"
        );
        let member = ServerProgram::Etcd(EtcdMember {
            peer_port: 1,
            advertise_peer: "127.0.0.1:1".into(),
            initial_cluster: String::new(),
            cluster_token: "t".into(),
        });
        assert_eq!(member.url(7002), "http://127.0.0.1:7002");
        assert_eq!(member.log_file(), "stdio.log");
        assert!(ServerProgram::Postgres.signals_children() && !member.signals_children());
    }

    #[test]
    fn children_are_found_by_parent_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let found = children_of(std::process::id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            found.contains(&child.id()),
            "{found:?} lacks {}",
            child.id()
        );
    }

    #[test]
    fn a_missing_explicit_binary_names_the_package() {
        let err = ServerProgram::Postgres
            .find_binary(Some(Path::new("/nonexistent/postgres")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("apt-get install postgresql"), "{err}");
        assert!(err.contains("/nonexistent/postgres"), "{err}");
    }
}
