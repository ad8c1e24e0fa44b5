//! Everything a scenario refers to is checked before anything starts: strategies (each once),
//! workload ranges, every fault step (its target, its keys, its times: the nemesis' own
//! [`FaultStep::check`]) and every expectation. Each error names the key it is about
//! ([`Place`]) so the caller can print `file:line:col`.

use super::locate::Place;
use super::Scenario;
use crate::nemesis::check::node_names;
use crate::nemesis::{FaultStep, StepContext};

/// One problem: where, and what to fix.
pub type Problem = (Place, String);

/// Checks `s`; the first problem found is returned.
pub fn validate(s: &Scenario) -> Result<(), Problem> {
    let Some(nodes) = node_names(s.topology) else {
        return Err((
            Place::Top("topology"),
            "scenarios run on nodes lockbench starts: `topology` must be \"single\", \"five\", \
             \"sentinel\", \"postgres\" or \"etcd\""
                .into(),
        ));
    };
    if s.strategies.is_empty() {
        return Err((
            Place::Top("strategies"),
            "`strategies` needs at least one name".into(),
        ));
    }
    for (i, k) in s.strategies.iter().enumerate() {
        if let Err(m) = s.topology.check_serves(*k) {
            return Err((Place::Strategy(i), m.to_string()));
        }
        if s.strategies[..i].contains(k) {
            return Err((
                Place::Strategy(i),
                format!("`strategies` lists {k} twice: name each strategy once"),
            ));
        }
        if let Err(why) = s.topology.check_shape(*k) {
            return Err((Place::Strategy(i), why.to_string()));
        }
    }
    if s.topology != crate::topology::TopologyKind::Postgres {
        if s.pooler.is_some() {
            return Err((
                Place::Top("pooler"),
                format!(
                    "`[pooler]` needs topology \"postgres\" (PgBouncer pools PostgreSQL \
                     sessions), this scenario has {}",
                    s.topology
                ),
            ));
        }
        if !s.pg_settings.is_empty() {
            return Err((
                Place::Top("pg_settings"),
                format!(
                    "`pg_settings` needs topology \"postgres\", this scenario has {}",
                    s.topology
                ),
            ));
        }
    }
    if let Some(Err(m)) = s.pooler.map(|p| p.validate()) {
        return Err((Place::Top("pooler"), format!("`pool_size`: {m}")));
    }
    for setting in &s.pg_settings {
        crate::orchestration::test::check_pg_setting(setting)
            .map_err(|m| (Place::Top("pg_settings"), m))?;
    }
    if s.workload.pg_pool_recycle.is_some() && s.workload.pg_pool.is_none() {
        return Err((
            Place::Workload("pg_pool_recycle"),
            "`pg_pool_recycle` needs `pg_pool = N` (the pool it recycles)".into(),
        ));
    }
    if let Some(size) = s.workload.pg_pool {
        if s.topology != crate::topology::TopologyKind::Postgres {
            return Err((
                Place::Workload("pg_pool"),
                format!(
                    "`pg_pool` needs topology \"postgres\", this scenario has {}",
                    s.topology
                ),
            ));
        }
        if size == 0 {
            return Err((
                Place::Workload("pg_pool"),
                "`pg_pool` must be at least 1 (connections the pool opens)".into(),
            ));
        }
        for (i, k) in s.strategies.iter().enumerate() {
            if !matches!(
                k,
                crate::strategy::StrategyKind::PgAdvisory
                    | crate::strategy::StrategyKind::PgAdvisoryWait
            ) {
                return Err((
                    Place::Strategy(i),
                    format!(
                        "{k} cannot borrow a pooled connection per operation (`pg_pool`): \
                         pooled clients run pg-advisory, pg-advisory-wait"
                    ),
                ));
            }
        }
    }
    workload(s)?;
    workers(s)?;
    for (i, step) in s.nemesis.iter().enumerate() {
        fault_step(s, &nodes, i, step)?;
    }
    expectations(s)
}

fn workload(s: &Scenario) -> Result<(), Problem> {
    let w = &s.workload;
    let at = |key| Place::Workload(key);
    if w.clients == 0 {
        return Err((at("clients"), "`clients` must be at least 1".into()));
    }
    if w.resources == 0 {
        return Err((at("resources"), "`resources` must be at least 1".into()));
    }
    if w.ttl.is_zero() {
        return Err((at("ttl"), "`ttl` must be above 0".into()));
    }
    if w.duration.is_zero() {
        return Err((at("duration"), "`duration` must be above 0".into()));
    }
    if w.retry_attempts == Some(0) {
        return Err((
            at("retry_attempts"),
            "`retry_attempts` must be at least 1 (1 = no retry)".into(),
        ));
    }
    if let Some(rate) = w.rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err((
                at("rate"),
                "`rate` must be a positive number of ops/s".into(),
            ));
        }
    }
    if w.adapter_processes == Some(0) {
        return Err((
            at("adapter_processes"),
            "`adapter_processes` must be at least 1".into(),
        ));
    }
    // The rest of the workload's own rules (the slowest rate), as `run` applies them.
    let test = s.to_test();
    test.check_adapter_processes("`adapter_processes` =")
        .map_err(|m| (at("adapter_processes"), m))?;
    if let Err(e) = test.workload.validate() {
        return Err((at("rate"), e.to_string().replace("--rate", "`rate`")));
    }
    for (key, value) in [
        ("acquire_timeout", w.acquire_timeout),
        ("node_timeout", w.node_timeout),
        ("response_timeout", w.response_timeout),
        ("connect_timeout", w.connect_timeout),
    ] {
        if value.is_some_and(|d| d.is_zero()) {
            return Err((at(key), format!("`{key}` must be above 0")));
        }
    }
    // The strategies' own rules (smallest workable TTL, node timeout), as `run` applies them.
    if w.adapter.is_some()
        && !s
            .strategies
            .contains(&crate::strategy::StrategyKind::AdapterCommand)
    {
        return Err((
            at("adapter"),
            "`adapter` is set but no strategy runs it: add \"adapter:command\" to `strategies`"
                .into(),
        ));
    }
    for &kind in &s.strategies {
        let mut opts = test.strategy_options(kind);
        if kind == crate::strategy::StrategyKind::AdapterCommand {
            if let Some(cmd) = &w.adapter {
                if test.client.adapter_argv().is_none() {
                    return Err((
                        at("adapter"),
                        format!(
                            "`adapter` {cmd:?} is not a command line (empty, or a quote left open)"
                        ),
                    ));
                }
            }
            // The command may also come from `chaos --adapter`, checked there.
            opts.adapter_command.get_or_insert_with(|| vec!["-".into()]);
        }
        if let Err(e) = opts.validate() {
            let m = match e {
                crate::strategy::StrategyError::InvalidOptions(m) => m,
                other => other.to_string(),
            };
            return Err((at("ttl"), format!("`ttl` with strategy {kind}: {m}")));
        }
    }
    // The one capacity check of `run`, `chaos` and the matrix.
    test.check_descriptor_budget("`clients` =")
        .map_err(|m| (at("clients"), m))
}

/// `workers = N` and `launcher`: at least one client per worker, on nodes with plain URLs.
fn workers(s: &Scenario) -> Result<(), Problem> {
    let Some(n) = s.workers else {
        if s.launcher.is_some() {
            return Err((
                Place::Top("launcher"),
                "`launcher` needs `workers = N` (the worker processes it starts)".into(),
            ));
        }
        return Ok(());
    };
    let at = Place::Top("workers");
    if n == 0 {
        return Err((at, "`workers` must be at least 1".into()));
    }
    if s.workload.clients < n {
        return Err((
            at,
            format!(
                "`workers` = {n} with {} clients: every worker needs at least one client",
                s.workload.clients
            ),
        ));
    }
    if matches!(
        s.topology,
        crate::topology::TopologyKind::Sentinel | crate::topology::TopologyKind::Cluster
    ) {
        return Err((
            at,
            format!(
                "`workers` with topology {}: workers reach plain node URLs only (not Sentinel \
                 lookups or cluster routing)",
                s.topology
            ),
        ));
    }
    Ok(())
}

/// The nemesis' own check of step `i` ([`FaultStep::check`]), its problem placed at the key
/// it names and prefixed with the step (`nemesis[0] (kill): …`).
fn fault_step(s: &Scenario, nodes: &[String], i: usize, step: &FaultStep) -> Result<(), Problem> {
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

fn expectations(s: &Scenario) -> Result<(), Problem> {
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
