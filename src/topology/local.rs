//! One local `redis-server` process, started and owned by this process.
//!
//! Each node has its own directory `<base_dir>/<name>/` holding `redis.conf` (generated),
//! `redis.pid`, `redis.log`, `stdio.log` (whatever redis-server prints before its log is open,
//! e.g. config errors) and, with AOF, `appendonlydir/`. The process is a direct child (never
//! `--daemonize`), so it can be killed, paused and reaped by pid; see [`super::reaper`].

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::node::{ConnectOptions, NodeEndpoint};

use super::ports::{check_port_free, pick_free_port};
use super::program::ServerProgram;
use super::{reaper, TopologyError};

/// How a node keeps its data across a restart.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// `appendonly no` and `save ""`: a restarted node comes back empty.
    #[default]
    None,
    /// `appendonly yes` + `appendfsync always`: every write is fsynced before the reply, so a
    /// node killed with SIGKILL comes back with every acknowledged write.
    AofAlways,
}

impl Persistence {
    /// Names accepted by [`std::str::FromStr`].
    pub const NAMES: [&'static str; 2] = ["none", "aof-always"];
}

impl std::str::FromStr for Persistence {
    type Err = String;

    /// `none` or `aof-always`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Persistence::None),
            "aof-always" => Ok(Persistence::AofAlways),
            other => Err(format!(
                "unknown persistence {other:?}: use one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Persistence::None => "none",
            Persistence::AofAlways => "aof-always",
        })
    }
}

/// How to start one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNodeConfig {
    /// Node name (`n1`, …); also the name of its directory under the base dir.
    pub name: String,
    /// Port on [`LocalNodeConfig::host`]; `None` picks a free one (retried if another process
    /// takes it first).
    pub port: Option<u16>,
    /// Loopback address a redis-server binds and is reached at (`127.0.0.1`; a cluster node
    /// whose bus can be cut has its own, see [`super::cluster`]). Other programs ignore it
    /// and listen on 127.0.0.1.
    pub host: Ipv4Addr,
    /// Data persistence across restarts.
    pub persistence: Persistence,
    /// Path of the redis-server binary; `None` searches `PATH`.
    pub redis_server: Option<PathBuf>,
    /// How long start waits for the node to answer PING (default 5 s).
    pub start_timeout: Duration,
    /// Extra `redis.conf` lines appended verbatim (e.g. `replicaof …` for later topologies);
    /// for PostgreSQL, `key=value` server settings, each passed as `-c key=value`.
    pub extra_config: Vec<String>,
    /// The server this node runs (default `redis-server`).
    pub program: ServerProgram,
}

impl LocalNodeConfig {
    /// A node with a free port, no persistence, redis-server from `PATH` and a 5 s start timeout.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            port: None,
            host: Ipv4Addr::LOCALHOST,
            persistence: Persistence::None,
            redis_server: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            extra_config: Vec::new(),
            program: ServerProgram::Redis,
        }
    }
}

/// Default bound on the wait for a starting node to answer PING.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`LocalNode::stop`] waits after SIGTERM before it sends SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts with a fresh auto-picked port when another process took the previous one.
const AUTO_PORT_ATTEMPTS: usize = 5;
/// Log lines quoted in a start error.
const LOG_TAIL_LINES: usize = 15;

/// A running (or killed, or paused) local redis-server. Dropping it kills the process.
#[derive(Debug)]
pub struct LocalNode {
    config: LocalNodeConfig,
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl LocalNode {
    /// Starts `redis-server` for `config` in `<base_dir>/<name>/` and waits (bounded by
    /// `config.start_timeout`) until it answers PING. Stale data files from an earlier run in
    /// that directory are removed first, so a fresh node always starts empty.
    ///
    /// # Errors
    /// - [`TopologyError::RedisServerNotFound`]: no binary on `PATH` / at the configured path;
    /// - [`TopologyError::PortInUse`]: the requested port is taken;
    /// - [`TopologyError::NodeStart`]: the process exited or did not answer PING in time (the
    ///   error quotes the last lines of its log);
    /// - [`TopologyError::Io`]: the directory or config file could not be written.
    pub async fn start(config: &LocalNodeConfig, base_dir: &Path) -> Result<Self, TopologyError> {
        let binary = match config.program {
            ServerProgram::Redis => find_redis_server(config.redis_server.as_deref())?,
            ref other => other.find_binary(config.redis_server.as_deref())?,
        };
        // redis-server runs inside its node directory, so every path it is given (config, dir,
        // pidfile, log) must be absolute: a relative `--results` would otherwise be doubled.
        let base_dir = std::path::absolute(base_dir)
            .map_err(|e| TopologyError::io(format!("resolving {}", base_dir.display()), e))?;
        let dir = base_dir.join(&config.name);
        prepare_fresh_dir(&dir)?;
        config
            .program
            .prepare_data(&config.name, &dir, &binary, config.start_timeout)
            .await?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let port = match config.port {
                Some(port) => {
                    check_port_free(port)?;
                    port
                }
                None => pick_free_port()?,
            };
            let mut node = LocalNode {
                config: config.clone(),
                binary: binary.clone(),
                port,
                dir: dir.clone(),
                child: None,
                paused: false,
            };
            match node.launch().await {
                Ok(()) => return Ok(node),
                Err(TopologyError::PortInUse { .. })
                    if config.port.is_none() && attempts < AUTO_PORT_ATTEMPTS =>
                {
                    tracing::debug!(node = %config.name, port, "auto-picked port taken, retrying");
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Endpoint `redis://HOST:PORT` (host 127.0.0.1 unless configured, see
    /// [`LocalNodeConfig::host`]) named after the node.
    pub fn endpoint(&self) -> NodeEndpoint {
        let url = match self.config.program {
            ServerProgram::Redis => format!("redis://{}:{}", self.config.host, self.port),
            ref other => other.url(self.port),
        };
        NodeEndpoint::new(&self.config.name, url)
    }

    /// Node name (`n1`, …).
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Port on 127.0.0.1 (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Pid of the current process, `None` after [`kill`](Self::kill) or [`stop`](Self::stop).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The node's directory (config, pidfile, logs, AOF).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the redis-server log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(self.config.program.log_file())
    }

    /// The configuration the node was started with (`port` is the chosen one).
    pub fn config(&self) -> &LocalNodeConfig {
        &self.config
    }

    /// The node's persistence mode.
    pub fn persistence(&self) -> Persistence {
        self.config.persistence
    }

    /// True while the process exists (a paused process counts as running). Reaps it if it
    /// exited on its own.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_))) | Some(Err(_)) => {
                if let Some(child) = self.child.take() {
                    reaper::unregister(child.id());
                }
                self.paused = false;
                false
            }
            None => false,
        }
    }

    /// True between [`pause`](Self::pause) and [`resume`](Self::resume).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// SIGKILL (the crash nemesis): no shutdown, no final fsync. The process is reaped before
    /// this returns. Data survives a later [`restart`](Self::restart) only with
    /// [`Persistence::AofAlways`].
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] if the node was already killed or stopped.
    pub fn kill(&mut self) -> Result<(), TopologyError> {
        let child = self.take_child("kill")?;
        crash(child, self.config.program.signals_children());
        Ok(())
    }

    /// [`kill`](Self::kill) with its waiting (for the process to die and be reaped, and for
    /// PostgreSQL's backends, up to 2 s) done on tokio's blocking pool, so the other tasks of
    /// the runtime — a run's clients, when the nemesis kills a node — keep running meanwhile.
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] if the node was already killed or stopped.
    pub async fn kill_off_runtime(&mut self) -> Result<(), TopologyError> {
        let child = self.take_child("kill")?;
        let signals_children = self.config.program.signals_children();
        if let Err(e) = tokio::task::spawn_blocking(move || crash(child, signals_children)).await {
            tracing::error!(node = %self.config.name, "killing the node failed: {e}");
        }
        Ok(())
    }

    fn take_child(&mut self, op: &'static str) -> Result<Child, TopologyError> {
        let child = self.child.take().ok_or_else(|| self.not_running(op))?;
        self.paused = false;
        Ok(child)
    }

    /// Starts the node again on the same port and directory, then waits for PING as
    /// [`start`](Self::start) does. A node that is still running is killed (SIGKILL) first.
    ///
    /// # Errors
    /// As for [`start`](Self::start); [`TopologyError::PortTakenWhileDown`] if another process
    /// took the port while the node was down.
    pub async fn restart(&mut self) -> Result<(), TopologyError> {
        if self.is_running() {
            self.kill_off_runtime().await?;
        }
        let node = self.config.name.clone();
        let taken = |e: TopologyError| match e {
            TopologyError::PortInUse { port } => TopologyError::PortTakenWhileDown {
                node: node.clone(),
                port,
            },
            other => other,
        };
        check_port_free(self.port).map_err(taken)?;
        self.launch().await.map_err(taken)
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing until [`resume`](Self::resume).
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`]; [`TopologyError::Signal`] if kill(2) fails.
    pub fn pause(&mut self) -> Result<(), TopologyError> {
        self.signal(libc::SIGSTOP, "pause (SIGSTOP)")?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT after [`pause`](Self::pause).
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`]; [`TopologyError::Signal`] if kill(2) fails.
    pub fn resume(&mut self) -> Result<(), TopologyError> {
        self.signal(libc::SIGCONT, "resume (SIGCONT)")?;
        self.paused = false;
        Ok(())
    }

    /// Graceful stop: SIGCONT (in case it is paused), SIGTERM, then wait up to 5 s for the
    /// process to exit, and SIGKILL if it has not. Stopping a node that is not running is a
    /// no-op.
    ///
    /// # Errors
    /// [`TopologyError::Signal`] if SIGTERM cannot be sent.
    pub async fn stop(&mut self) -> Result<(), TopologyError> {
        if !self.is_running() {
            return Ok(());
        }
        self.signal(libc::SIGCONT, "resume before stop (SIGCONT)")?;
        if self.config.program == ServerProgram::Postgres {
            // SIGTERM is PostgreSQL's "smart" shutdown, which waits for every session to end.
            self.signal(libc::SIGINT, "stop (SIGINT, fast shutdown)")?;
        } else {
            self.signal(libc::SIGTERM, "stop (SIGTERM)")?;
        }
        let deadline = Instant::now() + self.config.program.stop_grace().unwrap_or(STOP_TIMEOUT);
        while Instant::now() < deadline {
            if !self.is_running() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::warn!(node = %self.config.name, "no exit 5 s after SIGTERM; sending SIGKILL");
        self.kill_off_runtime().await
    }

    fn not_running(&self, op: &'static str) -> TopologyError {
        TopologyError::NotRunning {
            node: self.config.name.clone(),
            op,
        }
    }

    fn signal(&mut self, signal: libc::c_int, op: &'static str) -> Result<(), TopologyError> {
        if !self.is_running() {
            return Err(self.not_running(op));
        }
        let pid = self.pid().ok_or_else(|| self.not_running(op))?;
        // PostgreSQL: the backends first (SIGSTOP: so none is left serving; SIGCONT: they
        // resume with the postmaster), each in its own session, found by parent pid.
        if self.config.program.signals_children() {
            for child in super::program::children_of(pid) {
                // SAFETY: kill(2) on a child of our child; ESRCH (already gone) is fine.
                unsafe { libc::kill(child as libc::pid_t, signal) };
            }
        }
        // SAFETY: kill(2) on our own child; no memory effects.
        if unsafe { libc::kill(pid as libc::pid_t, signal) } != 0 {
            return Err(TopologyError::Signal {
                node: self.config.name.clone(),
                op,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Writes the config, spawns the process and waits until it answers PING.
    async fn launch(&mut self) -> Result<(), TopologyError> {
        let conf_path = self.dir.join("redis.conf");
        let conf = (self.config.program == ServerProgram::Redis)
            .then(|| (conf_path.clone(), self.render_config()));
        let stdio_path = self.dir.join("stdio.log");
        let log_path = self.log_path();
        // Off the runtime: on a busy ext4 a create or an append can wait for the journal, and
        // a restart by the nemesis must not stall the run's clients meanwhile.
        let (stdio, stderr, log_offset) =
            tokio::task::spawn_blocking(move || open_launch_files(conf, &stdio_path, &log_path))
                .await
                .map_err(|e| {
                    TopologyError::io("preparing the launch", std::io::Error::other(e))
                })??;
        let mut command = self.config.program.command(
            &self.config.name,
            &self.binary,
            &self.dir,
            self.port,
            &conf_path,
            &self.config.extra_config,
        )?;
        command.stdin(Stdio::null()).stdout(stdio).stderr(stderr);
        let child = reaper::spawn(command).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound
                && self.config.program != ServerProgram::Redis
            {
                TopologyError::ServerNotFound {
                    program: self.config.program.binary_name(),
                    package: self.config.program.package(),
                    location: format!("at {}", self.binary.display()),
                }
            } else if e.kind() == std::io::ErrorKind::NotFound {
                TopologyError::RedisServerNotFound {
                    location: format!("at {}", self.binary.display()),
                }
            } else {
                TopologyError::io(format!("spawning {}", self.binary.display()), e)
            }
        })?;
        self.child = Some(child);
        self.paused = false;
        match self.wait_until_ready().await {
            Ok(()) => Ok(()),
            Err(reason) => {
                let exited = !self.is_running();
                if self.child.is_some() {
                    self.kill_off_runtime().await?;
                }
                if self
                    .log_since(log_offset)
                    .to_ascii_lowercase()
                    .contains("address already in use")
                {
                    return Err(TopologyError::PortInUse { port: self.port });
                }
                Err(TopologyError::NodeStart {
                    node: self.config.name.clone(),
                    port: self.port,
                    reason: if exited {
                        format!("{} exited: {reason}", self.config.program.binary_name())
                    } else {
                        reason
                    },
                    log_path: self.log_path(),
                    log_tail: self.log_tail(),
                })
            }
        }
    }

    /// Polls PING every 20 ms until it answers, the process exits, or the start timeout ends.
    async fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + self.config.start_timeout;
        let endpoint = self.endpoint();
        let probe = ConnectOptions {
            connect_timeout: Duration::from_millis(250),
            response_timeout: Duration::from_millis(250),
        };
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    reaper::unregister(child.id());
                    self.child = None;
                    return Err(format!("{status} before it was ready"));
                }
            }
            let answer = if self.config.program == ServerProgram::Redis {
                ping(&endpoint, &probe).await.map_err(|e| e.to_string())
            } else {
                self.config
                    .program
                    .probe(&endpoint.url, Duration::from_millis(500))
                    .await
            };
            let last_error = match answer {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "not ready within {} ms (last error: {last_error})",
                    self.config.start_timeout.as_millis()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn render_config(&self) -> String {
        let mut conf = String::new();
        let dir = quote(&self.dir.to_string_lossy());
        let _ = writeln!(
            conf,
            "# generated by lockbench for node {}",
            self.config.name
        );
        let _ = writeln!(conf, "bind {}", self.config.host);
        let _ = writeln!(conf, "port {}", self.port);
        let _ = writeln!(conf, "daemonize no");
        let _ = writeln!(conf, "dir {dir}");
        let _ = writeln!(
            conf,
            "pidfile {}",
            quote(&self.dir.join("redis.pid").to_string_lossy())
        );
        let _ = writeln!(
            conf,
            "logfile {}",
            quote(&self.log_path().to_string_lossy())
        );
        let _ = writeln!(conf, "save \"\"");
        let _ = writeln!(conf, "enable-debug-command local");
        // Thousands of clients: accept them all (redis-server lowers maxclients itself to what
        // its descriptor limit allows, which it inherits from lockbench after
        // `raise_nofile_limit`) and keep a deep accept queue (capped by net.core.somaxconn).
        let _ = writeln!(conf, "maxclients {}", node_max_clients());
        let _ = writeln!(conf, "tcp-backlog 4096");
        match self.config.persistence {
            Persistence::None => {
                let _ = writeln!(conf, "appendonly no");
            }
            Persistence::AofAlways => {
                let _ = writeln!(conf, "appendonly yes");
                let _ = writeln!(conf, "appendfsync always");
            }
        }
        for line in &self.config.extra_config {
            let _ = writeln!(conf, "{line}");
        }
        conf
    }

    /// `redis.log` from byte `offset` on (empty if unreadable).
    fn log_since(&self, offset: u64) -> String {
        let text = fs::read(self.log_path()).unwrap_or_default();
        let start = usize::try_from(offset).unwrap_or(0).min(text.len());
        String::from_utf8_lossy(&text[start..]).into_owned()
    }

    /// The last lines of `redis.log` and `stdio.log`, labelled, for error messages.
    fn log_tail(&self) -> String {
        let mut out = String::new();
        for file in ["redis.log", "stdio.log", "initdb.log"] {
            let path = self.dir.join(file);
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.is_empty() {
                continue;
            }
            let _ = writeln!(out, "--- last lines of {} ---", path.display());
            for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
                let _ = writeln!(out, "{line}");
            }
        }
        if out.is_empty() {
            out.push_str("(redis-server wrote no log)\n");
        }
        out
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            reaper::sigkill_group(pid);
            reaper::unregister(pid);
            let _ = child.wait();
        }
    }
}

/// Writes a Redis node's config (when given), opens its stdio log for appending (stdout and
/// stderr) and returns where its log ends now: logs are appended across restarts and only
/// this launch's lines decide "port in use". Blocks.
fn open_launch_files(
    conf: Option<(PathBuf, String)>,
    stdio_path: &Path,
    log_path: &Path,
) -> Result<(fs::File, fs::File, u64), TopologyError> {
    if let Some((path, text)) = conf {
        fs::write(&path, text)
            .map_err(|e| TopologyError::io(format!("writing {}", path.display()), e))?;
    }
    let opening = |e| TopologyError::io(format!("opening {}", stdio_path.display()), e);
    let stdio = OpenOptions::new()
        .create(true)
        .append(true)
        .open(stdio_path)
        .map_err(opening)?;
    let stderr = stdio.try_clone().map_err(opening)?;
    let log_offset = fs::metadata(log_path).map(|m| m.len()).unwrap_or(0);
    Ok((stdio, stderr, log_offset))
}

/// SIGKILL to a node's process (and its process group) and reaps it. A server whose program
/// signals its children (PostgreSQL) is stopped first and its backends killed and waited for
/// (≤ 2 s): they run in sessions of their own and outlive a killed postmaster until they
/// notice (up to ~0.5 s measured under load), holding its shared memory, so an immediate
/// restart would fail — as a crash of its machine would, the whole server goes. Blocks.
fn crash(mut child: Child, signals_children: bool) {
    let pid = child.id();
    if signals_children {
        // The postmaster is stopped first, so it cannot fork a backend after the list is taken.
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        let backends = super::program::children_of(pid);
        for b in &backends {
            // SAFETY: kill(2) on a child of our child; ESRCH (already gone) is fine.
            unsafe { libc::kill(*b as libc::pid_t, libc::SIGKILL) };
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while backends.iter().any(|b| super::program::is_alive(*b)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    reaper::sigkill_group(pid);
    reaper::unregister(pid);
    let _ = child.wait(); // Err only if kill_all already reaped it
}

/// One PING on a fresh connection.
pub(crate) async fn ping(
    endpoint: &NodeEndpoint,
    opts: &ConnectOptions,
) -> Result<(), redis::RedisError> {
    let mut conn = endpoint.connect(opts).await?;
    let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    Ok(())
}

/// Resolves the redis-server binary: the configured path, or the first executable on `PATH`.
fn find_redis_server(explicit: Option<&Path>) -> Result<PathBuf, TopologyError> {
    if let Some(path) = explicit {
        return if is_executable(path) {
            Ok(path.to_path_buf())
        } else {
            Err(TopologyError::RedisServerNotFound {
                location: format!("at {}", path.display()),
            })
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| TopologyError::RedisServerNotFound {
            location: "on PATH".into(),
        })
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Creates the node directory and removes data and logs an earlier run left there.
fn prepare_fresh_dir(dir: &Path) -> Result<(), TopologyError> {
    fs::create_dir_all(dir)
        .map_err(|e| TopologyError::io(format!("creating {}", dir.display()), e))?;
    for file in [
        "dump.rdb",
        "redis.log",
        "stdio.log",
        "redis.pid",
        "nodes.conf",
    ] {
        let path = dir.join(file);
        if path.exists() {
            fs::remove_file(&path)
                .map_err(|e| TopologyError::io(format!("removing {}", path.display()), e))?;
        }
    }
    let aof = dir.join("appendonlydir");
    if aof.exists() {
        fs::remove_dir_all(&aof)
            .map_err(|e| TopologyError::io(format!("removing {}", aof.display()), e))?;
    }
    Ok(())
}

/// Quotes a value for redis.conf (double quotes, backslash escapes).
fn quote(value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// `maxclients` for a local node: the descriptor limit it will inherit, less Redis's own 32.
fn node_max_clients() -> u64 {
    let soft = super::limits::raise_nofile_limit().map_or(10_032, |l| l.soft);
    soft.saturating_sub(32).max(1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(persistence: Persistence) -> LocalNode {
        let mut config = LocalNodeConfig::new("n1");
        config.persistence = persistence;
        LocalNode {
            config,
            binary: PathBuf::from("/usr/bin/redis-server"),
            port: 40001,
            dir: PathBuf::from("/tmp/lb \"x\""),
            child: None,
            paused: false,
        }
    }

    #[test]
    fn config_without_persistence() {
        let conf = node(Persistence::None).render_config();
        assert!(conf.contains("port 40001\n"));
        assert!(conf.contains("bind 127.0.0.1\n"));
        assert!(conf.contains("save \"\"\n"));
        assert!(conf.contains("appendonly no\n"));
        assert!(!conf.contains("appendfsync"));
        assert!(conf.contains("enable-debug-command local\n"));
        assert!(conf.contains("daemonize no\n"));
        assert!(conf.contains("dir \"/tmp/lb \\\"x\\\"\"\n"));
    }

    #[test]
    fn config_with_aof_always() {
        let conf = node(Persistence::AofAlways).render_config();
        assert!(conf.contains("appendonly yes\nappendfsync always\n"));
    }

    #[test]
    fn persistence_serde_is_kebab_case() {
        assert_eq!(
            serde_json::to_string(&Persistence::AofAlways).unwrap(),
            "\"aof-always\""
        );
        assert_eq!(
            serde_json::from_str::<Persistence>("\"none\"").unwrap(),
            Persistence::None
        );
    }

    #[test]
    fn missing_explicit_binary_names_path_and_fix() {
        let err = find_redis_server(Some(Path::new("/nonexistent/redis-server"))).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/redis-server"), "{msg}");
        assert!(msg.contains("apt-get install redis-server"), "{msg}");
    }
}
