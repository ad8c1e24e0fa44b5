//! How a multi-worker run's workers are started: `processes` runs `lockbench worker` as local
//! subprocesses (also how one big machine's cores are used). Every child is killed when the
//! run ends, on every path: [`Launched::stop_all`] on the normal and error paths, and
//! `kill_on_drop` when the coordinator unwinds from a panic. A worker whose coordinator dies
//! without either stops by itself ([`super::SILENCE_LIMIT`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::WorkersError;

/// A launcher by name, as a scenario's `launcher = "processes"` and `--launcher` write it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, strum::Display,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum LauncherKind {
    /// Local subprocesses of this executable.
    #[default]
    Processes,
}

/// Which engine starts the workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// Local subprocesses of `exe` (the `lockbench` executable).
    Processes {
        /// The executable to run as `exe worker --coordinator URL --slot I --scratch DIR`.
        exe: PathBuf,
    },
}

impl Launcher {
    /// The launcher of `kind` for this machine (`processes`: this executable).
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when this executable cannot be found.
    pub fn of_kind(kind: LauncherKind) -> Result<Self, WorkersError> {
        match kind {
            LauncherKind::Processes => Ok(Launcher::Processes {
                exe: std::env::current_exe().map_err(|e| WorkersError::Launch {
                    launcher: kind.to_string(),
                    detail: format!("cannot find this executable to start workers: {e}"),
                })?,
            }),
        }
    }

    /// `processes`.
    pub fn name(&self) -> &'static str {
        match self {
            Launcher::Processes { .. } => "processes",
        }
    }

    /// Starts `workers` workers for the control API at `coordinator`, each logging to
    /// `<dir>/w<i>.log` and writing its scratch files under `<dir>/w<i>.scratch`.
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when a process cannot be started (those already started are
    /// killed when the returned value would have been dropped).
    pub fn launch(
        &self,
        workers: u32,
        coordinator: &str,
        dir: &Path,
    ) -> Result<Launched, WorkersError> {
        let Launcher::Processes { exe } = self;
        let err = |detail: String| WorkersError::Launch {
            launcher: self.name().into(),
            detail,
        };
        std::fs::create_dir_all(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        let mut children = Vec::new();
        for i in 0..workers {
            let log = std::fs::File::create(dir.join(format!("w{i}.log")))
                .map_err(|e| err(format!("w{i}.log: {e}")))?;
            let log2 = log.try_clone().map_err(|e| err(e.to_string()))?;
            let child = Command::new(exe)
                .arg("worker")
                .arg("--coordinator")
                .arg(coordinator)
                .arg("--slot")
                .arg(i.to_string())
                .arg("--scratch")
                .arg(dir.join(format!("w{i}.scratch")))
                .stdin(Stdio::null())
                .stdout(Stdio::from(log))
                .stderr(Stdio::from(log2))
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| err(format!("{}: {e}", exe.display())))?;
            children.push(Some(child));
        }
        Ok(Launched { children })
    }
}

/// The started workers, by slot.
#[derive(Debug)]
pub struct Launched {
    children: Vec<Option<Child>>,
}

impl Launched {
    /// The process id of slot `i`'s worker while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.children.get(i)?.as_ref()?.id()
    }

    /// Whether slot `i`'s worker has exited (and how); `None` while it runs.
    pub fn exited(&mut self, i: usize) -> Option<String> {
        let child = self.children.get_mut(i)?.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot wait for it: {e}")),
        }
    }

    /// Kills slot `i`'s worker and waits for it (bounded).
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children.get_mut(i).and_then(Option::take) {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        }
    }

    /// Kills every worker still running and waits for each (bounded).
    pub async fn stop_all(&mut self) {
        for i in 0..self.children.len() {
            if self.exited(i).is_none() {
                self.kill(i).await;
            }
        }
    }
}
