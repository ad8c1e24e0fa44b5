//! `lockbench adapter check`: a fixed script that tells an adapter author whether the adapter
//! keeps the protocol (`docs/adapter-protocol.md`) before any verdict about the library is
//! trusted. It starts the adapter's own topology (local Redis nodes in `dir`), runs the steps
//! below one after another with one [`LockClient`], and stops the nodes.
//!
//! | step | passes when |
//! |---|---|
//! | acquire and release | an acquire returns a lease and its release finds it still held |
//! | contended acquire is busy | a second logical client's acquire of the same resource fails as `busy` |
//! | release after expiry is not owner | a release after the TTL finds the lock not ours |
//! | extend | an extend of a held lock succeeds and the release then finds it held |
//! | a request that times out is unknown | with the adapter stopped (`SIGSTOP`), an acquire ends in lockbench's timeout, recorded as `info` |
//! | stdin EOF makes it exit | with its stdin closed the adapter exits within 2 s |

use std::path::Path;
use std::time::Duration;

use crate::driver::client::classify;
use crate::history::OpKind;
use crate::lease::{AcquireError, NodeFailureKind, ReleaseFinding};
use crate::strategy::{LockClient, RetryPolicy, StrategyKind, StrategyOptions};
use crate::topology::{LocalTopologyOptions, Topology, TopologyKind};

/// The TTL of the script's locks (whole seconds: some libraries take no less).
const TTL: Duration = Duration::from_secs(1);

/// One step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What was checked.
    pub name: &'static str,
    /// `Ok(what was seen)` or `Err(what was wrong)`.
    pub outcome: Result<String, String>,
}

/// Why the script could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// The strategy is not an adapter.
    #[error("{0} is not an adapter strategy (use adapter:redis-py, adapter:python-redis-lock, adapter:pottery-redlock)")]
    NotAnAdapter(StrategyKind),
    /// The nodes could not start.
    #[error("cannot start the {topology} topology: {message}")]
    Topology {
        /// The topology.
        topology: TopologyKind,
        /// Why.
        message: String,
    },
    /// The adapter could not start or refused `init`.
    #[error("{0}")]
    Connect(String),
}

/// Runs the script against the adapter of `kind` on nodes started under `dir`.
///
/// # Errors
/// [`ConformanceError`] when the script cannot start; failed steps are [`Step`]s, not errors.
pub async fn check_adapter(kind: StrategyKind, dir: &Path) -> Result<Vec<Step>, ConformanceError> {
    if !kind.is_adapter() {
        return Err(ConformanceError::NotAnAdapter(kind));
    }
    let topology_kind = TopologyKind::default_for(kind);
    let topology = Topology::start_local(topology_kind, &LocalTopologyOptions::new(dir))
        .await
        .map_err(|e| ConformanceError::Topology {
            topology: topology_kind,
            message: e.to_string(),
        })?;
    let mut opts = StrategyOptions::new(kind, TTL);
    opts.retry = RetryPolicy::no_retry();
    opts.key_prefix = "lockbench:conformance:".into();
    opts.adapter_log = Some(dir.join("adapter.log"));
    let connected = LockClient::connect(&topology.endpoints(), opts, &Default::default()).await;
    let steps = match connected {
        Ok(client) => Ok(run_steps(&client).await),
        Err(e) => Err(ConformanceError::Connect(e.to_string())),
    };
    topology.shutdown().await;
    steps
}

async fn run_steps(client: &LockClient) -> Vec<Step> {
    vec![
        Step {
            name: "acquire and release",
            outcome: acquire_release(client).await,
        },
        Step {
            name: "contended acquire is busy",
            outcome: contended(client).await,
        },
        Step {
            name: "release after expiry is not owner",
            outcome: release_after_expiry(client).await,
        },
        Step {
            name: "extend",
            outcome: extend(client).await,
        },
        Step {
            name: "a request that times out is unknown",
            outcome: timeout_is_unknown(client).await,
        },
        Step {
            name: "stdin EOF makes it exit",
            outcome: match client.close_adapter(Duration::from_secs(2)).await {
                Some(status) => Ok(format!("exited ({status})")),
                None => Err("still running 2 s after its stdin closed".into()),
            },
        },
    ]
}

async fn release_finding(
    client: &LockClient,
    lease: &crate::lease::Lease,
) -> Result<ReleaseFinding, String> {
    client
        .release(lease)
        .await
        .map(|o| o.finding())
        .map_err(|e| format!("release failed: {e}"))
}

async fn acquire_release(client: &LockClient) -> Result<String, String> {
    let lease = client
        .acquire("c1")
        .await
        .map_err(|e| format!("acquire: {e}"))?;
    match release_finding(client, &lease).await? {
        ReleaseFinding::Held => Ok(format!("owner {}", lease.owner)),
        other => Err(format!("release found {other:?}, expected Held")),
    }
}

async fn contended(client: &LockClient) -> Result<String, String> {
    let first = client
        .acquire("c2")
        .await
        .map_err(|e| format!("first acquire: {e}"))?;
    let second = client.acquire("c2").await;
    let _ = client.release(&first).await;
    match second {
        Err(e) if e.is_contention() && classify(&e).0 == OpKind::Fail => Ok(e.to_string()),
        Err(e) => Err(format!("the second acquire failed, but not as busy: {e}")),
        Ok(lease) => {
            let _ = client.release(&lease).await;
            Err("the second acquire of a held lock succeeded".into())
        }
    }
}

async fn release_after_expiry(client: &LockClient) -> Result<String, String> {
    let lease = client
        .acquire("c3")
        .await
        .map_err(|e| format!("acquire: {e}"))?;
    tokio::time::sleep(TTL + Duration::from_millis(300)).await;
    match release_finding(client, &lease).await? {
        ReleaseFinding::Lost => Ok("not owner".into()),
        other => Err(format!(
            "release after the TTL found {other:?}, expected not owner"
        )),
    }
}

async fn extend(client: &LockClient) -> Result<String, String> {
    let lease = client
        .acquire("c4")
        .await
        .map_err(|e| format!("acquire: {e}"))?;
    let extended = client.extend(&lease).await;
    let finding = release_finding(client, &lease).await?;
    match (extended, finding) {
        (Ok(_), ReleaseFinding::Held) => Ok("extended, then released".into()),
        (Err(e), _) => Err(format!("extend: {e}")),
        (Ok(_), other) => Err(format!("after the extend the release found {other:?}")),
    }
}

async fn timeout_is_unknown(client: &LockClient) -> Result<String, String> {
    let pid = client.adapter_pid().ok_or("the adapter process is gone")?;
    let signal = |sig| {
        // SAFETY: kill(2) to the adapter process this client started.
        unsafe { libc::kill(pid as libc::pid_t, sig) }
    };
    if signal(libc::SIGSTOP) != 0 {
        return Err(format!(
            "cannot stop it: {}",
            std::io::Error::last_os_error()
        ));
    }
    let result = client.acquire("c5").await;
    signal(libc::SIGCONT);
    if let Some(why) = client.failure() {
        return Err(format!("the adapter failed instead: {why}"));
    }
    match result {
        Err(
            e @ AcquireError::Adapter {
                kind: NodeFailureKind::Timeout,
                ..
            },
        ) if classify(&e).0 == OpKind::Info => Ok(e.to_string()),
        Err(e) => Err(format!("expected an unknown outcome, got: {e}")),
        Ok(_) => Err("a stopped adapter answered".into()),
    }
}
