//! The matrix's trials pinned: for every cell of a plan with every strategy, every PostgreSQL
//! setup and both Redis setups: its planned trials and episodes on the standard and the quick
//! workload, and the scenario of its first trial (topology, workload, every nemesis step, the
//! fault's description), compared with `tests/golden/matrix_shapes.txt`.
//!
//! The description and the episode shapes are written per service and topology; a change to
//! them shows here line by line. After an intended change, rewrite the file with
//! `LOCKBENCH_BLESS=1 cargo test --test matrix_shapes` and review its diff.

use std::fmt::Write;

use lockbench::matrix::{FaultClass, MatrixPlan, MatrixWorkload, PgSetup, RedisSetup};
use lockbench::strategy::StrategyKind;
use strum::VariantArray;

const GOLDEN: &str = "tests/golden/matrix_shapes.txt";

fn plan(workload: MatrixWorkload) -> MatrixPlan {
    let faults = FaultClass::ALL
        .iter()
        .chain(FaultClass::CLUSTER.iter())
        .copied()
        .collect();
    let mut plan = MatrixPlan::new(StrategyKind::all().to_vec(), faults, 3, workload);
    plan.pg_setups = PgSetup::VARIANTS.to_vec();
    plan.redis_setups = RedisSetup::VARIANTS.to_vec();
    plan
}

fn render() -> String {
    let mut out = String::new();
    // What each cell plans on the two presets: one line per cell.
    for (name, workload) in [
        ("standard", MatrixWorkload::standard()),
        ("quick", MatrixWorkload::quick()),
    ] {
        let plan = plan(workload);
        for (row, fault) in plan.cells() {
            writeln!(
                out,
                "{name} {row} × {fault}: {} trials, {} episodes per trial, lease {} ms, {} ms per trial",
                plan.planned_trials(row, fault),
                plan.episodes_per_trial(row, fault),
                plan.lease_ttl(row, fault).as_millis(),
                plan.trial_duration(row, fault).as_millis(),
            )
            .unwrap();
        }
    }
    // Every step and episode of one trial per cell, on the standard workload cut to two
    // exposed episodes (the shapes repeat episode after episode; latency alternates two).
    let plan = plan(MatrixWorkload {
        episodes: 2,
        ..MatrixWorkload::standard()
    });
    let mut seen: Vec<(String, String)> = Vec::new();
    for (row, fault) in plan.cells() {
        let scenario = plan.scenario(row, fault, 1);
        let mut block = String::new();
        writeln!(block, "description: {}", scenario.description).unwrap();
        writeln!(
            block,
            "topology: {}, clients: {}, ttl: {} ms, duration: {} ms, watchdog: {}",
            scenario.topology,
            scenario.workload.clients,
            scenario.workload.ttl.as_millis(),
            scenario.workload.duration.as_millis(),
            scenario.workload.watchdog
        )
        .unwrap();
        for step in &scenario.nemesis {
            writeln!(block, "  {}", without_unset(&format!("{step:?}"))).unwrap();
        }
        for episode in plan.episode_specs(row, fault) {
            writeln!(block, "  {episode:?}").unwrap();
        }
        let cell = format!("{row} × {fault}");
        // Many rows share a trial (the same topology, the same fault): written once.
        match seen.iter().find(|(_, b)| *b == block) {
            Some((first, _)) => writeln!(out, "== {cell}: as {first}").unwrap(),
            None => {
                writeln!(out, "== {cell}\n{block}").unwrap();
                seen.push((cell, block));
            }
        }
    }
    out
}

/// `debug` without its `, field: None` parts (a step sets a few of its many parameters).
fn without_unset(debug: &str) -> String {
    let mut out = String::new();
    for (i, part) in debug.split(", ").enumerate() {
        let unset: Option<&str> = part
            .split_once(": None")
            .filter(|(field, _)| field.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()))
            .map(|(_, rest)| rest);
        match unset {
            Some("") if i > 0 => continue,
            Some(" }") if i > 0 => {
                out.push_str(" }");
                continue;
            }
            _ => {}
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(part);
    }
    out
}

#[test]
fn every_cell_keeps_its_trial() {
    let now = render();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("LOCKBENCH_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let pinned = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (LOCKBENCH_BLESS=1 writes it)", path.display()));
    if now != pinned {
        let (line, (was, is)) = pinned
            .lines()
            .zip(now.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((
                pinned.lines().count().min(now.lines().count()),
                ("(end)", "(end)"),
            ));
        panic!(
            "{GOLDEN} differs at line {}:\n  pinned: {was}\n  now:    {is}\n({} lines pinned, {} now)",
            line + 1,
            pinned.lines().count(),
            now.lines().count()
        );
    }
    // The plan covers every service and every topology a matrix row runs on.
    for needle in [
        "topology: single",
        "topology: five",
        "topology: sentinel",
        "topology: cluster",
        "topology: postgres",
        "topology: etcd",
    ] {
        assert!(now.contains(needle), "no cell runs on {needle}");
    }
}
