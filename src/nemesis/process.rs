//! The process family: `kill` (SIGKILL, or `docker kill`; restarted at the heal) and
//! `pause-node` (SIGSTOP / `docker pause`; SIGCONT at the heal) of data nodes, and
//! `client-pause` (SIGSTOP) / `client-crash` (SIGKILL) of a `lockbench worker` process
//! (target `worker:I`). Process faults need nodes lockbench started (local or containers).
//!
//! After every heal, [`Nemesis::ensure_processes_running`] makes sure every node and Sentinel
//! is resumed and running.

use super::faults::Injection;
use super::{FaultKind, FaultStep, Nemesis, NemesisError};

/// A `lockbench worker` process of a multi-worker run, as the nemesis acts on it (target
/// `worker:I`): its pid and the client ids it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerProcess {
    /// Its process id (a child of this process: it cannot be reused while unwaited).
    pub pid: u32,
    /// Its first client id.
    pub first_client: u32,
    /// How many clients it runs.
    pub clients: u32,
}

/// What undoes a process fault.
#[derive(Debug)]
pub(super) enum Undo {
    /// Restart these nodes (those still down).
    Restart(Vec<String>),
    /// Resume these paused nodes.
    Resume(Vec<String>),
    /// SIGCONT to a stopped worker process.
    ResumeWorker {
        /// Its process id.
        pid: u32,
        /// The target as written (`worker:1`), for errors.
        target: String,
    },
}

impl Nemesis {
    /// `kill`: SIGKILL (or `docker kill`) of every target node; on Docker, the proxies'
    /// connections to them are closed too ([`Nemesis::drop_connections`]).
    ///
    /// # Errors
    /// Target resolution; the kill failed.
    pub(super) async fn kill(&mut self, step: &FaultStep) -> Result<Injection, NemesisError> {
        let nodes = self.resolve_nodes(&step.target).await?;
        for n in &nodes {
            self.proxied.topology_mut().node_handle(n)?.kill().await?;
        }
        if self.proxied.topology().is_docker() {
            self.drop_connections(&nodes).await?;
        }
        let detail = format!("kill -9 (persistence {})", self.persistence_of(&nodes));
        Ok(Injection::lasting(
            nodes.clone(),
            Undo::Restart(nodes),
            detail,
        ))
    }

    /// `pause-node`: SIGSTOP (or `docker pause`) of every target node.
    ///
    /// # Errors
    /// Target resolution; a pause failed (the nodes already paused are resumed).
    pub(super) async fn pause_nodes(
        &mut self,
        step: &FaultStep,
    ) -> Result<Injection, NemesisError> {
        let nodes = self.resolve_nodes(&step.target).await?;
        let mut done = Vec::new();
        for n in &nodes {
            let paused = match self.proxied.topology_mut().node_handle(n) {
                Ok(mut x) => x.pause().await,
                Err(e) => Err(e),
            };
            if let Err(e) = paused {
                self.undo_process(Undo::Resume(done)).await.ok();
                return Err(e.into());
            }
            done.push(n.clone());
        }
        Ok(Injection::lasting(nodes, Undo::Resume(done), "SIGSTOP"))
    }

    /// `client-pause` (SIGSTOP, healed by SIGCONT) or `client-crash` (SIGKILL) of a worker
    /// process: every one of its clients stalls or dies with it, its lease renewals and its
    /// heartbeats too, as when an application host stops the world.
    ///
    /// # Errors
    /// [`NemesisError::Target`] for a worker that does not exist; [`NemesisError::Signal`].
    pub(super) fn worker_process_fault(&self, step: &FaultStep) -> Result<Injection, NemesisError> {
        let (_, w, targets) = self.worker_of(step)?;
        let crash = step.fault == FaultKind::ClientCrash;
        let (sig, name) = if crash {
            (libc::SIGKILL, "SIGKILL")
        } else {
            (libc::SIGSTOP, "SIGSTOP")
        };
        signal_worker(w.pid, sig).map_err(|source| NemesisError::Signal {
            fault: format!("{} {}", step.fault, step.target),
            signal: name,
            pid: w.pid,
            source,
        })?;
        Ok(if crash {
            let detail = format!(
                "SIGKILL of worker process {}: its clients stop, no release",
                w.pid
            );
            Injection::instant(targets, detail)
        } else {
            let detail = format!(
                "SIGSTOP of worker process {}: its clients, renewals and heartbeats stall",
                w.pid
            );
            let undo = Undo::ResumeWorker {
                pid: w.pid,
                target: step.target.to_string(),
            };
            Injection::lasting(targets, undo, detail)
        })
    }

    /// Heals a process fault: restarts the nodes still down, resumes the paused ones, or
    /// sends SIGCONT to the worker (one that exited meanwhile needs none).
    ///
    /// # Errors
    /// The first failure; every node is still tried.
    pub(super) async fn undo_process(&mut self, undo: Undo) -> Result<(), NemesisError> {
        let mut first: Option<NemesisError> = None;
        match undo {
            Undo::Restart(nodes) => {
                for n in nodes {
                    let restarted = async {
                        let mut node = self.proxied.topology_mut().node_handle(&n)?;
                        if !node.is_running().await {
                            node.restart().await?;
                        }
                        Ok::<_, crate::topology::TopologyError>(())
                    };
                    if let Err(e) = restarted.await {
                        first.get_or_insert(e.into());
                    }
                }
            }
            Undo::Resume(nodes) => {
                for n in nodes {
                    let resumed = match self.proxied.topology_mut().node_handle(&n) {
                        Ok(mut node) if node.is_paused() => node.resume().await,
                        Ok(_) => Ok(()),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = resumed {
                        first.get_or_insert(e.into());
                    }
                }
            }
            Undo::ResumeWorker { pid, target } => {
                // A worker that exited meanwhile (ESRCH) needs no resume.
                if let Err(e) = signal_worker(pid, libc::SIGCONT) {
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        first.get_or_insert(NemesisError::Signal {
                            fault: format!("client-pause {target}"),
                            signal: "SIGCONT",
                            pid,
                            source: e,
                        });
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The end state of every heal: every node and Sentinel lockbench started resumed and
    /// running (nothing to do on external nodes).
    ///
    /// # Errors
    /// The first node that could not be resumed or restarted; the others are still tried.
    pub(super) async fn ensure_processes_running(&mut self) -> Result<(), NemesisError> {
        let topology = self.proxied.topology_mut();
        if topology.is_external() {
            return Ok(());
        }
        let mut first: Option<NemesisError> = None;
        for mut node in topology.node_handles() {
            if node.is_paused() {
                if let Err(e) = node.resume().await {
                    first.get_or_insert(e.into());
                }
            }
            if !node.is_running().await {
                if let Err(e) = node.restart().await {
                    first.get_or_insert(e.into());
                }
            }
        }
        for mut node in topology.sentinel_handles() {
            if node.is_paused() {
                node.resume().await.ok();
            }
            if !node.is_running().await {
                if let Err(e) = node.restart().await {
                    first.get_or_insert(e.into());
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Closes every open connection of the nodes' client proxies (disable, then enable).
    ///
    /// A killed local process's sockets are closed by its kernel, and the proxy passes the
    /// close on to the clients. A killed container's network namespace can vanish before its
    /// FIN leaves, so the proxy's upstream connection would hang until TCP gives up and the
    /// clients would wait on it; closing them here gives clients what a local kill gives.
    async fn drop_connections(&self, nodes: &[String]) -> Result<(), NemesisError> {
        for p in nodes.iter().flat_map(|n| self.proxied.client_proxies_of(n)) {
            // A proxy a `refuse` partition holds disabled has no connections and stays so.
            if self.held_disabled(&p) {
                continue;
            }
            self.proxied.api().set_enabled(&p, false).await?;
            self.proxied.api().set_enabled(&p, true).await?;
        }
        Ok(())
    }

    /// The persistence of the first of `nodes` (`unknown` if none is a node handle).
    fn persistence_of(&mut self, nodes: &[String]) -> String {
        self.proxied
            .topology_mut()
            .node_handles()
            .iter()
            .find(|n| nodes.iter().any(|x| x == n.name()))
            .map_or("unknown".to_string(), |n| n.persistence().to_string())
    }
}

/// kill(2) of a worker process this process started.
fn signal_worker(pid: u32, sig: libc::c_int) -> std::io::Result<()> {
    // 0 (and anything that is not a positive pid_t) would signal a whole process group.
    if pid == 0 || pid > i32::MAX as u32 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("no worker process id ({pid})"),
        ));
    }
    // SAFETY: kill(2) on the pid of a child worker process; no memory effects.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
