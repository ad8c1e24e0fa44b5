//! What a test writes as it goes: `config.json` and `summary.json` at the start, a failure or
//! the final status at the end, the cluster's layout, and each strategy's checker report and
//! expectation.

use super::nodes::Nodes;
use super::{Backend, RunError, TestOutcome};
use crate::checker::CheckReport;
use crate::orchestration::expectation::compare;
use crate::orchestration::test::{DockerImages, Test};
use crate::results::{RunDir, RunDirError, RunStatus, RunSummary};

/// Writes `config.json` (the Test, with the images it runs on when `backend` is Docker, so that
/// `run --config` reruns it there) and the first `summary.json` (config = that Test plus
/// `backend`), and returns that summary.
///
/// # Errors
/// [`RunDirError`] when a file cannot be written.
pub(super) fn start(
    test: &Test,
    dir: &RunDir,
    backend: &Backend,
) -> Result<RunSummary, RunDirError> {
    let mut recorded = test.clone();
    recorded.docker = match backend {
        Backend::Local => None,
        Backend::Docker(o) => Some(DockerImages {
            redis_image: o.redis_image.clone(),
            toxiproxy_image: o.toxiproxy_image.clone(),
        }),
    };
    dir.write_json("config.json", &recorded)?;
    let mut config = serde_json::to_value(&recorded).map_err(|source| RunDirError::Json {
        name: "summary.json".into(),
        source,
    })?;
    config["backend"] = backend.name().into();
    let summary = RunSummary::start(dir.run_id(), config);
    dir.write_json("summary.json", &summary)?;
    Ok(summary)
}

/// Marks the run failed with `e` as its reason in `summary.json` (before anything ran).
///
/// # Errors
/// The write's own error.
pub(super) fn fail(
    dir: &RunDir,
    summary: &mut RunSummary,
    e: &RunError,
) -> Result<(), RunDirError> {
    summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
    summary.status = RunStatus::Failed;
    summary.error = Some(e.to_string());
    dir.write_json("summary.json", &*summary)
}

/// Writes the final status: interrupted, completed, or failed with the reason.
///
/// # Errors
/// The write's error, only when the run itself succeeded: a failed run's own error says more
/// (a full disk fails both); the file then still says `running`, which `lockbench check`
/// recognises once this process is gone.
pub(super) fn finish(
    dir: &RunDir,
    summary: &mut RunSummary,
    result: &Result<TestOutcome, RunError>,
) -> Result<(), RunDirError> {
    summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
    match result {
        Ok(o) if o.interrupted => summary.status = RunStatus::Interrupted,
        Ok(_) => summary.status = RunStatus::Completed,
        Err(e) => {
            summary.status = RunStatus::Failed;
            summary.error = Some(e.to_string());
        }
    }
    if let Err(w) = dir.write_json("summary.json", &*summary) {
        if result.is_ok() {
            return Err(w);
        }
        tracing::error!("{w}: summary.json still says running");
    }
    Ok(())
}

/// Records the cluster's layout at the start in `summary.json` (`config.cluster_layout`); a
/// layout that cannot be read is logged, not an error.
///
/// # Errors
/// [`RunError::Results`] when `summary.json` cannot be written.
pub(super) async fn cluster_layout(
    test: &Test,
    dir: &RunDir,
    summary: &mut RunSummary,
    nodes: &Nodes,
) -> Result<(), RunError> {
    match nodes.cluster_layout().await {
        Ok(shards) => {
            summary.config["cluster_layout"] =
                cluster_layout_json(&shards, test.workload.resources);
            dir.write_json("summary.json", &*summary)?;
        }
        Err(e) => tracing::warn!("{}: cluster layout not recorded: {e}", test.name),
    }
    Ok(())
}

/// The cluster's shards at the start of a run and, for each resource `r0`.., its slot and
/// the shard serving it: `{"shards": [{primary, replicas, slots}], "resources": {"r0":
/// {"slot": 12, "shard": 0, "primary": "n1"}}}`.
fn cluster_layout_json(
    shards: &[crate::topology::ShardLayout],
    resources: u32,
) -> serde_json::Value {
    let per_resource: serde_json::Map<String, serde_json::Value> = (0..resources)
        .map(|i| {
            let name = crate::driver::workload::Workload::resource_name(i);
            let slot = crate::topology::cluster::resource_slot(&name);
            let shard = shards.iter().position(|s| s.owns(slot));
            let primary = shard.map(|i| shards[i].primary.clone());
            (
                name,
                serde_json::json!({ "slot": slot, "shard": shard, "primary": primary }),
            )
        })
        .collect();
    serde_json::json!({ "shards": shards, "resources": per_resource })
}

/// One strategy's checker report: `checker.json` (all strategies
/// so far, in `checks`), its expectation (not judged when `interrupted`), and
/// `expectations.json` for a test with a claim.
///
/// # Errors
/// [`RunDirError`] when a file cannot be written.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    test: &Test,
    dir: &RunDir,
    name: &str,
    report: &CheckReport,
    interrupted: bool,
    checks: &mut serde_json::Map<String, serde_json::Value>,
    outcome: &mut TestOutcome,
) -> Result<(), RunDirError> {
    checks.insert(
        name.to_string(),
        serde_json::to_value(report).unwrap_or_default(),
    );
    dir.write_json("checker.json", &*checks)?;
    let mut expectation = compare(name, report, test.expect.get(name));
    if interrupted {
        // Partial data: kept, not judged against the claim.
        expectation.met = None;
        expectation.mismatches.clear();
        expectation.interrupted = true;
    }
    outcome.expectations.push(expectation);
    if test.claim.is_some() {
        dir.write_json("expectations.json", &outcome.expectations)?;
    }
    Ok(())
}
