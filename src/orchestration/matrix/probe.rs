//! The uncontended probe: what a strategy's acquire costs when nobody else wants the lock
//! (one client, no hold, its home topology, no fault), so the efficiency rule ranks locks by
//! their own cost and not by the queueing of a hold-bound workload.

use serde::{Deserialize, Serialize};

/// One strategy's uncontended acquire latency. Latencies in µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Strategy name.
    pub strategy: String,
    /// Topology it ran on.
    pub topology: String,
    /// Servers the strategy needs (Redis nodes, PostgreSQL servers, etcd members).
    pub servers: u32,
    /// Successful acquires measured.
    pub acquires: u64,
    /// Acquire latency p50, µs.
    pub p50_us: u64,
    /// Acquire latency p99, µs.
    pub p99_us: u64,
    /// Its run directory, relative to the matrix directory (`probes/single`).
    pub dir: String,
    /// Why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Runs the uncontended probe of `strategy` on its home topology under
/// `matrix_dir/probes/<strategy>/` with `backend`; a probe that cannot run is a record with
/// `error` set.
pub async fn run_probe(
    strategy: crate::strategy::StrategyKind,
    backend: &crate::orchestration::runner::Backend,
    matrix_dir: &std::path::Path,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> ProbeRecord {
    let _ = (backend, matrix_dir, shutdown);
    ProbeRecord {
        strategy: strategy.to_string(),
        topology: String::new(),
        servers: 0,
        acquires: 0,
        p50_us: 0,
        p99_us: 0,
        dir: String::new(),
        error: Some("not implemented yet".into()),
    }
}
