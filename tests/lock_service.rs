//! Lock services under faults, with real servers: a session whose request was swallowed by a
//! black hole is closed (so the server frees its lock), and the watchdog of a session lock
//! checks the session; an etcd connection whose call timed out is closed too, and a key nobody can
//! take while clients wait until the run ends is reported stuck.

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

const KILLED_UNDER_HOLDER: &str = r#"
claim = "the watchdog of a session lock reports the lease lost as soon as the session ends"
topology = "postgres"
strategies = ["pg-advisory"]
seed = 23

[workload]
clients = 1
resources = 1
hold = "3s"
ttl = "1s"
duration = "6s"
watchdog = true
retry_attempts = 1000
retry_delay = "20ms"
retry_jitter = "10ms"

[[nemesis]]
at = "1s"
duration = "2s"
fault = "kill"
target = "n1"
"#;

#[test]
fn the_pg_watchdog_checks_the_session_and_reports_it_lost_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    // Renewals are session checks: a slow holder's are recorded.
    let results = tmp.path().join("plain");
    let out = common::cli::run_in(
        [
            "run",
            "--topology",
            "postgres",
            "-s",
            "pg-advisory",
            "--watchdog",
            "-c",
            "2",
            "-r",
            "1",
            "--hold",
            "800ms",
            "--ttl",
            "1s",
            "-d",
            "3s",
            "--no-progress",
        ],
        &results,
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let run = std::fs::canonicalize(results.join("latest")).unwrap();
    let extends_ok = history(&run.join("pg-advisory"))
        .iter()
        .filter(|e| e["f"] == "extend" && e["kind"] == "ok")
        .count();
    assert!(extends_ok > 0, "no session check recorded\n{stdout}");

    // The server dies under a holder with 3 s of work: the loss is recorded within a second
    // of the kill, not at the release 2 s later, and the release says the lease was lost.
    let dir = chaos(tmp.path(), "pg-kill", KILLED_UNDER_HOLDER, "pg-advisory");
    let events = history(&dir);
    let kill_us = events
        .iter()
        .find(|e| e["type"] == "fault")
        .and_then(|e| e["start_us"].as_u64())
        .expect("the kill is recorded");
    let op_time = |f: &str, kind: &str| {
        events
            .iter()
            .find(|e| e["f"] == f && e["kind"] == kind && e["time_us"].as_u64() > Some(kill_us))
            .and_then(|e| e["time_us"].as_u64())
    };
    let lost_us = op_time("extend", "fail").expect("the lease is reported lost");
    let release_us = op_time("release", "fail").expect("the release finds the lease lost");
    assert!(
        lost_us - kill_us < 1_000_000 && lost_us < release_us,
        "kill {kill_us} µs, lost {lost_us} µs, release {release_us} µs"
    );
}

#[test]
fn the_watchdog_is_refused_where_there_is_nothing_to_watch() {
    let tmp = tempfile::tempdir().unwrap();
    let out = common::cli::run_in(
        ["run", "-s", "no-ttl", "--watchdog", "-d", "1s"],
        tmp.path(),
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--watchdog with no-ttl: its lock has no TTL to renew and no session"),
        "{stderr}"
    );
}

const ETCD_BLACKHOLE: &str = r#"
claim = "a timed-out etcd connection is closed, so the clients reach the cluster again after the heal"
topology = "etcd"
strategies = ["etcd-lease"]
seed = 24

[workload]
clients = 2
resources = 1
hold = "200ms"
ttl = "1s"
duration = "7s"
retry_attempts = 1000
retry_delay = "20ms"
retry_jitter = "10ms"
node_timeout = "300ms"

[[nemesis]]
at = "1s"
duration = "2s"
fault = "partition"
target = "all"
mode = "blackhole"
"#;

#[test]
fn black_holed_etcd_connections_are_closed_and_the_lock_taken_after_the_heal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = chaos(tmp.path(), "etcd-blackhole", ETCD_BLACKHOLE, "etcd-lease");
    let events = history(&dir);
    let (cut_us, heal_us) = events
        .iter()
        .filter(|e| e["type"] == "fault")
        .find_map(|e| Some((e["start_us"].as_u64()?, e["end_us"].as_u64()?)))
        .expect("the partition healed");
    let in_window = |e: &&serde_json::Value| {
        let t = e["time_us"].as_u64().unwrap_or(0);
        t > cut_us && t < heal_us
    };
    // Every client link swallowed requests: calls ran out of their node timeout.
    let timeouts = events
        .iter()
        .filter(|e| e["type"] == "op" && e["error_kind"] == "timeout")
        .filter(in_window)
        .count();
    assert!(timeouts > 0, "no request timed out during the black hole");
    let after_heal = events
        .iter()
        .filter(|e| e["type"] == "op" && e["kind"] == "ok" && e["f"] == "acquire")
        .filter(|e| e["time_us"].as_u64().unwrap() > heal_us)
        .count();
    let report = json(&dir.join("checker.json"));
    assert!(
        after_heal > 0 || report["liveness"] == "stuck",
        "{after_heal} acquires after the heal at {heal_us} µs, liveness {}",
        report["liveness"]
    );
    assert!(after_heal > 0, "nobody acquired after the heal");
    assert_eq!(report["verdict"], "valid", "{report}");
}

const NO_TTL_LEFT_BEHIND: &str = r#"
claim = "a key nobody can take while the clients wait until the run ends is reported stuck"
topology = "single"
strategies = ["no-ttl"]
seed = 25

[workload]
clients = 2
resources = 1
hold = "10ms"
ttl = "1s"
duration = "3s"
retry_attempts = 100000
retry_delay = "20ms"
retry_jitter = "10ms"
acquire_timeout = "20s"

[[nemesis]]
at = "300ms"
fault = "client-crash"
target = "client:0"
"#;

#[test]
fn a_key_left_by_a_crashed_holder_is_stuck_while_the_others_wait_until_the_run_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = chaos(tmp.path(), "no-ttl-left", NO_TTL_LEFT_BEHIND, "no-ttl");
    let events = history(&dir);
    let end_us = events
        .iter()
        .find(|e| e["type"] == "run-end")
        .and_then(|e| e["time_us"].as_u64())
        .expect("the run-end mark is recorded");
    let crash_us = events
        .iter()
        .find(|e| e["type"] == "crash")
        .and_then(|e| e["time_us"].as_u64())
        .expect("client 0 crashed holding the key");
    // The other client waits inside one acquire (20 s timeout): it fails nothing before the
    // mark, so only the mark tells the wait.
    let failed_before_end = events
        .iter()
        .filter(|e| e["type"] == "op" && e["f"] == "acquire" && e["kind"] == "fail")
        .filter(|e| e["time_us"].as_u64().unwrap() < end_us)
        .count();
    assert_eq!(failed_before_end, 0);
    let report = json(&dir.join("checker.json"));
    assert_eq!(report["liveness"], "stuck", "{report}");
    let stuck = report["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "stuck-resource")
        .expect("a stuck-resource anomaly");
    assert!(stuck["time_us"].as_u64().unwrap() >= crash_us, "{stuck}");
    assert_eq!(stuck["end_us"].as_u64(), Some(end_us), "{stuck}");
}
