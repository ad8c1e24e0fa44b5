//! `lockbench worker --coordinator URL`: one share of a multi-worker run's clients
//! ([`lockbench::orchestration::workers::worker`]). Exit 0 when it ran and reported (or the
//! coordinator called the run off before the start), 4 when the coordinator could not be
//! reached or went away, or the clients could not run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use lockbench::orchestration::workers::worker::{run_worker, WorkerExit, WorkerOptions};

use super::exit;

/// Options of `lockbench worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The coordinator's control API, e.g. http://127.0.0.1:40123 (given by `run --workers`
    /// in the worker's command line, or in the environment of a Kubernetes worker pod).
    #[arg(long, value_name = "URL", env = "LOCKBENCH_COORDINATOR")]
    pub coordinator: String,
    /// The slot to ask for (0..N); default the next free one. A pod of an Indexed Job gets its
    /// completion index.
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    pub slot: Option<u32>,
    /// Where the worker keeps its own history while it runs (removed when it has reported);
    /// default a new directory under the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
}

/// Runs `lockbench worker`.
pub async fn run(args: WorkerArgs) -> Result<ExitCode> {
    let url = url::Url::parse(&args.coordinator)
        .map_err(|e| exit::bad_input(anyhow::anyhow!("--coordinator {}: {e}", args.coordinator)))?;
    if !matches!(url.scheme(), "http") {
        return Err(exit::bad_input(anyhow::anyhow!(
            "--coordinator {}: the control API is plain http://host:port",
            args.coordinator
        )));
    }
    let scratch = args.scratch.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("lockbench-worker-{}", std::process::id()))
    });
    let opts = WorkerOptions {
        coordinator: args.coordinator.clone(),
        slot: args.slot,
        scratch,
    };
    match run_worker(&opts).await? {
        WorkerExit::Reported { worker, events } => {
            eprintln!("worker {worker}: reported {events} history events");
        }
        WorkerExit::Aborted(why) => eprintln!("worker: the run was called off: {why}"),
    }
    Ok(exit::code(exit::OK))
}
