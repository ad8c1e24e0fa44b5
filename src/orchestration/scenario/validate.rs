//! Everything a scenario refers to is checked before anything starts: strategies (each once),
//! workload ranges, every fault's target (nodes of the topology, clients of the workload),
//! its keys (those the fault uses, see [`super::catalogue`]), its times (inside the run) and
//! every expectation. Each error names the key it is about ([`Place`]) so the caller can print
//! `file:line:col`.

use super::catalogue::{self, Acts, PARAMETERS};
use super::locate::Place;
use super::{FaultStep, Scenario, Target};
use crate::topology::TopologyKind;

/// One problem: where, and what to fix.
pub type Problem = (Place, String);

/// The data nodes of a topology a scenario can start, by name.
pub fn node_names(kind: TopologyKind) -> Option<Vec<String>> {
    let n = match kind {
        TopologyKind::Single => 1,
        TopologyKind::Five => 5,
        TopologyKind::Sentinel => 3,
        TopologyKind::Postgres => 1,
        TopologyKind::Etcd => 3,
        TopologyKind::External => return None,
    };
    Some((1..=n).map(|i| format!("n{i}")).collect())
}

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
            return Err((Place::Strategy(i), m));
        }
        if s.strategies[..i].contains(k) {
            return Err((
                Place::Strategy(i),
                format!("`strategies` lists {k} twice: name each strategy once"),
            ));
        }
        if let Err(why) = k.fits(s.topology) {
            return Err((Place::Strategy(i), why));
        }
    }
    workload(s)?;
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
    if w.retry_attempts == 0 {
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
    for &kind in &s.strategies {
        let mut opts = crate::strategy::StrategyOptions::new(kind, w.ttl);
        if let Some(t) = w.node_timeout {
            opts.node_timeout = t;
        }
        if let Err(e) = opts.validate() {
            let m = match e {
                crate::strategy::StrategyError::InvalidOptions(m) => m,
                other => other.to_string(),
            };
            return Err((at("ttl"), format!("`ttl` with strategy {kind}: {m}")));
        }
    }
    Ok(())
}

/// The parameter keys a step sets.
fn keys_set(step: &FaultStep) -> Vec<&'static str> {
    let set = [
        step.duration.is_some(),
        step.latency.is_some(),
        step.jitter.is_some(),
        step.mode.is_some(),
        step.link.is_some(),
        step.method.is_some(),
        step.delta.is_some(),
        step.extra.is_some(),
        step.restart_after.is_some(),
    ];
    PARAMETERS
        .iter()
        .zip(set)
        .filter_map(|(k, on)| on.then_some(*k))
        .collect()
}

fn fault_step(s: &Scenario, nodes: &[String], i: usize, step: &FaultStep) -> Result<(), Problem> {
    let spec = catalogue::spec(step.fault);
    let here = |key: &str| Place::Nemesis(i, Some(key.to_string()));
    let name = format!("nemesis[{i}] ({})", spec.name);
    let run = s.workload.duration;
    let topology = s.topology;
    if step.at >= run {
        return Err((
            here("at"),
            format!(
                "{name}: `at` = {} is not before the end of the run (workload.duration = {})",
                humantime::format_duration(step.at),
                humantime::format_duration(run)
            ),
        ));
    }
    if let Some(d) = step.duration {
        if step.at + d > run {
            return Err((
                here("duration"),
                format!(
                    "{name}: the fault would last until {}, after the end of the run ({}): \
                     shorten `duration` or lengthen workload.duration{}",
                    humantime::format_duration(step.at + d),
                    humantime::format_duration(run),
                    if step.fault == super::FaultKind::Kill {
                        " (`restart_after` keeps a node down past the end)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    for key in spec.required {
        if !keys_set(step).contains(key) {
            let example = match *key {
                "latency" => " = \"50ms\"",
                "delta" => " = \"2s\"",
                "extra" => " = \"1s\"",
                _ => " = \"1s\"",
            };
            return Err((
                Place::Nemesis(i, None),
                format!("{name}: needs `{key}`, e.g. {key}{example}"),
            ));
        }
    }
    for key in keys_set(step) {
        if !spec.required.contains(&key) && !spec.optional.contains(&key) {
            return Err((
                here(key),
                format!(
                    "{name}: `{key}` is not a parameter of {} (it takes: {})",
                    spec.name,
                    spec.required
                        .iter()
                        .chain(spec.optional)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(only) = spec.topologies {
        if !only.contains(&topology.as_str()) {
            return Err((
                here("fault"),
                format!(
                    "{name}: needs topology {}, this scenario has {topology}",
                    only.join(" or ")
                ),
            ));
        }
    }
    match (&step.target, spec.acts) {
        (Target::Clients(ids), Acts::Clients) => {
            if let Some(bad) = ids.iter().find(|&&id| id >= s.workload.clients) {
                return Err((
                    here("target"),
                    format!(
                        "{name}: client {bad} does not exist (clients are 0..{})",
                        s.workload.clients
                    ),
                ));
            }
        }
        (Target::Holder, Acts::Clients) => {}
        (Target::Clients(_) | Target::Holder, Acts::Nodes) => {
            return Err((
                here("target"),
                format!(
                    "{name}: targets nodes (n1, minority, majority, all, primary), not clients"
                ),
            ))
        }
        (_, Acts::Clients) => {
            return Err((
                here("target"),
                format!("{name}: targets clients (`client:N`, `clients:N,M` or `holder`)"),
            ))
        }
        (Target::Nodes(list), Acts::Nodes) => {
            if let Some(bad) = list.iter().find(|n| *n != "primary" && !nodes.contains(n)) {
                return Err((
                    here("target"),
                    format!(
                        "{name}: no node {bad} in topology {topology} (nodes: {})",
                        nodes.join(", ")
                    ),
                ));
            }
        }
        (Target::Minority, Acts::Nodes) if nodes.len() < 3 => {
            return Err((
                here("target"),
                format!(
                    "{name}: the minority of {topology}'s {} node(s) is no node: name one (n1)",
                    nodes.len()
                ),
            ))
        }
        _ => {}
    }
    let choice = |key: &str, value: &Option<String>, allowed: &[&str]| match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err((
            here(key),
            format!(
                "{name}: `{key}` must be {}, not {v:?}",
                allowed
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )),
        _ => Ok(()),
    };
    choice("mode", &step.mode, &["blackhole", "refuse"])?;
    choice("link", &step.link, &["client", "replication", "peer"])?;
    choice("method", &step.method, &["kill-primary", "sentinel"])?;
    if step.link.as_deref() == Some("peer") && s.topology != TopologyKind::Etcd {
        return Err((
            here("link"),
            format!("{name}: `link = \"peer\"` needs topology etcd, this scenario has {topology}"),
        ));
    }
    if step.link.as_deref() == Some("replication") && s.topology != TopologyKind::Sentinel {
        return Err((
            here("link"),
            format!("{name}: `link = \"replication\"` needs topology sentinel, this scenario has {topology}"),
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
