//! Everything a scenario refers to is checked before anything starts: strategies (each once),
//! workload ranges, every fault step (its target, its keys, its times: the nemesis' own
//! [`FaultStep::check`]) and every expectation. Each error names the key it is about
//! ([`Place`]) so the caller can print `file:line:col`.

use super::locate::Place;
use super::Scenario;
use crate::nemesis::check::node_names;
use crate::nemesis::{FaultStep, StepContext};
use crate::orchestration::test::{Field, Test};
use crate::strategy::StrategyKind;

/// One problem in a file: where, and what to fix.
pub type FileProblem = (Place, String);

/// Checks `s`; the first problem found is returned. The settings a `run` flag also sets are
/// checked by the same rules as `run` ([`Test::check_settings`]), named here by their keys;
/// what only a file has (its topology, `launcher`, the timeouts it may leave out, the nemesis
/// steps and the expectations) is checked here.
pub fn validate(s: &Scenario) -> Result<(), FileProblem> {
    let Some(nodes) = node_names(s.topology) else {
        return Err((
            Place::Top("topology"),
            "scenarios run on nodes lockbench starts: `topology` must be \"single\", \"five\", \
             \"sentinel\", \"postgres\" or \"etcd\""
                .into(),
        ));
    };
    let test = shared_test(s);
    test.check_settings()
        .map_err(|p| (place(p.field), p.with_key()))?;
    file_only(s)?;
    // The one capacity check of `run`, `chaos` and the matrix.
    test.check_descriptor_budget()
        .map_err(|p| (place(p.field), p.with_key()))?;
    for (i, step) in s.nemesis.iter().enumerate() {
        fault_step(s, &nodes, i, step)?;
    }
    expectations(s)
}

/// The scenario's test as the shared rules see it: `adapter:command` may take its command line
/// from `chaos --adapter` (checked there), so a file without `workload.adapter` is not refused
/// for it here.
fn shared_test(s: &Scenario) -> Test {
    let mut test = s.to_test();
    if test.strategies.contains(&StrategyKind::AdapterCommand) && test.client.adapter.is_none() {
        test.client.adapter = Some("-".into());
    }
    test
}

/// Where a field's key is in a scenario file.
fn place(field: Field) -> Place {
    match field {
        Field::Strategies => Place::Top("strategies"),
        Field::Strategy(i) => Place::Strategy(i),
        Field::Pooler | Field::PoolSize => Place::Top("pooler"),
        Field::PgSettings => Place::Top("pg_settings"),
        Field::Workers => Place::Top("workers"),
        Field::Clients => Place::Workload("clients"),
        Field::Resources => Place::Workload("resources"),
        Field::Duration | Field::Ops => Place::Workload("duration"),
        Field::Rate => Place::Workload("rate"),
        Field::Ttl => Place::Workload("ttl"),
        Field::RetryAttempts => Place::Workload("retry_attempts"),
        Field::NodeTimeout => Place::Workload("node_timeout"),
        Field::Adapter => Place::Workload("adapter"),
        Field::AdapterProcesses => Place::Workload("adapter_processes"),
        Field::SharedConnection => Place::Workload("shared_connection"),
        Field::Work => Place::Workload("work"),
        Field::IdempotencyKey => Place::Workload("idempotency_key"),
        Field::PgPool => Place::Workload("pg_pool"),
    }
}

/// What only a file has: `launcher` without `workers`, the optional timeouts (given, they
/// must be above 0), `pg_pool_recycle` without `pg_pool`.
fn file_only(s: &Scenario) -> Result<(), FileProblem> {
    if s.launcher.is_some() && s.workers.is_none() {
        return Err((
            Place::Top("launcher"),
            "`launcher` needs `workers = N` (the worker processes it starts)".into(),
        ));
    }
    let w = &s.workload;
    for (key, value) in [
        ("acquire_timeout", w.acquire_timeout),
        ("response_timeout", w.response_timeout),
        ("connect_timeout", w.connect_timeout),
    ] {
        if value.is_some_and(|d| d.is_zero()) {
            return Err((Place::Workload(key), format!("`{key}` must be above 0")));
        }
    }
    if w.pg_pool_recycle.is_some() && w.pg_pool.is_none() {
        return Err((
            Place::Workload("pg_pool_recycle"),
            "`pg_pool_recycle` needs `pg_pool = N` (the pool it recycles)".into(),
        ));
    }
    Ok(())
}

/// The nemesis' own check of step `i` ([`FaultStep::check`]), its problem placed at the key
/// it names and prefixed with the step (`nemesis[0] (kill): …`).
fn fault_step(
    s: &Scenario,
    nodes: &[String],
    i: usize,
    step: &FaultStep,
) -> Result<(), FileProblem> {
    let ctx = StepContext {
        topology: s.topology,
        nodes,
        clients: s.workload.clients,
        resources: s.workload.resources,
        run: s.workload.duration,
        workers: s.workers.unwrap_or(0),
    };
    step.check(&ctx).map_err(|p| {
        (
            Place::Nemesis(i, p.key.map(str::to_string)),
            format!("nemesis[{i}] ({}): {}", step.fault, p.message),
        )
    })?;
    if step.link == Some(crate::nemesis::Link::Server) && s.pooler.is_none() {
        return Err((
            Place::Nemesis(i, Some("link".into())),
            format!(
                "nemesis[{i}] ({}): `link = \"server\"` is PgBouncer's link to the server: add a \
                 `[pooler]` table",
                step.fault
            ),
        ));
    }
    Ok(())
}

fn expectations(s: &Scenario) -> Result<(), FileProblem> {
    for (name, e) in &s.expect {
        let at = |key| Place::Expect(name.clone(), key);
        if !s.strategies.iter().any(|k| k.to_string() == *name) {
            return Err((
                at(None),
                format!("[expect.{name}]: {name} is not in `strategies`"),
            ));
        }
        for (key, kinds) in [("anomalies", &e.anomalies), ("absent", &e.absent)] {
            for kind in kinds {
                let known = serde_json::from_value::<crate::checker::AnomalyKind>(
                    serde_json::Value::String(kind.clone()),
                )
                .is_ok();
                if !known {
                    return Err((
                        at(Some(key)),
                        format!(
                            "[expect.{name}]: unknown anomaly {kind:?} (the checker's kinds: \
                             mutex-violation, stale-write-accepted, stale-write-rejected, \
                             lost-update, token-regression, token-duplicate, stuck-resource, \
                             unavailable, believed-overlap, possible-overlap)"
                        ),
                    ));
                }
            }
        }
        if !matches!(e.verdict.as_str(), "valid" | "invalid" | "unknown") {
            return Err((
                at(Some("verdict")),
                format!(
                    "[expect.{name}]: verdict must be valid, invalid or unknown, not {:?}",
                    e.verdict
                ),
            ));
        }
    }
    Ok(())
}
