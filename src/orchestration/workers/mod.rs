//! Multi-process runs (issue 26): one coordinator (`lockbench run … --workers N`) and N
//! `lockbench worker` processes, each running a disjoint range of the clients against the
//! coordinator's topology and the shared PostgreSQL ledger. `docs/workers.md` describes the
//! control API, the launchers and the clock bound.
//!
//! | module | concept |
//! |---|---|
//! | [`protocol`] | the control API's JSON messages (slot, barrier, batches, final report) |
//! | [`clock`] | each worker's clock offset and its bound, from round trips |
//! | [`merge`] | the workers' histories as one, windows widened by the clock bound, a lost worker's open ops `info` |
//! | `api` | the control API's server side: the board of workers and the axum handlers |
//! | [`coordinator`] | one strategy's multi-worker run: slots, supervision, merged results |
//! | [`faults`] | the nemesis schedule run by the coordinator: per-worker proxies, SIGSTOP/SIGKILL of a worker, a paused worker not counted lost |
//! | [`launcher`] | how workers are started: `processes` (local subprocesses) |
//! | [`worker`] | the worker's side: register, connect, barrier, run, stream, report |

mod api;
pub mod clock;
pub mod coordinator;
mod evidence;
pub mod faults;
pub mod launcher;
pub mod merge;
pub mod protocol;
pub mod worker;

use std::time::Duration;

/// How often a worker sends a batch (its heartbeat), even an empty one.
pub const HEARTBEAT: Duration = Duration::from_millis(500);

/// Clock probes a worker makes at registration (the shortest round trip sets its estimate).
pub const REGISTRATION_PROBES: usize = 8;

/// A worker not heard from for this long is lost (coordinator side); a coordinator that has not
/// answered for this long is gone, and the worker stops its clients and exits (worker side).
pub const SILENCE_LIMIT: Duration = Duration::from_secs(5);

/// Errors of a multi-worker run, on either side.
#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    /// The coordinator could not be reached, or stopped answering (worker side).
    #[error("coordinator {url}: {detail}")]
    Coordinator {
        /// Its URL.
        url: String,
        /// What failed.
        detail: String,
    },
    /// A message that does not parse or does not fit the run.
    #[error("control API: {0}")]
    Protocol(String),
    /// The control API could not listen.
    #[error("control API: cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Workers could not be started.
    #[error("launcher {launcher}: {detail}")]
    Launch {
        /// The launcher.
        launcher: String,
        /// Why.
        detail: String,
    },
    /// Not every worker registered, got ready or reported in time.
    #[error("{0}")]
    Timeout(String),
    /// The fault schedule could not inject or heal a fault.
    #[error(transparent)]
    Nemesis(#[from] crate::nemesis::NemesisError),
    /// The run's ledger, history or clients failed.
    #[error(transparent)]
    Experiment(#[from] crate::orchestration::experiment::ExperimentError),
    /// A results file could not be written or read.
    #[error("{path}: {detail}")]
    Files {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        detail: String,
    },
}

/// µs since the Unix epoch on this machine's wall clock.
pub fn unix_now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Splits `total` clients into `workers` contiguous ranges, as `(first id, count)`, the first
/// `total % workers` ranges one larger. Every worker gets at least one client when `total >=
/// workers`.
pub fn client_ranges(total: u32, workers: u32) -> Vec<(u32, u32)> {
    let workers = workers.max(1);
    let (each, extra) = (total / workers, total % workers);
    let mut first = 0;
    (0..workers)
        .map(|w| {
            let n = each + u32::from(w < extra);
            let range = (first, n);
            first += n;
            range
        })
        .collect()
}

/// Splits an op count as [`client_ranges`] splits clients (the shares sum to `total`).
pub fn op_shares(total: u64, workers: u32) -> Vec<u64> {
    let workers = u64::from(workers.max(1));
    let (each, extra) = (total / workers, total % workers);
    (0..workers).map(|w| each + u64::from(w < extra)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ranges_are_disjoint_contiguous_and_cover_every_client() {
        assert_eq!(client_ranges(10, 3), vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(client_ranges(6, 3), vec![(0, 2), (2, 2), (4, 2)]);
        assert_eq!(client_ranges(30_000, 6)[5], (25_000, 5_000));
        assert_eq!(op_shares(10, 3), vec![4, 3, 3]);
        assert_eq!(op_shares(10, 3).iter().sum::<u64>(), 10);
    }
}
