//! Lock services under faults, with real servers: a session whose request was swallowed by a
//! black hole is closed (so the server frees its lock), and the watchdog of a session lock
//! checks the session.

mod common;

use std::path::{Path, PathBuf};

use common::cli::{json, text};

/// Runs `lockbench chaos <scenario>` (written to a file under `dir`) and returns the strategy
/// directory of the run.
fn chaos(dir: &Path, name: &str, scenario: &str, strategy: &str) -> PathBuf {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, scenario).unwrap();
    let results = dir.join("results");
    let out = common::cli::run_in(["chaos", file.to_str().unwrap()], &results);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let run = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && p.join(strategy).is_dir())
        .unwrap_or_else(|| {
            panic!(
                "no run directory in {}\n{stdout}\n{stderr}",
                results.display()
            )
        });
    run.join(strategy)
}

/// Every history line as JSON.
fn history(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const BLACKHOLE: &str = r#"
claim = "a timed-out PostgreSQL connection is closed, so the server frees the session's lock"
topology = "postgres"
strategies = ["pg-advisory"]
seed = 22

[workload]
clients = 2
resources = 1
hold = "200ms"
ttl = "1s"
duration = "8s"
retry_attempts = 1000
retry_delay = "20ms"
retry_jitter = "10ms"

[[nemesis]]
at = "1s"
duration = "2s"
fault = "partition"
target = "n1"
mode = "blackhole"
"#;

#[test]
fn a_black_holed_pg_session_is_closed_and_its_lock_freed_after_the_heal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = chaos(tmp.path(), "pg-blackhole", BLACKHOLE, "pg-advisory");
    let events = history(&dir);
    let heal_us = events
        .iter()
        .filter(|e| e["type"] == "fault")
        .find_map(|e| e["end_us"].as_u64())
        .expect("the partition healed");
    let after_heal = events
        .iter()
        .filter(|e| e["type"] == "op" && e["kind"] == "ok" && e["f"] == "acquire")
        .filter(|e| e["time_us"].as_u64().unwrap() > heal_us)
        .count();
    let report = json(&dir.join("checker.json"));
    // Either the lock was freed (somebody acquired after the heal), or the checker says the
    // resource is stuck: never a silent `valid` with nobody acquiring.
    assert!(
        after_heal > 0 || report["liveness"] == "stuck",
        "{after_heal} acquires after the heal at {heal_us} µs, liveness {}",
        report["liveness"]
    );
    assert!(after_heal > 0, "the lock was not freed after the heal");
}
