//! Ctrl-C / SIGTERM for the long-running subcommands: the first signal asks the run to stop
//! (clients finish, faults heal, processes stop, containers are removed, partial results stay);
//! a second one kills every started process, removes every container and network of the run
//! (`docker rm -f`), and exits at once.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use lockbench::topology::{docker, reaper};

/// Installed signal handling; drop or [`Shutdown::disarm`] it when the run is over.
pub struct Shutdown {
    /// Becomes `true` at the first SIGINT/SIGTERM.
    pub requested: watch::Receiver<bool>,
    code: Arc<AtomicU8>,
    task: JoinHandle<()>,
}

impl Shutdown {
    /// Installs the handlers (before anything starts, so an early Ctrl-C still tears down
    /// cleanly) and the panic hook that kills every started process.
    pub fn install() -> Result<Self> {
        let mut signals =
            reaper::TerminationListener::install().context("cannot install signal handlers")?;
        reaper::install_panic_hook();
        docker::install_panic_hook();
        let (tx, requested) = watch::channel(false);
        let code = Arc::new(AtomicU8::new(130));
        let slot = code.clone();
        let task = tokio::spawn(async move {
            let first = signals.recv().await;
            slot.store(first.exit_code() as u8, Ordering::Release);
            eprintln!("\ninterrupted: stopping, healing faults, keeping partial results (again to force quit)");
            let _ = tx.send(true);
            signals.recv().await;
            reaper::kill_all();
            docker::remove_all_blocking();
            std::process::exit(first.exit_code());
        });
        Ok(Self {
            requested,
            code,
            task,
        })
    }

    /// The exit code for an interrupted run: 130 after SIGINT, 143 after SIGTERM.
    pub fn interrupted_exit_code(&self) -> ExitCode {
        ExitCode::from(self.code.load(Ordering::Acquire))
    }

    /// Stops listening (the run is over).
    pub fn disarm(&self) {
        self.task.abort();
    }
}
