//! The `compose` launcher: the workers as the containers of one docker compose project per
//! strategy run, from a local image holding the lockbench binary (`docker/build-images.sh
//! --only lockbench`, built `FROM scratch`; nothing is pulled).
//!
//! - **Network: the host's** (`network_mode: host`). The coordinator's control API, the
//!   embedded proxies and the ledger all listen on loopback ports picked at run time; in the
//!   host's network namespace the workers reach them at the very URLs the `processes` workers
//!   get. Publishing instead would need every port known before the containers start and
//!   every listener moved off loopback, and would put docker's userland proxy (or NAT) between
//!   the clients and the proxies the faults act on.
//! - **Files:** the strategy's `workers/` directory is bind-mounted at its own path, so each
//!   worker keeps its scratch history where a `processes` worker would; the containers run as
//!   the coordinator's uid:gid, so those files are the user's. Each container's output is
//!   copied to `workers/w<i>.log` before the project is removed.
//! - **Always brought down:** `down -v --remove-orphans` on the normal and error paths
//!   ([`ComposeProject::down`]), and from `Drop` when the coordinator unwinds from a panic.
//!   The project is named `lockbench-<pid>-<run>-<strategy>`, so runs never share one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::process::Command;

use super::super::WorkersError;

/// How long one compose or docker command may take.
const COMMAND_WITHIN: Duration = Duration::from_secs(120);

/// How often the containers' states are read.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// The `compose` launcher's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeLauncher {
    /// The worker image (entrypoint `lockbench`).
    pub image: String,
    /// The compose command: `docker-compose` (Debian's), or `docker compose` (the plugin).
    pub command: Vec<String>,
}

fn launch_err(detail: impl Into<String>) -> WorkersError {
    WorkersError::Launch {
        launcher: "compose".into(),
        detail: detail.into(),
    }
}

/// Runs `program args` (bounded), returning its stdout; the error names the command and
/// quotes its stderr.
async fn output(program: &[String], args: &[&str]) -> Result<String, WorkersError> {
    let shown = format!("{} {}", program.join(" "), args.join(" "));
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(COMMAND_WITHIN, cmd.output())
        .await
        .map_err(|_| launch_err(format!("`{shown}` took longer than {COMMAND_WITHIN:?}")))?
        .map_err(|e| launch_err(format!("`{shown}`: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(launch_err(format!(
            "`{shown}` failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn docker() -> Vec<String> {
    vec!["docker".to_string()]
}

impl ComposeLauncher {
    /// Finds the compose command and checks that the engine answers and has `image`: called
    /// before anything starts, so a missing piece is bad input.
    ///
    /// # Errors
    /// [`WorkersError::Launch`] naming what is missing and how to get it.
    pub fn check(image: &str) -> Result<Self, WorkersError> {
        let runs = |program: &str, args: &[&str]| {
            std::process::Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let command: Vec<String> = if runs("docker-compose", &["version"]) {
            vec!["docker-compose".into()]
        } else if runs("docker", &["compose", "version"]) {
            vec!["docker".into(), "compose".into()]
        } else {
            return Err(launch_err(
                "neither `docker-compose` nor `docker compose` runs here: install one \
                 (Debian: apt-get install docker-compose)",
            ));
        };
        if !runs("docker", &["info"]) {
            return Err(launch_err(
                "no Docker engine answers `docker info`: start dockerd or set DOCKER_HOST",
            ));
        }
        if !runs("docker", &["image", "inspect", image]) {
            return Err(launch_err(format!(
                "the worker image {image} is not in the local engine: build it with \
                 `docker/build-images.sh --only lockbench` (or name another with --worker-image)"
            )));
        }
        Ok(Self {
            image: image.to_string(),
            command,
        })
    }

    /// The compose file of `workers` workers for the control API at `coordinator`, their
    /// files in `dir` (absolute), run as `user` (`uid:gid`): services `w0..`, each
    /// `lockbench worker --coordinator URL --slot I --scratch <dir>/w<i>.scratch` on the host's
    /// network, never restarted (the coordinator decides about a worker that exits).
    pub fn compose_file(
        &self,
        workers: u32,
        coordinator: &str,
        dir: &Path,
        user: &str,
    ) -> serde_json::Value {
        let dir_s = dir.display().to_string();
        let services: serde_json::Map<String, serde_json::Value> = (0..workers)
            .map(|i| {
                let scratch = dir.join(format!("w{i}.scratch")).display().to_string();
                let service = json!({
                    "image": self.image,
                    "command": ["worker", "--coordinator", coordinator, "--slot", i.to_string(), "--scratch", scratch],
                    "network_mode": "host",
                    "user": user,
                    "volumes": [format!("{dir_s}:{dir_s}")],
                    "restart": "no",
                    "stop_grace_period": "2s",
                    "labels": {"org.lockbench.slot": i.to_string()},
                });
                (format!("w{i}"), service)
            })
            .collect();
        json!({"version": "2.4", "services": services})
    }

    /// Writes `<dir>/compose.json` (and the project's name in `<dir>/compose.project`) and brings
    /// the project up (detached).
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when the file cannot be written or `up` fails (the project is
    /// brought down again before this returns).
    pub(super) async fn launch(
        &self,
        workers: u32,
        coordinator: &str,
        dir: &Path,
    ) -> Result<ComposeProject, WorkersError> {
        let dir = std::fs::canonicalize(dir)
            .map_err(|e| launch_err(format!("{}: {e}", dir.display())))?;
        // SAFETY: getuid/getgid cannot fail.
        let user = unsafe { format!("{}:{}", libc::getuid(), libc::getgid()) };
        let file = dir.join("compose.json");
        let body = serde_json::to_vec_pretty(&self.compose_file(workers, coordinator, &dir, &user))
            .map_err(|e| launch_err(e.to_string()))?;
        std::fs::write(&file, body).map_err(|e| launch_err(format!("{}: {e}", file.display())))?;
        let project =
            super::run_object_name(&format!("lockbench-{}", std::process::id()), &dir, 63);
        let named = dir.join("compose.project");
        std::fs::write(&named, format!("{project}\n"))
            .map_err(|e| launch_err(format!("{}: {e}", named.display())))?;
        let state: Arc<Mutex<Vec<Container>>> = Arc::new(Mutex::new(
            (0..workers).map(|_| Container::default()).collect(),
        ));
        let poller = tokio::spawn(poll(project.clone(), state.clone()));
        let mut launched = ComposeProject {
            project,
            command: self.command.clone(),
            file,
            dir,
            state,
            poller,
            down: false,
        };
        let up = launched
            .compose(&["up", "-d", "--no-build", "--remove-orphans"])
            .await;
        if let Err(e) = up {
            launched.down().await;
            return Err(e);
        }
        Ok(launched)
    }
}

/// One worker's container as last seen.
#[derive(Debug, Default, Clone)]
struct Container {
    id: Option<String>,
    pid: Option<u32>,
    exited: Option<String>,
}

/// Reads the project's containers every [`POLL_EVERY`]: ids, host pids, exit statuses.
async fn poll(project: String, state: Arc<Mutex<Vec<Container>>>) {
    let filter = format!("label=com.docker.compose.project={project}");
    loop {
        let listed = output(
            &docker(),
            &[
                "ps",
                "-a",
                "--no-trunc",
                "--filter",
                &filter,
                "--format",
                "{{.Label \"com.docker.compose.service\"}}\t{{.ID}}\t{{.State}}\t{{.Status}}",
            ],
        )
        .await
        .unwrap_or_default();
        let mut need_pid = Vec::new();
        {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            for line in listed.lines() {
                let f: Vec<&str> = line.split('\t').collect();
                let (Some(service), Some(id), Some(st), Some(status)) =
                    (f.first(), f.get(1), f.get(2), f.get(3))
                else {
                    continue;
                };
                let Some(c) = service
                    .strip_prefix('w')
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| s.get_mut(i))
                else {
                    continue;
                };
                c.id = Some((*id).to_string());
                if matches!(*st, "exited" | "dead") {
                    c.exited
                        .get_or_insert_with(|| format!("container {status}"));
                } else if *st == "running" && c.pid.is_none() {
                    need_pid.push((*id).to_string());
                }
            }
        }
        for id in need_pid {
            let pid = output(&docker(), &["inspect", "--format", "{{.State.Pid}}", &id])
                .await
                .ok()
                .and_then(|o| o.trim().parse::<u32>().ok())
                .filter(|&p| p > 0);
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = s.iter_mut().find(|c| c.id.as_deref() == Some(&id)) {
                c.pid = pid;
            }
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// A started compose project.
#[derive(Debug)]
pub struct ComposeProject {
    project: String,
    command: Vec<String>,
    file: PathBuf,
    dir: PathBuf,
    state: Arc<Mutex<Vec<Container>>>,
    poller: tokio::task::JoinHandle<()>,
    down: bool,
}

impl ComposeProject {
    /// The project's name (`lockbench-<pid>-<run>-<strategy>`).
    pub fn name(&self) -> &str {
        &self.project
    }

    fn container(&self, i: usize) -> Container {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(i)
            .cloned()
            .unwrap_or_default()
    }

    async fn compose(&self, args: &[&str]) -> Result<String, WorkersError> {
        let file = self.file.display().to_string();
        let mut all = vec!["-p", &self.project, "-f", &file];
        all.extend_from_slice(args);
        output(&self.command, &all).await
    }

    /// Slot `i`'s worker's host pid while its container runs.
    pub(super) fn pid(&self, i: usize) -> Option<u32> {
        self.container(i).pid
    }

    /// How slot `i`'s container exited (`None` while it runs or has not been seen yet).
    pub(super) fn exited(&self, i: usize) -> Option<String> {
        self.container(i).exited
    }

    /// Kills slot `i`'s container.
    pub(super) async fn kill(&self, i: usize) {
        if let Some(id) = self.container(i).id {
            let _ = output(&docker(), &["kill", &id]).await;
        }
    }

    /// Copies each container's output to `w<i>.log`, then `down -v --remove-orphans`
    /// (idempotent; failures are logged, the coordinator's result stands).
    pub async fn down(&mut self) {
        if std::mem::replace(&mut self.down, true) {
            return;
        }
        self.poller.abort();
        let n = self.state.lock().map(|s| s.len()).unwrap_or(0);
        for i in 0..n {
            let Some(id) = self.container(i).id else {
                continue;
            };
            let log = self.dir.join(format!("w{i}.log"));
            if let Ok(f) = std::fs::File::create(&log) {
                let f2 = f.try_clone();
                let mut cmd = Command::new("docker");
                cmd.args(["logs", &id])
                    .stdout(Stdio::from(f))
                    .kill_on_drop(true);
                if let Ok(f2) = f2 {
                    cmd.stderr(Stdio::from(f2));
                }
                let _ = tokio::time::timeout(COMMAND_WITHIN, cmd.status()).await;
            }
        }
        if let Err(e) = self
            .compose(&["down", "-v", "--remove-orphans", "-t", "2"])
            .await
        {
            tracing::error!("compose project {}: {e}", self.project);
        }
    }
}

impl Drop for ComposeProject {
    fn drop(&mut self) {
        if self.down {
            return;
        }
        // Unwinding (or dropped without `down`): bring the project down before going.
        self.poller.abort();
        let _ = std::process::Command::new(&self.command[0])
            .args(&self.command[1..])
            .arg("-p")
            .arg(&self.project)
            .arg("-f")
            .arg(&self.file)
            .args(["down", "-v", "--remove-orphans", "-t", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compose_file_runs_one_worker_per_slot_on_the_host_network() {
        let l = ComposeLauncher {
            image: "lockbench/worker:test".into(),
            command: vec!["docker-compose".into()],
        };
        let dir = Path::new("/r/run/single/workers");
        let f = l.compose_file(3, "http://127.0.0.1:4100", dir, "1000:1000");
        let services = f["services"].as_object().unwrap();
        assert_eq!(services.keys().collect::<Vec<_>>(), ["w0", "w1", "w2"]);
        let w1 = &services["w1"];
        assert_eq!(w1["image"], "lockbench/worker:test");
        assert_eq!(w1["network_mode"], "host");
        assert_eq!(w1["user"], "1000:1000");
        assert_eq!(w1["restart"], "no");
        assert_eq!(
            w1["command"],
            json!([
                "worker",
                "--coordinator",
                "http://127.0.0.1:4100",
                "--slot",
                "1",
                "--scratch",
                "/r/run/single/workers/w1.scratch"
            ])
        );
        assert_eq!(
            w1["volumes"],
            json!(["/r/run/single/workers:/r/run/single/workers"])
        );
    }
}
