//! The `processes` launcher: `lockbench worker` as local subprocesses (also how one big
//! machine's cores are used). Every child is killed when the run ends, on every path:
//! [`Processes::stop_all`] on the normal and error paths, and `kill_on_drop` when the
//! coordinator unwinds from a panic.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::super::WorkersError;

/// Starts `workers` subprocesses `exe worker --coordinator URL --slot I --scratch
/// <dir>/w<i>.scratch`, each logging to `<dir>/w<i>.log`.
///
/// # Errors
/// [`WorkersError::Launch`] when a process cannot be started (those already started are
/// killed as the partial set is dropped).
pub(super) fn launch(
    exe: &Path,
    workers: u32,
    coordinator: &str,
    dir: &Path,
) -> Result<Processes, WorkersError> {
    let err = |detail: String| WorkersError::Launch {
        launcher: "processes".into(),
        detail,
    };
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
    Ok(Processes { children })
}

/// The started workers, by slot.
#[derive(Debug)]
pub struct Processes {
    children: Vec<Option<Child>>,
}

impl Processes {
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
