//! How a multi-worker run's workers are started, by an existing engine in each case:
//!
//! | launcher | module | engine | the workers reach the coordinator and the proxies through |
//! |---|---|---|---|
//! | `processes` | [`processes`] | local subprocesses of this executable | loopback |
//! | `compose` | [`compose`] | `docker-compose` with the local worker image | the host's network (`network_mode: host`): loopback |
//! | `kubernetes` | [`kubernetes`] | an Indexed Job applied with `kubectl` | a headless Service selecting the coordinator's pod |
//!
//! Every launcher stops what it started on every path: [`Launched::stop_all`] on the normal
//! and error paths, `Drop` when the coordinator unwinds from a panic. A worker whose
//! coordinator dies without either stops by itself ([`super::SILENCE_LIMIT`]).

pub mod compose;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod processes;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::WorkersError;

/// The image holding the lockbench binary (and `kubectl`) that the `compose` and
/// `kubernetes` launchers run: `docker/build-images.sh --only lockbench` builds it.
pub const DEFAULT_IMAGE: &str = "lockbench/lockbench:local";

/// A launcher by name, as a scenario's `launcher = "processes"` and `chaos`/`matrix`
/// `--launcher` write it (the launchers a test can name without further settings).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, strum::Display,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum LauncherKind {
    /// Local subprocesses of this executable.
    #[default]
    Processes,
    /// Containers of [`DEFAULT_IMAGE`] through docker compose.
    Compose,
}

/// Which engine starts the workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// Local subprocesses of `exe` (the `lockbench` executable).
    Processes {
        /// The executable to run as `exe worker --coordinator URL --slot I --scratch DIR`.
        exe: PathBuf,
    },
    /// Containers of one docker compose project per strategy run.
    Compose(compose::ComposeLauncher),
    /// One Indexed Job per strategy run.
    #[cfg(feature = "kubernetes")]
    Kubernetes(kubernetes::KubernetesLauncher),
}

impl Launcher {
    /// The launcher of `kind` for this machine (`processes`: this executable; `compose`:
    /// [`DEFAULT_IMAGE`], checked as [`compose::ComposeLauncher::check`] does).
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when this executable cannot be found, or compose, the engine
    /// or the image is missing.
    pub fn of_kind(kind: LauncherKind) -> Result<Self, WorkersError> {
        match kind {
            LauncherKind::Processes => Ok(Launcher::Processes {
                exe: std::env::current_exe().map_err(|e| WorkersError::Launch {
                    launcher: kind.to_string(),
                    detail: format!("cannot find this executable to start workers: {e}"),
                })?,
            }),
            LauncherKind::Compose => Ok(Launcher::Compose(compose::ComposeLauncher::check(
                DEFAULT_IMAGE,
            )?)),
        }
    }

    /// `processes`, `compose` or `kubernetes`.
    pub fn name(&self) -> &'static str {
        match self {
            Launcher::Processes { .. } => "processes",
            Launcher::Compose(_) => "compose",
            #[cfg(feature = "kubernetes")]
            Launcher::Kubernetes(_) => "kubernetes",
        }
    }

    /// Where the control API listens: a free loopback port, except for `kubernetes`
    /// (`0.0.0.0:<control port>`, the port its Service names).
    pub fn control_bind(&self) -> SocketAddr {
        match self {
            #[cfg(feature = "kubernetes")]
            Launcher::Kubernetes(k) => ([0, 0, 0, 0], k.control_port).into(),
            _ => ([127, 0, 0, 1], 0).into(),
        }
    }

    /// The control API's URL as the workers use it, given the address it listens on.
    pub fn coordinator_url(&self, local: SocketAddr) -> String {
        match self {
            #[cfg(feature = "kubernetes")]
            Launcher::Kubernetes(k) => k.coordinator_url(),
            _ => format!("http://{local}"),
        }
    }

    /// The host the workers reach this machine's nodes and proxies by, when it is not the
    /// host in their URLs (loopback): the `kubernetes` Service's name.
    pub fn worker_host(&self) -> Option<String> {
        match self {
            #[cfg(feature = "kubernetes")]
            Launcher::Kubernetes(k) => Some(k.service_host()),
            _ => None,
        }
    }

    /// Starts `workers` workers for the control API at `coordinator`; `dir` is the strategy's
    /// `workers/` directory (logs `w<i>.log`, scratch `w<i>.scratch`, the launcher's files).
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when the engine refuses (whatever was started is stopped).
    pub async fn launch(
        &self,
        workers: u32,
        coordinator: &str,
        dir: &Path,
    ) -> Result<Launched, WorkersError> {
        std::fs::create_dir_all(dir).map_err(|e| WorkersError::Launch {
            launcher: self.name().into(),
            detail: format!("{}: {e}", dir.display()),
        })?;
        Ok(match self {
            Launcher::Processes { exe } => {
                Launched::Processes(processes::launch(exe, workers, coordinator, dir)?)
            }
            Launcher::Compose(c) => Launched::Compose(c.launch(workers, coordinator, dir).await?),
            #[cfg(feature = "kubernetes")]
            Launcher::Kubernetes(k) => {
                Launched::Kubernetes(k.launch(workers, coordinator, dir).await?)
            }
        })
    }
}

/// The started workers, by slot.
#[derive(Debug)]
pub enum Launched {
    /// Local subprocesses.
    Processes(processes::Processes),
    /// A compose project's containers.
    Compose(compose::ComposeProject),
    /// An Indexed Job's pods.
    #[cfg(feature = "kubernetes")]
    Kubernetes(kubernetes::IndexedJob),
}

impl Launched {
    /// The process id of slot `i`'s worker on this host while it runs (`None` when it runs
    /// elsewhere, or has not started).
    pub fn pid(&self, i: usize) -> Option<u32> {
        match self {
            Launched::Processes(p) => p.pid(i),
            Launched::Compose(c) => c.pid(i),
            #[cfg(feature = "kubernetes")]
            Launched::Kubernetes(_) => None,
        }
    }

    /// Whether slot `i`'s worker has exited for good (and how); `None` while it runs.
    pub fn exited(&mut self, i: usize) -> Option<String> {
        match self {
            Launched::Processes(p) => p.exited(i),
            Launched::Compose(c) => c.exited(i),
            #[cfg(feature = "kubernetes")]
            Launched::Kubernetes(k) => k.exited(i),
        }
    }

    /// Kills slot `i`'s worker and waits for it (bounded).
    pub async fn kill(&mut self, i: usize) {
        match self {
            Launched::Processes(p) => p.kill(i).await,
            Launched::Compose(c) => c.kill(i).await,
            #[cfg(feature = "kubernetes")]
            Launched::Kubernetes(k) => k.kill(i).await,
        }
    }

    /// Stops every worker still running and removes what the engine made for them (bounded).
    pub async fn stop_all(&mut self) {
        match self {
            Launched::Processes(p) => p.stop_all().await,
            Launched::Compose(c) => c.down().await,
            #[cfg(feature = "kubernetes")]
            Launched::Kubernetes(k) => k.delete().await,
        }
    }
}

/// `s` as a DNS label: lowercase `a-z0-9-`, no leading, trailing or doubled `-`, at most `max`
/// characters.
pub fn dns_label(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in s.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    let cut: String = out.chars().take(max).collect();
    cut.trim_end_matches('-').to_string()
}

/// A name for `dir`'s run and strategy (`dir` = `<run>/<strategy>/workers`) that compose
/// projects and Kubernetes objects accept: [`dns_label`] of `prefix-<run>-<strategy>`, the
/// run's directory name (its timestamp first) cut short when the whole does not fit `max`.
pub fn run_object_name(prefix: &str, dir: &Path, max: usize) -> String {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| dns_label(&n.to_string_lossy(), max))
            .unwrap_or_default()
    };
    let strategy_dir = dir.parent();
    let (run, strategy) = (
        name(strategy_dir.and_then(Path::parent)),
        name(strategy_dir),
    );
    let room = max.saturating_sub(prefix.len() + strategy.len() + 2);
    let run = dns_label(&run, room);
    let parts: Vec<&str> = [prefix, &run, &strategy]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    dns_label(&parts.join("-"), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_labels_and_keep_the_strategy() {
        let dir = Path::new("/r/20261203T140512Z-run/redlock/workers");
        assert_eq!(
            run_object_name("lockbench", dir, 63),
            "lockbench-20261203t140512z-run-redlock"
        );
        // Cut from the run's end: its timestamp is kept.
        assert_eq!(run_object_name("lb", dir, 24), "lb-20261203t1405-redlock");
        let odd = Path::new("/r/My_Run.2/pg-advisory-fenced/workers");
        assert_eq!(
            run_object_name("lockbench", odd, 63),
            "lockbench-my-run-2-pg-advisory-fenced"
        );
    }
}
