//! The uncontended probe: what a strategy's acquire costs when nobody else wants the lock
//! (one client, no hold, its home topology, no fault), so the efficiency rule ranks locks by
//! their own cost and not by the queueing of a hold-bound workload.
//!
//! The probe is a [`Test`] like any other, run by the same [`Runner`] into
//! `<matrix>/probes/<strategy>/` (a run directory: `config.json`, `summary.json`, the
//! `.hgrm` percentiles):
//! - one client, one resource, hold 0 ms, closed loop, [`PROBE_ACQUIRES`] acquire attempts;
//! - the row's home topology ([`MatrixRow::home_topology`]: `single` for the one-node
//!   Redis strategies, `five` for Redlock, `sentinel` for `single-wait`, `postgres`, `etcd`;
//!   `cluster` for a cluster row),
//!   behind the proxies as every matrix trial is, so the uncontended figures sit beside the
//!   cells' contended ones on the same path;
//! - TTL [`PROBE_TTL`] (the matrix's default) and every other client option from
//!   [`ClientSpec::with_ttl`];
//! - **audit off**: one client cannot overlap with itself, so history, ledger and checker
//!   would have nothing to find; they would only add a ledger write per section and a checker
//!   pass to the run. The acquire latency is timed around the strategy's acquire alone either
//!   way.
//!
//! Measured on the 2-core development machine (debug build, a matrix build beside it), 2,000
//! attempts take about 1 s (`single`) to about 10 s (`etcd-lease`, two round trips and a Raft
//! write per acquire) plus the topology's start; p99 then rests on the 20 slowest samples.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::setup::MatrixRow;
use crate::driver::{HoldTime, Pacing, StopCondition, Workload};
use crate::orchestration::runner::{Backend, Runner};
use crate::orchestration::test::{defaults, CheckerSpec, ClientSpec, Test, TopologySpec};
use crate::results::{RunDir, StrategySummary};
use crate::topology::{Persistence, TopologyKind};

/// Acquire attempts of one probe (one client, so also its successful acquires when nothing
/// fails): p99 rests on the 20 slowest.
pub const PROBE_ACQUIRES: u64 = 2_000;

/// Lease TTL of the probe (the matrix's default TTL; an uncontended acquire never waits for
/// it).
pub const PROBE_TTL: Duration = Duration::from_secs(1);

/// One strategy's uncontended acquire latency. Latencies in µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Strategy name.
    pub strategy: String,
    /// Topology it ran on.
    pub topology: String,
    /// Servers the strategy needs ([`servers_to_run`]: Redis nodes and Sentinels, PostgreSQL
    /// servers, etcd members), plus one for a row behind PgBouncer (the pooler is run too).
    pub servers: u32,
    /// Successful acquires measured.
    pub acquires: u64,
    /// Acquire latency p50, µs.
    pub p50_us: u64,
    /// Acquire latency p99, µs.
    pub p99_us: u64,
    /// Its run directory, relative to the matrix directory (`probes/single`).
    pub dir: String,
    /// Why it did not run (or measured no successful acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The server processes a team has to run (and monitor, upgrade, back up) for a strategy on
/// `topology`: 1 Redis node (`single`); 5 independent Redis nodes (`five`); 6 for `sentinel`
/// (a primary, two replicas and three Sentinels: the Sentinels are processes to operate like
/// any other, and failover needs a quorum of them); 1 PostgreSQL server; 3 etcd members
/// (a Raft cluster that survives one loss); 6 for `cluster` (3 primaries and their replicas,
/// the smallest cluster `redis-cli --cluster create` makes). 0 for `external` (not ours to
/// count). Per topology in its service's registration ([`super::service`]).
pub fn servers_to_run(topology: TopologyKind) -> u32 {
    match topology.service() {
        Some(_) => super::service::topology(topology).servers,
        None => 0,
    }
}

/// The probe's test for a row (see the module docs): a row behind PgBouncer is probed
/// through it, a cluster row on a Redis Cluster (the lock's shard reached through its proxy).
pub fn probe_test(row: impl Into<MatrixRow>) -> Test {
    let row = row.into();
    let strategy = row.strategy;
    Test {
        name: format!("probe-{}", row.dir_name()),
        claim: None,
        description: format!(
            "uncontended probe of {row}: 1 client, hold 0 ms, {PROBE_ACQUIRES} acquires, no fault"
        ),
        topology: TopologySpec {
            kind: row.home_topology(),
            urls: Vec::new(),
            persistence: Persistence::None,
            key_prefix: defaults::KEY_PREFIX.to_string(),
            direct: false,
            pooler: row.setup.pooler(),
            pg_settings: Vec::new(),
            cluster: row
                .on_cluster()
                .then(crate::topology::ClusterSettings::default),
            tls: Default::default(),
            cluster_seeds: Vec::new(),
        },
        strategies: vec![strategy],
        client: ClientSpec::with_ttl(PROBE_TTL),
        workload: Workload {
            clients: 1,
            resources: 1,
            hold: HoldTime::Fixed(Duration::ZERO),
            stop: StopCondition::Ops(PROBE_ACQUIRES),
            pacing: Pacing::Closed,
            seed: defaults::SEED,
            shared_connection: false,
            in_flight: Workload::DEFAULT_IN_FLIGHT,
            adapter_processes: None,
            work: crate::driver::WorkKind::Row,
            idempotency_key: false,
        },
        nemesis: Vec::new(),
        checker: CheckerSpec { audit: false },
        expect: Default::default(),
        workers: None,
        ledger: None,
        docker: None,
    }
}

/// Runs the uncontended probe of `strategy` on its home topology under
/// `matrix_dir/probes/<row>/` ([`MatrixRow::dir_name`]) with `backend`; a probe that cannot run (topology did not
/// start, no successful acquire, interrupted) is a record with `error` set and zero
/// latencies.
pub async fn run_probe(
    row: impl Into<MatrixRow>,
    backend: &Backend,
    matrix_dir: &Path,
    shutdown: watch::Receiver<bool>,
) -> ProbeRecord {
    let row = row.into();
    let test = probe_test(row);
    let topology = test.topology.kind;
    let mut record = ProbeRecord {
        strategy: row.label(),
        topology: topology.to_string(),
        servers: servers_to_run(topology) + u32::from(test.topology.pooler.is_some()),
        acquires: 0,
        p50_us: 0,
        p99_us: 0,
        dir: format!("probes/{}", row.dir_name()),
        error: None,
    };
    let dir = match RunDir::create_named(&matrix_dir.join("probes"), &row.dir_name()) {
        Ok(d) => d,
        Err(e) => {
            record.error = Some(e.to_string());
            return record;
        }
    };
    if let Some(rel) = relative(dir.path(), matrix_dir) {
        record.dir = rel;
    }
    let runner = Runner {
        backend: backend.clone(),
        ..Runner::local(shutdown)
    };
    let outcome = runner.run(&test, &dir, |_| {}).await;
    super::trial::discard_server_data(&dir);
    match outcome {
        Ok(o) if o.interrupted => record.error = Some("interrupted".into()),
        Ok(o) => match o.strategies.first() {
            Some(s) => fill(&mut record, s),
            None => record.error = Some("the run measured nothing".into()),
        },
        Err(e) => record.error = Some(e.to_string()),
    }
    record
}

/// Copies the run's figures into `record`; an error when no acquire succeeded.
fn fill(record: &mut ProbeRecord, s: &StrategySummary) {
    if s.acquired == 0 {
        let why = s
            .error_samples
            .first()
            .map(|(m, n)| format!(": {m} ({n}×)"))
            .unwrap_or_default();
        record.error = Some(format!(
            "no successful acquire in {} attempts{why}",
            s.attempts
        ));
        return;
    }
    record.acquires = s.acquired;
    record.p50_us = s.acquire_ok.p50_us;
    record.p99_us = s.acquire_ok.p99_us;
}

fn relative(path: &Path, base: &Path) -> Option<String> {
    let base = std::path::absolute(base).ok()?;
    path.strip_prefix(base)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::StrategyKind;

    #[test]
    fn the_probe_is_one_client_without_hold_on_the_home_topology_of_every_strategy() {
        for &s in StrategyKind::all() {
            let t = probe_test(s);
            t.validate().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(t.topology.kind, TopologyKind::default_for(s), "{s}");
            assert_eq!((t.workload.clients, t.workload.resources), (1, 1));
            assert_eq!(t.workload.hold, HoldTime::Fixed(Duration::ZERO));
            assert!(t.nemesis.is_empty() && !t.checker.audit);
        }
        let servers = |s| servers_to_run(TopologyKind::default_for(s));
        assert_eq!(servers(StrategyKind::Single), 1);
        assert_eq!(servers(StrategyKind::RedlockFenced), 5);
        assert_eq!(servers(StrategyKind::SingleWait), 6);
        assert_eq!(servers(StrategyKind::PgAdvisoryFenced), 1);
        assert_eq!(servers(StrategyKind::EtcdLease), 3);
    }
}
